// Enqueue and cancel inside your own PostgreSQL transaction, on a delayq server that runs on the
// PostgreSQL store (docs/postgres.md). Works with `pg` (npm): pass a Client or a PoolClient that
// is inside your transaction, or anything with `query(text, values)` answering `{ rows }`.
//
//   import pg from 'pg';
//   import { enqueueIn, cancelIn } from 'delayq/postgres';
//   const db = await pool.connect();
//   await db.query('BEGIN');
//   await db.query("INSERT INTO orders (id, state) VALUES ($1, 'unpaid')", [42]);
//   await enqueueIn(db, 'order-timeouts', { orderId: 42 }, { delay: '30m', key: 'order-42' });
//   await db.query('COMMIT');   // the order and its timeout exist together; ROLLBACK: neither
//
// Each function is one call of the SQL API (delayq.enqueue, cancel, cancel_job, reschedule): nothing
// is visible or delivered before the transaction commits. A refusal rejects with the driver's
// error, `code` '22023' and a message naming the field.
import { toMs } from './index.js';
import { activeTraceHeaders } from './tracing.js';

/**
 * @param {{query: Function}} db a pg Client or PoolClient inside your transaction (a Pool would run the
 *   call in a transaction of its own)
 * @param {string} queue
 * @param {unknown} payload any JSON value
 * @param {{delay?: string|number (a number: milliseconds), deliverAt?: Date, key?: string, maxAttempts?: number,
 *          headers?: Record<string,string>, priority?: number, group?: string,
 *          onKey?: 'dedupe'|'replace'|'debounce', traceparent?: string, tracestate?: string}} [options]
 *   traceparent/tracestate: the producer's W3C Trace Context; by default, with `@opentelemetry/api`
 *   in the application, the active span's (schema version 3; without either, any version works).
 * @returns {Promise<{id: string, dueAtMs: number, duplicate: boolean}>}
 */
export async function enqueueIn(db, queue, payload, options = {}) {
  const delayMs = options.delay != null ? toMs(options.delay, 'delay') : options.deliverAt ? null : 0;
  const own = options.traceparent != null || options.tracestate != null || options.headers?.traceparent != null;
  const trace = own ? { traceparent: options.traceparent, tracestate: options.tracestate } : activeTraceHeaders() ?? {};
  const values = [queue, JSON.stringify(payload), delayMs, options.key ?? null, options.deliverAt ?? null,
    options.maxAttempts ?? null, options.headers ? JSON.stringify(options.headers) : null,
    options.priority ?? 0, options.group ?? null, options.onKey ?? 'dedupe'];
  const traced = trace.traceparent != null || trace.tracestate != null;
  if (traced) values.push(trace.traceparent ?? null, trace.tracestate ?? null);
  const r = await db.query(
    'SELECT id, due_at_ms, duplicate FROM delayq.enqueue($1, $2::json, delay_ms => $3, key => $4, ' +
      'deliver_at => $5, max_attempts => $6, headers => $7::json, priority => $8, "group" => $9, on_key => $10' +
      (traced ? ', traceparent => $11, tracestate => $12)' : ')'),
    values);
  const row = r.rows[0];
  return { id: row.id, dueAtMs: Number(row.due_at_ms), duplicate: row.duplicate };
}

/** Cancels the live job of `key` when the transaction commits; false when there is none. */
export async function cancelIn(db, queue, key) {
  const r = await db.query('SELECT delayq.cancel($1, $2) AS done', [queue, key]);
  return r.rows[0].done;
}

/** cancelIn by job id. */
export async function cancelJobIn(db, queue, id) {
  const r = await db.query('SELECT delayq.cancel_job($1, $2) AS done', [queue, id]);
  return r.rows[0].done;
}

/**
 * Moves the job of `key` to now + delay (or deliverAt, one of them); resolves to its new due time
 * in ms, or null when no live job has that key.
 */
export async function rescheduleIn(db, queue, key, options = {}) {
  const r = await db.query('SELECT delayq.reschedule($1, $2, delay_ms => $3, deliver_at => $4) AS due',
    [queue, key, options.delay != null ? toMs(options.delay, 'delay') : null, options.deliverAt ?? null]);
  return r.rows[0].due === null ? null : Number(r.rows[0].due);
}
