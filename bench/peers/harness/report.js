// Turns the runs (one JSON line each, from run.js) into bench/results/peers.json, peers.md
// and the data files the gnuplot script (plots.gp) draws.
//
//   node report.js RUNS.jsonl RESULTS_DIR DATA_DIR META_JSON
'use strict';

const fs = require('fs');
const path = require('path');
const { median } = require('./lib');

const [runsPath, resultsDir, dataDir, metaJson] = process.argv.slice(2);
const meta = JSON.parse(metaJson || '{}');

// Name in the tables, durability, short name in the plots, and the durability class the row
// is compared within: 'none' (nothing synced), 'interval' (synced at most every 50 ms or every
// second), 'sync' (synced before the answer). Rows are listed in this order, class by class.
const LABELS = {
  'delayq-none': ['delayq, embedded', 'none (RAM + disk, no fsync)', 'delayq', 'none'],
  'delayq-none-stream': ['delayq, embedded, push streams', 'none (RAM + disk, no fsync)', 'delayq streams', 'none'],
  'delayq-redis': ['delayq on Redis', 'Redis without AOF', 'delayq on Redis', 'none'],
  'delayq-redis-stream': ['delayq on Redis, push streams', 'Redis without AOF', 'delayq on Redis, streams', 'none'],
  bullmq: ['BullMQ 6.7', 'Redis without AOF', 'BullMQ', 'none'],
  beanstalkd: ['beanstalkd 1.12', 'none (RAM)', 'beanstalkd', 'none'],
  'zset-poll': ['Redis ZSET + Lua pop, 0.5 s poll', 'Redis without AOF', 'ZSET poll', 'none'],
  'zset-stream': ['Redis ZSET → Stream mover, 500 ms', 'Redis without AOF', 'ZSET→Stream', 'none'],
  'delayq-interval': ['delayq, embedded', 'fsync at most every 50 ms', 'delayq fsync≤50ms', 'interval'],
  'beanstalkd-binlog': ['beanstalkd 1.12 -b', 'binlog, fsync at most every 50 ms', 'beanstalkd -b', 'interval'],
  'delayq-redis-everysec': ['delayq on Redis', 'Redis AOF, fsync every second', 'delayq on Redis, AOF 1 s', 'interval'],
  'zset-poll-everysec': ['Redis ZSET + Lua pop, 0.5 s poll', 'Redis AOF, fsync every second', 'ZSET poll, AOF 1 s', 'interval'],
  'delayq-sync': ['delayq, embedded', 'fsync before the answer (the default)', 'delayq sync', 'sync'],
  'beanstalkd-binlog-sync': ['beanstalkd 1.12 -b -f 0', 'binlog, fsync every write', 'beanstalkd -f 0', 'sync'],
  'delayq-redis-always': ['delayq on Redis', 'Redis AOF, fsync every write', 'delayq on Redis, AOF always', 'sync'],
  'zset-poll-always': ['Redis ZSET + Lua pop, 0.5 s poll', 'Redis AOF, fsync every write', 'ZSET poll, AOF always', 'sync'],
  'delayq-postgres': ['delayq on PostgreSQL', 'PostgreSQL 15, synchronous_commit on', 'delayq on PostgreSQL', 'sync'],
  'delayq-postgres-sql': ['delayq on PostgreSQL, SQL enqueue', 'PostgreSQL 15, synchronous_commit on', 'delayq PG, SQL enqueue', 'sync'],
  'pg-boss': ['pg-boss 10.3, 0.5 s poll', 'PostgreSQL 15, synchronous_commit on', 'pg-boss', 'sync'],
  'graphile-worker': ['graphile-worker 0.16, 0.5 s poll', 'PostgreSQL 15, synchronous_commit on', 'graphile-worker', 'sync'],
};
const CLASS_TITLES = { none: 'nothing synced', interval: 'synced every 50 ms – 1 s', sync: 'synced before the answer' };
const ORDER = Object.keys(LABELS);

const runs = fs.readFileSync(runsPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const failed = runs.filter((r) => r.error);
const ok = runs.filter((r) => !r.error);

const groupKey = (r) => `${r.workload}:${r.consumers}`;
const groups = {};  // groupKey -> system -> [runs]
for (const r of ok) ((groups[groupKey(r)] ??= {})[r.system] ??= []).push(r);

const get = (r, f) => f.split('.').reduce((o, k) => (o == null ? null : o[k]), r);
function summary(list, fields) {
  const out = { runs: list.length };
  for (const f of fields) {
    const values = list.map((r) => get(r, f));
    out[f] = median(values);
    out[`${f}.runs`] = values;
  }
  return out;
}

const DELIVERY_FIELDS = ['enqueue_per_s', 'delivered', 'lost', 'duplicates', 'early', 'lateness_ms.p50', 'lateness_ms.p90',
  'lateness_ms.p99', 'lateness_ms.p999', 'lateness_ms.max', 'delivery_per_s', 'server_cpu_us_per_job', 'peak_server_bytes'];
const MEMORY_FIELDS = ['enqueue_per_s', 'bytes_per_job', 'disk_bytes_per_job', 'peak_server_bytes'];
const SINGLE_FIELDS = ['enqueue_per_s', 'requests', 'peak_server_bytes'];
const FIELDS = { memory: MEMORY_FIELDS, single: SINGLE_FIELDS };

const medians = {};
for (const [key, bySystem] of Object.entries(groups)) {
  medians[key] = {};
  for (const sys of ORDER.filter((s) => bySystem[s])) {
    medians[key][sys] = summary(bySystem[sys], FIELDS[key.split(':')[0]] || DELIVERY_FIELDS);
  }
}

// ---- peers.md
const fmtInt = (x) => (x == null ? '–' : Math.round(x).toLocaleString('en-US').replace(/,/g, ' '));
const fmtMs = (x) => {
  if (x == null) return '–';
  const a = Math.abs(x);
  if (a >= 1000) return `${(x / 1000).toFixed(2)} s`;
  if (a >= 100) return `${x.toFixed(0)} ms`;
  if (a >= 10) return `${x.toFixed(1)} ms`;
  return `${x.toFixed(2)} ms`;
};
const fmtUs = (x) => (x == null ? '–' : `${x.toFixed(1)} µs`);
const fmtMiB = (x) => (x == null ? '–' : `${(x / 1048576).toFixed(0)} MiB`);
const range = (values, fmt) => {
  const v = values.filter((x) => typeof x === 'number');
  return v.length > 1 ? ` <sub>${fmt(Math.min(...v))}–${fmt(Math.max(...v))}</sub>` : '';
};

const burstN = ok.find((r) => r.workload === 'burst')?.n;
const burstS = ok.find((r) => r.workload === 'burst')?.seconds ?? 10;
const lines = [];
const w = (s = '') => lines.push(s);
w('# delayq and the delay queues users would pick instead — side by side');
w();
w(`Measured by \`make bench-peers\` (scripts/bench-peers.sh, harness in bench/peers/harness, method in bench/README.md) on ${meta.date || 'an unknown date'}: ${meta.machine || ''}`);
w(`Every figure is the median of ${meta.repeat || 3} runs; small print under a figure is the range over the runs.${meta.seconds ? ` The whole run took ${meta.seconds} s.` : ''}`);
w(`Load average before the run: ${meta.load_before || '?'}; after: ${meta.load_after || '?'}. Versions: ${meta.versions || '?'}.`);
w('Lateness = when the consumer received the job − its due time, one clock; "early" counts deliveries more than 1 ms before the due time.');
w();

// One line per system with the figures a reader compares first (README shows this table).
function summaryTable() {
  const b4 = medians['burst:4'] || {};
  const b1 = medians['burst:1'] || {};
  const mem = medians['memory:0'] || {};
  const crash = medians['crash:1'] || {};
  w('## Summary');
  w();
  w(`Burst: ${fmtInt(burstN)} jobs due over ${burstS} s. Memory: per job scheduled an hour ahead. Crash: the consumer SIGKILLed mid-batch and restarted.`);
  w();
  w('Rows are grouped by what the system has synced to disk when it answers the producer; compare within a group.');
  w();
  w('| system | durability | enqueue jobs/s | lateness p50 · p99 · max, 4 consumers | server CPU per job, 4 consumers | p99, 1 consumer | memory per job | crash: never delivered · twice |');
  w('|---|---|--:|--:|--:|--:|--:|--:|');
  let lastClass = null;
  for (const sys of ORDER.filter((x) => b4[x] || mem[x] || crash[x])) {
    const s4 = b4[sys];
    if (LABELS[sys][3] !== lastClass) {
      lastClass = LABELS[sys][3];
      w(`| ***${CLASS_TITLES[lastClass]}*** | | | | | | | |`);
    }
    w(`| ${LABELS[sys][0]} | ${LABELS[sys][1]} | ${fmtInt(s4?.enqueue_per_s)} | `
      + `${s4 ? `${fmtMs(s4['lateness_ms.p50'])} · **${fmtMs(s4['lateness_ms.p99'])}** · ${fmtMs(s4['lateness_ms.max'])}` : '–'} | `
      + `${fmtUs(s4?.server_cpu_us_per_job)} | ${fmtMs(b1[sys]?.['lateness_ms.p99'])} | ${mem[sys] ? `${fmtInt(mem[sys].bytes_per_job)} B` : '–'} | `
      + `${crash[sys] ? `${fmtInt(crash[sys].lost)} · ${fmtInt(crash[sys].duplicates)}` : '–'} |`);
  }
  w();
}

function deliveryTable(key, title) {
  const m = medians[key];
  if (!m) return;
  w(`## ${title}`);
  w();
  w('| system | durability | enqueue jobs/s | lateness p50 | p90 | p99 | p99.9 | max | delivered | lost | duplicate | early | delivered/s | server CPU per job | peak server RSS |');
  w('|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const [sys, s] of Object.entries(m)) {
    w(`| ${LABELS[sys][0]} | ${LABELS[sys][1]} | ${fmtInt(s.enqueue_per_s)}${range(s['enqueue_per_s.runs'], fmtInt)} | ${fmtMs(s['lateness_ms.p50'])} | ${fmtMs(s['lateness_ms.p90'])} | `
      + `${fmtMs(s['lateness_ms.p99'])}${range(s['lateness_ms.p99.runs'], fmtMs)} | ${fmtMs(s['lateness_ms.p999'])} | ${fmtMs(s['lateness_ms.max'])} | `
      + `${fmtInt(s.delivered)} | ${fmtInt(s.lost)} | ${fmtInt(s.duplicates)} | ${fmtInt(s.early)} | ${fmtInt(s.delivery_per_s)} | `
      + `${fmtUs(s.server_cpu_us_per_job)}${range(s['server_cpu_us_per_job.runs'], fmtUs)} | ${fmtMiB(s.peak_server_bytes)} |`);
  }
  w();
}

summaryTable();
deliveryTable('burst:4', `Burst: ${fmtInt(burstN)} jobs due uniformly over ${burstS} s, 4 consumers`);
deliveryTable('burst:1', `Burst: ${fmtInt(burstN)} jobs due uniformly over ${burstS} s, 1 consumer`);

if (medians['single:0']) {
  const one = ok.find((r) => r.workload === 'single');
  w(`## Single-job requests: ${one.connections} connections, one job per request, one request in flight on each, for ${one.seconds} s`);
  w();
  w('Jobs due 1 h ahead, no consumer; each system through its own client (delayq: undici, the HTTP client behind Node\'s fetch; beanstalkd: jackd; Redis: ioredis).');
  w();
  w('| system | durability | requests/s | requests | peak server RSS |');
  w('|---|---|--:|--:|--:|');
  for (const [sys, s] of Object.entries(medians['single:0'])) {
    w(`| ${LABELS[sys][0]} | ${LABELS[sys][1]} | ${fmtInt(s.enqueue_per_s)}${range(s['enqueue_per_s.runs'], fmtInt)} | ${fmtInt(s.requests)} | ${fmtMiB(s.peak_server_bytes)} |`);
  }
  w();
}

if (medians['memory:0']) {
  const n = ok.find((r) => r.workload === 'memory')?.n;
  w(`## Memory: ${fmtInt(n)} jobs due 1–2 h ahead`);
  w();
  w('| system | memory per scheduled job | measured as | disk per job | enqueue jobs/s | peak server RSS |');
  w('|---|--:|---|--:|--:|--:|');
  for (const [sys, s] of Object.entries(medians['memory:0'])) {
    const what = sys === 'delayq-none' ? 'RSS growth of delayq serve'
      : sys.startsWith('beanstalkd') ? 'RSS growth of beanstalkd'
        : sys === 'delayq-redis' ? 'Redis used_memory + delayq RSS growth' : 'Redis used_memory growth';
    w(`| ${LABELS[sys][0]} | ${fmtInt(s.bytes_per_job)} B${range(s['bytes_per_job.runs'], (x) => `${fmtInt(x)}`)} | ${what} | `
      + `${s.disk_bytes_per_job == null ? '–' : `${fmtInt(s.disk_bytes_per_job)} B`} | ${fmtInt(s.enqueue_per_s)}${range(s['enqueue_per_s.runs'], fmtInt)} | ${fmtMiB(s.peak_server_bytes)} |`);
  }
  w();
}

if (medians['crash:1']) {
  const n = ok.find((r) => r.workload === 'crash')?.n;
  w(`## Crash: ${fmtInt(n)} jobs due in 3 s, the consumer SIGKILLed after a quarter and restarted`);
  w();
  w('Lease / visibility timeout / TTR / lock = 3 s for every system.');
  w();
  w('| system | never delivered | delivered twice | early | lateness p50 | p99 | max |');
  w('|---|--:|--:|--:|--:|--:|--:|');
  for (const [sys, s] of Object.entries(medians['crash:1'])) {
    w(`| ${LABELS[sys][0]} | ${fmtInt(s.lost)}${range(s['lost.runs'], fmtInt)} | ${fmtInt(s.duplicates)}${range(s['duplicates.runs'], fmtInt)} | ${fmtInt(s.early)} | `
      + `${fmtMs(s['lateness_ms.p50'])} | ${fmtMs(s['lateness_ms.p99'])} | ${fmtMs(s['lateness_ms.max'])} |`);
  }
  w();
}
if (failed.length) {
  w('## Runs that failed');
  w();
  for (const r of failed) w(`- ${r.system} ${r.workload}${r.consumers ? ` (${r.consumers} consumers)` : ''}: ${r.error}`);
  w();
}
w(`Plots: [lateness CDF](peers-lateness.png) · [throughput](peers-throughput.png)${ok.some((r) => r.workload === 'memory') ? ' · [memory per job](peers-memory.png)' : ''}`);
fs.mkdirSync(resultsDir, { recursive: true });
fs.writeFileSync(path.join(resultsDir, 'peers.md'), `${lines.join('\n')}\n`);

// ---- data for gnuplot
fs.mkdirSync(dataDir, { recursive: true });
const cdfSystems = [];
for (const [sys, list] of Object.entries(groups['burst:4'] || {})) {
  // The curves of the systems that sync nothing, and delayq's default: more would be unreadable.
  if (LABELS[sys][3] !== 'none' && sys !== 'delayq-sync') continue;
  // The run whose p99 is the median's (the middle run), so the curve is one real run.
  const sorted = list.slice().sort((x, y) => x.lateness_ms.p99 - y.lateness_ms.p99);
  const run = sorted[Math.floor((sorted.length - 1) / 2)];
  if (!run.lateness_cdf_permille.length) continue;
  const rows = run.lateness_cdf_permille.map((v, i) => `${Math.max(v, 0.1)} ${(i + 1) / 1000}`);
  fs.writeFileSync(path.join(dataDir, `cdf-${sys}.dat`), `${rows.join('\n')}\n`);
  cdfSystems.push(sys);
}
const q = (s) => `"${s.replace(/"/g, "'")}"`;
fs.writeFileSync(path.join(dataDir, 'cdf-systems.txt'),
  cdfSystems.map((s) => `${path.join(dataDir, `cdf-${s}.dat`)}\t${LABELS[s][2]}`).join('\n'));
const bars = [];
const memBars = [];
for (const sys of ORDER) {
  const b = medians['burst:4']?.[sys];
  const mem = medians['memory:0']?.[sys];
  if (b) bars.push(`${q(LABELS[sys][2])} ${b.enqueue_per_s} ${mem?.enqueue_per_s ?? '?'} ${b.delivery_per_s}`);
  if (mem) memBars.push(`${q(LABELS[sys][2])} ${mem.bytes_per_job}`);
}
fs.writeFileSync(path.join(dataDir, 'throughput.dat'), `# system burst_enqueue memory_enqueue burst_delivered_per_s\n${bars.join('\n')}\n`);
fs.writeFileSync(path.join(dataDir, 'memory.dat'), `# system bytes_per_job\n${memBars.join('\n')}\n`);
fs.writeFileSync(path.join(dataDir, 'titles.gp'), [
  `burst_n = '${fmtInt(burstN)}'`, `burst_s = '${burstS}'`, `memory_n = '${fmtInt(ok.find((r) => r.workload === 'memory')?.n)}'`].join('\n') + '\n');

// ---- peers.json (every run, without the CDF samples but for the plotted ones)
const slim = ok.map(({ lateness_cdf_permille, describe, ...rest }) => rest);
const describe = {};
for (const r of ok) describe[r.system] = r.describe;
fs.writeFileSync(path.join(resultsDir, 'peers.json'), `${JSON.stringify({
  meta, systems: Object.fromEntries(ORDER.filter((s) => describe[s]).map((s) => [s, { label: LABELS[s][0], durability: LABELS[s][1], driven_by: describe[s] }])),
  medians, runs: slim, failed,
}, null, 1)}\n`);
console.log(lines.join('\n'));
