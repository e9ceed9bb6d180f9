'use strict';
// Sends the spec's messages with ali-ons' Producer and reports each SendResult.
//
// spec: { nameSrv, group, timeoutMs, inFlight, messages: [{ topic, tags, keys, bodyB64,
//         delayTimeLevel, shardingKey, properties }] }
// events: { event: 'sent', index, sendStatus, msgId, queueId, queueOffset } per message, in the
//         order the answers arrive; { event: 'send_error', index, name, code, message } and exit 1
//         on the first failure; { event: 'done' } and exit 0 when all are answered.
// `inFlight` > 1 sends that many at once: ali-ons has no async or oneway send, but its send is a
// promise, so a JavaScript caller keeps several requests in flight on one connection.

const common = require('./common');

common.guardLoopback();
const spec = common.readSpec();
common.deadline(spec.timeoutMs);

const { Producer, Message } = require('ali-ons');

function build(m) {
  const msg = new Message(m.topic, m.tags, Buffer.from(m.bodyB64, 'base64'));
  if (m.keys) {
    msg.keys = m.keys;
  }
  if (m.delayTimeLevel) {
    msg.delayTimeLevel = m.delayTimeLevel;
  }
  if (m.shardingKey) {
    msg.shardingKey = m.shardingKey;
  }
  Object.assign(msg.properties, m.properties || {});
  return msg;
}

async function sendOne(producer, index) {
  try {
    const r = await producer.send(build(spec.messages[index]));
    common.emit({ event: 'sent', index, sendStatus: r.sendStatus, msgId: r.msgId,
      queueId: Number(r.messageQueue.queueId), queueOffset: r.queueOffset });
  } catch (err) {
    common.emit({ event: 'send_error', index, name: err.name, code: err.code, message: err.message });
    process.exit(1);
  }
}

(async () => {
  const producer = new Producer(Object.assign(common.clientOptions(spec), { producerGroup: spec.group }));
  producer.on('error', err => common.emit({ event: 'client_error', message: err.message }));
  await producer.ready();
  const inFlight = spec.inFlight || 1;
  for (let i = 0; i < spec.messages.length; i += inFlight) {
    const batch = [];
    for (let j = i; j < Math.min(i + inFlight, spec.messages.length); j++) {
      batch.push(sendOne(producer, j));
    }
    await Promise.all(batch);
  }
  await common.bounded(producer.close(), 3000);
  common.emit({ event: 'done' });
  process.exit(0);
})().catch(err => {
  common.emit({ event: 'fatal', name: err.name, message: err.message, stack: err.stack });
  process.exit(3);
});
