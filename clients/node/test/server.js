// A real `delayq serve` for a test, on a free loopback port, in a temporary data directory.
// The binary is $DELAYQ_BIN, or build/delayq of this repository.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const here = dirname(fileURLToPath(import.meta.url));
export const BIN = process.env.DELAYQ_BIN || join(here, '..', '..', '..', 'build', 'delayq');

export async function startServer(extra = [], dir = mkdtempSync(join(tmpdir(), 'delayq-node-'))) {
  const server = { dir, port: 0, log: [] };
  server.start = () => new Promise((resolve, reject) => {
    const child = spawn(BIN, ['serve', '--listen', `127.0.0.1:${server.port}`, '--data', join(dir, 'data'), ...extra],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    server.child = child;
    child.stderr.on('data', (d) => server.log.push(String(d)));
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      server.log.push(line);
      const m = /delayq serving https?:\/\/127\.0\.0\.1:(\d+)/.exec(line);
      if (m) { server.port = Number(m[1]); server.url = `http://127.0.0.1:${server.port}`; resolve(server); }
    });
    child.on('exit', (code) => reject(new Error(`delayq serve exited ${code}: ${server.log.join('')}`)));
  });
  server.kill = () => new Promise((resolve) => { server.child.once('exit', resolve); server.child.kill('SIGKILL'); });
  server.stop = () => new Promise((resolve) => {
    if (server.child.exitCode !== null) { rmSync(dir, { recursive: true, force: true }); resolve(); return; }
    server.child.once('exit', () => { rmSync(dir, { recursive: true, force: true }); resolve(); });
    server.child.kill('SIGTERM');
  });
  await server.start();
  return server;
}
