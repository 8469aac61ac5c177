// The systems the harness compares, by the name used on the command line and in the results.
'use strict';

const delayq = require('./delayq');
const bullmq = require('./bullmq');
const beanstalkd = require('./beanstalkd');
const zset = require('./zset');

const systems = {
  'delayq-none': delayq.variant({ durability: 'none' }),
  'delayq-interval': delayq.variant({ durability: 'interval' }),
  'delayq-redis': delayq.variant({ store: 'redis' }),
  bullmq: bullmq.variant(),
  beanstalkd: beanstalkd.variant({ binlog: false }),
  'beanstalkd-binlog': beanstalkd.variant({ binlog: true }),
  'zset-poll': zset.variant({ mode: 'poll' }),
  'zset-stream': zset.variant({ mode: 'stream' }),
};

function system(name) {
  const s = systems[name];
  if (!s) throw new Error(`unknown system "${name}"; expected one of: ${Object.keys(systems).join(', ')}`);
  return s;
}

module.exports = { systems, system };
