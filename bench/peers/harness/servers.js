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

async function redisUsedMemory(redis) {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

module.exports = {
  startRedis, startBeanstalkd, startDelayq, startProcess, stopProcess,
  rssBytes, peakRssBytes, dirBytes, redisUsedMemory,
};
