'use strict';
// What every ali-ons script shares: the spec it is driven by, the loopback-only guard, the
// deadline that makes it exit on its own, and the options that point ali-ons at 127.0.0.1.
//
// A script is run as `node <script>.js <spec.json>` by tests/interop/ali_ons.py and writes one
// JSON object per line on stdout (its events); ali-ons' own warnings go to stderr.

const fs = require('fs');
const net = require('net');
const http = require('http');
const https = require('https');
const crypto = require('crypto');

const LOOPBACK = new Set([ '127.0.0.1', 'localhost', '::1' ]);

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

// The connection's host, from any of net.Socket#connect's call forms.
function connectHost(args) {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (first && typeof first === 'object') {
    return first.path ? 'localhost' : (first.host || 'localhost');
  }
  if (typeof first === 'string' && Number.isNaN(Number(first))) {
    return 'localhost'; // a unix socket path
  }
  return typeof args[1] === 'string' ? args[1] : 'localhost';
}

// ali-ons defaults to an Aliyun HTTP address service (onsAddr) and would connect wherever a route
// points: any connection that is not to the loopback ends the script with exit code 4, so the test
// sees it instead of the traffic leaving the machine.
function guardLoopback() {
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function(...args) {
    const host = connectHost(args);
    if (!LOOPBACK.has(host)) {
      emit({ event: 'violation', host });
      process.exit(4);
    }
    return connect.apply(this, args);
  };
  for (const mod of [ http, https ]) {
    mod.request = mod.get = url => {
      emit({ event: 'violation', host: String(url && (url.host || url.hostname || url)) });
      process.exit(4);
    };
  }
}

function readSpec() {
  return JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
}

// Exit code 2 with a `timeout` event once `ms` have passed, whatever ali-ons is doing.
function deadline(ms) {
  setTimeout(() => {
    emit({ event: 'timeout', afterMs: ms });
    process.exit(2);
  }, ms);
}

// ali-ons' warnings go to stderr; its errors are events too, so a test sees them in order with
// the rest (before or after the script began to close).
const logger = {
  info() {},
  debug() {},
  warn(...args) { console.error('[ali-ons warn]', ...args); },
  error(...args) {
    console.error('[ali-ons error]', ...args);
    emit({ event: 'client_error', message: args.map(a => (a && a.message) || String(a)).join(' ') });
  },
};

// ali-ons' options for the daemons under test: the NameServer list given directly (nameSrv), so
// the HTTP address service is never asked; an httpclient that refuses, in case it were; ACL-style
// keys as placeholders (ali-ons signs every request with them; a broker without ACL ignores them).
function clientOptions(spec) {
  return {
    nameSrv: spec.nameSrv,
    onsAddr: 'http://127.0.0.1:1/rocketmq/nsaddr4client-internal',
    httpclient: {
      async request(url) {
        throw new Error(`ali-ons asked the HTTP address service ${url}; the tests give it nameSrv`);
      },
    },
    accessKeyId: 'interop-placeholder-key',
    accessKeySecret: 'interop-placeholder-secret',
    clientIP: '127.0.0.1',
    logger,
  };
}

function sha256(buf) {
  return crypto.createHash('sha256').update(buf || Buffer.alloc(0)).digest('hex');
}

// A message as the tests compare it: identity by KEYS, the body by length and digest.
function describe(msg) {
  return {
    topic: msg.topic,
    tags: msg.tags || null,
    keys: msg.keys || null,
    msgId: msg.msgId,
    queueId: Number(msg.queueId),
    queueOffset: Number(msg.queueOffset),
    sysFlag: msg.sysFlag,
    reconsumeTimes: msg.reconsumeTimes,
    bornTimestamp: Number(msg.bornTimestamp),
    storeTimestamp: Number(msg.storeTimestamp),
    properties: msg.properties,
    bodyLength: msg.body ? msg.body.length : 0,
    bodySha256: sha256(msg.body),
    receivedAt: Date.now(),
  };
}

// Resolves with `promise`, or with `undefined` after `ms`: a close that hangs must not keep the
// script from exiting.
function bounded(promise, ms) {
  return Promise.race([ promise, new Promise(resolve => setTimeout(resolve, ms)) ]);
}

module.exports = { emit, guardLoopback, readSpec, deadline, clientOptions, describe, bounded };
