// BullMQ doing the work delayq's Redis benchmark does (scripts/bench-redis.sh runs both
// against the same redis-server in the same run). One scenario per run, one JSON line out.
//
//   node bench.js enqueue  --port P --jobs N --batch 100
//       N delayed jobs (100-byte payload, delay 1 h..2 h) added with Queue.addBulk in batches;
//       reports jobs/s and Redis used_memory growth per scheduled job.
//   node bench.js lateness --port P --rate 10000 --seconds 10 --concurrency 100
//       rate*seconds jobs due uniformly over `seconds`, starting after the enqueue is done;
//       one Worker with `concurrency` receives them; lateness = received - due.
'use strict';

const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');
const { performance } = require('perf_hooks');

function args() {
  const out = { scenario: process.argv[2] };
  for (let i = 3; i + 1 < process.argv.length; i += 2) {
    out[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
  }
  return out;
}

const nowMs = () => performance.timeOrigin + performance.now();
const payload = 'x'.repeat(100);

async function usedMemory(redis) {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function enqueue(a, connection, redis, name) {
  const jobs = Number(a.jobs || 200000);
  const batch = Number(a.batch || 100);
  const queue = new Queue(name, { connection });
  await queue.waitUntilReady();
  const before = await usedMemory(redis);
  const start = nowMs();
  for (let i = 0; i < jobs; i += batch) {
    const bulk = [];
    for (let k = 0; k < batch; ++k) {
      bulk.push({ name: 'j', data: { p: payload }, opts: { delay: 3600000 + Math.floor(Math.random() * 3600000) } });
    }
    await queue.addBulk(bulk);
  }
  const secs = (nowMs() - start) / 1000;
  const after = await usedMemory(redis);
  await queue.close();
  return {
    scenario: 'enqueue', peer: 'bullmq', batch, jobs, seconds: +secs.toFixed(3),
    jobs_per_s: Math.round(jobs / secs), redis_bytes_per_job: Math.round((after - before) / jobs),
  };
}

async function lateness(a, connection, name) {
  const rate = Number(a.rate || 10000);
  const seconds = Number(a.seconds || 10);
  const concurrency = Number(a.concurrency || 100);
  const n = rate * seconds;
  const queue = new Queue(name, { connection });
  await queue.waitUntilReady();
  const windowStart = nowMs() + 3000 + n / 8;  // BullMQ enqueues 10-30k/s here: let it finish first
  for (let i = 0; i < n; i += 1000) {
    const bulk = [];
    for (let k = 0; k < 1000 && i + k < n; ++k) {
      const due = windowStart + Math.random() * seconds * 1000;
      bulk.push({
        name: 'j', data: { p: payload, due },
        opts: { delay: Math.max(0, Math.round(due - Date.now())), removeOnComplete: true },
      });
    }
    await queue.addBulk(bulk);
  }
  if (nowMs() >= windowStart) throw new Error('enqueue did not finish before the jobs came due');
  const late = [];
  let early = 0;
  await new Promise((resolve) => {
    const worker = new Worker(name, async (job) => {
      const l = nowMs() - job.data.due;
      if (l < 0) ++early;
      late.push(l);
      if (late.length === n) resolve(worker);
    }, { connection, concurrency });
  }).then((worker) => worker.close());
  await queue.close();
  late.sort((x, y) => x - y);
  const r = (v) => +v.toFixed(3);
  return {
    scenario: 'lateness', peer: 'bullmq', rate, jobs: late.length, concurrency, early,
    p50_ms: r(percentile(late, 0.5)), p90_ms: r(percentile(late, 0.9)), p99_ms: r(percentile(late, 0.99)),
    p999_ms: r(percentile(late, 0.999)), max_ms: r(late[late.length - 1]),
  };
}

async function main() {
  const a = args();
  const connection = { host: a.host || '127.0.0.1', port: Number(a.port || 6379), maxRetriesPerRequest: null };
  const redis = new IORedis(connection);
  const name = `bench-${process.pid}`;
  let result;
  if (a.scenario === 'enqueue') result = await enqueue(a, connection, redis, name);
  else if (a.scenario === 'lateness') result = await lateness(a, connection, name);
  else throw new Error(`unknown scenario ${a.scenario}; expected enqueue or lateness`);
  result.bullmq_version = require('bullmq/package.json').version;
  console.log(JSON.stringify(result));
  await redis.quit();
}

main().catch((e) => { console.error(e); process.exit(1); });
