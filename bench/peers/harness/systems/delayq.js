// delayq over its HTTP API, on the embedded store, on Redis or on PostgreSQL.
// Producer: POST /v1/queues/bench/jobs with batches of 100 {"payload", "deliver_at"} (one job:
// the single-job body); on PostgreSQL with `producer: 'sql'`, the SQL API on the producer's own
// connection instead (docs/postgres.md): one statement of delayq.enqueue per batch, each its own
// transaction, as an application's would be.
// Consumer: one loop of POST .../reserve {"max":100,"wait_ms":1000,"lease_ms"} and one
// POST .../ack {"receipts":[...]} per batch, sent while the next reserve waits (keep-alive).
'use strict';

const http = require('http');
const path = require('path');
const servers = require('../servers');

const QUEUE = '/v1/queues/bench';

// undici (the HTTP client behind Node's fetch) rather than Node's http module: measured here it
// sends single-job requests at ~1.7x the rate of http.request on the same cores (25 000 against
// 15 000 a second, 16 connections, `--durability none`), so the figures are less the client's.
// undici comes from npm with the peers (scripts/bench-peers.sh runs `npm ci`); `make test`'s
// smoke run of this harness has no npm packages, so there the client is Node's own http module,
// and the result's `describe` says which client drove the run.
let undici = null;
try { undici = require('undici'); } catch (e) { if (e.code !== 'MODULE_NOT_FOUND') throw e; }
const CLIENT = undici ? `undici ${require('undici/package.json').version}` : 'node:http (undici not installed)';

function contentHeaders(method) {
  // delayq refuses a POST, PUT or PATCH that does not say JSON, body or not.
  return method === 'GET' || method === 'DELETE' ? {} : { 'content-type': 'application/json' };
}

function answer(method, urlPath, status, text) {
  if (status >= 300) throw new Error(`delayq ${method} ${urlPath} answered ${status}: ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : {};
}

function httpClient(port) {
  if (!undici) return nodeHttpClient(port);
  const pool = new undici.Pool(`http://127.0.0.1:${port}`, { connections: 16, pipelining: 1 });
  return async (method, urlPath, body) => {
    const res = await pool.request({
      path: urlPath, method, headers: contentHeaders(method),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return answer(method, urlPath, res.statusCode, await res.body.text());
  };
}

function nodeHttpClient(port) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  return (method, urlPath, body) => new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers = contentHeaders(method);
    if (data) headers['content-length'] = data.length;
    const req = http.request({ host: '127.0.0.1', port, path: urlPath, method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        try { resolve(answer(method, urlPath, res.statusCode, Buffer.concat(chunks).toString())); } catch (e) { reject(e); }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

// On the embedded store `durability` is delayq's --durability; on Redis the server's AOF
// setting (`appendfsync`, see servers.startRedis) is what makes a write durable.
function describeStore(store, durability, appendfsync) {
  if (store === 'postgres') return '--store postgres:// (PostgreSQL 15, synchronous_commit on)';
  if (store !== 'redis') return `--durability ${durability}`;
  return `--store redis:// (${appendfsync ? `redis-server with AOF, appendfsync ${appendfsync}` : 'redis-server without persistence'})`;
}

function variant({ store, durability, appendfsync, producer: producerKind = 'http', consumer: consumerKind = 'reserve' }) {
  const enqueueText = producerKind === 'sql' ? 'jobs enqueued by SELECT delayq.enqueue on the producer\'s pg connection, delivered' : 'over';
  return {
    describe: `delayq serve ${describeStore(store, durability, appendfsync)}, ${enqueueText} HTTP/1.1 keep-alive from ${CLIENT}`
      + (consumerKind === 'stream' ? '; consumers on push streams (window 1000, one ack in flight taking every receipt that came meanwhile)' : ''),

    async start(ctx) {
      const procs = [];
      let storeUrl;
      if (store === 'redis') {
        procs.push(await servers.startRedis(ctx.ports.redis, ctx.dir, appendfsync));
        storeUrl = `redis://127.0.0.1:${ctx.ports.redis}`;
      } else if (store === 'postgres') {
        procs.push(await servers.startPostgres(ctx.ports.postgres, ctx.dir));
        storeUrl = servers.postgresUrl(ctx.ports.postgres);
      }
      procs.push(await servers.startDelayq(ctx.delayqBin, ctx.ports.delayq, ctx.dir, storeUrl, durability));
      const state = {
        procs, pgPort: ctx.ports.postgres, dataDir: path.join(ctx.dir, 'data'),
        conn: { port: ctx.ports.delayq, redisPort: ctx.ports.redis, postgresUrl: servers.postgresUrl(ctx.ports.postgres) },
      };
      await httpClient(ctx.ports.delayq)('PUT', `${QUEUE}/config`, { lease_ms: 30000 });  // creates the queue
      if (store === 'redis') {
        const IORedis = require('ioredis');
        state.redis = new IORedis({ host: '127.0.0.1', port: ctx.ports.redis });
      }
      return state;
    },

    async stop(state) {
      if (state.redis) state.redis.disconnect();
      for (const p of state.procs.slice().reverse()) await servers.stopProcess(p);
    },

    // Bytes the servers hold: the delayq process's RSS, plus Redis's used_memory on Redis.
    async memoryBytes(state) {
      const delayq = state.procs[state.procs.length - 1];
      let bytes = servers.rssBytes(delayq.pid);
      if (state.redis) bytes += await servers.redisUsedMemory(state.redis);
      if (store === 'postgres') bytes += await servers.postgresBytes(state.pgPort);
      return bytes;
    },
    diskBytes(state) { return store ? null : servers.dirBytes(state.dataDir); },
    // PostgreSQL is a process per connection: no one figure is its peak, so none is given.
    peakServerBytes(state) { return store === 'postgres' ? null : state.procs.reduce((sum, p) => sum + servers.peakRssBytes(p.pid), 0); },

    // delayq's own view of lateness (delivered_at - due_at at the server), beside the
    // consumers' view: the difference is the HTTP response's trip into the consumer.
    async serverLateness(state) {
      const stats = await httpClient(state.conn.port)('GET', QUEUE);
      return stats.lateness_ms;
    },

    async producer(conn) {
      if (producerKind === 'sql') return sqlProducer(conn);
      const call = httpClient(conn.port);
      return {
        // One job is sent as a single-job request ({"payload", "deliver_at"}), more as a batch.
        async enqueue(jobs) {
          if (jobs.length === 1) {
            const res = await call('POST', `${QUEUE}/jobs`, { payload: jobs[0].payload, deliver_at: jobs[0].due });
            if (typeof res.id !== 'string') throw new Error(`delayq enqueue answered ${JSON.stringify(res).slice(0, 200)}`);
            return;
          }
          const res = await call('POST', `${QUEUE}/jobs`, { jobs: jobs.map((j) => ({ payload: j.payload, deliver_at: j.due })) });
          if (!res.jobs || res.jobs.length !== jobs.length) throw new Error(`delayq enqueue answered ${JSON.stringify(res).slice(0, 200)}`);
        },
        async close() {},
      };
    },

    async consume(conn, opts, onBatch, onReady) {
      if (consumerKind === 'stream') return streamConsume(conn, opts, onBatch, onReady);
      const call = httpClient(conn.port);
      await call('GET', QUEUE);
      onReady();
      // The next reserve goes out while the last batch's ack is on its way (one ack in flight).
      let acking = Promise.resolve();
      for (;;) {
        const res = await call('POST', `${QUEUE}/reserve`, { max: 100, wait_ms: 1000, lease_ms: opts.leaseMs });
        if (res.jobs.length === 0) continue;
        onBatch(res.jobs.map((j) => j.payload));
        await acking;
        acking = call('POST', `${QUEUE}/ack`, { receipts: res.jobs.map((j) => j.receipt) });
      }
    },
  };
}

// A push stream (docs/http-api.md, "Push delivery"): POST .../stream answers one JSON line per
// job as it comes due, at most 1000 unacknowledged; what a read of the connection brings is one
// batch, and its receipts are acked 2 ms later on a second connection, one ack in flight, the next
// taking every receipt that came meanwhile (as the clients' workers batch theirs).
async function streamConsume(conn, opts, onBatch, onReady) {
  const call = httpClient(conn.port);
  const body = Buffer.from(JSON.stringify({ max_in_flight: 1000, lease_ms: opts.leaseMs }));
  const res = await new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port: conn.port, path: `${QUEUE}/stream`, method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': body.length },
    }, resolve);
    req.on('error', reject);
    req.end(body);
  });
  if (res.statusCode !== 200) throw new Error(`delayq POST ${QUEUE}/stream answered ${res.statusCode}`);
  res.setEncoding('utf8');
  onReady();
  // One ack in flight; the next takes every receipt that came meanwhile (a chain of small acks
  // would fall behind the stream and fill its window).
  let receipts = [];
  let timer = null;
  let acking = false;
  const flush = async () => {
    timer = null;
    if (acking) return;
    acking = true;
    while (receipts.length) {
      const batch = receipts;
      receipts = [];
      await call('POST', `${QUEUE}/ack`, { receipts: batch });
    }
    acking = false;
  };
  let failed = null;
  const fail = (e) => { failed = e; res.destroy(e); };
  let rest = '';
  for await (const chunk of res) {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop();
    const payloads = [];
    for (const line of lines) {
      if (!line) continue;
      const m = JSON.parse(line);
      if (m.error) throw new Error(`delayq stream ended: ${JSON.stringify(m.error)}`);
      if (m.receipt === undefined) continue;  // a heartbeat
      payloads.push(m.payload);
      receipts.push(m.receipt);
    }
    if (payloads.length) onBatch(payloads);
    if (receipts.length && !timer && !acking) timer = setTimeout(() => flush().catch(fail), 2);
  }
  throw failed || new Error('delayq stream ended without an error line');
}

// The SQL API on a connection of the producer's own: a batch is one statement (one transaction),
// one job the single-job call, as docs/postgres.md shows them.
async function sqlProducer(conn) {
  const pg = require('pg');
  const client = new pg.Client({ connectionString: conn.postgresUrl });
  await client.connect();
  return {
    async enqueue(jobs) {
      if (jobs.length === 1) {
        await client.query("SELECT id FROM delayq.enqueue('bench', $1::json, deliver_at => to_timestamp($2::float8 / 1000))",
          [JSON.stringify(jobs[0].payload), jobs[0].due]);
        return;
      }
      const r = await client.query(
        `SELECT count(*) AS n FROM unnest($1::text[], $2::float8[]) AS j(p, d),
           LATERAL delayq.enqueue('bench', to_json(j.p), deliver_at => to_timestamp(j.d / 1000))`,
        [jobs.map((j) => j.payload), jobs.map((j) => j.due)]);
      if (Number(r.rows[0].n) !== jobs.length) throw new Error(`delayq.enqueue took ${r.rows[0].n} of ${jobs.length} jobs`);
    },
    close: () => client.end(),
  };
}

module.exports = { variant };
