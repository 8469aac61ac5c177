// graphile-worker (npm graphile-worker 0.16, the last line that runs on Node.js 20) on
// PostgreSQL 15.
// Producer: graphile_worker.add_jobs(job_spec[]), its SQL bulk call, in batches of 100 (one job:
// add_job), run_at = the due time.
// Consumer: run() with concurrency 16 per consumer process and pollInterval 500 ms (its default
// is 2 s; jobs due now are announced by NOTIFY, jobs due later are found by polling).
'use strict';

const { postgresServer } = require('./postgres_server');

const TASK = 'j';

function variant() {
  return {
    describe: 'graphile-worker (npm graphile-worker) add_jobs + run(concurrency 16, pollInterval 500 ms), on PostgreSQL 15 with synchronous_commit on',

    ...postgresServer(),

    async start(ctx) {
      const state = await postgresServer().start(ctx);
      const { runMigrations } = require('graphile-worker');
      await runMigrations({ connectionString: state.conn.postgresUrl, logger: quietLogger() });
      return state;
    },

    async producer(conn) {
      const pg = require('pg');
      const client = new pg.Client({ connectionString: conn.postgresUrl });
      await client.connect();
      return {
        async enqueue(jobs) {
          if (jobs.length === 1) {
            await client.query('SELECT graphile_worker.add_job($1, $2::json, run_at => to_timestamp($3::float8 / 1000))',
              [TASK, JSON.stringify({ p: jobs[0].payload }), jobs[0].due]);
            return;
          }
          const r = await client.query(
            `SELECT count(*) AS n FROM graphile_worker.add_jobs(ARRAY(
               SELECT ROW($1, json_build_object('p', p), NULL, to_timestamp(d / 1000), NULL, NULL, NULL, NULL)::graphile_worker.job_spec
               FROM unnest($2::text[], $3::float8[]) AS j(p, d)))`,
            [TASK, jobs.map((j) => j.payload), jobs.map((j) => j.due)]);
          if (Number(r.rows[0].n) !== jobs.length) throw new Error(`add_jobs added ${r.rows[0].n} of ${jobs.length} jobs`);
        },
        close: () => client.end(),
      };
    },

    async consume(conn, opts, onBatch, onReady) {
      const { run } = require('graphile-worker');
      const runner = await run({
        connectionString: conn.postgresUrl, concurrency: 16, maxPoolSize: 17, pollInterval: 500, noHandleSignals: true,
        logger: quietLogger(), taskList: { [TASK]: async (payload) => { onBatch([payload.p]); } },
      });
      onReady();
      await runner.promise;
    },
  };
}

// graphile-worker logs every job at info; only its warnings and errors are kept.
function quietLogger() {
  const { Logger } = require('graphile-worker');
  return new Logger(() => (level, message) => { if (level === 'error' || level === 'warning') console.error(`graphile-worker: ${message}`); });
}

module.exports = { variant };
