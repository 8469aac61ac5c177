// The client over HTTPS: a CA file, a client certificate for a server that asks for one
// (serve --tls-client-ca), a server name other than the URL's host, big answers, and TLS
// options that cannot work refused before anything is sent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { inspect } from 'node:util';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Unavailable, Worker } from '../src/index.js';
import { startServer } from './server.js';

let dir;
const cert = (who) => join(dir, `${who}.pem`);
const key = (who) => join(dir, `${who}.key`);
const openssl = (...args) => execFileSync('openssl', args, { stdio: 'pipe' });
function sign(who, subject, san) {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', key(who), '-out', join(dir, `${who}.csr`));
  const args = ['x509', '-req', '-in', join(dir, `${who}.csr`), '-CA', cert('ca'), '-CAkey', key('ca'), '-CAcreateserial',
    '-days', '2', '-out', cert(who)];
  if (san) { writeFileSync(join(dir, `${who}.ext`), `${san}\n`); args.push('-extfile', join(dir, `${who}.ext`)); }
  openssl(...args);
}

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'delayq-node-tls-'));
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=delayq-test-ca', '-keyout', key('ca'), '-out', cert('ca'));
  sign('server', '/CN=127.0.0.1', 'subjectAltName=IP:127.0.0.1');
  sign('named', '/CN=delayq.test', 'subjectAltName=DNS:delayq.test');
  sign('client', '/CN=delayq-client', null);
});
after(() => rmSync(dir, { recursive: true, force: true }));

test('mutual TLS lets in only a client with a certificate the CA signed; big answers arrive whole', async () => {
  const server = await startServer(['--tls-cert', cert('server'), '--tls-key', key('server'), '--tls-client-ca', cert('ca')]);
  const url = `https://127.0.0.1:${server.port}`;
  try {
    const c = new Client(url, { caFile: cert('ca'), certFile: cert('client'), keyFile: key('client') });
    const first = await c.enqueue('mtls', { n: 1 });
    const big = 'x'.repeat(50_000);
    await c.enqueueBatch('mtls', Array.from({ length: 8 }, () => ({ payload: big })));
    const got = await c.reserve('mtls', { max: 9 });
    assert.equal(got[0].id, first.id);
    assert.deepEqual(got.slice(1).map((j) => j.payload.length), Array(8).fill(50_000));
    const without = new Client(url, { caFile: cert('ca') });
    // The refusal's alert says so; on a loaded machine the close may come first.
    await assert.rejects(without.enqueue('mtls', { n: 2 }), (e) => e instanceof Unavailable && /refused this client's certificate|ECONNRESET|socket hang up|EPIPE/.test(e.message));
    // Node resumes TLS sessions on new connections: 50 at once after the first all get in.
    const many = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => c.get('mtls', first.id)));
    assert.deepEqual(many.filter((r) => r.status === 'rejected').map((r) => r.reason.message), []);
    const untrusting = new Client(url, { certFile: cert('client'), keyFile: key('client') });
    await assert.rejects(untrusting.enqueue('mtls', { n: 3 }), Unavailable);
    assert.equal((await c.stats('mtls')).reserved, 9);
    c.close();
  } finally {
    await server.stop();
  }
});

test('a server name other than the host is what the certificate is checked against', async () => {
  const server = await startServer(['--tls-cert', cert('named'), '--tls-key', key('named')]);
  const url = `https://127.0.0.1:${server.port}`;
  try {
    await assert.rejects(new Client(url, { caFile: cert('ca') }).version(), Unavailable);
    const named = new Client(url, { caFile: cert('ca'), serverName: 'delayq.test' });
    assert.ok((await named.version()).version);
    await assert.rejects(new Client(url, { caFile: cert('ca'), serverName: 'other.test' }).version(), Unavailable);
  } finally {
    await server.stop();
  }
});

test('TLS options that cannot work are refused at once', () => {
  assert.throws(() => new Client('http://127.0.0.1:1', { caFile: cert('ca') }), /https:\/\/ URL/);
  assert.throws(() => new Client('https://127.0.0.1:1', { keyFile: key('client') }), /without certFile/);
  assert.throws(() => new Client('https://127.0.0.1:1', { caFile: join(dir, 'missing.pem') }), /cannot read caFile/);
  assert.throws(() => new Client('https://127.0.0.1:1', { caFile: key('ca') }), /holds no PEM certificate/);
  assert.throws(() => new Client('https://127.0.0.1:1', { certFile: cert('client'), keyFile: key('server') }), /cannot use certFile ".*client.pem" with keyFile ".*server.key"/);
  assert.throws(() => new Client('https://127.0.0.1:1', { certFile: cert('client') }), /holds no private key: give keyFile/);
  assert.throws(() => new Client('https://127.0.0.1:1', { cafile: cert('ca') }), /unknown option "cafile"/);
  assert.throws(() => new Client('https://user:pw@127.0.0.1:1'), /user name or password/);
  const c = new Client('https://127.0.0.1:1', { token: 'SECRET-TOKEN', caFile: cert('ca') });
  assert.ok(!inspect(c).includes('SECRET-TOKEN'), 'the token is not shown by console.log');
});

test('a worker streams over mutual TLS with big jobs, and stops', async () => {
  const server = await startServer(['--tls-cert', cert('server'), '--tls-key', key('server'), '--tls-client-ca', cert('ca')]);
  try {
    const c = new Client(`https://127.0.0.1:${server.port}`, { caFile: cert('ca'), certFile: cert('client'), keyFile: key('client') });
    const big = 'y'.repeat(200_000); // a stream line of many TLS records
    await c.enqueueBatch('tls-stream', Array.from({ length: 20 }, (_, n) => ({ payload: { n, big } })));
    const seen = [];
    const worker = new Worker(c, 'tls-stream', async (job) => {
      assert.equal(job.payload.big, big);
      seen.push(job.payload.n);
      if (seen.length === 20) worker.stop();
    }, { concurrency: 2, signals: false });
    await worker.run();
    assert.equal(worker.delivery, 'stream');
    assert.deepEqual(seen.sort((a, b) => a - b), Array.from({ length: 20 }, (_, n) => n));
    const st = await c.stats('tls-stream');
    assert.deepEqual([st.counters.acked, st.reserved], [20, 0]);
    c.close();
  } finally {
    await server.stop();
  }
});
