// The Worker against a real server: resolving acks, throwing nacks with the error's text, the
// lease is kept while a handler outlives it, SIGTERM lets the running handler finish; and the
// README's order-timeout story (examples/order-timeout.js) runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Client, Worker } from '../src/index.js';
import { startServer } from './server.js';

const here = dirname(fileURLToPath(import.meta.url));

function run(args, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = ''; let err = '';
    child.stdout.on('data', (d) => { out += d; if (opts.onOut) opts.onOut(String(d), child); });
    child.stderr.on('data', (d) => { err += d; });
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

test('resolving acks, throwing nacks with the error text', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.setConfig('w', { max_attempts: 1 });
    await c.enqueue('w', { ok: true });
    const bad = await c.enqueue('w', { ok: false });
    let seen = 0;
    const worker = new Worker(c, 'w', async (job) => {
      if (++seen === 2) worker.stop();
      if (!job.payload.ok) throw new Error('payment provider said no');
    }, { wait: '1s', signals: false });
    await worker.run();
    assert.deepEqual([worker.acked, worker.nacked], [1, 1]);
    const dead = await c.dead('w');
    assert.deepEqual(dead.map((j) => [j.id, j.lastError]), [[bad.id, 'Error: payment provider said no']]);
  } finally { await s.stop(); }
});

test('a handler longer than the lease keeps its job', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueue('slow', 'x');
    const attempts = [];
    const worker = new Worker(c, 'slow', async (job) => {
      attempts.push(job.attempt);
      await new Promise((r) => setTimeout(r, 2500)); // the work: two and a half leases of 1 s
      worker.stop();
    }, { concurrency: 2, lease: '1s', wait: '200ms', signals: false });
    await worker.run();
    assert.deepEqual(attempts, [1]);
    const st = await c.stats('slow');
    assert.deepEqual([st.counters.acked, st.counters.redelivered], [1, 0]);
    assert.equal(worker.errors, 0);
  } finally { await s.stop(); }
});

test('SIGTERM lets the running handler finish and be acked', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueue('term', 'x');
    const script = join(s.dir, 'worker.mjs');
    writeFileSync(script, `
      import { Client, Worker } from ${JSON.stringify(pathToFileURL(join(here, '..', 'src', 'index.js')).href)};
      const w = new Worker(new Client(${JSON.stringify(s.url)}), 'term', async () => {
        console.log('started');
        await new Promise((r) => setTimeout(r, 1500));
        console.log('finished');
      }, { concurrency: 4 });
      await w.run();
      console.log('acked', w.acked);
    `);
    const r = await run([script], { onOut: (d, child) => { if (d.includes('started')) child.kill('SIGTERM'); } });
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(r.out.trim().split('\n'), ['started', 'finished', 'acked 1']);
    const st = await c.stats('term');
    assert.deepEqual([st.counters.acked, st.ready, st.reserved], [1, 0, 0]);
  } finally { await s.stop(); }
});

test('the order-timeout story of the README, importing the package by its name', async () => {
  const s = await startServer();
  try {
    // What `npm install ./clients/node` makes: node_modules/delayq, resolved through package.json.
    const app = join(s.dir, 'app');
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    symlinkSync(join(here, '..'), join(app, 'node_modules', 'delayq'), 'dir');
    copyFileSync(join(here, '..', 'examples', 'order-timeout.js'), join(app, 'order-timeout.mjs'));
    const r = await run([join(app, 'order-timeout.mjs'), s.url]);
    assert.equal(r.code, 0, r.out + r.err);
    const out = r.out.trim().split('\n');
    assert.match(out[0], /duplicate: true$/);
    assert.ok(out.includes('cancelled unpaid order 42 on attempt 1'), r.out);
    assert.ok(out.includes('dead: order-bad Error: order id "not-a-number" is not a number'), r.out);
    assert.ok(out.includes('cancelled unpaid order not-a-number on attempt 1'), r.out);
    assert.deepEqual(out.slice(-2), ['replayed 1', 'done: acked 2 nacked 2']);
  } finally { await s.stop(); }
});

test("a handler's return value is its job's result", async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.setConfig('returning', { keepCompletedMs: 3_600_000 });
    const made = [];
    for (let i = 0; i < 4; i++) made.push(await c.enqueue('returning', { n: i }));
    const errors = [];
    let handled = 0;
    const worker = new Worker(c, 'returning', async (job) => {
      if (++handled === made.length) worker.stop();
      const n = job.payload.n;
      return n === 0 ? undefined : n === 3 ? () => 1 : { square: n * n }; // a function is not JSON
    }, { wait: '1s', signals: false, onError: (job, e) => errors.push(job.id) });
    await worker.run();
    const got = await Promise.all(made.map((m) => c.get('returning', m.id)));
    assert.deepEqual(got.map((j) => j.state), ['completed', 'completed', 'completed', 'completed']);
    assert.deepEqual(got.map((j) => j.result), [null, { square: 1 }, { square: 4 }, null]);
    assert.deepEqual(errors, [made[3].id]);
  } finally {
    await s.stop();
  }
});

// Found by a hostile try: one handler's result the server refused (a lone surrogate, or a body over
// a lower --max-body) failed the whole ack batch, and every job of it ran again and went dead,
// silently. Now the batch is split down to that ack, reported, and acked without it.
test('a result the server refuses costs no other job its ack', async () => {
  const s = await startServer(['--max-body', '1048576']);
  try {
    const c = new Client(s.url);
    await c.setConfig('refused', { keepCompletedMs: 3_600_000, maxAttempts: 2 });
    const made = [];
    for (let i = 0; i < 40; i++) made.push(await c.enqueue('refused', { n: i }));
    const errors = [];
    let handled = 0;
    const worker = new Worker(c, 'refused', async (job) => {
      if (++handled === made.length) worker.stop();
      return job.payload.n === 7 ? 'broken \ud800 text' : 'x'.repeat(60_000); // 40 x 60 KB: over the 1 MiB body
    }, { wait: '1s', signals: false, concurrency: 4, ackDelay: '300ms', onError: (job) => errors.push(job.id) });
    await worker.run();
    const got = await Promise.all(made.map((m) => c.get('refused', m.id)));
    assert.deepEqual([...new Set(got.map((j) => j.state))], ['completed']);
    assert.equal(got.filter((j) => j.result === 'x'.repeat(60_000)).length, 39);
    assert.equal(got[7].result, null);
    assert.deepEqual(errors, [made[7].id]);
    assert.equal(worker.acked, 40);
  } finally {
    await s.stop();
  }
});

test('a value that is not JSON at any depth is refused before sending', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    for (const bad of [[() => 1], { a: Symbol('s') }, [[NaN]], { m: new Map() }, [1n]]) {
      await assert.rejects(c.ack('q', 'r', { result: bad }), (e) => e instanceof TypeError && e.message.startsWith('result is not a JSON value'));
    }
  } finally {
    await s.stop();
  }
});

test('a handler reports its progress', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    const made = await c.enqueue('progressing', { n: 1 });
    const seen = [];
    const worker = new Worker(c, 'progressing', async (job) => {
      await worker.progress(job, { step: 1, of: 2 });
      seen.push((await c.get('progressing', job.id)).progress);
      worker.stop();
    }, { wait: '1s', signals: false });
    await worker.run();
    assert.deepEqual(seen, [{ step: 1, of: 2 }]);
    await assert.rejects(c.get('progressing', made.id), /does not exist/); // acked: gone, and its progress
    await assert.rejects(worker.progress({ id: made.id }, 1), /not running/);
  } finally {
    await s.stop();
  }
});

// A worker whose clock is 20 s behind the server's (a stand-in proxy adds 20 s to each delivery's
// lease_deadline, which is what such a worker reads). It took the lease for 21 s and touched a 1 s
// lease after 7 s: the job was handed out again while its handler ran, and in reserve mode run a
// second time. The queue's lease_ms is what a worker without `lease` goes by (found by a hostile
// try of the Java worker).
test("a worker whose clock is behind the server's keeps the lease", async () => {
  const http = await import('node:http');
  const s = await startServer();
  const proxy = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const sent = Buffer.concat(chunks);
    const answer = await fetch(s.url + req.url, {
      method: req.method, body: sent.length ? sent : undefined,
      headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
    });
    let body = await answer.text();
    if (req.url.split('?')[0].endsWith('/reserve') && answer.status === 200) {
      const parsed = JSON.parse(body);
      for (const j of parsed.jobs) j.lease_deadline += 20_000;
      body = JSON.stringify(parsed);
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(body);
  });
  await new Promise((resolve) => { proxy.listen(0, '127.0.0.1', resolve); });
  try {
    const c = new Client(s.url);
    await c.setConfig('skew', { lease_ms: 1000 });
    const made = await c.enqueue('skew', 1);
    let w;
    const runs = [];
    w = new Worker(new Client(`http://127.0.0.1:${proxy.address().port}`), 'skew', async (job) => {
      runs.push(job.id);
      await new Promise((r) => { setTimeout(r, 2500); }); // the work: more than two leases
      w.stop();
      return 'done';
    }, { concurrency: 2, wait: '200ms', stream: false, signals: false });
    await w.run();
    assert.deepEqual([runs.length, w.acked, w.redelivered], [1, 1, 0]);
    assert.equal((await c.stats('skew')).counters.delivered, 1, 'handed out once: its lease was kept');
    await assert.rejects(c.get('skew', made.id), (e) => e.status === 404);
  } finally {
    proxy.closeAllConnections(); // Node 18's close() leaves kept-alive connections open
    proxy.close();
    await s.stop();
  }
});

// Reserve mode, as the stream's twin test: a job reserved again while its handler runs here (its
// delivery given back from the handler, as a lease that ran out) ran a second time in another slot.
test('a job reserved again while its handler runs is not run twice', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueue('again', 'only');
    const runs = [];
    let w;
    w = new Worker(c, 'again', async (job) => {
      runs.push(job.id);
      await c.release('again', job.receipt); // ready again at once
      for (const start = Date.now(); w.redelivered === 0; await new Promise((r) => { setTimeout(r, 20); })) {
        assert.ok(Date.now() - start < 30_000, 'the job was not reserved again'); // polls what the worker reports
      }
      w.stop();
      return 'once';
    }, { concurrency: 2, wait: '200ms', stream: false, signals: false });
    await w.run();
    assert.equal(runs.length, 1, 'the job ran once');
    assert.equal((await c.stats('again')).counters.acked, 1);
  } finally { await s.stop(); }
});
