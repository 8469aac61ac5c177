// The delayq dashboard: a single page over the public HTTP API (docs/http-api.md), no
// libraries. Every DOM node is built with h(), which sets text with textContent, so nothing
// the server returns (payloads, errors, queue names) is ever parsed as HTML.
'use strict';

// ---------------------------------------------------------------------------------------------
// Helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children.flat()) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// 1234 -> "1.2 k"; 12 -> "12"
function num(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  const a = Math.abs(n);
  if (a < 1000) return Number.isInteger(n) ? String(n) : n.toFixed(1);
  for (const [d, u] of [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) {
    if (a >= d) return (n / d).toFixed(a / d >= 100 ? 0 : 1).replace(/\.0$/, '') + ' ' + u;
  }
  return String(n);
}

// 190000 -> "3 m 10 s"; 250 -> "250 ms"
function dur(ms) {
  if (ms === null || ms === undefined) return '–';
  ms = Math.abs(Math.round(ms));
  if (ms < 1000) return ms + ' ms';
  const parts = [];
  for (const [d, u] of [[86400000, 'd'], [3600000, 'h'], [60000, 'm'], [1000, 's']]) {
    if (ms >= d) { parts.push(Math.floor(ms / d) + ' ' + u); ms %= d; }
    if (parts.length === 2) break;
  }
  return parts.join(' ');
}

function latency(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 10) return ms.toFixed(2) + ' ms';
  if (ms < 1000) return Math.round(ms) + ' ms';
  return dur(ms);
}

function when(epochMs) {
  if (!epochMs) return '–';
  const d = epochMs - Date.now();
  const rel = Math.abs(d) < 1000 ? 'now' : d > 0 ? 'in ' + dur(d) : dur(d) + ' ago';
  return new Date(epochMs).toLocaleString() + ' (' + rel + ')';
}

// Reads "30m", "1h30m", "90s", "250ms", "2d" into milliseconds (null when unreadable).
function parseDuration(text) {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;
  const unit = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 };
  let total = 0, used = 0, m;
  text = text.trim();
  while ((m = re.exec(text)) !== null) { total += parseFloat(m[1]) * unit[m[2]]; used += m[0].length; }
  return used === text.length && used > 0 ? Math.round(total) : null;
}

function toast(message, isError) {
  const t = h('div', { class: 'toast' + (isError ? ' error' : '') }, message);
  document.getElementById('toasts').append(t);
  setTimeout(() => t.remove(), isError ? 9000 : 4000);
}

const enc = encodeURIComponent;

// ---------------------------------------------------------------------------------------------
// The API: every call goes through here. A 401 asks for the token once and retries.

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

let tokenPrompt = null;

function askToken(wrong) {
  if (tokenPrompt) return tokenPrompt;
  const dialog = document.getElementById('token-dialog');
  const input = document.getElementById('token-input');
  document.getElementById('token-error').textContent = wrong ? 'That token was refused; check it and try again.' : '';
  input.value = '';
  tokenPrompt = new Promise(resolve => {
    const form = document.getElementById('token-form');
    form.onsubmit = ev => {
      ev.preventDefault();
      sessionStorage.setItem('delayq-token', input.value.trim());
      dialog.close();
      tokenPrompt = null;
      resolve();
    };
  });
  dialog.showModal();
  input.focus();
  return tokenPrompt;
}

async function api(method, path, body) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const headers = {};
    const token = sessionStorage.getItem('delayq-token');
    if (token) headers.Authorization = 'Bearer ' + token;
    // The server refuses a POST, PUT or PATCH that does not say JSON (a cross-site guard).
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new ApiError(0, 'unreachable', 'cannot reach delayq: ' + e.message);
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
    if (res.status === 401) { await askToken(!!token); continue; }
    if (!res.ok) {
      const err = data && data.error ? data.error : { code: 'http_' + res.status, message: text.slice(0, 200) || res.statusText };
      throw new ApiError(res.status, err.code, err.message);
    }
    return data;
  }
  throw new ApiError(401, 'unauthenticated', 'the token was refused');
}

// Runs an action from a button: disables it meanwhile, reports the outcome either way.
async function act(button, fn, success) {
  if (button) button.disabled = true;
  try {
    const result = await fn();
    const msg = typeof success === 'function' ? success(result) : success;
    if (msg) toast(msg);
    return result;
  } catch (e) {
    toast((e.code ? e.code + ': ' : '') + e.message, true);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Charts (SVG)

// Bars with x labels every `labelEvery`; `title(i)` is the tooltip of bar i.
function barChart(values, labelOf, labelEvery, title, testid, start) {
  const W = 600, H = 160, pad = 18;
  const max = Math.max(1, ...values);
  const bw = (W - 2) / Math.max(1, values.length);
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img',
                         'data-testid': testid || '', 'aria-label': 'bar chart', 'data-start': start === undefined ? '' : start });
  values.forEach((v, i) => {
    const bh = Math.round((H - pad - 4) * v / max);
    const rect = s('rect', { class: 'bar', x: (1 + i * bw).toFixed(2), y: H - pad - bh, width: Math.max(1, bw - 1).toFixed(2),
                             height: bh, 'data-value': v, 'data-index': i });
    rect.append(s('title', {}, title(i, v)));
    svg.append(rect);
    if (labelEvery && i % labelEvery === 0) {
      svg.append(s('text', { class: 'axis', x: (1 + i * bw).toFixed(2), y: H - 4 }, labelOf(i)));
    }
  });
  svg.append(s('text', { class: 'axis', x: W - 4, y: 10, 'text-anchor': 'end' }, 'max ' + num(max)));
  return svg;
}

// Two small lines (enqueue and delivery rates) over the history samples.
function sparkline(samples) {
  const W = 130, H = 30;
  const svg = s('svg', { class: 'spark', viewBox: `0 0 ${W} ${H}`, 'aria-hidden': 'true' });
  if (!samples || samples.length < 2) return svg;
  const rates = (idx) => {
    const out = [];
    for (let i = 1; i < samples.length; i++) {
      const dt = (samples[i][0] - samples[i - 1][0]) / 1000;
      out.push(dt > 0 ? Math.max(0, samples[i][idx] - samples[i - 1][idx]) / dt : 0);
    }
    return out;
  };
  const a = rates(5), b = rates(6);
  const max = Math.max(0.001, ...a, ...b);
  const line = (vals, cls) => s('polyline', { class: cls, points: vals.map((v, i) =>
      `${(i * (W - 2) / Math.max(1, vals.length - 1) + 1).toFixed(1)},${(H - 2 - (H - 4) * v / max).toFixed(1)}`).join(' ') });
  svg.append(line(a, 'a'), line(b, 'b'));
  svg.append(s('title', {}, `last 15 min: enqueue up to ${num(Math.max(...a))}/s, delivery up to ${num(Math.max(...b))}/s`));
  return svg;
}

// ---------------------------------------------------------------------------------------------
// Pages. Each page is a function that renders into `main` and returns a refresh function
// (called every few seconds; it updates values in place so nothing flickers) or null.

const main = () => document.getElementById('main');
const previous = new Map();  // queue -> {t, enqueued, delivered} for rates between refreshes

function rateOf(q, now) {
  const p = previous.get(q.name);
  previous.set(q.name, { t: now, enqueued: q.counters.enqueued, delivered: q.counters.delivered, rates: p && p.rates });
  if (!p || now - p.t < 500) return p && p.rates ? p.rates : null;
  const dt = (now - p.t) / 1000;
  const rates = { enq: Math.max(0, q.counters.enqueued - p.enqueued) / dt, del: Math.max(0, q.counters.delivered - p.delivered) / dt };
  previous.get(q.name).rates = rates;
  return rates;
}

function overviewPage(params) {
  const PAGE = 50;
  let filter = params.get('filter') || '';
  let page = 0;
  const tiles = h('div', { class: 'tiles' });
  const tbody = h('tbody');
  const pager = h('div', { class: 'pager' });
  const empty = h('p', { class: 'muted', hidden: true }, 'No queues yet. Enqueue a job (POST /v1/queues/{queue}/jobs) and it appears here.');
  const search = h('input', { type: 'search', placeholder: 'Filter queues', 'aria-label': 'Filter queues', value: filter,
                              oninput: e => { filter = e.target.value; page = 0; refresh(); } });
  main().replaceChildren(
    h('h1', {}, 'Queues'), tiles,
    h('div', { class: 'toolbar' }, search,
      h('span', { class: 'legend' }, h('span', {}, h('i', { style: 'background:var(--chart-a)' }), 'enqueue/s'),
        h('span', {}, h('i', { style: 'background:var(--chart-b)' }), 'delivery/s'))),
    h('div', { class: 'tablewrap' }, h('table', { 'data-testid': 'queues' },
      h('thead', {}, h('tr', {}, ['Queue', 'Scheduled', 'Ready', 'Reserved', 'Dead', 'Enqueue/s', 'Delivery/s',
        'Lateness p99', 'State'].map((t, i) => h('th', { scope: 'col', class: i >= 5 && i <= 6 ? 'hide-narrow' : '' }, t)),
        h('th', { scope: 'col', class: 'hide-narrow left' }, 'Last 15 min'))),
      tbody)),
    empty, pager);
  const rows = new Map();  // name -> {tr, cells, spark}
  let histories = {};
  let historyAt = 0;

  async function refresh() {
    const data = await api('GET', '/v1/queues');
    const now = Date.now();
    const all = data.queues;
    const sum = k => all.reduce((a, q) => a + q[k], 0);
    tiles.replaceChildren(...[['Queues', all.length], ['Scheduled', sum('scheduled')], ['Ready', sum('ready')],
      ['Reserved', sum('reserved')], ['Dead', sum('dead')]].map(([l, v]) =>
        h('div', { class: 'tile' }, h('div', { class: 'label' }, l),
          h('div', { class: 'value' + (l === 'Dead' && v > 0 ? ' bad' : ''), 'data-testid': 'total-' + l.toLowerCase() }, num(v)))));
    const shown = all.filter(q => q.name.toLowerCase().includes(filter.toLowerCase()));
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    page = Math.min(page, pages - 1);
    const visible = shown.slice(page * PAGE, (page + 1) * PAGE);
    empty.hidden = all.length > 0;
    if (now - historyAt > 10000 && visible.length) {  // the charts change every 10 s
      historyAt = now;
      const qs = visible.map(q => 'queue=' + enc(q.name)).join('&');
      histories = (await api('GET', '/v1/history?' + qs)).queues || {};
    }
    const keep = new Set(visible.map(q => q.name));
    for (const [name, row] of rows) if (!keep.has(name)) { row.tr.remove(); rows.delete(name); }
    visible.forEach((q, i) => {
      let row = rows.get(q.name);
      if (!row) {
        const cells = Array.from({ length: 9 }, (_, j) => h('td', { class: j >= 5 && j <= 6 ? 'hide-narrow' : '' }));
        const spark = h('td', { class: 'hide-narrow left' });
        cells[0].replaceChildren(h('a', { href: '#/queue/' + enc(q.name) }, q.name));
        const tr = h('tr', { 'data-queue': q.name }, cells, spark);
        row = { tr, cells, spark };
        rows.set(q.name, row);
      }
      if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] || null);
      let r = rateOf(q, now);
      const hist = histories[q.name];
      if (!r && hist && hist.length >= 2) {  // first look: the rates of the last history interval
        const [a, b] = [hist[hist.length - 2], hist[hist.length - 1]];
        const dt = (b[0] - a[0]) / 1000;
        if (dt > 0) r = { enq: Math.max(0, b[5] - a[5]) / dt, del: Math.max(0, b[6] - a[6]) / dt };
      }
      const values = [null, num(q.scheduled), num(q.ready), num(q.reserved), num(q.dead),
        r ? num(r.enq) : '…', r ? num(r.del) : '…', q.lateness_ms.count ? latency(q.lateness_ms.p99) : '–', null];
      values.forEach((v, j) => { if (v !== null && row.cells[j].textContent !== v) row.cells[j].textContent = v; });
      row.cells[4].className = q.dead > 0 ? 'error' : '';
      const state = q.paused ? 'paused' : 'active';
      if (row.cells[8].textContent !== state) row.cells[8].replaceChildren(h('span', { class: 'badge' + (q.paused ? ' paused' : '') }, state));
      if (histories[q.name]) row.spark.replaceChildren(sparkline(histories[q.name]));
    });
    pager.replaceChildren(...(pages > 1 ? [
      h('button', { disabled: page === 0, onclick: () => { page--; refresh(); } }, '‹ Previous'),
      h('span', { class: 'muted' }, `page ${page + 1} of ${pages} (${shown.length} queues)`),
      h('button', { disabled: page >= pages - 1, onclick: () => { page++; refresh(); } }, 'Next ›')] : []));
  }
  return refresh;
}

function queuePage(name) {
  const base = '/v1/queues/' + enc(name);
  const title = h('h1', {}, name);
  const pauseBtn = h('button', {});
  const tiles = h('div', { class: 'tiles' });
  const hourChart = h('div', { class: 'panel' });
  const weekChart = h('div', { class: 'panel' });
  const lateChart = h('div', { class: 'panel' });
  const counters = h('div', { class: 'panel' });
  const configPanel = h('div', { class: 'panel' });
  const schedulesPanel = h('div', { class: 'panel', 'data-testid': 'schedules' });
  main().replaceChildren(title,
    h('div', { class: 'toolbar' }, pauseBtn,
      h('a', { href: '#/queue/' + enc(name) + '/jobs/scheduled', 'data-testid': 'browse' }, 'Browse jobs'),
      h('a', { href: '#/queue/' + enc(name) + '/dead' }, 'Dead letters'),
      h('a', { href: '#/find?queue=' + enc(name) }, 'Find a job')),
    tiles,
    h('h2', {}, 'When scheduled jobs come due'),
    h('div', { class: 'grid2' }, hourChart, weekChart),
    h('div', { class: 'grid2' },
      h('div', {}, h('h2', {}, 'Delivery lateness'), lateChart),
      h('div', {}, h('h2', {}, 'Counters (since the server started)'), counters)),
    h('h2', {}, 'Configuration'), configPanel,
    h('h2', {}, 'Recurring schedules'), schedulesPanel);

  let paused = false;
  pauseBtn.onclick = () => act(pauseBtn, () => api('POST', base + (paused ? '/resume' : '/pause')),
    r => (r.paused ? 'Paused ' : 'Resumed ') + name).then(refresh);

  loadConfig(name, base, configPanel);
  const refreshSchedules = schedules(name, base, schedulesPanel);

  async function refresh() {
    const [st, hour, week] = await Promise.all([
      api('GET', base), api('GET', base + '/schedule?bucket=1m&horizon=1h'), api('GET', base + '/schedule?bucket=1h&horizon=7d')]);
    paused = st.paused;
    pauseBtn.textContent = paused ? 'Resume' : 'Pause';
    title.replaceChildren(name, paused ? h('span', { class: 'badge paused' }, 'paused') : '');
    tiles.replaceChildren(...[
      ['Scheduled', num(st.scheduled)], ['Ready', num(st.ready)], ['Reserved', num(st.reserved)],
      ['Dead', num(st.dead)], ['Completed', num(st.completed ?? 0)], ['Due in 60 s', num(st.due_next_60s)],
      ['Next due', st.earliest_due_at ? (st.earliest_due_at > Date.now() ? 'in ' + dur(st.earliest_due_at - Date.now()) : 'now') : '–'],
      ['Oldest ready', st.ready ? dur(st.oldest_ready_ms) : '–']].map(([l, v]) =>
        h('div', { class: 'tile' }, h('div', { class: 'label' }, l),
          h('div', { class: 'value' + (l === 'Dead' && st.dead > 0 ? ' bad' : ''), 'data-testid': 'stat-' + l.toLowerCase().replace(/ /g, '-') }, v))));
    const start = hour.start;
    hourChart.replaceChildren(h('div', { class: 'muted' }, 'Next hour, per minute', hour.later ? ` (${num(hour.later)} later)` : ''),
      barChart(hour.buckets, i => new Date(start + i * 60000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }), 10,
        (i, v) => `${num(v)} due at ${new Date(start + i * 60000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}`, 'due-hour', start));
    weekChart.replaceChildren(h('div', { class: 'muted' }, 'Next week, per hour', week.later ? ` (${num(week.later)} later)` : ''),
      barChart(week.buckets, i => new Date(week.start + i * 3600000).toLocaleDateString([], { weekday: 'short' }), 24,
        (i, v) => `${num(v)} due ${new Date(week.start + i * 3600000).toLocaleString([], { weekday: 'short', hour: '2-digit', minute: '2-digit' })}`, 'due-week', week.start));
    const l = st.lateness_ms;
    const buckets = l.buckets || [];
    const perBucket = buckets.map((b, i) => b.count - (i ? buckets[i - 1].count : 0));
    perBucket.push(l.count - (buckets.length ? buckets[buckets.length - 1].count : 0));
    const edges = buckets.map(b => b.le);
    // Lateness runs from the due time to the delivery: with ready jobs nobody takes, it is the
    // wait for a consumer, not the scheduler's delay. Say which, so a queue with no worker
    // running does not read as a late scheduler.
    const waiting = st.ready > 0 && st.oldest_ready_ms >= 1000;
    const cause = waiting
      ? h('p', { class: 'note warn', 'data-testid': 'consumer-wait' },
        `Waiting for consumers: ${num(st.ready)} job${st.ready === 1 ? ' is' : 's are'} ready and not taken, the oldest for ${dur(st.oldest_ready_ms)}. ` +
        'The scheduler made them ready; lateness counts until a consumer reserves a job, so it includes this wait.')
      : h('p', { class: 'note muted', 'data-testid': 'consumer-wait' },
        st.ready > 0 ? 'Consumers are taking ready jobs as they come due.' : 'No job is waiting for a consumer: lateness here is the scheduler\'s and the consumers\' reserve speed.');
    lateChart.replaceChildren(
      h('div', { class: 'muted' }, `${num(l.count)} first deliveries: p50 ${latency(l.p50)}, p90 ${latency(l.p90)}, p99 ${latency(l.p99)}, max ${latency(l.max)}`),
      cause,
      barChart(perBucket, i => i < edges.length ? '≤' + (edges[i] >= 1000 ? edges[i] / 1000 + 's' : edges[i] + 'ms') : '>', 2,
        (i, v) => `${num(v)} delivered ${i < edges.length ? 'within ' + latency(edges[i]) : 'later than ' + latency(edges[edges.length - 1])}`, 'lateness'));
    const w = st.limit_wait_ms;
    if (w && w.count > 0) {
      lateChart.append(h('p', { class: 'note muted', 'data-testid': 'limit-wait' },
        `Held back by the queue's flow control (not counted as late): ${num(w.count)} deliveries, p50 ${latency(w.p50)}, p99 ${latency(w.p99)}, max ${latency(w.max)}.`));
    }
    refreshSchedules();
    const c = st.counters;
    counters.replaceChildren(h('dl', { class: 'kv' }, ...Object.entries({
      Enqueued: c.enqueued, Delivered: c.delivered, Acked: c.acked, Nacked: c.nacked,
      'Redelivered (lease expired)': c.redelivered, 'Went dead': c.dead }).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, num(v))])));
    // Fair groups: the groups with the most ready jobs (reserves take the groups in turn).
    const groups = st.groups || [];
    if (groups.length) {
      counters.append(h('h3', {}, 'Top groups by ready jobs'),
        h('table', { 'data-testid': 'groups' },
          h('tr', {}, h('th', {}, 'Group'), h('th', {}, 'Ready'), h('th', {}, 'Reserved')),
          ...groups.map(g => h('tr', {}, h('td', {}, g.group === null ? '(default)' : g.group), h('td', {}, num(g.ready)), h('td', {}, num(g.reserved))))));
    }
  }
  return refresh;
}

async function loadConfig(name, base, panel) {
  const fields = [
    ['max_attempts', 'Max attempts', 'number'], ['lease_ms', 'Lease', 'duration'],
    ['backoff.base_ms', 'Back-off base', 'duration'], ['backoff.factor', 'Back-off factor', 'number'],
    ['backoff.max_ms', 'Back-off max', 'duration'], ['backoff.jitter', 'Jitter (0..1)', 'number'],
    ['max_payload', 'Max payload (bytes)', 'number'], ['dead_retention_ms', 'Dead retention', 'duration'],
    ['max_delay_ms', 'Max delay', 'duration'], ['rate_per_s', 'Rate limit (per s, 0: none)', 'number'],
    ['group_max_reserved', 'Leased per group (0: no limit)', 'number'], ['priority_aging_ms', 'Priority aging (0: strict)', 'duration'],
    ['burst', 'Burst (0: the rate)', 'number'], ['max_reserved', 'Max reserved (0: none)', 'number'],
    ['keep_completed_ms', 'Keep completed (0: delete at ack)', 'duration']];
  const get = (o, path) => path.split('.').reduce((a, k) => a[k], o);
  let config;
  try { config = await api('GET', base + '/config'); } catch (e) { panel.replaceChildren(h('p', { class: 'error' }, e.message)); return; }
  const inputs = {};
  const grid = h('div', { class: 'form-grid' }, fields.map(([path, label, kind]) => {
    const v = get(config, path);
    const input = h('input', { name: path, value: kind === 'duration' ? compactDuration(v) : String(v), 'aria-label': label });
    inputs[path] = [input, kind];
    return h('label', {}, label, input);
  }));
  const save = h('button', { class: 'primary', type: 'submit' }, 'Save configuration');
  const form = h('form', { onsubmit: ev => {
    ev.preventDefault();
    const body = { backoff: {} };
    for (const [path, [input, kind]] of Object.entries(inputs)) {
      const value = kind === 'duration' ? parseDuration(input.value) : Number(input.value);
      if (value === null || Number.isNaN(value)) { toast(`${path}: "${input.value}" is not a ${kind === 'duration' ? 'duration like 30s or 1h' : 'number'}`, true); return; }
      if (path.startsWith('backoff.')) body.backoff[path.slice(8)] = value; else body[path] = value;
    }
    act(save, () => api('PUT', base + '/config', body), 'Saved the configuration of ' + name);
  } }, grid, h('div', { class: 'actions' }, save));
  panel.replaceChildren(form);
}

// The queue's recurring schedules (GET /v1/queues/{q}/schedules): the next runs and the last,
// pause/resume and delete, and a form to add one. Returns its refresh.
function schedules(name, base, panel) {
  const table = h('table', { class: 'jobs' });
  const nameIn = h('input', { name: 'schedule-name', placeholder: 'nightly-report', 'aria-label': 'Schedule name' });
  const whenIn = h('input', { name: 'schedule-when', placeholder: '0 3 * * *  or  every 15m', 'aria-label': 'Cron or every' });
  const tzIn = h('input', { name: 'schedule-tz', value: 'UTC', 'aria-label': 'Time zone' });
  const add = h('button', { class: 'primary', type: 'submit', 'data-testid': 'add-schedule' }, 'Add schedule');
  const form = h('form', { class: 'form-grid', onsubmit: ev => {
    ev.preventDefault();
    const when = whenIn.value.trim();
    const body = when.startsWith('every ') ? { every: when.slice(6).trim() } : { cron: when, timezone: tzIn.value.trim() || 'UTC' };
    act(add, () => api('PUT', base + '/schedules/' + enc(nameIn.value.trim()), body), r => `Schedule ${r.name}: next run ${new Date(r.next_runs[0]).toLocaleString()}`).then(refresh);
  } }, h('label', {}, 'Name', nameIn), h('label', {}, 'Cron, or "every 90s"', whenIn), h('label', {}, 'Time zone (cron)', tzIn), h('div', { class: 'actions' }, add));
  panel.replaceChildren(table, form);
  async function refresh() {
    let list;
    try { list = (await api('GET', base + '/schedules')).schedules; } catch (e) { table.replaceChildren(h('tr', {}, h('td', { class: 'error' }, e.message))); return; }
    const rows = list.map(s => {
      const toggle = h('button', {}, s.paused ? 'Resume' : 'Pause');
      toggle.onclick = () => act(toggle, () => api('POST', base + '/schedules/' + enc(s.name) + (s.paused ? '/resume' : '/pause')), (s.paused ? 'Resumed ' : 'Paused ') + s.name).then(refresh);
      const del = h('button', { class: 'danger' }, 'Delete');
      del.onclick = () => { if (confirm(`Delete the schedule ${s.name}? Its jobs not yet due are cancelled.`)) act(del, () => api('DELETE', base + '/schedules/' + enc(s.name)), 'Deleted ' + s.name).then(refresh); };
      return h('tr', { 'data-testid': 'schedule-' + s.name },
        h('td', { class: 'left' }, s.name), h('td', { class: 'left' }, s.cron ? `${s.cron} (${s.timezone})` : 'every ' + s.every),
        h('td', {}, s.paused ? h('span', { class: 'badge paused' }, 'paused') : s.next_runs.slice(0, 3).map(t => new Date(t).toLocaleString()).join(', ')),
        h('td', {}, s.last_run_at ? new Date(s.last_run_at).toLocaleString() : '–'), h('td', {}, toggle, del));
    });
    table.replaceChildren(h('tr', {}, ...['Schedule', 'When', 'Next runs', 'Last run', ''].map(c => h('th', {}, c))),
      ...(rows.length ? rows : [h('tr', {}, h('td', { colspan: 5, class: 'muted' }, `No schedules yet: add one below, or PUT ${base}/schedules/NAME`))]));
  }
  return refresh;
}

function compactDuration(ms) {
  const units = [[86400000, 'd'], [3600000, 'h'], [60000, 'm'], [1000, 's'], [1, 'ms']];
  if (!ms) return '0s';
  let out = '';
  for (const [d, u] of units) if (ms >= d) { out += Math.floor(ms / d) + u; ms %= d; }
  return out;
}

// The jobs of one state, a page at a time (GET /v1/queues/{q}/jobs?state=S&cursor=C), with the
// actions that state allows, one by one or on the selected rows.
const STATES = [['scheduled', 'Scheduled'], ['ready', 'Ready'], ['reserved', 'Reserved'], ['dead', 'Dead'], ['completed', 'Completed']];
const PAGE = 100;

function preview(j) {
  const text = j.payload !== undefined ? JSON.stringify(j.payload) : 'base64:' + (j.payload_base64 || '');
  return text.length > 80 ? text.slice(0, 77) + '…' : text;
}

function jobsPage(name, state) {
  const base = '/v1/queues/' + enc(name);
  const tbody = h('tbody');
  const count = h('span', { class: 'muted', 'data-testid': 'page-info' });
  const all = h('input', { type: 'checkbox', 'aria-label': 'Select all on this page' });
  const prev = h('button', { 'data-testid': 'prev' }, '← Previous');
  const next = h('button', { 'data-testid': 'next' }, 'Next →');
  const tabs = h('div', { class: 'tabs', role: 'tablist' }, STATES.map(([s, label]) =>
    h('a', { href: '#/queue/' + enc(name) + '/jobs/' + s, role: 'tab', class: s === state ? 'active' : '', 'aria-selected': String(s === state), 'data-testid': 'tab-' + s }, label)));
  const when = { scheduled: 'Due', ready: 'Due', reserved: 'Lease until', dead: 'Dead since', completed: 'Completed' }[state];
  const extra = { dead: ['Last error'], reserved: ['Progress'], completed: ['Result'] }[state] || [];
  const columns = ['Job', when, 'Attempts', 'Key', 'Payload', ...extra, ''];
  const selected = () => [...tbody.querySelectorAll('input[type=checkbox]:checked')].map(c => c.value);
  // Runs `one` on each selected job (a few at a time) and says how many it did.
  function bulk(button, verb, one) {
    const ids = selected();
    if (!ids.length) { toast(`Select jobs to ${verb.toLowerCase()} first`, true); return; }
    act(button, async () => {
      let done = 0, failed = 0, lastError = '';
      for (let i = 0; i < ids.length; i += 8) {
        await Promise.all(ids.slice(i, i + 8).map(id => one(id).then(() => { done++; }, e => { failed++; lastError = e.message; })));
      }
      if (failed) throw new Error(`${verb}: ${done} done, ${failed} failed (${lastError})`);
      return done;
    }, n => `${verb}: ${n} job${n === 1 ? '' : 's'}`).then(refresh);
  }
  const runNow = id => api('PATCH', base + '/jobs/' + enc(id), { delay_ms: 0 });
  const cancel = id => api('DELETE', base + '/jobs/' + enc(id));
  const replay = id => api('POST', base + '/dead/replay', { ids: [id] });
  const buttons = [];
  if (state === 'scheduled') {
    const b = h('button', { 'data-testid': 'run-selected' }, 'Run selected now');
    b.onclick = () => bulk(b, 'Run now', runNow);
    buttons.push(b);
  }
  if (state === 'dead') {
    const sel = h('button', {}, 'Replay selected');
    sel.onclick = () => bulk(sel, 'Replayed', replay);
    const allBtn = h('button', {}, 'Replay all');
    allBtn.onclick = () => act(allBtn, () => api('POST', base + '/dead/replay', {}), r => `Replayed ${r.replayed} jobs`).then(refresh);
    const purge = h('button', { class: 'danger' }, 'Purge all');
    purge.onclick = () => {
      if (!confirm(`Delete every dead job of ${name} for good? This cannot be undone.`)) { toast('Nothing was purged'); return; }
      act(purge, () => api('DELETE', base + '/dead'), r => `Purged ${r.purged} dead jobs`).then(refresh);
    };
    buttons.push(sel, allBtn, purge);
  }
  if (state !== 'reserved') {
    const finished = state === 'dead' || state === 'completed';  // deleted, not cancelled
    const b = h('button', { class: finished ? '' : 'danger', 'data-testid': 'cancel-selected' }, finished ? 'Delete selected' : 'Cancel selected');
    b.onclick = () => {
      const n = selected().length;
      if (n && !confirm(`Delete ${n} job${n === 1 ? '' : 's'} of ${name}? This cannot be undone.`)) { toast('Nothing was deleted'); return; }
      bulk(b, finished ? 'Deleted' : 'Cancelled', cancel);
    };
    buttons.push(b);
  }
  main().replaceChildren(
    h('h1', {}, h('a', { href: '#/queue/' + enc(name) }, name), ' · jobs'),
    tabs,
    h('div', { class: 'toolbar' }, ...buttons, state === 'reserved' ? h('span', { class: 'muted' }, 'Held by consumers: each comes back when its lease runs out.') : '', count),
    h('div', { class: 'tablewrap' }, h('table', { 'data-testid': 'jobs' },
      h('thead', {}, h('tr', {}, h('th', { class: 'left' }, state === 'reserved' ? '' : all), columns.map(t => h('th', { class: ['Job', 'Key', 'Payload', 'Last error', 'Progress', 'Result'].includes(t) ? 'left' : '' }, t)))),
      tbody)),
    h('div', { class: 'toolbar' }, prev, next));
  all.onchange = () => tbody.querySelectorAll('input[type=checkbox]').forEach(c => { c.checked = all.checked; });
  // cursors[i] is where page i starts ('' = the beginning); the server's next_cursor adds one.
  const cursors = [''];
  let page = 0, nextCursor = null;
  prev.onclick = () => { if (page > 0) { page--; refresh(); } };
  next.onclick = () => { if (nextCursor) { cursors[page + 1] = nextCursor; page++; refresh(); } };
  async function refresh() {
    const cursor = cursors[page];
    const data = await api('GET', base + '/jobs?state=' + state + '&limit=' + PAGE + (cursor ? '&cursor=' + enc(cursor) : ''));
    const keep = new Set(selected());
    nextCursor = data.next_cursor;
    prev.disabled = page === 0;
    next.disabled = !nextCursor;
    const first = page * PAGE;
    count.textContent = data.jobs.length ? `page ${page + 1}: ${num(first + 1)}–${num(first + data.jobs.length)}${nextCursor ? ', more after' : ''}` : (page ? `page ${page + 1}: none here${nextCursor ? ', more after' : ''}` : '');
    tbody.replaceChildren(...(data.jobs.length ? data.jobs.map(j => {
      const at = { dead: j.dead_at, reserved: j.lease_deadline, completed: j.completed_at }[state] ?? j.due_at;
      const rowAction = state === 'dead' ? ['Replay', replay, `Replayed ${j.id}`] : state === 'scheduled' ? ['Run now', runNow, `${j.id} is due now`] : null;
      let actionCell = '';
      if (rowAction) {
        const b = h('button', {}, rowAction[0]);
        b.onclick = () => act(b, () => rowAction[1](j.id), rowAction[2]).then(refresh);
        actionCell = b;
      }
      return h('tr', { 'data-id': j.id },
        h('td', { class: 'left' }, state === 'reserved' ? '' : h('input', { type: 'checkbox', value: j.id, 'aria-label': 'Select ' + j.id, checked: keep.has(j.id) })),
        h('td', { class: 'left mono' }, h('a', { href: '#/job/' + enc(name) + '/' + enc(j.id) }, j.id)),
        h('td', { title: at ? new Date(at).toISOString() : '' }, at ? relative(at) : '–'),
        h('td', {}, `${j.attempt} / ${j.max_attempts}`),
        h('td', { class: 'left mono' }, j.key || ''),
        h('td', { class: 'left mono wrap', 'data-testid': 'preview' }, preview(j)),
        ...(state === 'dead' ? [h('td', { class: 'wrap left' }, j.last_error || '')] : []),
        ...(state === 'reserved' ? [h('td', { class: 'left mono wrap', 'data-testid': 'progress' }, progressText(j.progress))] : []),
        ...(state === 'completed' ? [h('td', { class: 'left mono wrap', 'data-testid': 'result' }, progressText(j.result))] : []),
        h('td', {}, actionCell));
    }) : [h('tr', {}, h('td', { colspan: columns.length + 1, class: 'muted left' }, `No ${state} jobs${page ? ' on this page' : ''}.`))]));
  }
  return refresh;
}

// A delivery's progress (any JSON value its touches reported), or a completed job's result: a
// string as it is, else its JSON, cut at 200 characters.
function progressText(p) {
  if (p == null) return '';
  const text = typeof p === 'string' ? p : JSON.stringify(p);
  return text.length > 200 ? text.slice(0, 200) + '…' : text;
}

// "in 5m" / "3s ago" / "now".
function relative(epochMs) {
  const d = epochMs - Date.now();
  if (Math.abs(d) < 1000) return 'now';
  return d > 0 ? 'in ' + dur(d) : dur(-d) + ' ago';
}

function findPage(params) {
  const queue = h('input', { id: 'find-queue', required: true, value: params.get('queue') || '', placeholder: 'orders' });
  const ref = h('input', { id: 'find-ref', required: true, placeholder: '01J… or an idempotency key' });
  const kind = h('select', { id: 'find-kind', 'aria-label': 'Look up by' }, h('option', { value: 'id' }, 'by id'), h('option', { value: 'key' }, 'by key'));
  const form = h('form', { class: 'panel', onsubmit: ev => {
    ev.preventDefault();
    const q = queue.value.trim(), r = ref.value.trim();
    location.hash = kind.value === 'id' ? '#/job/' + enc(q) + '/' + enc(r) : '#/job/' + enc(q) + '?key=' + enc(r);
  } }, h('div', { class: 'form-grid' }, h('label', { for: 'find-queue' }, 'Queue', queue), h('label', { for: 'find-ref' }, 'Job', ref), h('label', {}, 'Look up', kind)),
    h('div', { class: 'actions' }, h('button', { class: 'primary', type: 'submit' }, 'Find')));
  main().replaceChildren(h('h1', {}, 'Find a job'), form);
  queue.value ? ref.focus() : queue.focus();
  return null;
}

function jobPage(name, id, params) {
  const base = '/v1/queues/' + enc(name);
  const key = params.get('key');
  const path = key !== null ? base + '/jobs?key=' + enc(key) : base + '/jobs/' + enc(id);
  const body = h('div', { class: 'panel' }, h('p', { class: 'muted' }, 'Loading…'));
  main().replaceChildren(h('h1', {}, h('a', { href: '#/queue/' + enc(name) }, name), ' · job'), body);
  async function refresh() {
    let j;
    try { j = await api('GET', path); } catch (e) {
      body.replaceChildren(h('p', { class: 'error', 'data-testid': 'job-error' }, (e.code ? e.code + ': ' : '') + e.message));
      return;
    }
    const cancel = h('button', { class: 'danger' }, 'Cancel job');
    cancel.onclick = () => {
      if (!confirm('Cancel job ' + j.id + '? It will be deleted.')) return;
      act(cancel, () => api('DELETE', base + '/jobs/' + enc(j.id)), 'Cancelled ' + j.id).then(refresh);
    };
    const delay = h('input', { placeholder: '5m', 'aria-label': 'New delay', size: 8 });
    const reschedule = h('button', { type: 'submit' }, 'Reschedule');
    const form = h('form', { class: 'toolbar', onsubmit: ev => {
      ev.preventDefault();
      const ms = parseDuration(delay.value);
      if (ms === null) { toast(`"${delay.value}" is not a delay like 30s, 5m or 1h30m`, true); return; }
      act(reschedule, () => api('PATCH', base + '/jobs/' + enc(j.id), { delay_ms: ms }), r => 'Rescheduled: due ' + when(r.due_at)).then(refresh);
    } }, h('label', {}, 'Due in ', delay), reschedule);
    let payload;
    if (j.payload !== undefined) payload = JSON.stringify(j.payload, null, 2);
    else payload = '(binary, base64) ' + j.payload_base64;
    if (payload.length > 4000) payload = payload.slice(0, 4000) + '\n… (' + num(payload.length) + ' characters)';
    body.replaceChildren(
      h('dl', { class: 'kv', 'data-testid': 'job' },
        h('dt', {}, 'Id'), h('dd', { class: 'mono' }, j.id),
        h('dt', {}, 'State'), h('dd', {}, h('span', { class: 'badge ' + j.state, 'data-testid': 'job-state' }, j.state)),
        h('dt', {}, 'Due'), h('dd', {}, when(j.due_at)),
        h('dt', {}, 'Attempts'), h('dd', {}, `${j.attempt} of ${j.max_attempts}`),
        j.key ? [h('dt', {}, 'Key'), h('dd', { class: 'mono' }, j.key)] : [],
        h('dt', {}, 'Created'), h('dd', {}, when(j.created_at)),
        j.lease_deadline ? [h('dt', {}, 'Lease until'), h('dd', {}, when(j.lease_deadline))] : [],
        j.progress != null ? [h('dt', {}, 'Progress'), h('dd', { class: 'mono wrap', 'data-testid': 'job-progress' }, progressText(j.progress))] : [],
        j.dead_at ? [h('dt', {}, 'Dead since'), h('dd', {}, when(j.dead_at))] : [],
        j.completed_at ? [h('dt', {}, 'Completed'), h('dd', {}, when(j.completed_at))] : [],
        j.state === 'completed' ? [h('dt', {}, 'Result'), h('dd', { class: j.result != null ? 'mono wrap' : 'muted', 'data-testid': 'job-result' }, j.result != null ? progressText(j.result) : 'none')] : [],
        h('dt', {}, 'Last error'), h('dd', { class: j.last_error ? 'error' : 'muted' }, j.last_error || 'none'),
        h('dt', {}, 'Headers'), h('dd', {}, Object.keys(j.headers).length ?
          h('table', {}, Object.entries(j.headers).map(([k, v]) => h('tr', {}, h('td', { class: 'mono' }, k), h('td', { class: 'wrap mono' }, v)))) : h('span', { class: 'muted' }, 'none'))),
      h('h2', {}, 'Payload'), h('pre', { class: 'payload', 'data-testid': 'payload' }, payload),
      j.state === 'scheduled' || j.state === 'ready' ? h('div', { class: 'actions' }, form, cancel) :
        j.state === 'dead' ? h('div', { class: 'actions' }, h('a', { href: '#/queue/' + enc(name) + '/dead' }, 'Replay it from the dead letters'), cancel) :
        j.state === 'completed' ? h('div', { class: 'actions' }, h('span', { class: 'muted' }, 'Acked; kept for the queue\'s keep_completed_ms.'), cancel) :
        h('p', { class: 'muted' }, 'A reserved job can be cancelled or rescheduled once its consumer acks or nacks it, or its lease runs out.'));
  }
  return refresh;
}

// ---------------------------------------------------------------------------------------------
// Routing and auto-refresh

let timer = null;
let current = null;

async function runRefresh() {
  if (!current) return;
  const state = document.getElementById('refresh-state');
  try {
    await current();
    state.textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    state.textContent = 'update failed';
    if (!runRefresh.lastError || runRefresh.lastError !== e.message) toast((e.code ? e.code + ': ' : '') + e.message, true);
    runRefresh.lastError = e.message;
    return;
  }
  runRefresh.lastError = null;
}

function route() {
  clearInterval(timer);
  const hash = location.hash.slice(1) || '/';
  const [pathPart, queryPart] = hash.split('?');
  const params = new URLSearchParams(queryPart || '');
  const parts = pathPart.split('/').filter(Boolean).map(decodeURIComponent);
  document.querySelectorAll('nav a').forEach(a => a.classList.remove('active'));
  if (parts[0] === 'queue' && parts[1]) {
    const state = parts[2] === 'dead' ? 'dead' : parts[2] === 'jobs' ? (parts[3] || 'scheduled') : null;
    current = state && STATES.some(([s]) => s === state) ? jobsPage(parts[1], state) : queuePage(parts[1]);
    document.getElementById('nav-queues').classList.add('active');
  } else if (parts[0] === 'job' && parts[1]) {
    current = jobPage(parts[1], parts[2] || '', params);
    document.getElementById('nav-find').classList.add('active');
  } else if (parts[0] === 'find') {
    current = findPage(params);
    document.getElementById('nav-find').classList.add('active');
  } else {
    current = overviewPage(params);
    document.getElementById('nav-queues').classList.add('active');
  }
  runRefresh();
  // Job pages change only by the user's actions; the others follow the queues live.
  if (current && parts[0] !== 'job') timer = setInterval(runRefresh, 3000);
}

window.addEventListener('hashchange', route);
route();
