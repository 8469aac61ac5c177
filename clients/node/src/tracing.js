// OpenTelemetry for the Node client, when the application has it: `@opentelemetry/api` is an
// optional peer dependency, looked up once (through require, which shares the API's global
// registry with an application that imports it as an ES module). Without it, nothing here costs
// more than a null check.
//
// - An enqueue sends the active span's context as W3C `traceparent`/`tracestate` headers; the
//   server puts them on each job that carries none (docs/http-api.md, "Trace context").
// - The Worker runs each handler in a span of its own, kind CONSUMER, linked to the producer's
//   span (a link, not a parent: a delayed job's work is its own trace step, as OpenTelemetry's
//   messaging conventions advise for batch and deferred processing).
import { createRequire } from 'node:module';

let api; // undefined: not looked up yet; null: the application has none (or turned it off)

function openTelemetry() {
  if (api === undefined) {
    try {
      api = createRequire(import.meta.url)('@opentelemetry/api');
    } catch {
      api = null;
    }
  }
  return api;
}

/**
 * Which OpenTelemetry API the client uses: the module (`import * as api from '@opentelemetry/api'`),
 * or null to trace nothing. By default the client finds the application's own.
 */
export function useOpenTelemetry(module) {
  api = module ?? null;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The active span's context as W3C headers, or null when there is none (or no OpenTelemetry). */
export function activeTraceHeaders() {
  const otel = openTelemetry();
  if (!otel) return null;
  const sc = otel.trace.getSpanContext(otel.context.active());
  if (!sc || !otel.isSpanContextValid(sc)) return null;
  const headers = { traceparent: `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}` };
  const state = sc.traceState?.serialize();
  if (state) headers.tracestate = state;
  return headers;
}

// The producer's span context of a job, or null.
function producerContext(otel, job) {
  const m = typeof job.traceparent === 'string' ? TRACEPARENT.exec(job.traceparent) : null;
  if (!m || m[1] === 'ff') return null;
  const sc = { traceId: m[2], spanId: m[3], traceFlags: parseInt(m[4], 16) & 0xff, isRemote: true };
  if (job.tracestate && typeof otel.createTraceState === 'function') sc.traceState = otel.createTraceState(job.tracestate);
  return otel.isSpanContextValid(sc) ? sc : null;
}

/** Runs `fn` in a CONSUMER span for `job` of `queue`, linked to its producer's, when tracing is on. */
export async function inConsumerSpan(queue, job, fn) {
  const otel = openTelemetry();
  if (!otel) return fn();
  const producer = producerContext(otel, job);
  const options = {
    kind: otel.SpanKind.CONSUMER,
    links: producer ? [{ context: producer }] : [],
    attributes: {
      'messaging.system': 'delayq',
      'messaging.operation': 'process',
      'messaging.destination.name': queue,
      'messaging.message.id': job.id,
      'messaging.delayq.attempt': job.attempt,
    },
  };
  // A new root (ROOT_CONTEXT), not a child of whatever is active where the worker reads its jobs
  // (with HTTP instrumentation, the span of the long-lived stream request): the link is the tie.
  return otel.trace.getTracer('delayq').startActiveSpan(`${queue} process`, options, otel.ROOT_CONTEXT, async (span) => {
    try {
      return await fn();
    } catch (e) {
      span.recordException(e);
      span.setStatus({ code: otel.SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
      throw e;
    } finally {
      span.end();
    }
  });
}
