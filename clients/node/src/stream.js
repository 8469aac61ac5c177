// A push stream (POST /v1/queues/{q}/stream): jobs arrive as they come due, under a window.
//
//   const jobs = await client.stream('orders', { maxInFlight: 16 });
//   for await (const job of jobs) { ...; await client.ack('orders', job.receipt); }
//
// The stream holds a connection of its own. Heartbeat lines are read and skipped; an error line
// (the store cannot serve) throws its error, as does a stream quiet for longer than the server's
// longest heartbeat allows. close() gives its unacknowledged deliveries back to the queue at
// once, without using an attempt.
import { DelayqError, Unavailable, errorFor } from './index.js';

/** The server sends a heartbeat after at most 15 s of silence: this much quiet on top means gone. */
export const QUIET_MS = 15_000;
/** A line is one delivery, bounded by the server's payload limit; this bounds a hostile server. */
const MAX_LINE = 64 << 20;

export class JobStream {
  #res;
  #req;
  #toJob;
  #where;
  #closed = false;

  constructor(req, res, toJob, where) {
    this.#req = req;
    this.#res = res;
    this.#toJob = toJob;
    this.#where = where;
    this.heartbeats = 0;
  }

  /** Ends the stream: its unacknowledged deliveries are ready again, no attempt used. */
  close() {
    this.#closed = true;
    this.#req.destroy();
  }

  async *[Symbol.asyncIterator]() {
    let pending = '';
    try {
      for await (const chunk of this.#res) {
        pending += chunk;
        let end;
        while ((end = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, end);
          pending = pending.slice(end + 1);
          const job = this.#line(line);
          if (job) yield job;
        }
        if (pending.length > MAX_LINE) throw new Unavailable(`${this.#where}: a stream line longer than ${MAX_LINE} bytes`, 'unavailable');
      }
    } catch (e) {
      if (this.#closed) return;
      if (e instanceof DelayqError) throw e;
      throw new Unavailable(`${this.#where}: the stream broke: ${e.message}`, 'unavailable');
    }
    if (this.#closed) return;
    throw new Unavailable(`${this.#where}: the server ended the stream (it is stopping)`, 'unavailable');
  }

  // A delivery, or null for a heartbeat or an empty line; throws for an error line or garbage.
  #line(line) {
    if (!line.trim()) return null;
    let value;
    try { value = JSON.parse(line); } catch { value = undefined; }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new DelayqError(`${this.#where}: a stream line is not a JSON object: ${line.slice(0, 200)}`, 'internal');
    }
    if ('heartbeat' in value) { this.heartbeats++; return null; }
    if ('error' in value) {
      const err = value.error && typeof value.error === 'object' ? value.error : {};
      throw errorFor(503, err.code ?? 'unavailable', err.message ?? 'the stream ended');
    }
    if (typeof value.id !== 'string' || typeof value.receipt !== 'string') {
      throw new DelayqError(`${this.#where}: a stream line is not a delivery (no id or receipt): ${line.slice(0, 200)}`, 'internal');
    }
    return this.#toJob(value);
  }
}

/**
 * Sends the stream's request; resolves to its JobStream once the server answered 200, or throws
 * the server's error (NotFound from a server without streams).
 */
export function openStream({ transport, agent, url, path, headers, body, quietMs }) {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = transport.request(url + path, {
      method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
    }, (res) => {
      if (res.statusCode === 200) {
        res.setEncoding('utf8');
        resolve({ req, res });
        return;
      }
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let err = null;
        try { err = JSON.parse(text).error; } catch { err = null; }
        reject(err && typeof err === 'object' ? errorFor(res.statusCode, err.code, err.message ?? '')
          : errorFor(res.statusCode, null, `HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
      });
    });
    req.setTimeout(quietMs, () => req.destroy(new Error(`nothing came for ${quietMs} ms, not even a heartbeat`)));
    req.on('error', (e) => reject(e instanceof DelayqError ? e : new Unavailable(`cannot reach ${url}: ${e.message}`, 'unavailable')));
    req.end(payload);
  });
}
