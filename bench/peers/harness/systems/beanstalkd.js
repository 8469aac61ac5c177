// beanstalkd (Debian's 1.12), through the npm client jackd, with and without its binlog.
// Producer: one connection, `use bench`, `put` with delay = the due time rounded up to whole
// seconds (beanstalkd's unit), ttr = the run's lease; up to 400 puts pipelined.
// Consumer: 16 connections per consumer process, each `watch bench` then a loop of
// `reserve` / `delete` — beanstalkd hands one job per reserve.
'use strict';

const servers = require('../servers');

const TUBE = 'bench';
const CONNECTIONS = 16;

async function connect(port) {
  const Jackd = require('jackd');
  const c = new Jackd();
  await c.connect({ host: '127.0.0.1', port });
  return c;
}

// fsyncMs: undefined (no binlog), 50 (fsync at most every 50 ms) or 0 (fsync every write).
function variant({ fsyncMs }) {
  const binlog = fsyncMs !== undefined;
  return {
    describe: binlog
      ? `beanstalkd -b DIR -f ${fsyncMs} (binlog, ${fsyncMs === 0 ? 'fsync every write' : `fsync at most every ${fsyncMs} ms`}) via npm jackd; 16 connections per consumer`
      : 'beanstalkd (no binlog) via npm jackd; 16 connections per consumer',

    async start(ctx) {
      const procs = [await servers.startBeanstalkd(ctx.ports.beanstalkd, ctx.dir, fsyncMs)];
      return { procs, conn: { port: ctx.ports.beanstalkd }, dir: ctx.dir };
    },
    async stop(state) { for (const p of state.procs) await servers.stopProcess(p); },
    memoryBytes: async (state) => servers.rssBytes(state.procs[0].pid),
    diskBytes: (state) => (binlog ? servers.dirBytes(`${state.dir}/binlog`) : null),
    peakServerBytes: (state) => servers.peakRssBytes(state.procs[0].pid),

    async producer(conn, opts) {
      const c = await connect(conn.port);
      await c.use(TUBE);
      const ttr = Math.max(1, Math.round(opts.leaseMs / 1000));
      return {
        async enqueue(jobs) {
          const now = Date.now();
          await Promise.all(jobs.map((j) => c.put(j.payload, {
            delay: Math.max(0, Math.ceil((j.due - now) / 1000)), ttr, priority: 0,
          })));
        },
        close: () => c.disconnect(),
      };
    },

    async consume(conn, opts, onBatch, onReady) {
      const loops = [];
      for (let i = 0; i < CONNECTIONS; ++i) {
        const c = await connect(conn.port);
        await c.watch(TUBE);
        await c.ignore('default');
        loops.push((async () => {
          for (;;) {
            const job = await c.reserve();
            onBatch([job.payload.toString()]);
            await c.delete(job.id);
          }
        })());
      }
      onReady();
      await Promise.all(loops);
    },
  };
}

module.exports = { variant };
