// pg-boss (npm pg-boss 10, the last line that runs on Node.js 20) on PostgreSQL 15.
// Producer: boss.insert in batches of 100, each job {name, data, startAfter: ISO due time}.
// Consumer: one boss.work per consumer process, batchSize 2 000, polling every 0.5 s (pg-boss's
// minimum; its default is 2 s). A pg-boss worker waits out its interval after every fetch, full
// or not, so batchSize bounds its rate: 2 000 per 0.5 s per consumer keeps up with the burst's
// 10 000 jobs/s across 4 consumers. expireInSeconds is the run's lease.
'use strict';

const { postgresServer } = require('./postgres_server');

const QUEUE = 'bench';

async function startBoss(conn, extra = {}) {
  const PgBoss = require('pg-boss');
  // supervise/schedule off: maintenance and cron would add their own load to a short run.
  const boss = new PgBoss({ connectionString: conn.postgresUrl, supervise: false, schedule: false, ...extra });
  boss.on('error', (e) => console.error(`pg-boss: ${e.message}`));
  await boss.start();
  return boss;
}

function variant() {
  return {
    describe: 'pg-boss (npm pg-boss) insert + work(batchSize 2000, polling 0.5 s), on PostgreSQL 15 with synchronous_commit on',

    ...postgresServer(),

    async start(ctx) {
      const state = await postgresServer().start(ctx);
      const boss = await startBoss(state.conn);  // creates pg-boss's schema
      await boss.createQueue(QUEUE);
      await boss.stop({ graceful: false });
      return state;
    },

    async producer(conn, opts) {
      const boss = await startBoss(conn, { max: 4 });
      const expireInSeconds = Math.ceil(opts.leaseMs / 1000);
      return {
        async enqueue(jobs) {
          if (jobs.length === 1) {
            const id = await boss.send(QUEUE, { p: jobs[0].payload }, { startAfter: new Date(jobs[0].due), expireInSeconds });
            if (!id) throw new Error('pg-boss send answered no id');
            return;
          }
          // pg-boss 10's insert answers nothing (null): a failed insert throws.
          await boss.insert(jobs.map((j) => ({
            name: QUEUE, data: { p: j.payload }, startAfter: new Date(j.due).toISOString(), expireInSeconds,
          })));
        },
        close: () => boss.stop({ graceful: false }),
      };
    },

    async consume(conn, opts, onBatch, onReady) {
      const boss = await startBoss(conn);
      await boss.work(QUEUE, { batchSize: 2000, pollingIntervalSeconds: 0.5 }, async (jobs) => {
        onBatch(jobs.map((j) => j.data.p));
      });
      onReady();
      await new Promise(() => {});  // runs until the driver stops this process
    },
  };
}

module.exports = { variant };
