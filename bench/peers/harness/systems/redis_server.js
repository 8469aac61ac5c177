// The server side shared by the peers that run on a plain redis-server (without or with AOF):
// start/stop, and memory read as Redis's used_memory (scheduled jobs) and VmHWM (peak).
'use strict';

const servers = require('../servers');

// appendfsync: see servers.startRedis.
const redisServer = (appendfsync) => ({
  async start(ctx) {
    const IORedis = require('ioredis');
    const procs = [await servers.startRedis(ctx.ports.redis, ctx.dir, appendfsync)];
    return { procs, conn: { redisPort: ctx.ports.redis }, redis: new IORedis({ host: '127.0.0.1', port: ctx.ports.redis }) };
  },
  async stop(state) {
    state.redis.disconnect();
    for (const p of state.procs) await servers.stopProcess(p);
  },
  memoryBytes: (state) => servers.redisUsedMemory(state.redis),
  diskBytes: () => null,
  peakServerBytes: (state) => servers.peakRssBytes(state.procs[0].pid),
});

module.exports = { redisServer };
