// One run of one workload against one system; prints one JSON line (scripts/bench-peers.sh
// runs every combination REPEAT times and report.js turns the lines into tables and plots).
//
//   node run.js --system NAME --workload burst|memory|crash|single [--n N] [--consumers C]
//               [--seconds S] [--connections K] [--delayq PATH] [--dir DIR]
//
// burst   N jobs (100-byte payloads) due uniformly over the S seconds after enqueueing
//         starts, handed in in due order, batches of 100 with 4 in flight; C consumer
//         processes take them as they come due. Lease 30 s. Also the servers' CPU per job
//         (user + system, from enqueue's start to the last job recorded).
// memory  N jobs due 1-2 h ahead; server memory growth per job and the enqueue rate.
// crash   N jobs all due 3 s after enqueueing starts; one consumer (50 µs of work per job)
//         is SIGKILLed once it has processed a quarter of them and started again at once.
//         Lease (visibility timeout, TTR, lock) 3 s for every system.
// single  one job per request (delayq: a POST .../jobs of one job; beanstalkd: one put;
//         ZSET: one ZADD) on K connections (16), each with one request in flight, for S
//         seconds; jobs due 1 h ahead, no consumer. The enqueue rate is requests per second.
'use strict';

const { fork } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const { system } = require('./systems');
const { treeCpuSeconds } = require('./servers');
const { nowMs, sleep, payloadFor, readRecords, percentile, round } = require('./lib');

function parseArgs(argv) {
  const a = { n: null, consumers: 1, seconds: 10, connections: 16, delayq: 'build/delayq', dir: null };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    if (!(k in a) && !['system', 'workload'].includes(k)) throw new Error(`unknown option --${k}; see the head of run.js`);
    a[k] = argv[i + 1];
  }
  if (!a.system || !a.workload) throw new Error('need --system NAME --workload burst|memory|crash|single');
  const defaults = { burst: 100000, memory: 1000000, crash: 10000, single: 0 };
  if (!(a.workload in defaults)) throw new Error(`unknown workload "${a.workload}"; expected burst, memory, crash or single`);
  a.n = Number(a.n || defaults[a.workload]);
  a.consumers = Number(a.consumers);
  a.seconds = Number(a.seconds);
  a.connections = Number(a.connections);
  if (!(a.connections >= 1)) throw new Error(`--connections ${a.connections}: expected a count of 1 or more`);
  return a;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

// Hands the jobs in through the system's producer: batches of 100 {id, due, payload},
// 4 batches in flight. `dues` (ms since the epoch) is set just before this is called.
async function enqueueAll(producer, payloads, dues) {
  let next = 0;
  const lane = async () => {
    while (next < payloads.length) {
      const batch = [];
      for (let id = next; id < Math.min(next + 100, payloads.length); ++id) batch.push({ id, due: dues[id], payload: payloads[id] });
      next += 100;
      await producer.enqueue(batch);
    }
  };
  const start = nowMs();
  await Promise.all([lane(), lane(), lane(), lane()]);
  return nowMs() - start;
}

// Single-job requests on `connections` producers (a connection each), one request in flight
// on each, for `seconds`: requests answered per second.
async function enqueueSingles(sys, conn, opts, seconds, connections) {
  const producers = [];
  for (let i = 0; i < connections; ++i) producers.push(await sys.producer(conn, opts));
  let issued = 0;
  const start = nowMs();
  const deadline = start + seconds * 1000;
  await Promise.all(producers.map(async (p) => {
    while (nowMs() < deadline) {
      const id = issued++;
      await p.enqueue([{ id, due: Math.ceil(nowMs() + 3600000), payload: payloadFor(id) }]);
    }
  }));
  const ms = nowMs() - start;
  for (const p of producers) await p.close().catch(() => {});
  return { requests: issued, enqueue_per_s: Math.round(issued / (ms / 1000)) };
}

class Consumers {
  constructor(name, conn, opts, dir) { Object.assign(this, { name, conn, opts, dir, procs: [], files: [] }); }

  async start() {
    const file = path.join(this.dir, `consumer-${this.files.length}.rec`);
    this.files.push(file);
    const child = fork(path.join(__dirname, 'consumer.js'),
      [this.name, JSON.stringify(this.conn), JSON.stringify(this.opts), file], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.recorded = 0;
    const ready = new Promise((resolve, reject) => {
      child.on('message', (m) => { if (m.ready) resolve(); if (m.recorded !== undefined) child.recorded = m.recorded; });
      child.once('exit', (code, signal) => reject(new Error(`consumer of ${this.name} exited (${code ?? signal}) before it was ready`)));
    });
    this.procs.push(child);
    await ready;
    return child;
  }

  recorded() { return this.procs.reduce((sum, c) => sum + c.recorded, 0); }
  alive() { return this.procs.some((c) => c.exitCode === null && c.signalCode === null); }

  // Every record so far, [id, receivedMs], read from the consumers' files.
  records() { return this.files.flatMap(readRecords); }

  async kill(child) {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
  async killAll() { for (const c of this.procs) await this.kill(c); }
}

// Delivered / lost / duplicate / early counts and the lateness distribution of first deliveries.
function deliveryStats(dues, records, t0) {
  const first = new Float64Array(dues.length).fill(NaN);
  let duplicates = 0;
  let lastAt = 0;
  for (const [id, at] of records) {
    if (!(id >= 0 && id < dues.length)) throw new Error(`a consumer recorded job ${id}, which was never enqueued`);
    if (Number.isNaN(first[id])) first[id] = at; else ++duplicates;
    if (at > lastAt) lastAt = at;
  }
  const late = [];
  let early = 0;
  for (let id = 0; id < dues.length; ++id) {
    if (Number.isNaN(first[id])) continue;
    const l = first[id] - dues[id];
    if (l < -1) ++early;
    late.push(l);
  }
  late.sort((x, y) => x - y);
  const cdf = [];
  for (let q = 1; q <= 1000; ++q) cdf.push(round(percentile(late, q / 1000), 3));
  return {
    delivered: late.length, lost: dues.length - late.length, duplicates, early,
    lateness_ms: {
      p50: round(percentile(late, 0.5)), p90: round(percentile(late, 0.9)), p99: round(percentile(late, 0.99)),
      p999: round(percentile(late, 0.999)), max: round(late[late.length - 1] ?? null),
    },
    // Jobs delivered per second from the first due time to the last delivery.
    delivery_per_s: late.length ? Math.round(late.length / ((lastAt - Math.min(t0, dues[0])) / 1000)) : 0,
    lateness_cdf_permille: late.length ? cdf : [],
  };
}

// CPU seconds used so far by the processes a system runs on (delayq, redis-server,
// beanstalkd, PostgreSQL with its backends): the "server CPU per job" of the burst.
const serverCpuSeconds = (state) => state.procs.reduce((sum, p) => sum + treeCpuSeconds(p.pid), 0);

async function waitFor(done, deadline, pollMs = 50) {
  while (!done() && nowMs() < deadline) await sleep(pollMs);
  return done();
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const sys = system(a.system);
  const dir = a.dir || fs.mkdtempSync(path.join(os.tmpdir(), `delayq-peers-${a.system}-`));
  fs.mkdirSync(dir, { recursive: true });
  const ctx = {
    dir, delayqBin: path.resolve(a.delayq),
    ports: { redis: await freePort(), beanstalkd: await freePort(), delayq: await freePort(), postgres: await freePort() },
  };
  const leaseMs = a.workload === 'crash' ? 3000 : 30000;
  const opts = { leaseMs, workMicros: a.workload === 'crash' ? 50 : 0 };
  const result = { system: a.system, workload: a.workload, n: a.n, consumers: a.workload === 'burst' ? a.consumers : (a.workload === 'crash' ? 1 : 0) };
  if (a.workload === 'burst' || a.workload === 'single') result.seconds = a.seconds;
  if (a.workload === 'single') result.connections = a.connections;
  const state = await sys.start(ctx);
  const consumers = new Consumers(a.system, state.conn, opts, dir);
  let producer;
  try {
    producer = await sys.producer(state.conn, opts);
    if (a.workload === 'single') {
      Object.assign(result, await enqueueSingles(sys, state.conn, opts, a.seconds, a.connections));
      result.peak_server_bytes = sys.peakServerBytes(state);
    } else if (a.workload === 'memory') {
      const before = await sys.memoryBytes(state);
      const payloads = Array.from({ length: a.n }, (_, id) => payloadFor(id));
      const t = nowMs();
      const dues = Float64Array.from({ length: a.n }, () => Math.ceil(t + 3600000 + Math.random() * 3600000));
      const ms = await enqueueAll(producer, payloads, dues);
      const after = await sys.memoryBytes(state);
      const disk = sys.diskBytes(state);
      Object.assign(result, {
        enqueue_per_s: Math.round(a.n / (ms / 1000)), bytes_per_job: Math.round((after - before) / a.n),
        disk_bytes_per_job: disk === null ? null : Math.round(disk / a.n),
        peak_server_bytes: sys.peakServerBytes(state),
      });
    } else {
      const count = a.workload === 'burst' ? a.consumers : 1;
      for (let i = 0; i < count; ++i) await consumers.start();
      // Payloads and offsets are made before the clock starts (100 000 jobs take ~150 ms
      // here); after it only the due times are set, in a typed array (~1 ms).
      const payloads = Array.from({ length: a.n }, (_, id) => payloadFor(id));
      const offsets = a.workload === 'burst'
        ? Float64Array.from({ length: a.n }, () => Math.random() * a.seconds * 1000).sort()
        : new Float64Array(a.n).fill(3000);
      const cpu0 = serverCpuSeconds(state);
      const t0 = nowMs();
      const dues = offsets.map((offset) => Math.ceil(t0 + offset));
      const ms = await enqueueAll(producer, payloads, dues);
      result.enqueue_per_s = Math.round(a.n / (ms / 1000));
      // With DELAYQ_PEERS_KEEP the run's directory stays, due times included, for a closer look.
      if (process.env.DELAYQ_PEERS_KEEP) fs.writeFileSync(path.join(dir, 'dues.txt'), `${t0}\n${dues.join('\n')}\n`);
      const lastDue = dues[dues.length - 1];
      const distinct = () => new Set(consumers.records().map(([id]) => id)).size;
      if (a.workload === 'burst') {
        await waitFor(() => consumers.recorded() >= a.n || !consumers.alive(), lastDue + 20000);
        // Enqueue, delivery and ack of every job (the consumers ack a batch once it is recorded:
        // the last acks may still be on their way, a few µs of the figure at most).
        result.server_cpu_us_per_job = round(((serverCpuSeconds(state) - cpu0) * 1e6) / a.n, 1);
        await sleep(500);  // let a stray redelivery show up as a duplicate
      } else {
        // crash: kill the consumer once it has processed a quarter, start another at once.
        const first = consumers.procs[0];
        await waitFor(() => first.recorded >= a.n / 4 || !consumers.alive(), lastDue + 20000);
        await consumers.kill(first);
        result.recorded_before_kill = consumers.records().length;
        await consumers.start();
        const deadline = nowMs() + leaseMs + 10000;
        let all = false;
        while (!all && nowMs() < deadline && consumers.alive()) { await sleep(250); all = distinct() >= a.n; }
        await sleep(all ? 1000 : 0);  // redeliveries after the last first delivery count as duplicates
      }
      await consumers.killAll();
      Object.assign(result, deliveryStats(dues, consumers.records(), t0));
      if (sys.serverLateness) result.server_lateness_ms = await sys.serverLateness(state);
      result.peak_server_bytes = sys.peakServerBytes(state);
    }
  } finally {
    await consumers.killAll();
    if (producer) await producer.close().catch(() => {});
    await sys.stop(state);
    if (!a.dir && !process.env.DELAYQ_PEERS_KEEP) fs.rmSync(dir, { recursive: true, force: true });
  }
  result.describe = sys.describe;
  console.log(JSON.stringify(result));
}

main().then(() => process.exit(0), (e) => { console.error(`run.js: ${e.stack || e.message}`); process.exit(1); });
