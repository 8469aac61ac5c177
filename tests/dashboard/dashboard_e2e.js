// End-to-end test of the dashboard in headless Chromium (playwright-core), against a real
// `delayq serve` seeded over the HTTP API. Saves a screenshot of each page under OUT_DIR.
//
//   node dashboard_e2e.js DELAYQ_BINARY OUT_DIR
'use strict';
const { chromium } = require('playwright-core');
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const assert = require('assert/strict');

const [bin, outDir] = process.argv.slice(2);
fs.mkdirSync(outDir, { recursive: true });
const children = [];

function startServer(extraArgs) {
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-dash-'));
  const child = spawn(bin, ['serve', '--listen', '127.0.0.1:0', '--data', data, '--durability', 'none', ...extraArgs],
                      { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push({ child, data });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', chunk => {
      out += chunk;
      const m = out.match(/http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(`http://127.0.0.1:${m[1]}`);
    });
    child.on('exit', code => reject(new Error('delayq serve exited with ' + code)));
  });
}

async function call(url, method, p, body, token) {
  const headers = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = 'Bearer ' + token;
  const res = await fetch(url + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(data)}`);
  return data;
}

async function makeDead(url, queue, error) {
  await call(url, 'PUT', `/v1/queues/${queue}/config`, { max_attempts: 1 });
  const { id } = await call(url, 'POST', `/v1/queues/${queue}/jobs`, { payload: { order: 7 } });
  const { jobs } = await call(url, 'POST', `/v1/queues/${queue}/reserve`, { max: 1 });
  await call(url, 'POST', `/v1/queues/${queue}/nack`, { receipt: jobs[0].receipt, error });
  return id;
}

const step = (name) => console.log('  ' + name);

async function main() {
  const url = await startServer([]);
  const minute = 60000;
  const now = Date.now();
  // orders: jobs due at known times within the next hour, and 4 two days out.
  const seeded = [5, 5, 5, 20, 20, 50].map(m => Math.floor(now / minute) * minute + (m * minute) + 30000);
  await call(url, 'POST', '/v1/queues/orders/jobs', { jobs: seeded.map((t, i) => ({ payload: { order: i }, deliver_at: t })) });
  await call(url, 'POST', '/v1/queues/orders/jobs', { jobs: [1, 2, 3, 4].map(i => ({ payload: i, delay: '2d' })) });
  await call(url, 'POST', '/v1/queues/payments/jobs', { payload: { amount: 1.5 }, key: 'pay-1', headers: { version: '2' } });
  const deadId = await makeDead(url, 'fails', 'card declined by the payment service');

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
           '--no-first-run', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const pageErrors = [];
    page.on('pageerror', e => pageErrors.push(e.message));

    step('the overview shows the seeded counts');
    await page.goto(url + '/');
    const row = q => page.locator(`tr[data-queue="${q}"] td`);
    await page.locator('tr[data-queue="orders"]').waitFor();
    assert.equal(await row('orders').nth(1).textContent(), '10');   // scheduled
    assert.equal(await row('payments').nth(2).textContent(), '1');  // ready
    assert.equal(await row('fails').nth(4).textContent(), '1');     // dead
    assert.equal(await page.getByTestId('total-queues').textContent(), '3');
    assert.equal(await page.getByTestId('total-scheduled').textContent(), '10');
    await page.screenshot({ path: path.join(outDir, 'overview.png'), fullPage: true });

    step('the due histogram matches the seeded due times');
    await page.click('a[href="#/queue/orders"]');
    const hour = page.getByTestId('due-hour');
    await hour.waitFor();
    const start = Number(await hour.getAttribute('data-start'));
    const values = await hour.locator('rect').evaluateAll(rs => rs.map(r => Number(r.dataset.value)));
    assert.equal(values.length, 60);
    const expected = new Array(60).fill(0);
    for (const t of seeded) expected[Math.floor((t - start) / minute)] += 1;
    assert.deepEqual(values, expected);
    const week = await page.getByTestId('due-week').locator('rect').evaluateAll(rs => rs.map(r => Number(r.dataset.value)));
    assert.equal(week.length, 168);
    assert.equal(week.reduce((a, b) => a + b, 0), 10);
    assert.equal(week[47] + week[48], 4, 'the four jobs two days out');
    assert.equal(await page.getByTestId('stat-scheduled').textContent(), '10');
    await page.screenshot({ path: path.join(outDir, 'queue.png'), fullPage: true });

    step('the queue config is editable from the page');
    await page.fill('input[name="max_attempts"]', '7');
    await page.click('text=Save configuration');
    await page.locator('.toast', { hasText: 'Saved the configuration of orders' }).waitFor();
    assert.equal((await call(url, 'GET', '/v1/queues/orders/config')).max_attempts, 7);
    await page.fill('input[name="lease_ms"]', 'soon');
    await page.click('text=Save configuration');
    await page.locator('.toast.error', { hasText: 'lease_ms' }).waitFor();

    step('pause and resume');
    await page.click('button:has-text("Pause")');
    await page.locator('h1 .badge.paused').waitFor();
    assert.equal((await call(url, 'GET', '/v1/queues/orders')).paused, true);
    await page.click('button:has-text("Resume")');
    await page.locator('.toast', { hasText: 'Resumed orders' }).waitFor();

    step('a dead job is replayed from the page and its state changes');
    await page.goto(url + '/#/queue/fails/dead');
    const deadRow = page.locator(`tr[data-id="${deadId}"]`);
    await deadRow.waitFor();
    assert.match(await deadRow.textContent(), /card declined by the payment service/);
    await page.screenshot({ path: path.join(outDir, 'dead.png'), fullPage: true });
    await deadRow.locator('button:has-text("Replay")').click();
    await page.locator('.toast', { hasText: 'Replayed ' + deadId }).waitFor();
    await deadRow.waitFor({ state: 'detached' });
    await page.goto(url + `/#/job/fails/${deadId}`);
    await page.getByTestId('job-state').waitFor();
    assert.equal(await page.getByTestId('job-state').textContent(), 'ready');
    assert.equal((await call(url, 'GET', '/v1/queues/fails/jobs/' + deadId)).state, 'ready');

    step('purge asks before acting');
    const second = await makeDead(url, 'refunds', 'second failure');
    await page.goto(url + '/#/queue/refunds/dead');
    await page.locator(`tr[data-id="${second}"]`).waitFor();
    let asked = '';
    page.once('dialog', d => { asked = d.message(); d.dismiss(); });
    await page.click('button:has-text("Purge all")');
    await page.locator('.toast', { hasText: 'Nothing was purged' }).waitFor();
    assert.match(asked, /cannot be undone/);
    assert.equal((await call(url, 'GET', '/v1/queues/refunds')).dead, 1, 'dismissing purges nothing');
    page.once('dialog', d => d.accept());
    await page.click('button:has-text("Purge all")');
    await page.locator('.toast', { hasText: 'Purged 1 dead jobs' }).waitFor();
    assert.equal((await call(url, 'GET', '/v1/queues/refunds')).dead, 0);

    step('job lookup by key, with the keyboard, and reschedule');
    await page.goto(url + '/#/find');
    await page.keyboard.type('payments');            // the queue field has focus
    await page.keyboard.press('Tab');
    await page.keyboard.type('pay-1');
    await page.selectOption('#find-kind', 'key');
    await page.focus('#find-ref');
    await page.keyboard.press('Enter');
    await page.getByTestId('job-state').waitFor();
    assert.equal(await page.getByTestId('job-state').textContent(), 'ready');
    assert.match(await page.getByTestId('payload').textContent(), /"amount": 1.5/);
    assert.match(await page.getByTestId('job').textContent(), /version/);
    await page.fill('input[aria-label="New delay"]', '10m');
    await page.click('button:has-text("Reschedule")');
    await page.locator('.toast', { hasText: 'Rescheduled' }).waitFor();
    await page.locator('[data-testid=job-state]', { hasText: 'scheduled' }).waitFor();
    await page.screenshot({ path: path.join(outDir, 'job.png'), fullPage: true });
    await page.goto(url + '/#/job/payments/01JDQ8Z3K6T6V3W1C9X2N4M5PQ');
    await page.getByTestId('job-error').waitFor();
    assert.match(await page.getByTestId('job-error').textContent(), /not_found/);

    step('a phone-width screen');
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await phone.goto(url + '/');
    await phone.locator('tr[data-queue="orders"]').waitFor();
    await phone.screenshot({ path: path.join(outDir, 'overview-phone.png'), fullPage: true });
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, 'the page itself does not scroll sideways on a phone');

    step('1 000 queues');
    for (let i = 0; i < 1000; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) =>
        call(url, 'POST', `/v1/queues/load.${String(i + j).padStart(4, '0')}/jobs`, { payload: 1, delay: '1h' })));
    }
    const t0 = Date.now();
    await page.goto(url + '/');
    await page.locator('.pager', { hasText: '1004 queues' }).waitFor();
    const loadMs = Date.now() - t0;
    console.log(`  overview with 1004 queues loaded in ${loadMs} ms`);
    assert.ok(loadMs < 5000, 'the overview of 1 000 queues loads in seconds, not minutes');
    assert.equal(await page.locator('tbody tr').count(), 50);
    assert.deepEqual(pageErrors, []);

    step('with --auth-token the page asks for the token once and keeps it for the tab');
    const secured = await startServer(['--auth-token', 's3cret']);
    await call(secured, 'POST', '/v1/queues/private/jobs', { payload: 1 }, 's3cret');
    const tab = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await tab.goto(secured + '/');
    await tab.locator('#token-dialog[open]').waitFor();
    await tab.screenshot({ path: path.join(outDir, 'token.png') });
    await tab.fill('#token-input', 'wrong');
    await tab.press('#token-input', 'Enter');
    await tab.locator('#token-error', { hasText: 'refused' }).waitFor();
    await tab.fill('#token-input', 's3cret');
    await tab.press('#token-input', 'Enter');
    await tab.locator('tr[data-queue="private"]').waitFor();
    await tab.goto(secured + '/#/queue/private');
    await tab.getByTestId('stat-ready').waitFor();
    assert.equal(await tab.locator('#token-dialog[open]').count(), 0, 'asked only once');
  } catch (e) {
    await failureShots(browser);
    throw e;
  } finally {
    await browser.close();
  }
}

// On a failure, a picture of every open page helps more than the stack alone.
async function failureShots(browser) {
  let n = 0;
  for (const context of browser.contexts()) {
    for (const p of context.pages()) await p.screenshot({ path: path.join(outDir, `failure-${n++}.png`) }).catch(() => {});
  }
}

main().then(() => {
  console.log('dashboard e2e: ok; screenshots in ' + outDir);
}, e => {
  console.error('dashboard e2e FAILED:', e);
  process.exitCode = 1;
}).finally(() => {
  for (const { child, data } of children) {
    child.kill('SIGTERM');
    fs.rmSync(data, { recursive: true, force: true });
  }
});
