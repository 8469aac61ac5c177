// BullMQ on redis-server (no persistence), through its own Queue and Worker classes.
// Producer: Queue.addBulk in batches of 100, each job {delay, removeOnComplete: true}.
// Consumer: one Worker per consumer process, concurrency 100; lockDuration and
// stalledInterval = the run's lease (BullMQ's defaults, 30 s, in the burst).
'use strict';

const { redisServer } = require('./redis_server');

const QUEUE = 'bench';

function variant() {
  return {
    describe: 'BullMQ (npm bullmq) Queue.addBulk + Worker(concurrency 100), on redis-server without persistence',

    ...redisServer(),

    async producer(conn) {
      const { Queue } = require('bullmq');
      const queue = new Queue(QUEUE, { connection: { host: '127.0.0.1', port: conn.redisPort, maxRetriesPerRequest: null } });
      await queue.waitUntilReady();
      return {
        async enqueue(jobs) {
          // delay counts from BullMQ's own timestamp, taken after this: rounding up never makes a job early.
          const now = Date.now();
          await queue.addBulk(jobs.map((j) => ({
            name: 'j', data: { p: j.payload },
            opts: { delay: Math.max(0, Math.ceil(j.due - now)), removeOnComplete: true },
          })));
        },
        close: () => queue.close(),
      };
    },

    async consume(conn, opts, onBatch, onReady) {
      const { Worker } = require('bullmq');
      const worker = new Worker(QUEUE, async (job) => { onBatch([job.data.p]); }, {
        connection: { host: '127.0.0.1', port: conn.redisPort, maxRetriesPerRequest: null },
        concurrency: 100, lockDuration: opts.leaseMs, stalledInterval: opts.leaseMs,
      });
      worker.on('error', (e) => console.error(`bullmq worker: ${e.message}`));
      await worker.waitUntilReady();
      onReady();
      await new Promise(() => {});  // runs until the driver stops this process
    },
  };
}

module.exports = { variant };
