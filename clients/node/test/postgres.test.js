// delayq/postgres: enqueue and cancel in the application's own `pg` transaction, against a real
// PostgreSQL 15 (started here, as the postgres user when the tests run as root) and a delayq server
// on it. `pg` comes from the tests' npm cache (scripts/openapi-tools.sh: DELAYQ_OPENAPI_TOOLS).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, chownSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { Client } from '../src/index.js';
import { enqueueIn, cancelIn, rescheduleIn } from '../src/postgres.js';
import { startServer } from './server.js';

const pg = createRequire(join(process.env.DELAYQ_OPENAPI_TOOLS, 'noop.js'))('pg');
const PG_BIN = '/usr/lib/postgresql/15/bin';

function asServerUser(args) {
  if (process.getuid() !== 0) return args;
  const uid = execFileSync('id', ['-u', 'postgres']).toString().trim();
  const gid = execFileSync('id', ['-g', 'postgres']).toString().trim();
  return ['setpriv', `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--', ...args];
}

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

let root, postgres, url, server;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'delayq-node-pg-'));
  if (process.getuid() === 0) {
    chownSync(root, Number(execFileSync('id', ['-u', 'postgres'])), Number(execFileSync('id', ['-g', 'postgres'])));
  }
  const [cmd, ...args] = asServerUser([`${PG_BIN}/initdb`, '-D', join(root, 'data'), '-A', 'trust', '-U', 'postgres',
    '--no-sync']);
  execFileSync(cmd, args, { stdio: 'ignore' });
  const port = await freePort();
  const [pcmd, ...pargs] = asServerUser([`${PG_BIN}/postgres`, '-D', join(root, 'data'), '-p', String(port), '-k', root,
    '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off']);
  postgres = spawn(pcmd, pargs, { stdio: 'ignore' });
  for (let i = 0; i < 500; i++) { // asks the server, not a clock
    try { execFileSync(`${PG_BIN}/pg_isready`, ['-h', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' }); break; } catch {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  server = await startServer(['--store', url]);
});

after(async () => {
  await server?.stop();
  postgres?.kill('SIGTERM');
  await new Promise((r) => postgres?.once('exit', r));
  rmSync(root, { recursive: true, force: true });
});

test('the order and its timeout commit together; a rollback leaves neither', async () => {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  await db.query('CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, state text)');
  await db.query('BEGIN');
  await db.query("INSERT INTO orders VALUES (1, 'unpaid')");
  const kept = await enqueueIn(db, 'timeouts', { orderId: 1 }, { key: 'order-1' });
  await db.query('COMMIT');
  await db.query('BEGIN');
  await enqueueIn(db, 'timeouts', { orderId: 2 }, { key: 'order-2' });
  await db.query('ROLLBACK');
  assert.equal(kept.id.length, 26);
  assert.equal(kept.duplicate, false);
  const c = new Client(server.url);
  const jobs = await c.reserve('timeouts', { max: 10, wait: '2s' });
  assert.deepEqual(jobs.map((j) => j.payload), [{ orderId: 1 }]);
  await c.ack('timeouts', jobs[0].receipt);
  await db.end();
});

test('paying cancels the timeout in the same transaction', async () => {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  await enqueueIn(db, 'timeouts', { orderId: 3 }, { delay: '1h', key: 'order-3' });
  await db.query('BEGIN');
  assert.ok(await rescheduleIn(db, 'timeouts', 'order-3', { delay: '2h' }) > 0);
  assert.equal(await cancelIn(db, 'timeouts', 'order-3'), true);
  await db.query('COMMIT');
  assert.equal(await cancelIn(db, 'timeouts', 'order-3'), false);
  await assert.rejects(enqueueIn(db, 'timeouts', {}, { priority: 12 }),
    (e) => e.code === '22023' && e.message.startsWith('priority is 12'));
  await db.end();
});
test('the trace context goes with a job enqueued in the transaction; a malformed one is refused', async () => {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const parent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const made = await enqueueIn(db, 'traced', { orderId: 5 }, { traceparent: parent, tracestate: 'rojo=1' });
  await assert.rejects(enqueueIn(db, 'traced', {}, { traceparent: '00-nope-01' }),
    (e) => e.code === '22023' && e.message.startsWith('traceparent is'));
  const job = await new Client(server.url).get('traced', made.id);
  assert.deepEqual([job.traceparent, job.tracestate], [parent, 'rojo=1']);
  await db.end();
});
