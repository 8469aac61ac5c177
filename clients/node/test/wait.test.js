// Client.wait against a real server: the outcome at the ack (with its result, nothing kept),
// death, cancel, the timeout, hostile input, many waits at once, and a server killed and started
// again under a wait.
import http from 'node:http';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as delayq from '../src/index.js';
import { Client } from '../src/index.js';
import { startServer } from './server.js';

async function openWaits(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = /^delayq_reserve_waiting (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

// Returns once the server holds n waits (its /metrics), so what follows comes after them.
async function awaitOpenWaits(url, n) {
  for (let i = 0; i < 1000; ++i) {
    if (await openWaits(url) >= n) return;
    await new Promise((resolve) => { setTimeout(resolve, 10); }); // a poll of the server's state
  }
  throw new Error(`${n} waits did not open on the server`);
}

test('a wait answers at the ack with its result though nothing is kept', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    const made = await c.enqueue('w', { order: 7 }, { key: 'order-7' });
    const [job] = await c.reserve('w');
    const byJob = c.wait('w', made, { timeout: '30s' });
    const byKey = c.wait('w', { key: 'order-7' }, { timeout: 30_000 });
    const byReserved = c.wait('w', job, { timeout: 30_000 });
    await awaitOpenWaits(s.url, 3);
    assert.equal(await c.ack('w', job.receipt, { result: { paid: 1999 } }), 1);
    for (const info of await Promise.all([byJob, byKey, byReserved])) {
      assert.deepEqual([info.id, info.state, info.result, info.payload], [made.id, 'completed', { paid: 1999 }, { order: 7 }]);
      assert.ok(info.completedAt >= info.createdAt);
    }
  } finally { await s.stop(); }
});

test('dead, cancelled, and the timeout', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    const later = await c.enqueue('w2', 'later', { delay: '1h' });
    const doomed = await c.enqueue('w2', 'doomed', { maxAttempts: 1 });
    const cancelled = c.wait('w2', later.id, { timeout: 30_000 });
    const dead = c.wait('w2', doomed, { timeout: 30_000 });
    await awaitOpenWaits(s.url, 2);
    assert.equal(await c.cancel('w2', later.id), true);
    const [job] = await c.reserve('w2');
    await c.nack('w2', job.receipt, { error: 'card declined' });
    assert.deepEqual([(await cancelled).state, (await cancelled).payload], ['cancelled', 'later']);
    assert.deepEqual([(await dead).state, (await dead).lastError], ['dead', 'card declined']);
    const still = await c.enqueue('w2', 'still', { delay: '1h' });
    const start = performance.now();
    const info = await c.wait('w2', still, { timeout: '300ms' });
    assert.equal(info.state, 'scheduled');
    assert.ok(performance.now() - start >= 299);
  } finally { await s.stop(); }
});

test('hostile waits are refused with a clear error', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueue('w3', 1);
    await assert.rejects(c.wait('w3', '../../etc', { timeout: 10 }), delayq.InvalidArgument);
    await assert.rejects(c.wait('w3', '01HZZZZZZZZZZZZZZZZZZZZZZZ', { timeout: 10 }), delayq.NotFound);
    await assert.rejects(c.wait('no-such-queue', '01HZZZZZZZZZZZZZZZZZZZZZZZ', { timeout: 10 }), delayq.NotFound);
    await assert.rejects(c.wait('w3', '01HZZZZZZZZZZZZZZZZZZZZZZZ', { timeout: -1 }), RangeError);
    await assert.rejects(c.wait('w3', {}), TypeError);
    for (const raw of ['wait_ms=-1', 'wait_ms=60001', 'wait_ms=99999999999999999999', 'wait_ms=', 'wait_ms=0x10']) {
      const r = await fetch(`${s.url}/v1/queues/w3/jobs/01HZZZZZZZZZZZZZZZZZZZZZZZ?${raw}`);
      assert.equal(r.status, 400, raw);
      assert.match((await r.json()).error.message, /wait_ms/);
    }
  } finally { await s.stop(); }
});

test('many waits while jobs are acked, nacked and cancelled at once', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    const ids = [];
    for (let i = 0; i < 30; ++i) ids.push((await c.enqueue('w4', i, { maxAttempts: 1 })).id);
    const waits = ids.map((id) => new Client(s.url).wait('w4', id, { timeout: 30_000 }));
    await awaitOpenWaits(s.url, ids.length);
    await Promise.all(ids.filter((_, n) => n % 3 === 0).map((id) => c.cancel('w4', id)));
    const jobs = await c.reserve('w4', { max: 30 });
    await Promise.all(jobs.map((j) => (j.payload % 2 === 0
      ? c.ack('w4', j.receipt, { result: j.payload }) : c.nack('w4', j.receipt, { error: 'odd' }))));
    const outcomes = await Promise.all(waits);
    outcomes.forEach((info, n) => {
      const want = n % 3 === 0 ? 'cancelled' : n % 2 === 0 ? 'completed' : 'dead';
      assert.equal(info.state, want, `job ${n}`);
      if (want === 'completed') assert.equal(info.result, n);
    });
    assert.equal(await openWaits(s.url), 0);
  } finally { await s.stop(); }
});

test('a wait outlives a server killed and started again', async () => {
  const s = await startServer(['--durability', 'sync']);
  try {
    const c = new Client(s.url);
    const made = await c.enqueue('w5', 'x');
    const [job] = await c.reserve('w5', { lease: '10m' });
    const outcome = c.wait('w5', made, { timeout: '30s' });
    await awaitOpenWaits(s.url, 1);
    await s.kill();
    await s.start();
    await awaitOpenWaits(s.url, 1); // the client asked the new server again
    await new Client(s.url).ack('w5', job.receipt, { result: 'after the restart' });
    const info = await outcome;
    assert.deepEqual([info.state, info.result], ['completed', 'after the restart']);
  } finally { await s.stop(); }
});

// Found by a hostile try (the Python client's twin test): each turn looked the key up again, so a
// wait whose job was cancelled and whose key was taken by a new job meanwhile answered the new
// one. A stand-in server ends the first turn early, as a 60 s turn ends, and records what is asked.
test('a wait by key waits for the job the key named when it began', async () => {
  const asked = [];
  const id = '01HZZZZZZZZZZZZZZZZZZZZZZZ';
  const fake = http.createServer((req, res) => {
    asked.push(req.url);
    const state = asked.length < 3 ? 'scheduled' : 'completed';
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id, queue: 'w6', state, payload: 'first', result: state === 'completed' ? 1 : undefined }));
  });
  await new Promise((resolve) => { fake.listen(0, '127.0.0.1', resolve); });
  try {
    const c = new Client(`http://127.0.0.1:${fake.address().port}`);
    const info = await c.wait('w6', { key: 'K' }, { timeout: '30s' });
    assert.deepEqual([info.id, info.state, info.result], [id, 'completed', 1]);
    assert.equal(asked.length, 3);
    assert.match(asked[0], /^\/v1\/queues\/w6\/jobs\?(.*&)?key=K(&|$)/);
    for (const url of asked.slice(1)) {
      assert.match(url, new RegExp(`^/v1/queues/w6/jobs/${id}\\?`));
      assert.doesNotMatch(url, /key=/);
    }
  } finally { fake.close(); }
});

// Found by a hostile try of the Go client (the same rule): on a server full of waits the wait gave
// up with Overloaded before its timeout; asked again until then, its last turn a plain read.
test('a wait on a full server answers the job as it is at its timeout', async () => {
  const s = await startServer(['--max-waiting', '1']);
  try {
    const c = new Client(s.url);
    const made = await c.enqueue('full', 1, { delay: '1h' });
    const held = new Client(s.url).reserve('other', { wait: '15s' }).catch(() => []); // takes the one room
    await awaitOpenWaits(s.url, 1);
    const start = performance.now();
    const info = await c.wait('full', made, { timeout: '1500ms' });
    assert.equal(info.state, 'scheduled');
    assert.ok(performance.now() - start >= 1400);
    await s.stop();
    await held;
  } finally { await s.stop(); }
});

// A stand-in for a reverse proxy (docs/security.md) in front of a delayq that restarts: 502 twice,
// then the job, completed. A 502 or 504 was a plain DelayqError: a wait gave up at once, and a
// worker's ack was not sent again (found by a hostile try of the Go client; the same rule here).
test("a proxy's bad gateway is unavailable and a wait asks again", async () => {
  const asked = [];
  const id = '01HZZZZZZZZZZZZZZZZZZZZZZZ';
  const proxy = http.createServer((req, res) => {
    asked.push(req.url);
    req.resume(); // read the body: on Node 18 a connection whose body was left unread kept the test's process alive
    if (req.method === 'POST') {
      res.writeHead(504);
      res.end();
    } else if (asked.length <= 2) {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html><title>502 Bad Gateway</title></html>');
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id, queue: 'p', state: 'completed', payload: 1, result: 7 }));
    }
  });
  await new Promise((resolve) => { proxy.listen(0, '127.0.0.1', resolve); });
  try {
    const c = new Client(`http://127.0.0.1:${proxy.address().port}`);
    const info = await c.wait('p', id, { timeout: '30s' });
    assert.deepEqual([info.state, info.result, asked.length], ['completed', 7, 3]);
    await assert.rejects(c.ack('p', 'a-receipt'), (e) => e instanceof delayq.Unavailable && e.status === 504);
  } finally {
    proxy.closeAllConnections(); // Node 18's close() leaves kept-alive connections open
    proxy.close();
  }
});
