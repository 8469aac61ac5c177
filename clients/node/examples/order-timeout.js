// The order-timeout story: cancel an unpaid order 30 minutes after it was placed (here: 1 s).
//   npm install /path/to/delayq/clients/node && node order-timeout.js [http://127.0.0.1:7070]
// A key makes placing the same order twice harmless; a worker acks what it handles; a poison
// job fails every attempt, goes dead, and is replayed once it is fixed.
import { Client, Worker } from 'delayq';

const c = new Client(process.argv[2] ?? 'http://127.0.0.1:7070');
await c.setConfig('orders', { max_attempts: 2, backoff: { base_ms: 100, jitter: 0 } });

const first = await c.enqueue('orders', { orderId: 42 }, { delay: '1s', key: 'order-42' });
const again = await c.enqueue('orders', { orderId: 42 }, { delay: '1s', key: 'order-42' });
console.log('enqueued', first.id, 'duplicate:', again.duplicate);
await c.enqueue('orders', { orderId: 'not-a-number' }, { key: 'order-bad' });

let fixed = false;
const worker = new Worker(c, 'orders', async (job) => {
  const order = job.payload.orderId;
  if (typeof order !== 'number' && !fixed) throw new Error(`order id "${order}" is not a number`);
  console.log('cancelled unpaid order', order, 'on attempt', job.attempt);
}, { concurrency: 4 });
const running = worker.run();

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (let s = await c.stats('orders'); !(s.counters.acked >= 1 && s.dead === 1); s = await c.stats('orders')) await sleep(100);
for (const j of await c.dead('orders')) console.log('dead:', j.key, j.lastError);

fixed = true; // the handler is fixed: replay the dead job
const replayed = await c.replay('orders');
while ((await c.stats('orders')).counters.acked < 2) await sleep(100);
worker.stop();
await running;
console.log('replayed', replayed);
console.log('done: acked', worker.acked, 'nacked', worker.nacked);
