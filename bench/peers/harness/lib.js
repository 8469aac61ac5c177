// What every part of the peers harness shares: one clock, the job payload, the consumer's
// record of what it processed, and the statistics.
'use strict';

const fs = require('fs');
const { performance } = require('perf_hooks');

// Wall-clock milliseconds with sub-millisecond resolution. Producers, consumers and the
// driver run on one machine and all use this, so lateness = received - due is one clock.
const nowMs = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A job's payload is 100 bytes and starts with its number, so every system carries the same
// bytes and a consumer knows which job it got without a system-specific field.
const PAYLOAD_BYTES = 100;
const payloadFor = (id) => `${id}:`.padEnd(PAYLOAD_BYTES, 'x');
const idOf = (payload) => parseInt(payload, 10);

// A consumer appends "id received_ms" lines for the jobs it has finished processing, with one
// write(2) per batch before it acknowledges them, so a SIGKILL leaves exactly the jobs that
// were processed (an acknowledgement that never happened shows up as a redelivery).
class RecordFile {
  constructor(path) { this.fd = fs.openSync(path, 'a'); }
  write(entries) {  // [[id, receivedMs], ...]
    if (entries.length === 0) return;
    let text = '';
    for (const [id, at] of entries) text += `${id} ${at.toFixed(3)}\n`;
    fs.writeSync(this.fd, text);
  }
  close() { fs.closeSync(this.fd); }
}

function readRecords(path) {
  if (!fs.existsSync(path)) return [];
  const out = [];
  for (const line of fs.readFileSync(path, 'utf8').split('\n')) {
    if (!line) continue;
    const sp = line.indexOf(' ');
    out.push([Number(line.slice(0, sp)), Number(line.slice(sp + 1))]);
  }
  return out;
}

// The "processing" a consumer does per job: a little CPU, so a kill lands mid-batch.
function work(micros) {
  if (micros <= 0) return;
  const until = performance.now() + micros / 1000;
  while (performance.now() < until) { /* busy */ }
}

// Nearest-rank percentile of an ascending array.
function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

function median(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

const round = (x, digits = 3) => (x === null || x === undefined ? null : +x.toFixed(digits));

module.exports = { nowMs, sleep, payloadFor, idOf, PAYLOAD_BYTES, RecordFile, readRecords, work, percentile, median, round };
