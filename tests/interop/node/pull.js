'use strict';
// Pulls every queue of a topic from offset 0 until NO_NEW_MSG with ali-ons' own wire layer.
//
// ali-ons has no pull consumer; its push consumer pulls through MQClientAPI#pullMessage, which
// this script calls directly (unchanged), without the long-poll suspend flag so an empty queue
// answers at once.
// spec: { nameSrv, group, topic, subExpression, timeoutMs }
// events: { event: 'pulled', ...message } per message; { event: 'pull', queueId, offset,
//         pullStatus, nextBeginOffset, count } per request; { event: 'done' } and exit 0.

const common = require('./common');

common.guardLoopback();
const spec = common.readSpec();
common.deadline(spec.timeoutMs);

const MQClientAPI = require('ali-ons/lib/mq_client_api');
const PullSysFlag = require('ali-ons/lib/utils/pull_sys_flag');
const PullStatus = require('ali-ons/lib/consumer/pull_status');

(async () => {
  const api = new MQClientAPI(common.clientOptions(spec));
  await api.ready();
  const route = await api.getTopicRouteInfoFromNameServer(spec.topic, 3000);
  const masters = new Map(route.brokerDatas.map(b => [ b.brokerName, b.brokerAddrs['0'] ]));
  const subscription = spec.subExpression || '*';
  for (const queueData of route.queueDatas) {
    const addr = masters.get(queueData.brokerName);
    for (let queueId = 0; queueId < queueData.readQueueNums; queueId++) {
      let offset = 0;
      for (let round = 0; round < 10000; round++) {
        const result = await api.pullMessage(addr, {
          consumerGroup: spec.group,
          topic: spec.topic,
          queueId,
          queueOffset: offset,
          maxMsgNums: 32,
          sysFlag: PullSysFlag.buildSysFlag(false, false, true, false),
          commitOffset: 0,
          suspendTimeoutMillis: 0,
          subscription,
          subVersion: 0,
        }, 3000);
        common.emit({ event: 'pull', queueId, offset, pullStatus: result.pullStatus,
          nextBeginOffset: result.nextBeginOffset, count: result.msgFoundList.length });
        for (const msg of result.msgFoundList) {
          common.emit(Object.assign({ event: 'pulled' }, common.describe(msg)));
        }
        if (result.pullStatus === PullStatus.NO_NEW_MSG || result.pullStatus === PullStatus.OFFSET_ILLEGAL) {
          break;
        }
        offset = result.nextBeginOffset;
      }
    }
  }
  await common.bounded(api.close(), 3000);
  common.emit({ event: 'done' });
  process.exit(0);
})().catch(err => {
  common.emit({ event: 'fatal', name: err.name, message: err.message, stack: err.stack });
  process.exit(3);
});
