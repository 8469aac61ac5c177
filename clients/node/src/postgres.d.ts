// Types of delayq/postgres (src/postgres.js): the SQL API on the application's own connection.
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}
export interface EnqueueInOptions {
  /** "30m", "1h", or a number of milliseconds. */
  delay?: string | number;
  deliverAt?: Date;
  key?: string;
  maxAttempts?: number;
  headers?: Record<string, string>;
  priority?: number;
  group?: string;
  onKey?: 'dedupe' | 'replace' | 'debounce';
  /** The producer's W3C Trace Context; by default the active span's, with @opentelemetry/api in the application. */
  traceparent?: string;
  tracestate?: string;
}
export function enqueueIn(db: Queryable, queue: string, payload: unknown, options?: EnqueueInOptions):
  Promise<{ id: string; dueAtMs: number; duplicate: boolean }>;
export function cancelIn(db: Queryable, queue: string, key: string): Promise<boolean>;
export function cancelJobIn(db: Queryable, queue: string, id: string): Promise<boolean>;
export function rescheduleIn(db: Queryable, queue: string, key: string,
  options?: { delay?: string | number; deliverAt?: Date }): Promise<number | null>;
