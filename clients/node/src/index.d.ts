// Types of delayq for Node (src/index.js).

/** "250ms", "1.5s", "1h30m", "7d" (units ms s m h d), or milliseconds. */
export type Duration = string | number;
/** Epoch milliseconds, an RFC 3339 string, or a Date. */
export type Timestamp = number | string | Date;

export class DelayqError extends Error {
  /** The server's error code: "invalid_argument", "not_found", "lease_expired", ... */
  code: string;
  /** The HTTP status, when there was an answer. */
  status?: number;
  constructor(message: string, code?: string, status?: number);
}
export class InvalidArgument extends DelayqError {}
export class TooLarge extends InvalidArgument {}
export class Unauthorized extends DelayqError {}
export class Forbidden extends DelayqError {}
export class NotFound extends DelayqError {}
export class Conflict extends DelayqError {}
export class LeaseExpired extends Conflict {}
export class Overloaded extends DelayqError {}
export class Unavailable extends DelayqError {}
/** The states a wait for an outcome ends on. */
export const FINAL_STATES: readonly ['completed', 'dead', 'cancelled'];

export function errorFor(status: number, code: string | null | undefined, message: string): DelayqError;
export function toMs(value: Duration, what?: string): number;

export interface JobOptions {
  delay?: Duration;
  delayMs?: number;
  deliverAt?: Timestamp;
  /** A live job with this key makes the enqueue a duplicate (answered with that job). */
  key?: string;
  headers?: Record<string, string>;
  maxAttempts?: number;
  /** With a key naming a scheduled or ready job: rewrite it instead. */
  replace?: boolean;
  /** With a key naming a scheduled or ready job: rewrite it and push it back (never earlier). */
  debounce?: boolean;
  /** Keep the key taken this long after the job is acked or cancelled (a retried enqueue then is a duplicate). */
  keyTtl?: Duration;
  /** 0..9, higher first within its group (default 0). */
  priority?: number;
  /** A tenant: reserves take the groups in turn (at most 128 bytes). */
  group?: string;
  /**
   * The producer's W3C Trace Context (00-<trace id>-<span id>-<flags>). By default, with
   * `@opentelemetry/api` in the application, the active span's context goes with the enqueue.
   */
  traceparent?: string;
  tracestate?: string;
}
/** A recurring schedule: exactly one of cron and every. */
export interface ScheduleOptions {
  cron?: string;
  every?: Duration;
  /** IANA time zone of cron; default UTC. */
  timezone?: string;
  payload?: unknown;
  headers?: Record<string, string>;
  maxAttempts?: number;
  /** Each run's priority, 0..9 (higher first within its group). */
  priority?: number;
  /** Each run's group (a tenant): reserves take the groups in turn. */
  group?: string;
  misfire?: 'skip' | 'run_once' | 'run_all';
  startAt?: Timestamp;
  endAt?: Timestamp;
}
export type JobState = 'scheduled' | 'ready' | 'reserved' | 'dead';
export interface JobPage {
  jobs: JobInfo[];
  /** null on the last page. */
  nextCursor: string | null;
}
export interface WireJob {
  payload?: unknown;
  payload_base64?: string;
  delay?: string;
  delay_ms?: number;
  deliver_at?: number | string;
  key?: string;
  headers?: Record<string, string>;
  max_attempts?: number;
  replace?: boolean;
  debounce?: boolean;
  key_ttl_ms?: number;
  priority?: number;
  group?: string;
  traceparent?: string;
  tracestate?: string;
}
export function jobBody(payload: unknown, opts?: JobOptions): WireJob;
/**
 * The OpenTelemetry API the client traces with (`import * as api from '@opentelemetry/api'`), or
 * null to trace nothing. By default it finds the application's own `@opentelemetry/api`.
 */
export function useOpenTelemetry(api: unknown | null): void;

export interface EnqueueResult {
  id: string;
  /** Epoch milliseconds. */
  dueAt: number;
  duplicate: boolean;
  replaced: boolean;
}
/** A delivery, as reserve hands it out; settle it with ack, nack or touch and its receipt. */
export interface Job {
  id: string;
  receipt: string;
  /** The JSON value enqueued; a Buffer for a binary payload. */
  payload: any;
  attempt: number;
  dueAt: number;
  key: string | null;
  headers: Record<string, string>;
  maxAttempts: number;
  leaseDeadline: number;
  priority: number;
  group: string | null;
  /** The producer's W3C Trace Context; the Worker links the handler's span to it. */
  traceparent: string | null;
  tracestate: string | null;
}
export interface JobInfo {
  id: string;
  queue: string;
  /** 'cancelled' only in the answer of a wait (Client.wait): the job as a cancel deleted it. */
  state: 'scheduled' | 'ready' | 'reserved' | 'dead' | 'completed' | 'cancelled';
  dueAt: number;
  attempt: number;
  maxAttempts: number;
  payload: any;
  key: string | null;
  headers: Record<string, string>;
  createdAt: number;
  lastError: string | null;
  leaseDeadline: number | null;
  deadAt: number | null;
  priority: number;
  group: string | null;
  traceparent: string | null;
  tracestate: string | null;
  /** While reserved: its delivery's last progress (Client.touch); else null. */
  progress: unknown;
  /** When completed (kept by the queue's keep_completed_ms): when it was acked; else null. */
  completedAt: number | null;
  /** When completed: the result its ack carried (Client.ack), or its handler returned; else null. */
  result: unknown;
}
export interface BatchResult {
  done: number;
  failed: { receipt: string; error: DelayqError }[];
}
export type JobRef = string | { id: string } | { key: string };

export interface ClientOptions {
  token?: string;
  /** For connecting and each answer; a waiting reserve gets its wait on top. */
  timeoutMs?: number;
  /** https:// only: trust the CAs in this PEM file (or `ca`, PEM text) instead of the system's. */
  caFile?: string;
  ca?: string | Buffer;
  /** https:// only: a client certificate and its key (PEM), for a server started with --tls-client-ca. */
  certFile?: string;
  keyFile?: string;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** https:// only: the name the server's certificate must carry, when it is not the URL's host. */
  serverName?: string;
}

export class Client {
  readonly url: string;
  constructor(url?: string, options?: ClientOptions);
  /** Closes the kept-alive connections (a process exits without it too). */
  close(): void;
  enqueue(queue: string, payload: unknown, opts?: JobOptions): Promise<EnqueueResult>;
  enqueueBatch(queue: string, jobs: WireJob[]): Promise<EnqueueResult[]>;
  get(queue: string, ref: JobRef): Promise<JobInfo>;
  /** Waits for the job's outcome (completed with its result, dead or cancelled), or until `timeout`
   *  (default 60 s) ends: the job as it then is. Asked again over a server restart (503). */
  wait(queue: string, ref: JobRef | { id: string }, opts?: { timeout?: Duration }): Promise<JobInfo>;
  cancel(queue: string, ref: JobRef): Promise<boolean>;
  reschedule(queue: string, ref: JobRef, when: { delay?: Duration; delayMs?: number; deliverAt?: Timestamp }): Promise<JobInfo>;
  reserve(queue: string, opts?: { max?: number; wait?: Duration; lease?: Duration }): Promise<Job[]>;
  /** A push stream on a connection of its own: each job as it comes due, at most maxInFlight
   *  (1..1000, default 100) unacknowledged; NotFound from a server without streams. */
  stream(queue: string, opts?: { maxInFlight?: number; lease?: Duration; maxBytes?: number }): Promise<JobStream>;
  /** Gives back deliveries that never reached a handler: ready again, no attempt used. */
  release(queue: string, receipt: string): Promise<number>;
  release(queue: string, receipts: string[]): Promise<BatchResult>;
  /** `result` (any JSON value, at most 64 KiB) is kept with the job while its queue keeps completed jobs. */
  ack(queue: string, receipt: string, opts?: { result?: unknown }): Promise<number>;
  /** A batch; an item may be a [receipt, result] pair, with its own result. */
  ack(queue: string, receipts: Array<string | [string, unknown]>, opts?: { result?: unknown }): Promise<BatchResult>;
  nack(queue: string, receipt: string, opts?: { retryIn?: Duration; error?: string; dead?: boolean }): Promise<{ state: 'scheduled' | 'dead'; dueAt: number }>;
  nack(queue: string, receipts: string[], opts?: { retryIn?: Duration; error?: string; dead?: boolean }): Promise<BatchResult>;
  /** `progress`: any JSON value up to 4 KiB, shown on the job (JobInfo.progress) while this
   *  delivery holds it; absent or null keeps the last one. */
  touch(queue: string, receipt: string, opts?: { lease?: Duration; progress?: unknown }): Promise<number>;
  touch(queue: string, receipts: string[], opts?: { lease?: Duration; progress?: unknown }): Promise<BatchResult>;
  stats(queue: string): Promise<Record<string, any>>;
  queues(): Promise<Record<string, any>[]>;
  config(queue: string): Promise<Record<string, any>>;
  /** The fields to change, camelCase ({ maxAttempts, backoff: { baseMs } }) or as the wire spells them;
   *  answers the whole config as the wire spells it (docs/http-api.md), as config() and stats() do. */
  setConfig(queue: string, fields: Record<string, unknown>): Promise<Record<string, any>>;
  pause(queue: string): Promise<void>;
  resume(queue: string): Promise<void>;
  putSchedule(queue: string, name: string, spec: ScheduleOptions): Promise<Record<string, any>>;
  schedule(queue: string, name: string): Promise<Record<string, any>>;
  schedules(queue: string): Promise<Record<string, any>[]>;
  deleteSchedule(queue: string, name: string): Promise<void>;
  pauseSchedule(queue: string, name: string): Promise<Record<string, any>>;
  resumeSchedule(queue: string, name: string): Promise<Record<string, any>>;
  dead(queue: string, opts?: { limit?: number }): Promise<JobInfo[]>;
  jobs(queue: string, state: JobState, opts?: { limit?: number; cursor?: string }): Promise<JobPage>;
  iterJobs(queue: string, state: JobState, opts?: { pageSize?: number }): AsyncGenerator<JobInfo>;
  replay(queue: string, ids?: string[]): Promise<number>;
  purge(queue: string): Promise<number>;
  version(): Promise<{ version: string; commit: string; store: string; durability: string }>;
}

/** Iterate with for await; an error line, a broken or quiet stream throw (Unavailable). */
export interface JobStream extends AsyncIterable<Job> {
  /** Heartbeat lines read so far. */
  heartbeats: number;
  /** Ends it: its unacknowledged deliveries are ready again, no attempt used. */
  close(): void;
}

export interface WorkerOptions {
  /** Handlers running at once. */
  concurrency?: number;
  /** Lease per job (default: the queue's), kept alive while the handler runs. */
  lease?: Duration;
  /** Long-poll wait per reserve (without a stream). */
  wait?: Duration;
  /** Stop on SIGTERM and SIGINT (default true). */
  signals?: boolean;
  onError?: (job: Job, error: unknown) => void;
  /** Jobs by a push stream (default true); false, or a server without streams: long-polled reserves. */
  stream?: boolean;
  /** Stream deliveries taken ahead of a free handler (default: concurrency). */
  prefetch?: number;
  /** Acks of a stream's jobs go in one request per this long at most (default 2ms). */
  ackDelay?: Duration;
}

export class Worker {
  /** Jobs whose handler returned and whose ack was taken. */
  acked: number;
  /** Jobs whose handler threw and whose nack was taken (it retries or goes dead). */
  nacked: number;
  /** Calls to the server that failed (a reserve, touch, ack or nack answered with an error or not at all);
   *  a handler's own error is counted in `nacked`, not here. */
  errors: number;
  /** Deliveries of a job whose handler was running here (a broken stream gave it back), settled by
   *  that handler rather than run again. */
  redelivered: number;
  readonly stopping: boolean;
  /** How jobs come now: 'reserve' with stream: false or after a server without streams. */
  readonly delivery: 'stream' | 'reserve';
  /** What `handler` returns (resolves to), when not undefined or null, is the job's result (Client.ack). */
  constructor(client: Client, queue: string, handler: (job: Job) => unknown | Promise<unknown>, options?: WorkerOptions);
  /** Resolves after stop() (or a signal), once the running handlers are settled. */
  run(): Promise<void>;
  stop(): void;
  /** From a handler: reports its progress with `job` (any JSON value up to 4 KiB), touching its lease. */
  progress(job: Job, value: unknown): Promise<void>;
}
