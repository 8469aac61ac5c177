// The server side shared by the peers that run on a plain redis-server (no persistence):
// start/stop, and memory read as Redis's used_memory (scheduled jobs) and VmHWM (peak).
'use strict';

const servers = require('../servers');

const redisServer = {
  async start(ctx) {
    const IORedis = require('ioredis');
    const procs = [await servers.startRedis(ctx.ports.redis, ctx.dir)];
    return { procs, conn: { redisPort: ctx.ports.redis }, redis: new IORedis({ host: '127.0.0.1', port: ctx.ports.redis }) };
  },
  async stop(state) {
    state.redis.disconnect();
    for (const p of state.procs) await servers.stopProcess(p);
  },
  memoryBytes: (state) => servers.redisUsedMemory(state.redis),
  diskBytes: () => null,
  peakServerBytes: (state) => servers.peakRssBytes(state.procs[0].pid),
};

module.exports = { redisServer };
