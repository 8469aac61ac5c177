// delayq for Node: the HTTP API as a Client, and a Worker that runs a handler per job.
// Node's own http and https modules only; no dependencies. Types: index.d.ts.
import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { JobStream, QUIET_MS, openStream } from './stream.js';
import { activeTraceHeaders, inConsumerSpan } from './tracing.js';

export { useOpenTelemetry } from './tracing.js';

/** Any error from delayq; `code` is the server's code ("not_found", ...), `status` the HTTP one. */
export class DelayqError extends Error {
  constructor(message, code = 'internal', status = undefined) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}
/** 400: a malformed request, a bad or unknown field (the message names it). */
export class InvalidArgument extends DelayqError {}
/** 413: a payload, body or batch over its limit. */
export class TooLarge extends InvalidArgument {}
/** 401: the server wants a (different) bearer token. */
export class Unauthorized extends DelayqError {}
/** 403: a foreign Origin or an unexpected Host. */
export class Forbidden extends DelayqError {}
/** 404: no such job, key, queue or route. */
export class NotFound extends DelayqError {}
/** 409: the job's state forbids it (cancel a reserved job). */
export class Conflict extends DelayqError {}
/** 409 lease_expired: the receipt names a delivery that is over; the job is not yours now. */
export class LeaseExpired extends Conflict {}
/** 429 or 507: refused for load or a limit. */
export class Overloaded extends DelayqError {}
/** 503 (a proxy's 502, 504) or no answer: the server is down, starting, stopping, or its store cannot serve now. */
export class Unavailable extends DelayqError {}

/** The states a wait for an outcome ends on (Client.wait), and the longest wait one request holds. */
export const FINAL_STATES = Object.freeze(['completed', 'dead', 'cancelled']);
const WAIT_MAX_MS = 60_000;

const BY_CODE = {
  invalid_argument: InvalidArgument, unsupported_media_type: InvalidArgument, method_not_allowed: InvalidArgument,
  too_large: TooLarge, unauthenticated: Unauthorized, forbidden: Forbidden, not_found: NotFound, conflict: Conflict,
  lease_expired: LeaseExpired, resource_exhausted: Overloaded, unavailable: Unavailable, io_error: Unavailable,
};
const BY_STATUS = {
  400: InvalidArgument, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: TooLarge,
  429: Overloaded, 503: Unavailable, 507: Overloaded,
  502: Unavailable, 504: Unavailable, // a proxy's: delayq is down or restarting behind it
};

/** The error for an answer: by its code, else by its HTTP status. */
export function errorFor(status, code, message) {
  const Cls = BY_CODE[code] || BY_STATUS[status] || DelayqError;
  return new Cls(message, code || `http_${status}`, status);
}

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds of "250ms", "1.5s", "1h30m", "7d", or of a number of milliseconds. */
export function toMs(value, what = 'duration') {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) throw new RangeError(`${what} ${value} is not a non-negative number of milliseconds`);
    return Math.round(value);
  }
  if (typeof value !== 'string') throw new TypeError(`${what} must be a duration such as "30s" or milliseconds`);
  const text = value.trim();
  const part = /(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)/y;
  let total = 0;
  part.lastIndex = 0;
  while (part.lastIndex < text.length) {
    const at = part.lastIndex;
    const m = part.exec(text);
    if (!m || m.index !== at) {
      throw new RangeError(`${what} "${value}" is not a duration: write number+unit parts, units ms s m h d ("250ms", "1h30m")`);
    }
    total += Number(m[1]) * UNIT_MS[m[2]];
  }
  if (!text) throw new RangeError(`${what} is empty: write a duration such as "30s"`);
  return Math.round(total);
}

function payloadOf(obj) {
  return 'payload_base64' in obj ? Buffer.from(obj.payload_base64, 'base64') : obj.payload;
}

// { maxAttempts: 1, backoff: { baseMs: 2 } } -> { max_attempts: 1, backoff: { base_ms: 2 } }.
function snakeKeys(value) {
  if (Array.isArray(value)) return value.map(snakeKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), snakeKeys(v)]));
}

function job(obj) {
  return {
    id: obj.id, receipt: obj.receipt, payload: payloadOf(obj), attempt: obj.attempt ?? 0, dueAt: obj.due_at ?? 0,
    key: obj.key ?? null, headers: obj.headers ?? {}, maxAttempts: obj.max_attempts ?? 0,
    leaseDeadline: obj.lease_deadline ?? 0, priority: obj.priority ?? 0, group: obj.group ?? null,
    traceparent: obj.traceparent ?? null, tracestate: obj.tracestate ?? null,
  };
}

// A value sent as JSON, or a TypeError naming it: JSON.stringify turns NaN and Infinity into null
// and drops functions and symbols (a progress of NaN meant "keep the last" without a word), and
// makes a Map or a Set {}: none of them is taken, at any depth (a result of [() => 1] was sent as
// [null]).
function jsonValue(value, field) {
  const notJson = (v) => typeof v === 'function' || typeof v === 'symbol' || typeof v === 'bigint' ||
    (typeof v === 'number' && !Number.isFinite(v)) || v instanceof Map || v instanceof Set;
  const refuse = (v) => new TypeError(`${field} is not a JSON value (${typeof v === 'number' ? v : v instanceof Map ? 'a Map' : v instanceof Set ? 'a Set' : typeof v}); give a number, string, object or array`);
  let text;
  try {
    text = JSON.stringify(value, (_, v) => { if (notJson(v)) throw refuse(v); return v; });
  } catch (e) {
    throw e instanceof TypeError && e.message.startsWith(field) ? e : new TypeError(`${field} is not a JSON value: ${e.message}`);
  }
  if (text === undefined) throw refuse(value);
  return value;
}

function jobInfo(obj) {
  return {
    id: obj.id, queue: obj.queue, state: obj.state, dueAt: obj.due_at ?? 0, attempt: obj.attempt ?? 0,
    maxAttempts: obj.max_attempts ?? 0, payload: payloadOf(obj), key: obj.key ?? null, headers: obj.headers ?? {},
    createdAt: obj.created_at ?? 0, lastError: obj.last_error ?? null, leaseDeadline: obj.lease_deadline ?? null,
    deadAt: obj.dead_at ?? null, priority: obj.priority ?? 0, group: obj.group ?? null,
    traceparent: obj.traceparent ?? null, tracestate: obj.tracestate ?? null, progress: obj.progress ?? null,
    completedAt: obj.completed_at ?? null, result: obj.result ?? null,
  };
}

function when(body, opts) {
  const given = ['delay', 'delayMs', 'deliverAt'].filter((n) => opts[n] !== undefined && opts[n] !== null);
  if (given.length > 1) throw new TypeError(`give one of delay, delayMs and deliverAt, not ${given.join(' and ')}`);
  if (opts.delay !== undefined && opts.delay !== null) {
    if (typeof opts.delay === 'string') body.delay = opts.delay; // the server parses it
    else body.delay_ms = toMs(opts.delay, 'delay');
  } else if (opts.delayMs !== undefined && opts.delayMs !== null) {
    body.delay_ms = toMs(opts.delayMs, 'delayMs');
  } else if (opts.deliverAt !== undefined && opts.deliverAt !== null) {
    body.deliver_at = opts.deliverAt instanceof Date ? opts.deliverAt.getTime() : opts.deliverAt;
  }
}

const JOB_OPTIONS = new Set(['delay', 'delayMs', 'deliverAt', 'key', 'headers', 'maxAttempts', 'replace', 'keyTtl', 'debounce',
  'priority', 'group', 'traceparent', 'tracestate']);

function checkOptions(opts, known, what) {
  for (const name of Object.keys(opts)) {
    if (!known.has(name)) throw new TypeError(`unknown option "${name}" for ${what}; the options are ${[...known].join(', ')}`);
  }
}

/** The wire object of one job, as enqueue and enqueueBatch send it (Buffers go as base64). */
export function jobBody(payload, opts = {}) {
  checkOptions(opts, JOB_OPTIONS, 'a job');
  const body = {};
  if (payload instanceof Uint8Array) body.payload_base64 = Buffer.from(payload).toString('base64');
  else body.payload = payload === undefined ? null : payload;
  when(body, opts);
  if (opts.key != null) body.key = opts.key;
  if (opts.headers) body.headers = { ...opts.headers };
  if (opts.maxAttempts != null) body.max_attempts = opts.maxAttempts;
  if (opts.replace) body.replace = true;
  if (opts.debounce) body.debounce = true;
  if (opts.keyTtl != null) body.key_ttl_ms = toMs(opts.keyTtl, 'keyTtl');
  if (opts.priority != null) body.priority = opts.priority;
  if (opts.group != null) body.group = opts.group;
  if (opts.traceparent != null) body.traceparent = opts.traceparent;
  if (opts.tracestate != null) body.tracestate = opts.tracestate;
  return body;
}

function readPem(file, option) {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new TypeError(`cannot read ${option} "${file}": ${e.message} (a PEM file is needed)`);
  }
}

/**
 * A connection to a delayq server. Safe to use from many async tasks at once.
 *
 * Options: `token` (the server's bearer token); `timeoutMs` (connecting and each answer; a
 * waiting reserve gets its wait on top). With https:// only: `caFile` (or `ca`, PEM text) trusts
 * these CAs instead of the system's; `certFile`/`keyFile` (or `cert`/`key`) are the client
 * certificate for a server started with --tls-client-ca; `serverName` is the name the server's
 * certificate must carry when it is not the URL's host. TLS options with http:// are a TypeError.
 */
const CLIENT_OPTIONS = ['token', 'timeoutMs', 'caFile', 'ca', 'certFile', 'keyFile', 'cert', 'key', 'serverName'];

export class Client {
  #agent;
  #streamAgent;  // streams hold a connection each: never pooled
  #transport;
  #token;  // private: not shown by console.log(client)

  constructor(url = 'http://127.0.0.1:7070', options = {}) {
    // A misspelt option (cafile, certfile) would otherwise send no client certificate, silently.
    const unknown = Object.keys(options).filter((k) => !CLIENT_OPTIONS.includes(k));
    if (unknown.length) throw new TypeError(`unknown option ${unknown.map((k) => `"${k}"`).join(', ')}; the options are ${CLIENT_OPTIONS.join(', ')}`);
    const {
      token = undefined, timeoutMs = 30_000, caFile = undefined, ca = undefined, certFile = undefined,
      keyFile = undefined, cert = undefined, key = undefined, serverName = undefined,
    } = options;
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`url "${url}" is not http://HOST:PORT or https://HOST:PORT`);
    if (u.username || u.password) throw new TypeError('the url has a user name or password before "@": delayq takes a bearer token instead (the token option)');
    this.url = url.replace(/\/+$/, '');
    this.#token = token;
    this.timeoutMs = timeoutMs;
    const tls = { caFile, ca, certFile, keyFile, cert, key, serverName };
    const given = Object.keys(tls).filter((k) => tls[k] !== undefined && tls[k] !== null);
    if (u.protocol === 'http:') {
      if (given.length) throw new TypeError(`${given.join(', ')}: TLS options are for an https:// URL, not "${url}"`);
      this.#transport = http;
      this.#agent = new http.Agent({ keepAlive: true });
      this.#streamAgent = new http.Agent({ keepAlive: false });
      return;
    }
    const agentOptions = { keepAlive: true };
    if (caFile != null || ca != null) agentOptions.ca = ca ?? readPem(caFile, 'caFile');
    if (certFile != null || cert != null) agentOptions.cert = cert ?? readPem(certFile, 'certFile');
    if (keyFile != null || key != null) agentOptions.key = key ?? readPem(keyFile, 'keyFile');
    if (agentOptions.key && !agentOptions.cert) throw new TypeError('keyFile (or key) was given without certFile (or cert): give both, or neither');
    if (agentOptions.cert && !agentOptions.key) {  // a PEM file that may hold both
      if (!String(agentOptions.cert).includes('PRIVATE KEY-----')) {
        throw new TypeError(`${certFile != null ? `certFile "${certFile}"` : 'cert'} holds no private key: give keyFile (or key) too`);
      }
      agentOptions.key = agentOptions.cert;
    }
    if (serverName != null) agentOptions.servername = serverName;
    if (agentOptions.ca && !String(agentOptions.ca).includes('-----BEGIN CERTIFICATE-----')) {
      throw new TypeError(`${caFile != null ? `caFile "${caFile}"` : 'ca'} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
    }
    // The agent reads them at the first connection: checked now, one by one, so that a bad file
    // fails here and is named.
    const check = (what, context) => {
      try {
        createSecureContext(context);
      } catch (e) {
        throw new TypeError(`cannot use ${what}: ${e.message}${/decrypt|pass phrase/i.test(e.message) ? ' (an encrypted key? give an unencrypted PEM key)' : ''}`);
      }
    };
    if (agentOptions.ca) check(caFile != null ? `caFile "${caFile}"` : 'ca', { ca: agentOptions.ca });
    if (agentOptions.cert) {
      const named = `${certFile != null ? `certFile "${certFile}"` : 'cert'}${keyFile != null ? ` with keyFile "${keyFile}"` : key != null ? ' with key' : ''}`;
      check(named, { cert: agentOptions.cert, key: agentOptions.key, passphrase: '' });
    }
    this.#agent = new https.Agent(agentOptions);
    this.#streamAgent = new https.Agent({ ...agentOptions, keepAlive: false });
    this.#transport = https;
  }

  /** Closes the kept-alive connections (a process exits without it too). */
  close() { this.#agent.destroy(); this.#streamAgent.destroy(); }

  // One exchange: the answer's status and text, or a throw (no answer within the timeout, a
  // refused connection, a failed TLS handshake).
  #send(method, path, headers, payload, timeoutMs) {
    return new Promise((resolve, reject) => {
      const req = this.#transport.request(this.url + path, { method, headers, agent: this.#agent }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => { clearTimeout(timer); resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }); });
        res.on('error', (e) => { clearTimeout(timer); reject(e); });
      });
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      req.on('error', (e) => { clearTimeout(timer); reject(e); });
      req.end(payload);
    });
  }

  async #call(method, path, body = undefined, { waitMs = 0, query = undefined, extraHeaders = undefined } = {}) {
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) q.append(k, String(v));
      path += `?${q}`;
    }
    const headers = { accept: 'application/json' };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (method === 'POST' || method === 'PUT' || method === 'PATCH') headers['content-type'] = 'application/json';
    headers['content-length'] = payload === undefined ? 0 : Buffer.byteLength(payload);
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (extraHeaders) Object.assign(headers, extraHeaders);
    let answer;
    try {
      answer = await this.#send(method, path, headers, payload, this.timeoutMs + waitMs);
    } catch (e) {
      const refused = /alert (certificate required|unknown ca|bad certificate|certificate expired|certificate unknown)/i.test(e.message);
      throw new Unavailable(`cannot reach ${this.url}: ${e.message}${refused
        ? " (the server refused this client's certificate, or wants one: give certFile/keyFile signed by a CA its --tls-client-ca names, valid now)" : ''}`, 'unavailable');
    }
    const { status, text } = answer;
    let value = null;
    try { value = text ? JSON.parse(text) : null; } catch { value = null; }
    if (status >= 200 && status < 300) return value;
    const err = value && typeof value === 'object' ? value.error : null;
    if (err && typeof err === 'object') throw errorFor(status, err.code, err.message ?? '');
    throw errorFor(status, null, `HTTP ${status}: ${text.slice(0, 200)}`);
  }

  static #q(queue) {
    if (typeof queue !== 'string' || !queue) throw new TypeError('queue must be a non-empty string');
    return `/v1/queues/${Client.#segment(queue, 'queue name')}`;
  }

  // A path segment. "." and ".." (and their %2E escapes) fetch takes out of the path, as a
  // browser or a proxy does: the request would reach another route. The server refuses such a
  // queue or schedule name; here it is refused before anything is sent.
  static #segment(name, what) {
    if (name === '.' || name === '..') {
      throw new InvalidArgument(`${what} "${name}" is a path's dot segment, which a URL cannot carry; give a name with a letter, digit, '_', ':' or '-'`, 'invalid_argument', 0);
    }
    return encodeURIComponent(name);
  }

  static #job(queue, ref) {
    const { id, key } = typeof ref === 'string' ? { id: ref } : (ref ?? {});
    if ((id === undefined) === (key === undefined)) throw new TypeError('give the job\'s id or {key} (one of them)');
    return id !== undefined ? [`${Client.#q(queue)}/jobs/${Client.#segment(String(id), 'job id')}`, undefined]
      : [`${Client.#q(queue)}/jobs`, { key }];
  }

  /**
   * Hands in one job: due after `delay` ("30m" or ms) or at `deliverAt`; now without either. With
   * OpenTelemetry in the application, the active span's context goes with it (unless the job gives
   * its own `traceparent`).
   */
  async enqueue(queue, payload, opts = {}) {
    const r = await this.#call('POST', `${Client.#q(queue)}/jobs`, jobBody(payload, opts), { extraHeaders: activeTraceHeaders() });
    return { id: r.id, dueAt: r.due_at, duplicate: !!r.duplicate, replaced: !!r.replaced };
  }

  /** Hands in up to 1000 jobs at once, all or none; each is jobBody(payload, opts) or the wire object. */
  async enqueueBatch(queue, jobs) {
    const r = await this.#call('POST', `${Client.#q(queue)}/jobs`, { jobs }, { extraHeaders: activeTraceHeaders() });
    return r.jobs.map((j) => ({ id: j.id, dueAt: j.due_at, duplicate: !!j.duplicate, replaced: !!j.replaced }));
  }

  /** A job by id, or by {key}. */
  async get(queue, ref) {
    const [path, query] = Client.#job(queue, ref);
    return jobInfo(await this.#call('GET', path, undefined, { query }));
  }

  /**
   * Waits for the job's outcome: answers it once it is `completed` (its `result` is the one its ack
   * carried, kept for this wait even with keep_completed_ms 0), `dead` or `cancelled`, or as it then
   * is when `timeout` ("5m" or ms; default 60 s) ends: look at `state`. `ref` is the id, what
   * enqueue, reserve or get answered, or {key}. The server is woken by the job's end, never polls;
   * a wait longer than 60 s is made of waits of 60 s. A server that restarts (Unavailable) or is
   * full (Overloaded) meanwhile is asked again until the timeout; NotFound when there is no such
   * job (or it ended, not kept, before the wait began).
   */
  async wait(queue, ref, { timeout = 60_000 } = {}) {
    let [path, query] = Client.#job(queue, ref?.id !== undefined ? { id: ref.id } : ref);
    const deadline = performance.now() + toMs(timeout, 'timeout');
    let pause = 100;
    for (;;) {
      const waitMs = Math.min(Math.max(0, Math.floor(deadline - performance.now())), WAIT_MAX_MS);
      let info;
      try {
        info = jobInfo(await this.#call('GET', path, undefined, { query: { ...(query ?? {}), wait_ms: waitMs }, waitMs }));
      } catch (e) {
        // A server starting again, or one at --max-waiting: asked again until the timeout, the last
        // time without waiting (wait_ms 0 is a plain read, never a 429); that last one's failure is the answer.
        if (!(e instanceof Unavailable || e instanceof Overloaded) || waitMs === 0) throw e;
        const left = Math.max(0, deadline - performance.now());
        await new Promise((resolve) => { setTimeout(resolve, Math.min(pause, left)); });
        pause = Math.min(pause * 2, 2000);
        continue;
      }
      if (FINAL_STATES.includes(info.state) || performance.now() >= deadline) return info;
      [path, query] = Client.#job(queue, info.id); // by key: the job the key named at first
    }
  }

  /** Deletes a scheduled, ready or dead job (NotFound when none, Conflict while reserved). */
  async cancel(queue, ref) {
    const [path, query] = Client.#job(queue, ref);
    return !!(await this.#call('DELETE', path, undefined, { query })).cancelled;
  }

  /** Moves a scheduled or ready job's due time: {delay} | {delayMs} | {deliverAt}. */
  async reschedule(queue, ref, opts) {
    const [path, query] = Client.#job(queue, ref);
    const body = {};
    when(body, opts ?? {});
    if (!Object.keys(body).length) throw new TypeError('give the new due time: delay, delayMs or deliverAt');
    return jobInfo(await this.#call('PATCH', path, body, { query }));
  }

  /** Takes up to `max` ready jobs for `lease`, waiting up to `wait` (≤ 60 s) for the first. */
  async reserve(queue, { max = 1, wait = undefined, lease = undefined } = {}) {
    const body = { max };
    const waitMs = wait === undefined ? 0 : toMs(wait, 'wait');
    if (waitMs) body.wait_ms = waitMs;
    if (lease !== undefined) body.lease_ms = toMs(lease, 'lease');
    const r = await this.#call('POST', `${Client.#q(queue)}/reserve`, body, { waitMs });
    return r.jobs.map(job);
  }

  /**
   * Opens a push stream on a connection of its own: iterate it (for await) for each job as it
   * comes due, at most `maxInFlight` (1..1000) unacknowledged at a time; settle them with ack,
   * nack, touch or release as reserved jobs. close() ends it: its unacknowledged deliveries are
   * ready again, no attempt used. A server without streams throws NotFound (use reserve).
   */
  async stream(queue, { maxInFlight = 100, lease = undefined, maxBytes = undefined } = {}) {
    const body = { max_in_flight: maxInFlight };
    if (lease !== undefined) body.lease_ms = toMs(lease, 'lease');
    if (maxBytes !== undefined) body.max_bytes = maxBytes;
    const path = `${Client.#q(queue)}/stream`;
    const headers = { accept: 'application/x-ndjson' };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    const { req, res } = await openStream({
      transport: this.#transport, agent: this.#streamAgent, url: this.url, path, headers, body, quietMs: this.timeoutMs + QUIET_MS,
    });
    return new JobStream(req, res, job, this.url + path);
  }

  /** Gives back deliveries that never reached a handler: ready again at once, no attempt used. */
  async release(queue, receipt) {
    const r = await this.#settle(queue, 'release', receipt, {}, 'released');
    return typeof receipt === 'string' ? r.released : r;
  }

  async #settle(queue, verb, receipt, extra, countField) {
    if (typeof receipt === 'string') return this.#call('POST', `${Client.#q(queue)}/${verb}`, { receipt, ...extra });
    const r = await this.#call('POST', `${Client.#q(queue)}/${verb}`, { receipts: [...receipt], ...extra });
    return {
      done: r[countField] ?? 0,
      failed: (r.failed ?? []).map((f) => ({
        receipt: f.receipt, error: errorFor(f.code === 'lease_expired' ? 409 : 400, f.code, f.message ?? f.code),
      })),
    };
  }

  /**
   * Acknowledges a delivery (the job is done). `result`, any JSON value up to 64 KiB, is kept with
   * the job while the queue keeps completed jobs (keep_completed_ms). An array of receipts is a
   * batch: {done, failed}; its items may be [receipt, result] pairs, each with its own result.
   */
  async ack(queue, receipt, { result = undefined } = {}) {
    const one = (r, value) => (value === undefined || value === null ? r : { receipt: r, result: jsonValue(value, 'result') });
    if (typeof receipt === 'string') {
      const extra = result === undefined || result === null ? {} : { result: jsonValue(result, 'result') };
      return (await this.#settle(queue, 'ack', receipt, extra, 'acked')).acked;
    }
    const entries = [...receipt].map((item) => (Array.isArray(item) ? one(item[0], item[1]) : one(item, result)));
    return this.#settle(queue, 'ack', entries, {}, 'acked');
  }

  /** Ends a delivery without success: retried after `retryIn` (default: the queue's back-off) or dead. */
  async nack(queue, receipt, { retryIn = undefined, error = undefined, dead = false } = {}) {
    const extra = {};
    if (retryIn !== undefined) extra.retry_in_ms = toMs(retryIn, 'retryIn');
    if (error !== undefined) extra.error = String(error);
    if (dead) extra.dead = true;
    const r = await this.#settle(queue, 'nack', receipt, extra, 'nacked');
    return typeof receipt === 'string' ? { state: r.state, dueAt: r.due_at } : r;
  }

  /** Extends a delivery's lease; answers the new deadline (epoch ms). */
  async touch(queue, receipt, { lease = undefined, progress = undefined } = {}) {
    const extra = lease === undefined ? {} : { lease_ms: toMs(lease, 'lease') };
    if (progress !== undefined && progress !== null) extra.progress = jsonValue(progress, 'progress');
    const r = await this.#settle(queue, 'touch', receipt, extra, 'touched');
    return typeof receipt === 'string' ? r.lease_deadline : r;
  }

  /** The queue's counts, counters and lateness (GET /v1/queues/{q}). */
  async stats(queue) { return this.#call('GET', Client.#q(queue)); }

  async queues() {
    const r = await this.#call('GET', '/v1/queues');
    return Array.isArray(r) ? r : r.queues;
  }

  async config(queue) { return this.#call('GET', `${Client.#q(queue)}/config`); }

  /**
   * Changes the fields given, in either spelling: { maxAttempts: 3, leaseMs: 60000, backoff:
   * { baseMs: 500 } } or the wire's { max_attempts: 3, ... }. Answers the whole config as the
   * wire spells it (docs/http-api.md), as config() and stats() do.
   */
  async setConfig(queue, fields) { return this.#call('PUT', `${Client.#q(queue)}/config`, snakeKeys(fields)); }

  async pause(queue) { await this.#call('POST', `${Client.#q(queue)}/pause`); }

  async resume(queue) { await this.#call('POST', `${Client.#q(queue)}/resume`); }

  /**
   * Creates or replaces a recurring schedule: { cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin' }
   * or { every: '90s' }, with payload, headers, maxAttempts, misfire, startAt, endAt. Each run
   * becomes a job of the queue. Resolves to the schedule with its next runs (the wire's JSON).
   */
  async putSchedule(queue, name, { cron, every, timezone, payload, headers, maxAttempts, priority, group, misfire, startAt, endAt } = {}) {
    const body = {};
    if (cron !== undefined) body.cron = cron;
    if (every !== undefined) body.every = toMs(every, 'every');
    if (timezone !== undefined) body.timezone = timezone;
    if (payload !== undefined) body.payload = payload;
    if (headers !== undefined) body.headers = headers;
    if (maxAttempts !== undefined) body.max_attempts = maxAttempts;
    if (priority !== undefined) body.priority = priority;
    if (group !== undefined) body.group = group;
    if (misfire !== undefined) body.misfire = misfire;
    if (startAt !== undefined) body.start_at = startAt;
    if (endAt !== undefined) body.end_at = endAt;
    return this.#call('PUT', Client.#schedule(queue, name), body);
  }

  async schedule(queue, name) { return this.#call('GET', Client.#schedule(queue, name)); }

  async schedules(queue) { return (await this.#call('GET', `${Client.#q(queue)}/schedules`)).schedules; }

  /** Deletes it; its jobs not yet due are cancelled. */
  async deleteSchedule(queue, name) { await this.#call('DELETE', Client.#schedule(queue, name)); }

  async pauseSchedule(queue, name) { return this.#call('POST', `${Client.#schedule(queue, name)}/pause`); }

  async resumeSchedule(queue, name) { return this.#call('POST', `${Client.#schedule(queue, name)}/resume`); }

  static #schedule(queue, name) { return `${Client.#q(queue)}/schedules/${Client.#segment(name, 'schedule name')}`; }

  /** The first `limit` dead jobs, oldest death first (jobs(queue, 'dead') pages on). */
  async dead(queue, { limit = 100 } = {}) {
    return (await this.#call('GET', `${Client.#q(queue)}/dead`, undefined, { query: { limit } })).jobs.map(jobInfo);
  }

  /** One page of the queue's jobs in `state`; pass nextCursor back as `cursor` until it is null. */
  async jobs(queue, state, { limit = 100, cursor = undefined } = {}) {
    const r = await this.#call('GET', `${Client.#q(queue)}/jobs`, undefined, { query: { state, limit, cursor } });
    return { jobs: r.jobs.map(jobInfo), nextCursor: r.next_cursor ?? null };
  }

  /** Every job of the queue in `state`, a page at a time. */
  async *iterJobs(queue, state, { pageSize = 100 } = {}) {
    let cursor;
    do {
      const page = await this.jobs(queue, state, { limit: pageSize, cursor });
      yield* page.jobs;
      cursor = page.nextCursor;
    } while (cursor);
  }

  /** Makes dead jobs ready again (all without `ids`). */
  async replay(queue, ids = undefined) {
    return (await this.#call('POST', `${Client.#q(queue)}/dead/replay`, ids ? { ids } : {})).replayed;
  }

  async purge(queue) { return (await this.#call('DELETE', `${Client.#q(queue)}/dead`)).purged; }

  async version() { return this.#call('GET', '/v1/version'); }
}

const POLL_MS = 5_000; // a reserve waits at most this long at a time, so that stop() is seen
const MAX_IN_FLIGHT = 1000; // the longest window a stream may ask for (the server's limit)
const MAX_RESULT = 65536; // bytes of JSON in a job's result (the server's limit)
const MAX_ACK_BYTES = 8 << 20; // results per ack request, about (the server's body limit is 16 MiB)

/**
 * Runs `handler(job)` for each job of `queue`, `concurrency` at a time. A handler that resolves
 * acks the job; one that throws (or rejects) nacks it with the error's text as last_error. The
 * lease is touched every third of its length while the handler runs. run() resolves after
 * stop() (or SIGTERM/SIGINT, when `signals` is true), once the running handlers are settled.
 *
 * Jobs come by a push stream (client.stream) unless `stream` is false: the server sends each job
 * as it comes due, at most `concurrency + prefetch` unacknowledged at a time, and acks go back in
 * batches (a request per `ackDelay` at most). A server without streams (404) gets long-polled
 * reserves instead. A broken stream (or one whose server stopped) is opened again after a pause,
 * and what it had prefetched and not started is given back (release: no attempt used). A job the
 * server hands out again while its handler still runs here (the stream broke: the server took its
 * deliveries back) is not run twice: the running handler's outcome settles the new delivery.
 *
 * A refusal no retry can mend (401, 403, 400: a wrong token, a bad option or queue name) stops the
 * worker, and run() throws it.
 */
export class Worker {
  #inbox = []; // [generation, job, msReadAt]: streamed, not started
  #wake = []; // resolvers of idle slots
  #stream = null;
  #generation = 0;
  #acks = [];
  #ackTimer = null;
  #ackFlush = Promise.resolve();
  #running = new Map(); // job id -> { receipt }: the newest delivery of a job whose handler runs
  #queued = new Map(); // job id -> its #inbox entry: a newer delivery replaces it in place (runs once)
  #unstarted = []; // [receipt, leaseDeadline]: stream deliveries no handler started, to give back
  #failed = null; // what stops the worker for good, for run() to throw
  #queueLease = undefined; // the queue's lease_ms as last read, and when (performance.now())
  #queueLeaseReadAt = 0;

  constructor(client, queue, handler, {
    concurrency = 1, lease = undefined, wait = '20s', signals = true, onError = undefined, stream = true,
    prefetch = undefined, ackDelay = '2ms',
  } = {}) {
    if (!(concurrency >= 1 && concurrency <= MAX_IN_FLIGHT)) throw new RangeError(`concurrency must be 1..${MAX_IN_FLIGHT}, not ${concurrency}`);
    const ahead = prefetch === undefined ? concurrency : prefetch;
    if (!(ahead >= 0)) throw new RangeError(`prefetch must be 0 or more, not ${prefetch}`);
    this.client = client;
    this.queue = queue;
    this.handler = handler;
    this.concurrency = concurrency;
    this.maxInFlight = Math.min(MAX_IN_FLIGHT, concurrency + ahead);
    this.leaseMs = lease === undefined ? undefined : toMs(lease, 'lease');
    this.waitMs = Math.max(1, Math.min(toMs(wait, 'wait'), POLL_MS));
    this.ackDelayMs = toMs(ackDelay, 'ackDelay');
    this.signals = signals;
    this.onError = onError;
    /** 'stream' or 'reserve': how jobs come now ('reserve' after a server without streams). */
    this.delivery = stream ? 'stream' : 'reserve';
    this.acked = 0;
    this.nacked = 0;
    this.errors = 0;
    /** Deliveries of a job whose handler was running here, settled by that handler (not run again). */
    this.redelivered = 0;
    this.stopping = false;
  }

  /** Takes no new job; run() resolves once the running handlers are settled. */
  stop() {
    this.stopping = true;
    for (const wake of this.#wake.splice(0)) wake();
  }

  async run() {
    const onSignal = () => this.stop();
    if (this.signals) { process.on('SIGTERM', onSignal); process.on('SIGINT', onSignal); }
    try {
      const reader = this.delivery === 'stream'
        ? this.#read().catch((e) => this.#fail(e)).finally(() => this.#giveBack(true)) : Promise.resolve();
      await Promise.all(Array.from({ length: this.concurrency }, () => this.#loop()));
      // Every handler is settled: the acks go out before the stream ends, since ending it gives
      // back each delivery not yet acked.
      await this.#flushAcks();
      if (this.#stream) this.#stream.close();
      await reader;
      if (this.#failed) throw this.#failed;
    } finally {
      if (this.signals) { process.off('SIGTERM', onSignal); process.off('SIGINT', onSignal); }
    }
  }

  // A bug, or a refusal no retry mends: the worker stops and run() throws it.
  #fail(e) {
    if (!this.#failed) this.#failed = e;
    this.stop();
  }

  static #fatal(e) { return e instanceof Unauthorized || e instanceof Forbidden || e instanceof InvalidArgument; }

  // Releases the stream deliveries no handler started: the server may still hold them leased (it
  // does after it stopped or restarted). While it cannot be reached they are kept for the next
  // try, as long as their leases hold.
  async #giveBack(final = false) {
    for (const [, j] of this.#inbox.splice(0)) this.#unstarted.push([j.receipt, j.leaseDeadline]);
    this.#queued.clear();
    const now = Date.now();
    const held = this.#unstarted.filter(([, deadline]) => !deadline || deadline > now);
    const batch = held.slice(0, 1000);
    this.#unstarted = held.slice(1000);
    if (!batch.length) return;
    try {
      await this.client.release(this.queue, batch.map(([r]) => r));
    } catch (e) {
      if (!(e instanceof DelayqError)) throw e;
      this.errors++;
      if (!final) this.#unstarted.push(...batch);
    }
  }

  // Waits `ms`, or less when stop() (or a delivery, or the fallback) wakes it. Its waker leaves
  // #wake when the time is up: a stale one left there would take a delivery's wake-up from a slot.
  async #pause(ms) {
    await new Promise((r) => {
      const wake = () => { clearTimeout(t); r(); };
      const t = setTimeout(() => {
        const at = this.#wake.indexOf(wake);
        if (at >= 0) this.#wake.splice(at, 1);
        r();
      }, ms);
      this.#wake.push(wake);
    });
  }

  async #loop() {
    try {
      await this.#takeJobs();
    } catch (e) { // a bug, or an onError that threw: the worker stops, run() throws it
      this.#fail(e);
    }
  }

  async #takeJobs() {
    while (!this.stopping) {
      if (this.delivery === 'stream') {
        await this.#takeStreamed();
        continue;
      }
      let jobs;
      try {
        jobs = await this.client.reserve(this.queue, { max: 1, wait: this.waitMs, lease: this.leaseMs });
      } catch (e) {
        if (!(e instanceof DelayqError)) throw e;
        if (Worker.#fatal(e)) { this.#fail(e); return; }
        this.errors++;
        await this.#pause(1000); // the server is down or refusing: again shortly
        continue;
      }
      for (const j of jobs) {
        const running = this.#running.get(j.id);
        if (running) { running.receipt = j.receipt; this.redelivered++; continue; } // delivered again while it runs here
        await this.#handle(j, Date.now(), false);
      }
    }
  }

  async #takeStreamed() {
    if (!this.#inbox.length) {
      await new Promise((r) => this.#wake.push(r));
      return;
    }
    const entry = this.#inbox.shift();
    const [generation, j, readAt] = entry;
    if (this.#queued.get(j.id) === entry) this.#queued.delete(j.id);
    if (generation !== this.#generation || this.stopping) { // its stream ended, or stopping: given back
      this.#unstarted.push([j.receipt, j.leaseDeadline]);
      return;
    }
    const running = this.#running.get(j.id);
    if (running) { running.receipt = j.receipt; this.redelivered++; return; } // delivered again while queued here
    await this.#handle(j, readAt, true);
  }

  // The stream's reader: opens it, queues what comes, opens it again when it breaks.
  async #read() {
    while (!this.stopping) {
      await this.#giveBack();
      let stream;
      try {
        stream = await this.client.stream(this.queue, { maxInFlight: this.maxInFlight, lease: this.leaseMs });
      } catch (e) {
        if (e instanceof NotFound) { // a server without streams: the slots reserve
          this.delivery = 'reserve';
          for (const wake of this.#wake.splice(0)) wake();
          return;
        }
        if (!(e instanceof DelayqError) || Worker.#fatal(e)) throw e;
        this.errors++;
        await this.#pause(1000);
        continue;
      }
      if (this.stopping) { stream.close(); return; }
      this.#stream = stream;
      const generation = ++this.#generation;
      try {
        for await (const j of stream) {
          const running = this.#running.get(j.id);
          if (running) { // delivered again while its handler runs here (the last stream broke): it
            running.receipt = j.receipt; // settles this delivery, the newest
            this.redelivered++;
            continue;
          }
          const queued = this.#queued.get(j.id);
          if (queued && queued[0] === generation) { // a newer delivery of a job still queued here
            queued[1] = j;
            queued[2] = Date.now();
            continue;
          }
          const entry = [generation, j, Date.now()];
          this.#queued.set(j.id, entry);
          this.#inbox.push(entry);
          const wake = this.#wake.shift();
          if (wake) wake();
        }
      } catch (e) {
        if (!(e instanceof DelayqError)) throw e;
        this.errors++;
        if (!this.stopping) await this.#pause(1000);
      } finally {
        if (this.#stream === stream) this.#stream = null;
        this.#generation++; // what it queued and no handler started is given back
        stream.close();
      }
    }
  }

  /**
   * From a handler: reports how far it has got with `job` (any JSON value up to 4 KiB), shown on
   * the job while it runs; touches its lease too. Rejects with LeaseExpired or NotFound when the
   * job is no longer this handler's.
   */
  async progress(job, value) {
    const book = this.#running.get(job.id);
    if (!book) throw new Error(`job ${job.id} is not running in this worker`);
    await this.client.touch(this.queue, book.receipt, { lease: book.lease, progress: value });
  }

  // The lease a delivery got: `lease`, or the queue's lease_ms, read from its config at most every
  // 10 s (as the C++ worker does). Not the delivery's leaseDeadline less this clock: that is the
  // server's clock, and with this one 20 s behind a touch came after the lease had run out (a
  // hostile try of the Java worker saw the job run by another consumer meanwhile). The deadline
  // serves only while the config cannot be read.
  async #leaseOf(j, receivedAt) {
    if (this.leaseMs !== undefined) return this.leaseMs;
    if (this.#queueLease === undefined || performance.now() - this.#queueLeaseReadAt > 10_000) {
      try {
        const ms = (await this.client.config(this.queue)).lease_ms;
        if (Number.isInteger(ms) && ms > 0) [this.#queueLease, this.#queueLeaseReadAt] = [ms, performance.now()];
      } catch (e) {
        if (!(e instanceof DelayqError)) throw e;
        this.errors++;
      }
    }
    return Math.max(1000, this.#queueLease ?? (j.leaseDeadline ? j.leaseDeadline - receivedAt : 30_000));
  }

  async #handle(j, receivedAt, batched) {
    const book = { receipt: j.receipt, lease: 30_000 };
    this.#running.set(j.id, book); // before the await below: a delivery meanwhile is not run twice
    const lease = book.lease = await this.#leaseOf(j, receivedAt);
    const keeper = setInterval(() => {
      this.client.touch(this.queue, book.receipt, { lease }).catch((e) => {
        if (!(e instanceof LeaseExpired || e instanceof NotFound)) this.errors++; // else settled meanwhile
      });
    }, lease / 3);
    let error = null;
    let returned;
    try {
      returned = await inConsumerSpan(this.queue, j, () => this.handler(j));
    } catch (e) {
      error = e;
    } finally {
      clearInterval(keeper);
      if (this.#running.get(j.id) === book) this.#running.delete(j.id);
    }
    const receipt = book.receipt; // the newest delivery of the job
    const [result, size] = error === null ? this.#resultOf(j, returned) : [undefined, 0];
    if (error === null && batched) { this.#ack({ job: j, receipt, result, size }); return; }
    if (error === null) { await this.#ackBatch([{ job: j, receipt, result, size }]); return; }
    try {
      const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      await this.client.nack(this.queue, receipt, { error: text.slice(0, 4000) });
      this.nacked++;
      if (this.onError) this.onError(j, error);
    } catch (e) {
      if (e instanceof LeaseExpired || e instanceof NotFound) return; // delivered again or deleted: not ours
      if (!(e instanceof DelayqError)) throw e;
      this.errors++; // unsettled: the lease runs out and the job is delivered again
    }
  }

  // A handler's return value as the job's result and its size: undefined when it returned none, or
  // one the server would refuse (not JSON, over 64 KiB), which counts in `errors` and goes to
  // onError; the job is acked without it (its work is done: a refused ack would only run it again).
  #resultOf(j, value) {
    if (value === undefined || value === null) return [undefined, 0];
    try {
      const size = Buffer.byteLength(JSON.stringify(jsonValue(value, 'the handler\'s result')), 'utf8');
      if (size > MAX_RESULT) throw new RangeError(`the result of job ${j.id} is ${size} bytes of JSON; at most ${MAX_RESULT} are kept`);
      return [value, size];
    } catch (e) {
      this.#resultRefused(j, e);
      return [undefined, 0];
    }
  }

  // A result that cannot be kept (here, or refused by the server): counted and given to onError;
  // the job is acked without it.
  #resultRefused(j, e) {
    this.errors++;
    if (this.onError) this.onError(j, e);
  }

  // Batched acks: the first starts a timer of ackDelay; what comes meanwhile goes in one request
  // (at most 1000 acks, and about MAX_ACK_BYTES of results: the server's body limit is 16 MiB).
  #ack(entry) {
    this.#acks.push(entry);
    if (!this.#ackTimer) this.#ackTimer = setTimeout(() => { this.#ackTimer = null; this.#flushAcks(); }, this.ackDelayMs);
  }

  #flushAcks() {
    if (this.#ackTimer) { clearTimeout(this.#ackTimer); this.#ackTimer = null; }
    while (this.#acks.length) {
      let n = 0;
      for (let bytes = 0; n < Math.min(1000, this.#acks.length); n++) {
        bytes += this.#acks[n].size;
        if (n > 0 && bytes > MAX_ACK_BYTES) break;
      }
      const batch = this.#acks.splice(0, n);
      this.#ackFlush = this.#ackFlush.then(() => this.#ackBatch(batch));
    }
    return this.#ackFlush;
  }

  // Acks {job, receipt, result, size} entries in one request. A request the server refuses for
  // its results (400: one it cannot keep, such as one nested too deep; 413: a body over its
  // --max-body) is split in halves, down to the ack whose result it refuses, which is reported and
  // acked without it: one job's result never costs the others their acks.
  async #ackBatch(entries) {
    try {
      const r = await this.client.ack(this.queue, entries.map((a) => (a.result === undefined ? a.receipt : [a.receipt, a.result])));
      this.acked += r.done;
      this.errors += r.failed.filter((f) => !(f.error instanceof LeaseExpired || f.error instanceof NotFound)).length;
    } catch (e) {
      if (!(e instanceof DelayqError)) throw e;
      if (!(e instanceof InvalidArgument) || entries.every((a) => a.result === undefined)) {
        this.errors++; // unsettled: the leases run out and the jobs are delivered again
      } else if (entries.length > 1) {
        const half = entries.length >> 1;
        await this.#ackBatch(entries.slice(0, half));
        await this.#ackBatch(entries.slice(half));
      } else {
        this.#resultRefused(entries[0].job, e);
        await this.#ackBatch([{ ...entries[0], result: undefined, size: 0 }]);
      }
    }
  }
}
