'use strict';
// Runs one ali-ons push Consumer until a `stop` line (or the end) of stdin, or its deadline.
//
// spec: { nameSrv, group, topic, subExpression (a tag expression, or { expressionType: 'SQL92',
//         subString }), broadcast, consumeFromWhere, consumeTimestamp, retryKeys, timeoutMs }
// events: { event: 'ready', clientId }; { event: 'assigned', queueIds } whenever rebalance changes
//         the consumer's queues of the topic; { event: 'received', action, ...message } per
//         delivery (action 'retry' for a message of retryKeys on its first delivery, whose handler
//         returns ACTION_RETRY so ali-ons sends it back to the broker); { event: 'client_error' }
//         for every error ali-ons reports; { event: 'stopping' }, then { event: 'closed' } and
//         exit 0 after a clean stop.

const common = require('./common');

common.guardLoopback();
const spec = common.readSpec();
common.deadline(spec.timeoutMs);

const { Consumer } = require('ali-ons');

const retryKeys = new Set(spec.retryKeys || []);

(async () => {
  const consumer = new Consumer(Object.assign(common.clientOptions(spec), {
    consumerGroup: spec.group,
    isBroadcast: !!spec.broadcast,
    consumeFromWhere: spec.consumeFromWhere || 'CONSUME_FROM_FIRST_OFFSET',
    // Java's defaults are 20 s and 5 s; a test waits for seconds, not tens of them.
    rebalanceInterval: 1000,
    persistConsumerOffsetInterval: 1000,
  }, spec.consumeTimestamp ? {
    // CONSUME_FROM_TIMESTAMP's start, local time to the second: YYYYMMDDHHmmss.
    consumeTimestamp: spec.consumeTimestamp,
  } : {}));
  consumer.on('error', err => common.emit({ event: 'client_error', message: err.message }));
  consumer.on(`topic_${spec.topic}_queue_changed`, () => {
    const queueIds = [];
    for (const { messageQueue } of consumer.processQueueTable.values()) {
      if (messageQueue.topic === spec.topic) {
        queueIds.push(messageQueue.queueId);
      }
    }
    common.emit({ event: 'assigned', queueIds: queueIds.sort((a, b) => a - b) });
  });
  consumer.subscribe(spec.topic, spec.subExpression || '*', async msg => {
    const retry = retryKeys.has(msg.keys) && msg.reconsumeTimes === 0;
    common.emit(Object.assign({ event: 'received', action: retry ? 'retry' : 'ok' }, common.describe(msg)));
    return retry ? Consumer.ACTION_RETRY : undefined;
  });
  await consumer.ready();
  common.emit({ event: 'ready', clientId: consumer._mqClient.clientId });

  let stopping = false;
  const stop = async () => {
    if (stopping) {
      return;
    }
    stopping = true;
    // Errors after this line are the close's own (a rebalance's request cut by it), not the broker's.
    common.emit({ event: 'stopping' });
    // close() persists the offsets (UPDATE_CONSUMER_OFFSET) and unregisters from the broker.
    await common.bounded(consumer.close(), 5000);
    common.emit({ event: 'closed' });
    process.exit(0);
  };
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', chunk => {
    if (chunk.includes('stop')) {
      stop();
    }
  });
  process.stdin.on('end', stop);
})().catch(err => {
  common.emit({ event: 'fatal', name: err.name, message: err.message, stack: err.stack });
  process.exit(3);
});
