// The coordinator's web page: the network and a chat box. No framework, no
// build step. It polls the JSON API (GET /api/v3/stats every second,
// /api/v3/workers every second, /api/v3/models every few seconds) and
// streams chat replies from POST /v1/chat/completions (server-sent events
// read with fetch and a ReadableStream). Everything a worker or model
// reports is put into the page as text, never as HTML: worker ids come from
// volunteers.
'use strict';

const $ = (id) => document.getElementById(id);
const KEY_STORE = 'bonfire.apiKey';
const SPARK_POINTS = 60;

const state = {
  key: localStorage.getItem(KEY_STORE) || '',
  models: [],          // GET /api/v3/models
  lastStats: null,     // {t, tokens}: the previous /api/v3/stats sample
  rates: [],           // tokens/s, one per second, newest last
  history: [],         // the conversation: {role, content}
  busy: null,          // AbortController of the reply streaming now
};

// ---- helpers ----

// h('div', {class: 'x', title: 't'}, child, 'text', ...): an element; strings become text nodes.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'style') el.style.cssText = v;
    else if (k.startsWith('data-')) el.setAttribute(k, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function bytes(n) {
  if (!Number.isFinite(n) || n <= 0) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return `${n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
}

// Where a worker's steps run: "cpu · AVX2", and the WebGPU adapter a tab
// holds beside it.
function deviceText(d, simd) {
  if (!d) return simd || '–';
  const gpu = d.webgpu ? ` + WebGPU ${[d.webgpu.adapterInfo?.vendor, d.webgpu.adapterInfo?.architecture].filter(Boolean).join(' ')}` : '';
  return `${d.type} · ${d.adapter || simd || '?'}${gpu}`;
}
// The speed placement weighs (docs/NETWORK.md, "Routing and placement"):
// measured on its decode steps, else the bandwidth it announced.
function speedText(s) {
  if (!s) return '–';
  if (s.measuredGBs > 0) return `${s.measuredGBs.toFixed(2)} GB/s`;
  if (s.announcedGBs > 0) return `~${s.announcedGBs.toFixed(1)} GB/s (announced)`;
  return '–';
}
const speedTitle = (s) => (s && s.measuredGBs > 0
  ? `weights streamed per decode step's round trip, over ${s.samples} steps`
  : 'read bandwidth the worker measured at start; placement takes half of it until its steps are timed');
const deviceTitle = (d) => (d && d.webgpu ? 'the tab has this WebGPU adapter; its steps run on the CPU (WebAssembly)' : 'where its steps run');

const count = (n) => (Number.isFinite(n) ? n.toLocaleString('en-US') : '–');

function rate(n) {
  if (!Number.isFinite(n)) return '–';
  return n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2);
}

function ago(unixSeconds) {
  const s = Math.max(0, Date.now() / 1000 - unixSeconds);
  if (s < 60) return `${Math.floor(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

function headers(extra = {}) {
  const hs = { ...extra };
  if (state.key) hs.Authorization = `Bearer ${state.key}`;
  return hs;
}

class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// The error sentence of a bonfire or OpenAI-style error body.
function errorText(body, status) {
  try {
    const j = JSON.parse(body);
    if (typeof j.error === 'string') return j.error;
    if (j.error && j.error.message) return j.error.message;
  } catch { /* not JSON */ }
  return body.trim() || `HTTP ${status}`;
}

async function getJson(path) {
  const res = await fetch(path, { headers: headers(), cache: 'no-store' });
  if (!res.ok) throw new HttpError(res.status, errorText(await res.text(), res.status));
  return res.json();
}

// ---- connection status ----

function setStatus(kind, text) {
  $('status').dataset.state = kind;
  $('status-text').textContent = text;
  $('key-button').classList.toggle('attention', kind === 'auth');
}

function failed(e) {
  if (e instanceof HttpError && e.status === 401) setStatus('auth', 'needs an API key');
  else setStatus('down', e instanceof HttpError ? e.message : 'coordinator unreachable');
}

// ---- live numbers ----

async function pollStats() {
  const s = await getJson('/api/v3/stats');
  const t = performance.now();
  if (state.lastStats) {
    const dt = (t - state.lastStats.t) / 1000;
    const r = dt > 0 ? Math.max(0, s.tokensGenerated - state.lastStats.tokens) / dt : 0;
    state.rates.push(r);
    if (state.rates.length > SPARK_POINTS) state.rates.shift();
    $('tps').textContent = rate(r);
    $('tps-hint').textContent = `last second · ${rate(s.tokensPerSecond)} avg over ${s.windowSeconds} s`;
  }
  state.lastStats = { t, tokens: s.tokensGenerated };
  $('active').textContent = count(s.activeGenerations);
  $('waiting').textContent = count(s.waitingForMemory ?? 0);
  $('total-tokens').textContent = count(s.tokensGenerated);
  $('worker-count').textContent = count(s.workers);
  drawSpark();
}

function drawSpark() {
  const c = $('spark');
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth, hgt = c.clientHeight;
  if (!w || !hgt) return;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(hgt * dpr)) {
    c.width = Math.round(w * dpr);
    c.height = Math.round(hgt * dpr);
  }
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, hgt);
  const pts = state.rates;
  if (pts.length < 2) return;
  const max = Math.max(1, ...pts);
  // Newest at the right edge; the first 20 s fill the width, then it scrolls.
  const slots = Math.min(SPARK_POINTS, Math.max(pts.length, 20));
  const x = (i) => (w * (i + slots - pts.length)) / (slots - 1);
  const y = (v) => hgt - 2 - (v / max) * (hgt - 6);
  const accent = getComputedStyle(document.body).getPropertyValue('--accent').trim() || '#f97316';
  g.beginPath();
  g.moveTo(x(0), hgt);
  pts.forEach((v, i) => g.lineTo(x(i), y(v)));
  g.lineTo(x(pts.length - 1), hgt);
  g.closePath();
  g.globalAlpha = 0.15;
  g.fillStyle = accent;
  g.fill();
  g.globalAlpha = 1;
  g.beginPath();
  pts.forEach((v, i) => (i ? g.lineTo(x(i), y(v)) : g.moveTo(x(i), y(v))));
  g.strokeStyle = accent;
  g.lineWidth = 1.5;
  g.stroke();
}

// ---- workers ----

function layersOf(modelId) {
  const m = state.models.find((x) => x.id === modelId);
  return m ? m.layers : undefined;
}

function stageBar(stage) {
  const total = layersOf(stage.model);
  const bar = h('div', { class: 'bar', title: `layers ${stage.first}–${stage.end - 1} of ${total ?? '?'}` });
  if (total) {
    bar.append(h('span', { style: `left:${(100 * stage.first) / total}%;width:${(100 * (stage.end - stage.first)) / total}%` }));
  }
  return bar;
}

// One stage's continuous batching (/api/v3/workers "batching"): the
// sequences decoding there, the steps queued beyond the running batch, the
// last call's rows and the mean so far.
function batchLine(b) {
  const [first, end] = String(b.layers).split('-').map(Number);
  const mean = b.batches ? ` · ${(b.rows / b.batches).toFixed(1)} rows a call` : '';
  return h('div', { class: 'batch' },
    `${b.model} · layers ${first}–${end - 1}: ${count(b.sequences)} decoding · ${count(b.queued)} queued · ` +
    `last call ${count(b.lastBatch)} rows${mean}`);
}

function workerCard(w) {
  const load = w.load || {};
  const busy = (load.inFlight || 0) > 0 || (w.generations || 0) > 0;
  const features = (w.features || []).slice().sort();
  const models = w.models || [];
  const stages = w.stages || [];
  const batching = w.batching || [];
  const sessions = w.sessions;
  const checks = w.checks;
  const kind = w.kind === 'browser' ? 'browser' : 'native';  // coordinators before "kind" had native workers only
  return h('article', { class: `worker ${kind}`, 'data-worker-id': w.id, 'data-kind': kind },
    h('header', {},
      h('span', { class: `led ${busy ? 'busy' : 'idle'}`, title: busy ? 'working' : 'idle' }),
      h('span', { class: 'wid' }, w.id),
      kind === 'browser' ? h('span', { class: 'chip kind', title: 'a browser tab lending itself (/lend)' }, 'browser tab') : null,
      h('span', { class: 'muted small' }, w.remote || ''),
      h('span', { class: 'muted small right', title: 'joined' }, w.joined ? `up ${ago(w.joined)}` : '')),
    h('dl', { class: 'facts' },
      h('div', {}, h('dt', {}, 'threads'), h('dd', {}, count(w.threads) + (w.background ? ' (background)' : ''))),
      h('div', {}, h('dt', {}, 'memory'), h('dd', {}, bytes(w.memory))),
      h('div', {}, h('dt', {}, 'in flight'), h('dd', { class: 'inflight' }, count(load.inFlight ?? 0))),
      h('div', {}, h('dt', {}, 'ms / call'), h('dd', {}, load.msPerCall ? load.msPerCall.toFixed(1) : '–')),
      h('div', {}, h('dt', {}, 'calls'), h('dd', {}, count(load.calls ?? 0))),
      h('div', { class: 'wide' }, h('dt', {}, 'checks'), h('dd', { class: 'checks', title: 'spot checks passed / failed (docs/NETWORK.md)' },
        checks ? `${count(checks.passed)} ✓ / ${count(checks.failed)} ✗${checks.trusted ? ' · trusted' : ''}` : '–')),
      h('div', { class: 'wide' }, h('dt', {}, 'device'), h('dd', { class: 'device', title: deviceTitle(w.device) }, deviceText(w.device, w.simd))),
      h('div', {}, h('dt', {}, 'speed'), h('dd', { class: 'speed', title: speedTitle(w.speed) }, speedText(w.speed))),
      h('div', {}, h('dt', {}, 'ops'), h('dd', {}, count((w.ops || []).length)))),
    h('div', { class: 'line' }, h('span', { class: 'key' }, 'models'),
      models.length ? models.map((m) => h('span', { class: 'chip model', title: `sha256 ${m.hash}` }, m.id))
                    : h('span', { class: 'muted' }, 'none')),
    stages.length ? h('div', { class: 'line stages' }, h('span', { class: 'key' }, 'stages'),
      h('div', { class: 'stage-list' }, stages.map((s) => h('div', { class: 'stage' },
        h('span', { class: 'stage-name' }, `${s.model} · layers ${s.first}–${s.end - 1}`),
        stageBar(s),
        h('span', { class: 'muted small' }, `${s.generations} running`))))) : null,
    sessions ? h('div', { class: 'line' }, h('span', { class: 'key' }, 'sessions'),
      h('span', { class: 'sessions', title: 'the caches of the generations placed here, against what sessions may take (3/4 of its memory)' },
        `${bytes(sessions.reserved)} reserved of ${bytes(sessions.budget)}`)) : null,
    batching.length ? h('div', { class: 'line batching' }, h('span', { class: 'key' }, 'batches'),
      h('div', { class: 'stage-list' }, batching.map(batchLine))) : null,
    h('div', { class: 'line' }, h('span', { class: 'key' }, 'features'),
      h('span', { class: 'features' }, features.length ? features.join(' · ') : 'none')));
}

async function pollWorkers() {
  const { workers, bans = [] } = await getJson('/api/v3/workers');
  const box = $('workers');
  workers.sort((a, b) => a.id.localeCompare(b.id));
  const banned = bans.map((b) => h('p', { class: 'banned small', title: b.reason },
    `banned: ${b.id}${b.address ? ` (${b.address})` : ''} for another ${Math.round(b.secondsLeft)} s — ${b.reason}`));
  box.replaceChildren(...(workers.length ? workers.map(workerCard)
    : [h('p', { class: 'empty' }, 'No worker has joined. Start one with ',
      h('code', {}, `bonfire worker --join ${location.origin}`), ', or ', h('a', { href: '/lend' }, 'lend this browser tab'),
      '.')]), ...banned);
}

// ---- models ----

async function pollModels() {
  const { models } = await getJson('/api/v3/models');
  state.models = models;
  const body = $('models');
  body.replaceChildren(...(models.length ? models.map((m) => h('tr', { 'data-model-id': m.id },
    h('td', { class: 'strong' }, m.id),
    h('td', {}, m.family || '–'),
    h('td', { class: 'num' }, count(m.layers)),
    h('td', { class: 'num' }, bytes(m.bytes)),
    h('td', { class: 'num' }, count(m.ctx)),
    h('td', { class: 'mono', title: m.hash }, (m.hash || '').slice(0, 12)),
    h('td', {}, (m.workers || []).length ? (m.workers || []).map((w) => h('span', { class: 'chip' }, w))
                                         : h('span', { class: 'muted' }, 'no worker'))))
    : [h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'This coordinator serves no model (start it with --model PATH).'))]));
  // The chat's model picker follows the list, keeping the choice.
  const sel = $('model');
  const keep = sel.value;
  const ids = models.map((m) => m.id);
  if (ids.join('\n') !== [...sel.options].map((o) => o.value).join('\n')) {
    sel.replaceChildren(...ids.map((id) => h('option', { value: id }, id)));
    if (ids.includes(keep)) sel.value = keep;
  }
  updateSendable();
}

// ---- polling loop ----

let slowTick = 0;
async function tick() {
  try {
    const jobs = [pollStats(), pollWorkers()];
    if (slowTick++ % 5 === 0 || !state.models.length) jobs.push(pollModels());
    await Promise.all(jobs);
    setStatus('up', 'connected');
  } catch (e) {
    failed(e);
  }
  setTimeout(tick, 1000);
}

// ---- chat ----

function addMessage(role, text = '') {
  $('chat-empty')?.remove();
  const body = h('div', { class: 'text' });
  body.append(document.createTextNode(text));
  const msg = h('div', { class: `msg ${role}`, 'data-role': role },
    h('div', { class: 'who' }, role === 'user' ? 'you' : $('model').value || 'assistant'), body);
  if (role === 'assistant') msg.append(h('div', { class: 'meta' }));
  $('messages').append(msg);
  scrollDown(true);
  return msg;
}

function scrollDown(force) {
  const box = $('messages');
  if (force || box.scrollHeight - box.scrollTop - box.clientHeight < 80) box.scrollTop = box.scrollHeight;
}

function updateSendable() {
  $('send').disabled = !!state.busy || !$('model').value;
}

// The events of a server-sent event stream: each data: payload as a string.
async function* sseData(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let at;
    while ((at = buf.search(/\r?\n\r?\n/)) >= 0) {
      const event = buf.slice(0, at);
      buf = buf.slice(at).replace(/^\r?\n\r?\n/, '');
      const data = event.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
      if (data.length) yield data.join('\n');
    }
  }
}

// For a model without a chat template: a plain transcript for /v1/completions.
function transcript(history) {
  return history.map((m) => `${m.role === 'user' ? 'User' : 'Assistant'}: ${m.content}`).join('\n') + '\nAssistant:';
}

async function send() {
  const text = $('input').value.trim();
  const model = $('model').value;
  if (!text || state.busy || !model) return;
  $('input').value = '';
  const history = state.history;  // "New chat" during the reply starts another one
  history.push({ role: 'user', content: text });
  addMessage('user', text);
  const msg = addMessage('assistant');
  const out = msg.querySelector('.text');
  const meta = msg.querySelector('.meta');
  const node = document.createTextNode('');
  out.append(node);
  msg.dataset.state = 'streaming';

  const info = state.models.find((m) => m.id === model);
  const chat = !info || info.chatTemplate !== false;
  const maxTokens = Math.max(1, Math.min(4096, Number($('max-tokens').value) || 256));
  const temperature = Math.max(0, Number($('temperature').value) || 0);
  const body = chat
    ? { model, messages: history, stream: true, max_tokens: maxTokens, temperature,
        stream_options: { include_usage: true } }
    : { model, prompt: transcript(history), stream: true, max_tokens: maxTokens, temperature,
        stop: ['\nUser:'], stream_options: { include_usage: true } };

  const ctl = new AbortController();
  state.busy = ctl;
  $('send').hidden = true;
  $('stop').hidden = false;
  updateSendable();

  const t0 = performance.now();
  let tFirst = 0, tokens = 0, usageTokens = 0, finish = '', full = '', ended = 'done';
  const showMeta = (final) => {
    const now = performance.now();
    const parts = [];
    const n = usageTokens || tokens;
    parts.push(`${n} token${n === 1 ? '' : 's'}`);
    if (tFirst && n > 1 && now > tFirst) parts.push(`${rate((n - 1) / ((now - tFirst) / 1000))} tok/s`);
    if (tFirst) parts.push(`first token ${Math.round(tFirst - t0)} ms`);
    if (final) parts.push(`${((now - t0) / 1000).toFixed(2)} s`);
    if (final && finish) parts.push(finish === 'length' ? 'stopped at max tokens' : `finish: ${finish}`);
    meta.textContent = parts.join(' · ');
  };
  try {
    const res = await fetch(chat ? '/v1/chat/completions' : '/v1/completions', {
      method: 'POST', headers: headers({ 'Content-Type': 'application/json' }), body: JSON.stringify(body),
      signal: ctl.signal,
    });
    if (!res.ok) {
      const e = new HttpError(res.status, errorText(await res.text(), res.status));
      if (res.status === 401) failed(e);
      throw e;
    }
    for await (const data of sseData(res.body)) {
      if (data === '[DONE]') break;
      const j = JSON.parse(data);
      if (j.error) throw new Error(j.error.message || String(j.error));
      if (j.usage && j.usage.completion_tokens) usageTokens = j.usage.completion_tokens;
      const choice = (j.choices || [])[0];
      if (!choice) continue;
      const piece = chat ? choice.delta?.content : choice.text;
      if (piece) {
        if (!tFirst) tFirst = performance.now();
        ++tokens;
        full += piece;
        node.appendData(piece);
        showMeta(false);
        scrollDown(false);
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  } catch (e) {
    if (ctl.signal.aborted) {
      ended = 'stopped';
      finish = 'stopped';
    } else {
      ended = 'error';
      msg.append(h('div', { class: 'error' }, e.message || String(e)));
    }
  }
  if (full) history.push({ role: 'assistant', content: full });
  else if (ended !== 'done') history.pop();  // nothing came back: the question goes unanswered
  if (!full && ended === 'done') out.append(h('span', { class: 'muted' }, '(empty reply)'));
  showMeta(true);
  msg.dataset.state = ended;
  state.busy = null;
  $('send').hidden = false;
  $('stop').hidden = true;
  updateSendable();
  scrollDown(false);
  $('input').focus();
}

// ---- API key ----

function openKeyDialog() {
  $('key-input').value = state.key;
  $('key-dialog').showModal();
}

function setupKeyDialog() {
  $('key-button').addEventListener('click', openKeyDialog);
  $('key-dialog').addEventListener('close', () => {
    const how = $('key-dialog').returnValue;
    if (how === 'save') state.key = $('key-input').value.trim();
    else if (how === 'clear') state.key = '';
    else return;
    if (state.key) localStorage.setItem(KEY_STORE, state.key);
    else localStorage.removeItem(KEY_STORE);
    $('key-button').textContent = state.key ? 'API key ✓' : 'API key';
    pollModels().catch(failed);
  });
  $('key-button').textContent = state.key ? 'API key ✓' : 'API key';
}

// ---- lend this tab ----

// The lend page takes the network's token from ?token= (else what it
// remembers). This page passes on a token it was opened with, and no other:
// the API key is a client's secret, not the workers'.
function setupLendLink() {
  const token = new URLSearchParams(location.search).get('token');
  if (token) $('lend-link').href = `/lend?token=${encodeURIComponent(token)}`;
}

// ---- start ----

function setup() {
  setupKeyDialog();
  setupLendLink();
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  $('stop').addEventListener('click', () => state.busy?.abort());
  $('clear').addEventListener('click', () => {
    state.busy?.abort();
    state.history = [];
    $('messages').replaceChildren(h('p', { class: 'empty', id: 'chat-empty' }, 'A new conversation.'));
  });
  $('model').addEventListener('change', updateSendable);
  window.addEventListener('resize', drawSpark);
  tick();
}

setup();
