// The delay queue most tutorials teach, on redis-server (no persistence) through ioredis:
// ZADD with score = due time in ms, member = the job.
//   poll:   consumers run an atomic Lua pop (ZRANGEBYSCORE -inf now LIMIT 0 100, then ZREM)
//           and sleep 0.5 s whenever it comes back empty.
//   stream: a mover process runs a Lua script every 500 ms that moves what is due into a
//           Stream (XADD) and removes it from the set; consumers read the Stream through a
//           consumer group (XREADGROUP COUNT 100 BLOCK 1000), XACK + XDEL when done, and
//           every second XAUTOCLAIM entries idle longer than the lease (a dead consumer's).
'use strict';

const { fork } = require('child_process');
const path = require('path');
const { redisServer } = require('./redis_server');
const { sleep } = require('../lib');

const DUE = 'zq:due';
const READY = 'zq:ready';
const GROUP = 'workers';

const POP = `
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #items > 0 then redis.call('ZREM', KEYS[1], unpack(items)) end
return items`;

const MOVE = `
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, item in ipairs(items) do redis.call('XADD', KEYS[2], '*', 'job', item) end
if #items > 0 then redis.call('ZREM', KEYS[1], unpack(items)) end
return #items`;

function redisClient(port) {
  const IORedis = require('ioredis');
  const r = new IORedis({ host: '127.0.0.1', port, maxRetriesPerRequest: null });
  r.defineCommand('dqPop', { numberOfKeys: 1, lua: POP });
  r.defineCommand('dqMove', { numberOfKeys: 2, lua: MOVE });
  return r;
}

// The stream variant's mover, run as its own process (node zset.js mover PORT).
async function mover(port) {
  const r = redisClient(port);
  for (;;) {
    while (await r.dqMove(DUE, READY, Date.now(), 1000) === 1000) { /* more is due */ }
    await sleep(500);
  }
}

// appendfsync: see servers.startRedis.
function variant({ mode, appendfsync }) {
  const server = redisServer(appendfsync);
  const aof = appendfsync ? ` (AOF, appendfsync ${appendfsync})` : '';
  return {
    describe: (mode === 'poll'
      ? 'Redis sorted set + Lua pop (LIMIT 100), polled every 0.5 s when empty, via ioredis'
      : 'Redis sorted set, Lua mover every 500 ms into a Stream + consumer group (COUNT 100), via ioredis') + aof,

    ...server,
    async start(ctx) {
      const state = await server.start(ctx);
      if (mode === 'stream') {
        await state.redis.xgroup('CREATE', READY, GROUP, '$', 'MKSTREAM');
        state.mover = fork(__filename, ['mover', String(ctx.ports.redis)], { stdio: 'inherit' });
      }
      return state;
    },
    async stop(state) {
      if (state.mover) state.mover.kill('SIGKILL');
      await server.stop(state);
    },

    async producer(conn) {
      const r = redisClient(conn.redisPort);
      return {
        async enqueue(jobs) {
          const args = [];
          for (const j of jobs) args.push(j.due, j.payload);
          await r.zadd(DUE, ...args);
        },
        close: async () => r.disconnect(),
      };
    },

    async consume(conn, opts, onBatch, onReady) {
      const r = redisClient(conn.redisPort);
      await r.ping();
      onReady();
      if (mode === 'poll') {
        for (;;) {
          const items = await r.dqPop(DUE, Date.now(), 100);
          if (items.length === 0) { await sleep(500); continue; }
          onBatch(items);
        }
      }
      const me = `c${process.pid}`;
      const handle = async (client, entries) => {
        if (!entries || entries.length === 0) return;
        onBatch(entries.map(([, fields]) => fields[1]));
        const ids = entries.map(([id]) => id);
        await client.multi().xack(READY, GROUP, ...ids).xdel(READY, ...ids).exec();
      };
      const claimer = (async () => {
        const c = redisClient(conn.redisPort);
        for (;;) {
          await sleep(1000);
          let cursor = '0-0';
          do {
            const [next, entries] = await c.xautoclaim(READY, GROUP, me, opts.leaseMs, cursor, 'COUNT', 100);
            await handle(c, entries.filter((e) => e && e[1]));
            cursor = next;
          } while (cursor !== '0-0');
        }
      })();
      for (;;) {
        const res = await r.xreadgroup('GROUP', GROUP, me, 'COUNT', 100, 'BLOCK', 1000, 'STREAMS', READY, '>');
        if (res) await handle(r, res[0][1]);
      }
      await claimer;  // eslint-disable-line no-unreachable
    },
  };
}

if (require.main === module && process.argv[2] === 'mover') {
  mover(Number(process.argv[3])).catch((e) => { console.error(`zset mover: ${e.message}`); process.exit(1); });
}

module.exports = { variant };
