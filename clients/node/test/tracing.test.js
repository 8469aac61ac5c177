// OpenTelemetry through the application's own @opentelemetry/api (from the tests' npm cache,
// found through NODE_PATH as an application's node_modules would be): an enqueue carries the
// active span's context, the Worker runs each handler in a CONSUMER span linked to the producer's,
// and a failing handler's span says so. The tracer and context manager are small recording ones
// written here (the SDK is not needed to see what the client asks of the API).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Client, Worker, useOpenTelemetry } from '../src/index.js';
import { startServer } from './server.js';

const api = createRequire(join(process.env.DELAYQ_OPENAPI_TOOLS, 'noop.js'))('@opentelemetry/api');

// Active contexts through AsyncLocalStorage, as the SDK's AsyncLocalStorageContextManager does.
class Contexts {
  #als = new AsyncLocalStorage();
  active() { return this.#als.getStore() ?? api.ROOT_CONTEXT; }
  with(ctx, fn, thisArg, ...args) { return this.#als.run(ctx, () => fn.call(thisArg, ...args)); }
  bind(_ctx, target) { return target; }
  enable() { return this; }
  disable() { return this; }
}

const spans = [];
let nextSpan = 1;
const tracer = {
  // (name, options, fn) or (name, options, context, fn): the parent is the context given, else the active one.
  startActiveSpan(name, options, ...rest) {
    const fn = rest.pop();
    const ctx = rest.length ? rest[0] : api.context.active();
    const parent = api.trace.getSpanContext(ctx);
    const context = {
      traceId: parent?.traceId ?? '5b8efff798038103d269b633813fc60c',
      spanId: (nextSpan++).toString(16).padStart(16, '0'),
      traceFlags: 1,
    };
    const span = {
      name, options, ended: false, status: null, exceptions: [],
      spanContext: () => context,
      setStatus(s) { this.status = s; return this; },
      recordException(e) { this.exceptions.push(e); },
      end() { this.ended = true; },
      setAttribute() { return this; }, setAttributes() { return this; }, addEvent() { return this; },
      isRecording: () => true, updateName() { return this; },
    };
    span.parent = parent ?? null;
    spans.push(span);
    return api.context.with(api.trace.setSpan(ctx, span), () => fn(span));
  },
};

const PRODUCER = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 };

function inProducerSpan(fn) {
  const sc = { ...PRODUCER, traceState: api.createTraceState('rojo=1') };
  return api.context.with(api.trace.setSpan(api.context.active(), api.trace.wrapSpanContext(sc)), fn);
}

let s;
before(async () => {
  api.context.setGlobalContextManager(new Contexts());
  api.trace.setGlobalTracerProvider({ getTracer: () => tracer });
  s = await startServer();
});
after(async () => { await s.stop(); });

test('an enqueue in a span carries its context; a job with its own keeps it', async () => {
  const c = new Client(s.url);
  const traced = await inProducerSpan(() => c.enqueue('t1', { n: 1 }));
  const own = await inProducerSpan(() => c.enqueue('t1', { n: 2 }, {
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00',
  }));
  const [batched] = (await inProducerSpan(() => c.enqueueBatch('t1', [{ payload: 3 }])));
  const plain = await c.enqueue('t1', { n: 4 });
  const job = await c.get('t1', traced.id);
  assert.equal(job.traceparent, `00-${PRODUCER.traceId}-${PRODUCER.spanId}-01`);
  assert.equal(job.tracestate, 'rojo=1');
  assert.equal((await c.get('t1', own.id)).traceparent, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00');
  assert.equal((await c.get('t1', own.id)).tracestate, null, "the span's tracestate belongs to the span's traceparent");
  assert.equal((await c.get('t1', batched.id)).traceparent, job.traceparent);
  assert.equal((await c.get('t1', plain.id)).traceparent, null, 'no span, no context');
});

test("the worker runs each handler in a CONSUMER span linked to the producer's, and marks a failure", async () => {
  const c = new Client(s.url);
  await c.setConfig('t2', { max_attempts: 1 });
  const good = await inProducerSpan(() => c.enqueue('t2', { ok: true }));
  await inProducerSpan(() => c.enqueue('t2', { ok: false }));
  const seen = [];
  let worker = null;
  worker = new Worker(c, 't2', async (job) => {
    seen.push({ job, span: api.trace.getActiveSpan() });
    if (seen.length === 2) worker.stop();
    if (!job.payload.ok) throw new Error('card declined');
  }, { wait: '1s', signals: false });
  // Run inside a span of the application's (as an HTTP instrumentation's stream span would be):
  // the handlers' spans are still roots of their own, tied to the producer by the link alone.
  await api.context.with(api.trace.setSpan(api.ROOT_CONTEXT, api.trace.wrapSpanContext({
    traceId: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', spanId: 'bbbbbbbbbbbbbbbb', traceFlags: 1 })), () => worker.run());
  assert.equal(seen.length, 2);
  for (const { job, span } of seen) {
    assert.ok(span, 'the handler runs in a span');
    assert.equal(job.traceparent, `00-${PRODUCER.traceId}-${PRODUCER.spanId}-01`);
    assert.equal(span.options.kind, api.SpanKind.CONSUMER);
    assert.equal(span.name, 't2 process');
    assert.deepEqual(span.options.links.map((l) => [l.context.traceId, l.context.spanId, l.context.isRemote]),
      [[PRODUCER.traceId, PRODUCER.spanId, true]]);
    assert.equal(span.options.links[0].context.traceState.get('rojo'), '1');
    assert.equal(span.options.attributes['messaging.message.id'], job.id);
    assert.equal(span.parent, null, 'a root span, not a child of the context the worker ran in');
    assert.ok(span.ended);
  }
  const failed = seen.find(({ job }) => !job.payload.ok).span;
  assert.equal(failed.status.code, api.SpanStatusCode.ERROR);
  assert.equal(failed.exceptions[0].message, 'card declined');
  assert.equal(seen.find(({ job }) => job.id === good.id).span.status, null);
});

test('a job without a context gives a span without a link; useOpenTelemetry(null) turns tracing off', async () => {
  const c = new Client(s.url);
  await c.enqueue('t3', { n: 1 }, { headers: { other: 'x' } });
  let span;
  let worker = null;
  worker = new Worker(c, 't3', async () => { span = api.trace.getActiveSpan(); worker.stop(); }, { wait: '1s', signals: false });
  await worker.run();
  assert.deepEqual(span.options.links, []);
  useOpenTelemetry(null);
  try {
    const quiet = await inProducerSpan(() => c.enqueue('t3', { n: 2 }));
    assert.equal((await c.get('t3', quiet.id)).traceparent, null);
  } finally {
    useOpenTelemetry(api);
  }
});
