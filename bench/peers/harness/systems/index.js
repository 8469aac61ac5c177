// The systems the harness compares, by the name used on the command line and in the results.
'use strict';

const delayq = require('./delayq');
const bullmq = require('./bullmq');
const beanstalkd = require('./beanstalkd');
const zset = require('./zset');
const pgboss = require('./pgboss');
const graphile = require('./graphile');

// Three durabilities, each system at its own setting of each: nothing synced; synced at most
// every 50 ms (delayq interval, beanstalkd -f 50) or every second (Redis appendfsync everysec);
// synced before the answer (delayq sync, its default; beanstalkd -f 0; appendfsync always).
const systems = {
  'delayq-none': delayq.variant({ durability: 'none' }),
  // The same server, its consumers on push streams instead of long-polled reserves.
  'delayq-none-stream': delayq.variant({ durability: 'none', consumer: 'stream' }),
  'delayq-interval': delayq.variant({ durability: 'interval' }),
  'delayq-sync': delayq.variant({ durability: 'sync' }),
  'delayq-redis': delayq.variant({ store: 'redis' }),
  'delayq-redis-stream': delayq.variant({ store: 'redis', consumer: 'stream' }),
  'delayq-redis-everysec': delayq.variant({ store: 'redis', appendfsync: 'everysec' }),
  'delayq-redis-always': delayq.variant({ store: 'redis', appendfsync: 'always' }),
  bullmq: bullmq.variant(),
  beanstalkd: beanstalkd.variant({}),
  'beanstalkd-binlog': beanstalkd.variant({ fsyncMs: 50 }),
  'beanstalkd-binlog-sync': beanstalkd.variant({ fsyncMs: 0 }),
  'zset-poll': zset.variant({ mode: 'poll' }),
  'zset-poll-everysec': zset.variant({ mode: 'poll', appendfsync: 'everysec' }),
  'zset-poll-always': zset.variant({ mode: 'poll', appendfsync: 'always' }),
  'zset-stream': zset.variant({ mode: 'stream' }),
  // On PostgreSQL, as it ships: a commit is on disk when it is acknowledged.
  'delayq-postgres': delayq.variant({ store: 'postgres' }),
  'delayq-postgres-sql': delayq.variant({ store: 'postgres', producer: 'sql' }),
  'pg-boss': pgboss.variant(),
  'graphile-worker': graphile.variant(),
};

function system(name) {
  const s = systems[name];
  if (!s) throw new Error(`unknown system "${name}"; expected one of: ${Object.keys(systems).join(', ')}`);
  return s;
}

module.exports = { systems, system };
