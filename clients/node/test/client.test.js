// The Node client against a real server: every operation, the typed errors, hostile input,
// concurrent mixed traffic, and a server killed with SIGKILL under the client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as delayq from '../src/index.js';
import { Client, jobBody } from '../src/index.js';
import { startServer } from './server.js';

test('enqueue, reserve, touch, ack round trip', async () => {
  const s = await startServer(['--durability', 'interval']);
  try {
    const c = new Client(s.url);
    const r = await c.enqueue('orders', { orderId: 42 }, { key: 'order-42', headers: { version: '2' }, maxAttempts: 3 });
    assert.ok(r.id);
    assert.equal(r.duplicate, false);
    const dup = await c.enqueue('orders', { orderId: 43 }, { delay: '30m', key: 'order-42' });
    assert.equal(dup.duplicate, true);
    assert.equal(dup.id, r.id);
    const info = await c.get('orders', { key: 'order-42' });
    assert.deepEqual([info.state, info.payload, info.headers, info.maxAttempts], ['ready', { orderId: 42 }, { version: '2' }, 3]);
    const jobs = await c.reserve('orders', { max: 10, wait: '1s', lease: '30s' });
    assert.deepEqual(jobs.map((j) => j.id), [r.id]);
    const [job] = jobs;
    assert.deepEqual([job.payload, job.attempt, job.key], [{ orderId: 42 }, 1, 'order-42']);
    assert.ok((await c.touch('orders', job.receipt, { lease: '60s' })) >= job.leaseDeadline);
    assert.equal(await c.ack('orders', job.receipt), 1);
    await assert.rejects(c.get('orders', r.id), delayq.NotFound);
    assert.equal((await c.stats('orders')).counters.acked, 1);
    const v = await c.version();
    assert.equal(v.store, 'embedded');
    assert.equal(v.durability, 'interval');
  } finally { await s.stop(); }
});

test('delay forms, reschedule, cancel, binary payloads, batches', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    const now = Date.now();
    const a = await c.enqueue('d', 'x', { delay: '1h30m' });
    assert.ok(a.dueAt >= now + 5_400_000);
    const at = new Date(Date.UTC(2027, 5, 1));
    assert.equal((await c.enqueue('d', 'x', { deliverAt: at })).dueAt, at.getTime());
    assert.equal((await c.enqueue('d', 'x', { deliverAt: '2027-06-01T00:00:00Z' })).dueAt, at.getTime());
    assert.ok((await c.reschedule('d', a.id, { delay: '10m' })).dueAt < a.dueAt);
    assert.equal(await c.cancel('d', a.id), true);
    await assert.rejects(c.cancel('d', a.id), delayq.NotFound);
    const blob = Buffer.from([0, 1, 2, 250, 255]);
    const b = await c.enqueue('bin', blob);
    assert.deepEqual((await c.get('bin', b.id)).payload, blob);
    const results = await c.enqueueBatch('batch', [0, 1, 2, 3, 4].map((i) => jobBody(i, { key: `k${i}` })));
    assert.equal(results.length, 5);
    assert.equal((await c.reserve('batch', { max: 10 })).length, 5);
  } finally { await s.stop(); }
});

test('nack retries, goes dead, is replayed', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.setConfig('p', { max_attempts: 2, backoff: { base_ms: 1, jitter: 0 } });
    const r = await c.enqueue('p', { poison: true });
    let [job] = await c.reserve('p', { wait: '2s' });
    assert.equal((await c.nack('p', job.receipt, { retryIn: 0, error: 'boom' })).state, 'scheduled');
    [job] = await c.reserve('p', { wait: '2s' });
    assert.equal(job.attempt, 2);
    assert.equal((await c.nack('p', job.receipt, { error: 'boom again' })).state, 'dead');
    const dead = await c.dead('p');
    assert.deepEqual(dead.map((j) => [j.id, j.lastError]), [[r.id, 'boom again']]);
    assert.equal(await c.replay('p'), 1);
    const again = await c.reserve('p', { wait: '2s' });
    assert.equal(again[0].attempt, 1);
    assert.equal((await c.nack('p', again[0].receipt, { dead: true })).state, 'dead');
    assert.equal(await c.purge('p'), 1);
  } finally { await s.stop(); }
});

test('typed errors', async () => {
  const s = await startServer();
  const t = await startServer(['--auth-token', 's3cret-token-for-tests']);
  try {
    const c = new Client(s.url);
    await assert.rejects(c.stats('never-used'), (e) => e instanceof delayq.NotFound && e.status === 404 && /does not exist/.test(e.message));
    await assert.rejects(c.enqueue('q', 1, { delay: '5 minutes' }), delayq.InvalidArgument);
    await c.enqueue('q', 0, { delay: '1h' });
    await assert.rejects(c.ack('q', 'not-a-receipt'), delayq.InvalidArgument);
    await assert.rejects(c.enqueueBatch('q', Array.from({ length: 1001 }, (_, i) => ({ payload: i }))), delayq.TooLarge);
    await c.enqueue('q', 1);
    const [job] = await c.reserve('q');
    await assert.rejects(c.cancel('q', job.id), delayq.Conflict);
    await c.ack('q', job.receipt);
    await assert.rejects(c.ack('q', job.receipt), delayq.NotFound);
    await assert.rejects(new Client(t.url).stats('q'), delayq.Unauthorized);
    assert.ok((await new Client(t.url, { token: 's3cret-token-for-tests' }).enqueue('q', 1)).id);
    await assert.rejects(new Client('http://127.0.0.1:1').stats('q'), delayq.Unavailable);
    assert.ok(delayq.errorFor(429, 'resource_exhausted', 'x') instanceof delayq.Overloaded);
    assert.ok(delayq.errorFor(409, 'lease_expired', 'x') instanceof delayq.Conflict);
  } finally { await s.stop(); await t.stop(); }
});

test('an old receipt is lease_expired once the job was delivered again', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await c.enqueue('l', 1);
    const [first] = await c.reserve('l', { lease: '1s' });
    const second = await c.reserve('l', { wait: '5s' }); // answered when the 1 s lease runs out
    assert.equal(second[0].id, first.id);
    assert.equal(second[0].attempt, 2);
    await assert.rejects(c.ack('l', first.receipt), delayq.LeaseExpired);
    const batch = await c.ack('l', [second[0].receipt, first.receipt]);
    assert.equal(batch.done, 1);
    assert.equal(batch.failed[0].receipt, first.receipt);
    assert.ok(batch.failed[0].error instanceof delayq.LeaseExpired);
  } finally { await s.stop(); }
});

test('hostile and malformed input is refused with a clear error', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    await assert.rejects(c.enqueue('q', 1, { delay: '5s', deliverAt: 1 }), /one of delay/);
    await assert.rejects(c.enqueue('q', 1, { dealy: '5s' }), /unknown option "dealy"/);
    await assert.rejects(c.reserve('q', { wait: 'soon' }), /not a duration/);
    await assert.rejects(c.get('q', {}), /id or \{key\}/);
    await assert.rejects(c.enqueueBatch('q', [{ payload: 1, dealy_ms: 5 }]), (e) => e instanceof delayq.InvalidArgument && /did you mean "delay_ms"/.test(e.message));
    await assert.rejects(c.enqueue('bad name\n', 1), delayq.InvalidArgument);
    await assert.rejects(c.get('q', '../../etc/passwd'), delayq.NotFound);
    assert.throws(() => new Client('ftp://example'), TypeError);
    assert.deepEqual(await c.queues(), []);
  } finally { await s.stop(); }
});

test('concurrent mixed traffic delivers every job once', async () => {
  const s = await startServer(['--durability', 'interval']);
  try {
    const c = new Client(s.url);
    const producers = 4; const per = 50; const acked = []; let errors = 0;
    const produce = async (p) => {
      for (let i = 0; i < per; i++) {
        await c.enqueue('mix', { p, i }, { key: `${p}-${i}` });
        await c.enqueue('mix', 1, { delay: 'nonsense' }).catch((e) => { if (e instanceof delayq.InvalidArgument) errors++; });
      }
    };
    const consume = async () => {
      while (acked.length < producers * per) {
        for (const job of await c.reserve('mix', { max: 8, wait: '200ms' })) {
          await c.ack('mix', 'garbage').catch(() => {});
          await c.ack('mix', job.receipt);
          acked.push(`${job.payload.p}-${job.payload.i}`);
        }
      }
    };
    await Promise.all([...Array.from({ length: producers }, (_, p) => produce(p)), consume(), consume(), consume()]);
    assert.equal(new Set(acked).size, producers * per);
    assert.equal(acked.length, producers * per);
    assert.equal(errors, producers * per);
    const st = await c.stats('mix');
    assert.deepEqual([st.counters.acked, st.ready, st.reserved], [producers * per, 0, 0]);
  } finally { await s.stop(); }
});

test('a server killed with SIGKILL loses nothing and the client carries on', async () => {
  const s = await startServer(['--durability', 'sync']);
  try {
    const c = new Client(s.url);
    const ids = [];
    for (let i = 0; i < 20; i++) ids.push((await c.enqueue('k', i)).id);
    await s.kill();
    await assert.rejects(c.stats('k'), delayq.Unavailable);
    await s.start();
    assert.equal((await c.stats('k')).ready, 20);
    const got = [];
    while (got.length < 20) {
      for (const job of await c.reserve('k', { max: 20, wait: '1s' })) { await c.ack('k', job.receipt); got.push(job.id); }
    }
    assert.deepEqual(got.sort(), ids.sort());
  } finally { await s.stop(); }
});

test('browsing pages through a state; a key ttl keeps the key after the ack', async () => {
  const s = await startServer(['--durability', 'none']);
  try {
    const c = new Client(s.url);
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await c.enqueue('browse', { n: i }, { delay: `${10 + i}m` })).id);
    const first = await c.jobs('browse', 'scheduled', { limit: 2 });
    assert.deepEqual(first.jobs.map((j) => j.id), ids.slice(0, 2));
    assert.ok(first.nextCursor);
    const all = [];
    for await (const j of c.iterJobs('browse', 'scheduled', { pageSize: 2 })) all.push(j.id);
    assert.deepEqual(all, ids, 'due order, each once');
    assert.equal((await c.jobs('browse', 'ready')).nextCursor, null);
    await assert.rejects(c.jobs('browse', 'dead', { cursor: first.nextCursor }), /state=scheduled/);
    await assert.rejects(c.jobs('nope', 'ready'), delayq.NotFound);

    const done = await c.enqueue('ttl', { pay: 1 }, { key: 'pay-1', keyTtl: '1h' });
    const [job] = await c.reserve('ttl');
    await c.ack('ttl', job.receipt);
    const again = await c.enqueue('ttl', { pay: 1 }, { key: 'pay-1', keyTtl: '1h' });
    assert.equal(again.duplicate, true);
    assert.equal(again.id, done.id);
    await assert.rejects(c.enqueue('ttl', 1, { keyTtl: '1m' }), /key_ttl_ms is set without a key/);

    const edit = await c.enqueue('edits', { doc: 1 }, { key: 'doc-1', delay: '1h', debounce: true });
    const pushed = await c.enqueue('edits', { doc: 2 }, { key: 'doc-1', delay: '2h', debounce: true });
    assert.equal(pushed.id, edit.id);
    assert.ok(pushed.replaced && pushed.dueAt > edit.dueAt, 'pushed back');
    const shorter = await c.enqueue('edits', { doc: 3 }, { key: 'doc-1', delay: '1m', debounce: true });
    assert.equal(shorter.dueAt, pushed.dueAt, 'never brought forward');
    await assert.rejects(c.enqueue('edits', 1, { debounce: true }), /debounce is set without a key/);

    await c.enqueue('tenants', { n: 1 }, { group: 'big' });
    await c.enqueue('tenants', { n: 2 }, { group: 'big' });
    await c.enqueue('tenants', { n: 3 }, { group: 'small', priority: 9 });
    const turns = await c.reserve('tenants', { max: 3 });
    assert.deepEqual(turns.map((j) => j.group), ['big', 'small', 'big'], 'the groups take turns');
    await assert.rejects(c.enqueue('tenants', 1, { priority: 10 }), /priority is 10/);

    const morning = await c.putSchedule('reports', 'morning', { cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin', payload: { report: 'sales' } });
    assert.equal(morning.next_runs.length, 5);
    const run = await c.get('reports', { key: `schedule:morning:${morning.next_runs[0]}` });
    assert.deepEqual(run.payload, { report: 'sales' });
    assert.equal((await c.pauseSchedule('reports', 'morning')).paused, true);
    assert.deepEqual((await c.schedules('reports')).map((x) => x.name), ['morning']);
    await assert.rejects(c.putSchedule('reports', 'bad', { cron: '0 25 * * *' }), /hour/);
    await c.deleteSchedule('reports', 'morning');
    await assert.rejects(c.schedule('reports', 'morning'), delayq.NotFound);
  } finally {
    await s.stop();
  }
});

test('a trace context given is kept and shown; a malformed one is refused; without OpenTelemetry none is sent', async () => {
  const s = await startServer(['--durability', 'interval']);
  try {
    const c = new Client(s.url);
    const parent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const made = await c.enqueue('traced', 1, { traceparent: parent, tracestate: 'rojo=1' });
    const plain = await c.enqueue('traced', 2);
    assert.deepEqual([(await c.get('traced', made.id)).traceparent, (await c.get('traced', plain.id)).traceparent],
      [parent, null]);
    const [first, second] = await c.reserve('traced', { max: 2 });
    assert.deepEqual([first.traceparent, first.tracestate, second.traceparent], [parent, 'rojo=1', null]);
    await assert.rejects(c.enqueue('traced', 3, { traceparent: 'x'.repeat(100000) }),
      (e) => e instanceof delayq.InvalidArgument && e.message.includes('traceparent') && e.message.length < 500);
    await assert.rejects(c.enqueue('traced', 3, { tracestate: 'a=1' }),
      (e) => e instanceof delayq.InvalidArgument && e.message.includes('without a traceparent'));
  } finally {
    await s.stop();
  }
});

test('an ack keeps its result on a completed job; a bad one is refused before sending', async () => {
  const s = await startServer(['--durability', 'interval']);
  try {
    const c = new Client(s.url);
    await c.setConfig('results', { keepCompletedMs: 3_600_000 });
    for (let i = 0; i < 3; i++) await c.enqueue('results', { n: i });
    const jobs = await c.reserve('results', { max: 3 });
    assert.equal(jobs.length, 3);
    await assert.rejects(c.ack('results', jobs[0].receipt, { result: 'x'.repeat(70_000) }),
      (e) => e instanceof delayq.InvalidArgument && e.message.includes('at most 65536') && e.message.length < 500);
    for (const bad of [NaN, () => 1, new Set([1])]) {
      await assert.rejects(c.ack('results', jobs[0].receipt, { result: bad }),
        (e) => e instanceof TypeError && e.message.includes('result is not a JSON value'));
    }
    assert.equal((await c.get('results', jobs[0].id)).state, 'reserved', 'nothing acked');
    assert.equal(await c.ack('results', jobs[0].receipt, { result: { charged: 1999 } }), 1);
    const batch = await c.ack('results', [[jobs[1].receipt, [1, 2]], jobs[2].receipt, 'bogus']);
    assert.equal(batch.done, 2);
    assert.deepEqual(batch.failed.map((f) => f.receipt), ['bogus']);
    const first = await c.get('results', jobs[0].id);
    assert.equal(first.state, 'completed');
    assert.deepEqual(first.result, { charged: 1999 });
    assert.ok(first.completedAt >= first.createdAt);
    assert.deepEqual((await c.get('results', jobs[1].id)).result, [1, 2]);
    assert.equal((await c.get('results', jobs[2].id)).result, null);
    assert.equal((await c.jobs('results', 'completed')).jobs.length, 3);
    assert.equal((await c.stats('results')).completed, 3);
    await assert.rejects(c.ack('results', jobs[0].receipt), delayq.NotFound);
  } finally {
    await s.stop();
  }
});

test('a touch reports progress, shown on the job while it is reserved; a bad one is refused', async () => {
  const s = await startServer(['--durability', 'interval']);
  try {
    const c = new Client(s.url);
    const made = await c.enqueue('progress', { rows: 1000 });
    const [job] = await c.reserve('progress', { max: 1 });
    assert.equal((await c.get('progress', made.id)).progress, null);
    await c.touch('progress', job.receipt, { progress: { rows: 120, of: 1000 } });
    assert.deepEqual((await c.get('progress', made.id)).progress, { rows: 120, of: 1000 });
    await c.touch('progress', job.receipt, { lease: '1m' }); // no progress: the last one stays
    assert.deepEqual((await c.jobs('progress', 'reserved')).jobs[0].progress, { rows: 120, of: 1000 });
    await assert.rejects(c.touch('progress', job.receipt, { progress: 'x'.repeat(5000) }),
      (e) => e instanceof delayq.InvalidArgument && e.message.includes('at most 4096') && e.message.length < 500);
    for (const bad of [NaN, Infinity, () => 1, Symbol('s'), new Map([[1, 2]])]) {
      await assert.rejects(c.touch('progress', job.receipt, { progress: bad }),
        (e) => e instanceof TypeError && e.message.includes('progress is not a JSON value'));
    }
    assert.deepEqual((await c.get('progress', made.id)).progress, { rows: 120, of: 1000 }, 'nothing sent');
    await c.ack('progress', job.receipt);
    await assert.rejects(c.touch('progress', job.receipt, { progress: 1 }), delayq.NotFound);
  } finally {
    await s.stop();
  }
});

// A queue named "." or ".." could be made and then not reached through a proxy, curl or a browser
// (they take dot segments out of a path, %2E escapes too): the server refuses the name. Node's
// fetch takes them out itself (a POST to "." reached another route and answered 405), so this
// client refuses them before sending.
test('a queue, job or schedule named like a dot segment is refused before anything is sent', async () => {
  const s = await startServer();
  try {
    const c = new Client(s.url);
    for (const dots of ['.', '..']) {
      await assert.rejects(c.enqueue(dots, 1), (e) => e instanceof delayq.InvalidArgument && /dot segment/.test(e.message));
      await assert.rejects(c.get('q', dots), (e) => e instanceof delayq.InvalidArgument);
      await assert.rejects(c.schedule('q', dots), (e) => e instanceof delayq.InvalidArgument);
    }
    assert.deepEqual((await c.queues()).map((q) => q.name), []);
  } finally { await s.stop(); }
});
