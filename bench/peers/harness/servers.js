// Starting and stopping the servers a system runs on (redis-server, beanstalkd, delayq serve),
// each on a loopback port in a fresh directory, and reading their memory from /proc.
'use strict';

const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const path = require('path');
const { sleep } = require('./lib');

function portOpen(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => { s.destroy(); resolve(true); });
    s.on('error', () => resolve(false));
  });
}

async function waitPort(port, what, child, logPath) {
  for (let i = 0; i < 300; ++i) {
    if (child.exitCode !== null) break;
    if (await portOpen(port)) return;
    await sleep(50);
  }
  const log = fs.existsSync(logPath) ? fs.readFileSync(logPath, 'utf8').slice(-2000) : '';
  throw new Error(`${what} did not start listening on 127.0.0.1:${port}; its log:\n${log}`);
}

// Starts `cmd args` with output in dir/name.log; resolves once `port` accepts connections.
async function startProcess(name, cmd, args, port, dir) {
  const logPath = path.join(dir, `${name}.log`);
  const log = fs.openSync(logPath, 'a');
  const child = spawn(cmd, args, { stdio: ['ignore', log, log], cwd: dir });
  fs.closeSync(log);
  child.on('error', (e) => { child.spawnError = e; });
  await waitPort(port, `${name} (${cmd} ${args.join(' ')})`, child, logPath);
  return { name, child, pid: child.pid, port };
}

async function stopProcess(proc) {
  if (!proc || proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const exited = new Promise((resolve) => proc.child.once('exit', resolve));
  proc.child.kill('SIGTERM');
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 10000);
  await exited;
  clearTimeout(timer);
}

function procStatusKb(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch (e) {
    return null;
  }
}
const rssBytes = (pid) => procStatusKb(pid, 'VmRSS');
const peakRssBytes = (pid) => procStatusKb(pid, 'VmHWM');

// CPU seconds (user + system) a server has used: its process and every process under it (a
// PostgreSQL backend per connection), with the children it has already reaped (cutime, cstime).
// A child's time is either under a live descendant or in its reaper's c-times, never both.
const CLK_TCK = Number(require('child_process').execFileSync('getconf', ['CLK_TCK']).toString().trim());
function treeCpuSeconds(rootPid) {
  const stats = new Map();  // pid -> [ppid, ticks]
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let text;
    try { text = fs.readFileSync(`/proc/${name}/stat`, 'utf8'); } catch { continue; }  // gone meanwhile
    // Fields after the command (which may hold spaces) in parentheses: state ppid ... utime(14)
    // stime(15) cutime(16) cstime(17), counted from the pid as field 1.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    stats.set(Number(name), [Number(f[1]), Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])]);
  }
  let ticks = 0;
  const todo = [rootPid];
  while (todo.length) {
    const pid = todo.pop();
    ticks += stats.get(pid)?.[1] ?? 0;
    for (const [child, [ppid]] of stats) if (ppid === pid) todo.push(child);
  }
  return ticks / CLK_TCK;
}

function dirBytes(dir) {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += dirBytes(p);
    else if (e.isFile()) total += fs.statSync(p).size;
  }
  return total;
}

// appendfsync: undefined (no AOF, no snapshots), 'everysec' or 'always' (AOF, fsync per write).
const startRedis = (port, dir, appendfsync) => startProcess('redis', 'redis-server', [
  '--port', String(port), '--bind', '127.0.0.1', '--save', '',
  ...(appendfsync ? ['--appendonly', 'yes', '--appendfsync', appendfsync] : ['--appendonly', 'no']),
  '--dir', dir, '--daemonize', 'no'], port, dir);

// fsyncMs: undefined (no binlog), or the binlog's fsync interval (-f; 0 = fsync every write).
const startBeanstalkd = (port, dir, fsyncMs) => {
  const args = ['-l', '127.0.0.1', '-p', String(port)];
  if (fsyncMs !== undefined) {
    fs.mkdirSync(path.join(dir, 'binlog'), { recursive: true });
    args.push('-b', path.join(dir, 'binlog'), '-f', String(fsyncMs));
  }
  return startProcess('beanstalkd', 'beanstalkd', args, port, dir);
};

const startDelayq = (bin, port, dir, store, durability) => {
  const args = ['serve', '--listen', `127.0.0.1:${port}`, '--data', path.join(dir, 'data')];
  if (store) args.push('--store', store);
  if (durability) args.push('--durability', durability);
  return startProcess('delayq', bin, args, port, dir);
};

// PostgreSQL 15 (Debian postgresql-15) in DIR/pg on a loopback port, with the crash-safety
// settings it ships with (fsync on, synchronous_commit on: a commit is on disk when it is
// acknowledged), trust authentication for the superuser `postgres`, and room for the peers'
// connection pools. initdb refuses root: as root both run as the `postgres` user, via setpriv,
// which execs (a signal to the child is a signal to the server).
const PG_BIN = '/usr/lib/postgresql/15/bin';
function asServerUser(cmd, args, dir) {
  if (process.getuid() !== 0) return [cmd, args];
  const { execFileSync } = require('child_process');
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  fs.chmodSync(dir, 0o711);  // mkdtemp's 0700 would keep the server user out
  fs.chownSync(path.join(dir, 'pg'), uid, gid);
  return ['setpriv', ['--reuid', String(uid), '--regid', String(gid), '--clear-groups', cmd, ...args]];
}
async function startPostgres(port, dir) {
  const home = path.join(dir, 'pg');
  fs.mkdirSync(home, { recursive: true });
  const data = path.join(home, 'data');
  const { execFileSync } = require('child_process');
  const [initCmd, initArgs] = asServerUser(`${PG_BIN}/initdb`,
    ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '--encoding=UTF8', '--locale=C'], dir);
  execFileSync(initCmd, initArgs, { stdio: ['ignore', 'ignore', 'pipe'] });
  const [cmd, args] = asServerUser(`${PG_BIN}/postgres`, ['-D', data, '-p', String(port), '-k', home,
    '-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300'], dir);
  const proc = await startProcess('postgres', cmd, args, port, dir);
  // The port opens before the server accepts sessions ("the database system is starting up"):
  // a delayq started then refused to start, once in a run of make bench-peers.
  for (let i = 0; i < 300; ++i) {
    try {
      execFileSync(`${PG_BIN}/pg_isready`, ['-q', '-h', '127.0.0.1', '-p', String(port)]);
      return proc;
    } catch { await sleep(50); }
  }
  throw new Error(`PostgreSQL on 127.0.0.1:${port} listens but did not accept sessions within 15 s (pg_isready)`);
}
const postgresUrl = (port) => `postgres://postgres@127.0.0.1:${port}/postgres`;

// Bytes of the database's files (tables, indexes, TOAST): what a job costs on disk.
async function postgresBytes(port) {
  const pg = require('pg');
  const c = new pg.Client({ connectionString: postgresUrl(port) });
  await c.connect();
  try {
    const r = await c.query('SELECT pg_database_size(current_database()) AS b');
    return Number(r.rows[0].b);
  } finally { await c.end(); }
}

async function redisUsedMemory(redis) {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

module.exports = {
  startRedis, startBeanstalkd, startDelayq, startPostgres, postgresUrl, postgresBytes, startProcess, stopProcess,
  rssBytes, peakRssBytes, treeCpuSeconds, dirBytes, redisUsedMemory,
};
