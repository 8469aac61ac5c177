// Push delivery from Node: client.stream, and the Worker on a stream (its default), against a
// real server; its fallback to reserve, a server killed under it, a stopped worker's prefetched
// jobs, and hostile stream lines from a fake server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Client, DelayqError, NotFound, Unauthorized, Worker } from '../src/index.js';
import { startServer } from './server.js';

// Polls a condition the server reports, with a deadline.
async function waitFor(condition, what, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function requestsTo(url, suffix) {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/delayq_http_requests_total\{route="([^"]*)"[^}]*\} (\S+)/g)) if (m[1].endsWith(suffix)) n += Number(m[2]);
  return n;
}

test('a stream yields due jobs; closing it gives the unacked back unused', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    const ids = [];
    for (let n = 0; n < 3; n++) ids.push((await c.enqueue('s', { n })).id);
    const jobs = await c.stream('s', { maxInFlight: 2 });
    const it = jobs[Symbol.asyncIterator]();
    const first = (await it.next()).value;
    const second = (await it.next()).value;
    assert.deepEqual([first.id, second.id], ids.slice(0, 2));
    assert.equal((await c.stats('s')).reserved, 2); // the window: the third waits for room
    assert.equal(await c.ack('s', first.receipt), 1);
    assert.equal((await it.next()).value.id, ids[2]); // the ack made room
    jobs.close();
    assert.equal((await it.next()).done, true);
    await waitFor(async () => (await c.stats('s')).ready === 2, 'the server to take the deliveries back');
    const st = await c.stats('s');
    assert.deepEqual([st.ready, st.reserved], [2, 0]);
    const again = await c.reserve('s', { max: 2 });
    assert.deepEqual(again.map((j) => j.id).sort(), ids.slice(1).sort());
    assert.ok(again.every((j) => j.attempt === 1));
    c.close();
  } finally { await s.stop(); }
});

test('the worker streams by default and acks in batches', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueueBatch('b', Array.from({ length: 300 }, (_, n) => ({ payload: n })));
    const seen = [];
    const worker = new Worker(c, 'b', async (job) => {
      seen.push(job.payload);
      if (seen.length === 300) worker.stop();
    }, { concurrency: 4, signals: false });
    await worker.run();
    assert.equal(worker.delivery, 'stream');
    assert.deepEqual(seen.sort((a, b) => a - b), Array.from({ length: 300 }, (_, n) => n));
    assert.deepEqual([worker.acked, worker.errors], [300, 0]);
    const st = await c.stats('b');
    assert.deepEqual([st.counters.acked, st.ready, st.reserved], [300, 0, 0]);
    assert.equal(await requestsTo(s.url, '/reserve'), 0);
    assert.ok(await requestsTo(s.url, '/ack') < 300, 'acks are batched');
    c.close();
  } finally { await s.stop(); }
});

test('a stopped worker settles what ran and gives back what it prefetched', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueueBatch('p', Array.from({ length: 10 }, (_, n) => ({ payload: n })));
    let ran = 0;
    const worker = new Worker(c, 'p', async () => { ran++; worker.stop(); }, { concurrency: 1, prefetch: 5, signals: false });
    await worker.run();
    assert.deepEqual([ran, worker.acked], [1, 1]);
    const st = await c.stats('p');
    assert.deepEqual([st.counters.acked, st.reserved, st.ready], [1, 0, 9]);
    assert.ok((await c.reserve('p', { max: 9 })).every((j) => j.attempt === 1), 'given back unused');
    c.close();
  } finally { await s.stop(); }
});

test('a server without streams gets reserves', async () => {
  const s = await startServer();
  try {
    class OldServer extends Client {
      async stream() { throw new NotFound('POST /v1/queues/o/stream is not a route', 'not_found', 404); }
    }
    const c = new OldServer(s.url);
    await c.enqueueBatch('o', Array.from({ length: 5 }, (_, n) => ({ payload: n })));
    const seen = [];
    const worker = new Worker(c, 'o', async (job) => { seen.push(job.payload); if (seen.length === 5) worker.stop(); },
      { concurrency: 2, wait: '200ms', signals: false });
    await worker.run();
    assert.equal(worker.delivery, 'reserve');
    assert.deepEqual(seen.sort(), [0, 1, 2, 3, 4]);
    assert.equal((await c.stats('o')).counters.acked, 5);
    c.close();
  } finally { await s.stop(); }
});

test('the worker streams again after its server is killed', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueueBatch('k', Array.from({ length: 20 }, (_, n) => ({ payload: n })));
    const seen = new Set();
    let killed = false;
    const worker = new Worker(c, 'k', async (job) => {
      seen.add(job.payload);
      if (seen.size === 5 && !killed) {
        killed = true;
        await s.kill();
        await s.start(); // the same port and data
      }
      if (seen.size === 20) worker.stop();
    }, { concurrency: 2, lease: '2s', signals: false });
    await worker.run();
    assert.equal(seen.size, 20);
    assert.ok(worker.errors >= 1, 'the broken stream was counted');
    const st = await c.stats('k');
    assert.deepEqual([st.ready, st.scheduled], [0, 0]);
    c.close();
  } finally { await s.stop(); }
});

// Answers every connection with `answer`, then closes: a hostile or broken server.
async function fakeServer(answer) {
  const server = net.createServer((sock) => { sock.once('data', () => { sock.end(answer); }); sock.on('error', () => {}); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}
const HEAD = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/x-ndjson\r\n\r\n';
const chunk = (text) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

for (const [name, body] of [
  ['not json', chunk('not json\n')],
  ['not an object', chunk('[1,2,3]\n')],
  ['no receipt', chunk('{"id":"x"}\n')],
  ['an error line', `${chunk('{"error":{"code":"unavailable","message":"the store is down"}}\n')}0\r\n\r\n`],
  ['ended without an error', `${chunk('{"heartbeat":1}\n')}0\r\n\r\n`],
  ['a broken chunk', `${chunk('{"heartbeat":1}')}zz\r\n`],
  ['closed before a line', ''],
]) {
  test(`a hostile stream is an error, not a job: ${name}`, async () => {
    const fake = await fakeServer(HEAD + body);
    try {
      const c = new Client(fake.url);
      const jobs = await c.stream('q');
      await assert.rejects(async () => { for await (const j of jobs) assert.fail(`a job came: ${JSON.stringify(j)}`); },
        (e) => e instanceof DelayqError && (e.message.includes(fake.url) || e.message.includes('store is down')));
      c.close();
    } finally { fake.close(); }
  });
}

test('a refused stream throws the server error', async () => {
  const body = '{"error":{"code":"resource_exhausted","message":"too many waiting"}}';
  const fake = await fakeServer(`HTTP/1.1 429 Too Many Requests\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  try {
    const c = new Client(fake.url);
    await assert.rejects(c.stream('q'), (e) => e.code === 'resource_exhausted');
    c.close();
  } finally { fake.close(); }
});

test('the worker counts a hostile stream and keeps trying', async () => {
  const fake = await fakeServer(HEAD + chunk('not json\n'));
  try {
    const c = new Client(fake.url);
    const worker = new Worker(c, 'q', async () => {}, { signals: false });
    const running = worker.run();
    await new Promise((resolve) => { const t = setInterval(() => { if (worker.errors >= 2) { clearInterval(t); resolve(); } }, 20); });
    worker.stop();
    await running;
    assert.equal(worker.acked, 0);
    c.close();
  } finally { fake.close(); }
});

test('window bounds are refused by the server, and by the worker', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    for (const bad of [0, 1001, -1, 2 ** 63]) {
      await assert.rejects(c.stream('q', { maxInFlight: bad }), (e) => e.code === 'invalid_argument' && /max_in_flight/.test(e.message));
    }
    assert.throws(() => new Worker(c, 'q', () => {}, { concurrency: 1001 }), RangeError);
    assert.throws(() => new Worker(c, 'q', () => {}, { prefetch: -1 }), RangeError);
    c.close();
  } finally { await s.stop(); }
});

test('a queue name the client refuses ends run() with its error', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await assert.rejects(new Worker(c, '', async () => {}, { signals: false }).run(), TypeError);
    c.close();
  } finally { await s.stop(); }
});

// A TCP proxy to the server that can cut its stream connections (a proxy's idle timeout, a
// network blip), leaving the others alone.
async function cuttingProxy(port) {
  const streams = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    client.once('data', (d) => { if (d.includes('/stream ')) streams.push([client, upstream]); });
    client.pipe(upstream);
    upstream.pipe(client);
    for (const s of [client, upstream]) s.on('error', () => {}).on('close', () => { client.destroy(); upstream.destroy(); });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    streams,
    cut() { for (const pair of streams.splice(0)) for (const s of pair) s.destroy(); },
    close() { server.close(); },
  };
}

test('a job handed out again while its handler runs is not run twice', async () => {
  const s = await startServer();
  const proxy = await cuttingProxy(s.port);
  try {
    const c = new Client(proxy.url);
    const direct = new Client(s.url);
    await c.enqueue('cut', 'only');
    const runs = [];
    let started;
    const running = new Promise((r) => { started = r; });
    let release;
    const released = new Promise((r) => { release = r; });
    const worker = new Worker(c, 'cut', async (job) => { runs.push(job.attempt); started(); await released; },
      { concurrency: 1, signals: false });
    const done = worker.run();
    await running;
    proxy.cut(); // the server gives the running job back, and the new stream brings it again
    await waitFor(() => worker.redelivered === 1, 'the job to be delivered again');
    release();
    await waitFor(async () => (await direct.stats('cut')).counters.acked === 1, 'the ack');
    worker.stop();
    await done;
    assert.deepEqual(runs, [1], 'the job ran once');
    const st = await direct.stats('cut');
    assert.deepEqual([st.ready, st.reserved], [0, 0]);
    c.close();
    direct.close();
  } finally { proxy.close(); await s.stop(); }
});

test('prefetched jobs are given back after the server restarts', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.setConfig('restart', { maxAttempts: 1, leaseMs: 6000 });
    await c.enqueueBatch('restart', Array.from({ length: 6 }, (_, n) => ({ payload: n })));
    const seen = [];
    let bothStarted;
    const twoRunning = new Promise((r) => { bothStarted = r; });
    let restarted;
    const back = new Promise((r) => { restarted = r; });
    const worker = new Worker(c, 'restart', async (job) => {
      seen.push(job.payload);
      const n = seen.length;
      if (n === 2) bothStarted();
      if (n <= 2) await back;
      if (n === 6) worker.stop();
    }, { concurrency: 2, signals: false }); // a window of 4: 2 running, 2 prefetched
    const done = worker.run();
    await twoRunning;
    await new Promise((resolve) => { s.child.once('exit', resolve); s.child.kill('SIGTERM'); }); // deliveries stay leased
    await s.start();
    restarted();
    await done;
    assert.deepEqual(seen.sort((a, b) => a - b), [0, 1, 2, 3, 4, 5]);
    const st = await c.stats('restart');
    assert.deepEqual([st.dead, st.counters.acked], [0, 6]);
    c.close();
  } finally { await s.stop(); }
});

for (const stream of [true, false]) {
  test(`a wrong token stops the worker with its error (stream: ${stream})`, async () => {
    const s = await startServer(['--auth-token', 's3cret-token-for-tests']);
    try {
      const c = new Client(s.url, { token: 'wrong' });
      await assert.rejects(new Worker(c, 'q', async () => {}, { stream, signals: false }).run(), Unauthorized);
      c.close();
    } finally { await s.stop(); }
  });
}

test('a prefetched job whose lease ran out while it waited runs once', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueueBatch('slow', [{ payload: 'a' }, { payload: 'b' }]);
    const runs = [];
    const worker = new Worker(c, 'slow', async (job) => {
      runs.push(job.payload);
      if (job.payload === 'a') await new Promise((r) => setTimeout(r, 2500)); // longer than b's lease
      else worker.stop();
    }, { concurrency: 1, prefetch: 1, lease: '1s', signals: false });
    await worker.run();
    assert.deepEqual(runs, ['a', 'b'], 'b ran once, with its newest delivery');
    const st = await c.stats('slow');
    assert.deepEqual([st.counters.acked, st.ready, st.reserved], [2, 0, 0]);
    c.close();
  } finally { await s.stop(); }
});

// Each pause of the stream's reader (the server down) left its waker behind, and the wake-ups of
// later deliveries went to those instead of the idle slot: the jobs sat in the inbox.
test('a worker that waited out a server down takes every job once it is back', async () => {
  const s = await startServer();
  try {
    await s.kill();
    const c = new Client(s.url);
    const seen = [];
    const worker = new Worker(c, 'back', async (job) => { seen.push(job.payload); if (seen.length === 3) worker.stop(); },
      { concurrency: 1, signals: false });
    const done = worker.run();
    await waitFor(() => worker.errors >= 4, 'the reader to pause a few times');
    await s.start();
    await c.enqueueBatch('back', [0, 1, 2].map((n) => ({ payload: n })));
    await done;
    assert.deepEqual(seen.sort(), [0, 1, 2]);
    c.close();
  } finally { await s.stop(); }
});

test('an onError that throws stops the worker with its error', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueue('e', 'x');
    const worker = new Worker(c, 'e', async () => { throw new Error('the job failed'); },
      { signals: false, onError: () => { throw new RangeError('a bug in the callback'); } });
    await assert.rejects(worker.run(), RangeError);
    c.close();
  } finally { await s.stop(); }
});
