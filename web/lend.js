// The lend page: this tab becomes a worker of the coordinator that serves
// the page. The work runs in a Web Worker (web/lend-worker.js: the
// WebSocket to the coordinator, model downloads, the WebAssembly build of
// the worker); this script checks the browser first, starts and stops that
// worker, and shows what it reports. Every state is visible text: a
// volunteer who sees nothing change cannot tell waiting from broken.
//
// The contract with lend-worker.js (postMessage):
//   page -> worker: {cmd: 'start', url, token, memory (bytes), threads, id: '', gpu},
//                   {cmd: 'stop'}, {cmd: 'visible', visible}
//   worker -> page: {type: 'state', state, message}, {type: 'stats', stats}, {type: 'log', text}
'use strict';

const $ = (id) => document.getElementById(id);
const STORE = { token: 'bonfire.lend.token', memory: 'bonfire.lend.memory', threads: 'bonfire.lend.threads' };
const MEMORY_MIB = { min: 64, max: 3584, default: 1024 };  // 32-bit WebAssembly memory ends at 4 GiB
const MAX_THREADS = 64;
const LOG_LINES = 50;
const STOP_GRACE_MS = 1000;     // after {cmd: 'stop'}, the worker is terminated anyway
const SILENCE_MS = 15000;       // no word from a new worker this long: say so

// (module (func (result v128) i32.const 0 i8x16.splat i8x16.popcnt)): valid
// only where WebAssembly SIMD is, which the worker's kernels need.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0,
                                   65, 0, 253, 15, 253, 98, 11]);

// What each state says, big, and the status dot's colour (main page's style).
const STATES = {
  checking: ['Checking this browser…', 'connecting'],
  unsupported: ['This browser cannot lend this tab', 'down'],
  idle: ['Not lending', 'connecting'],
  loading: ['Loading the worker…', 'connecting'],
  connecting: ['Connecting to the coordinator…', 'connecting'],
  joined: ['Lending this tab', 'up'],
  refused: ['Refused by the coordinator', 'down'],
  disconnected: ['Disconnected: reconnecting…', 'down'],
  error: ['Error', 'down'],
  stopping: ['Stopping…', 'connecting'],
  stopped: ['Stopped', 'connecting'],
};

const page = {
  features: null,     // detect()
  worker: null,       // the running Web Worker, or null
  starting: false,    // between Start and the worker's creation
  state: 'checking',
  models: [],         // GET /api/v3/models when the coordinator lets us read it: [{id, bytes}]
  silence: 0,         // timer: no message from the worker since start
  stopTimer: 0,
};

// ---- helpers ----

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, v);
  for (const c of children.flat()) if (c !== undefined && c !== null) el.append(c instanceof Node ? c : String(c));
  return el;
}

function bytes(n) {
  if (!Number.isFinite(n) || n < 0) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return `${n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
}

const count = (n) => (Number.isFinite(n) ? n.toLocaleString('en-US') : '–');
const rate = (n) => (!Number.isFinite(n) ? '–' : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));
const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

function log(text) {
  const box = $('log');
  const at = new Date().toLocaleTimeString('en-GB');
  box.append(h('li', {}, h('span', { class: 'muted' }, at), ' ', String(text)));
  while (box.children.length > LOG_LINES) box.firstElementChild.remove();
  box.scrollTop = box.scrollHeight;
}

// ---- what this browser can do ----

function detect() {
  const wasm = typeof WebAssembly === 'object' && typeof WebAssembly.validate === 'function';
  let simd = false;
  try { simd = wasm && WebAssembly.validate(SIMD_PROBE); } catch { /* no SIMD */ }
  return {
    wasm,
    simd,
    worker: typeof Worker === 'function',
    // Threads share the WASM memory, which needs SharedArrayBuffer, which
    // browsers grant only to cross-origin isolated pages (the coordinator
    // sends COOP/COEP; a proxy may strip them).
    isolated: self.crossOriginIsolated === true && typeof SharedArrayBuffer !== 'undefined',
    // Model files are checked by SHA-256 (crypto.subtle) and kept in the
    // Cache API (caches): both exist only in a secure context.
    secure: self.isSecureContext === true && !!(self.crypto && crypto.subtle) && typeof caches !== 'undefined',
  };
}

// Why this tab cannot lend, one sentence each; [] when it can.
function blockers(f) {
  const out = [];
  if (!f.wasm) out.push('This browser has no WebAssembly, which the worker is built as. Try a current Chrome, Edge, Firefox or Safari.');
  else if (!f.simd) out.push('This browser\'s WebAssembly has no SIMD, which the worker\'s kernels need. Update the browser (Chrome 91+, Firefox 89+, Safari 16.4+).');
  if (!f.worker) out.push('This browser has no Web Workers to run the worker in.');
  // The worker's memory is a SharedArrayBuffer even at one thread (it is
  // built with threads), so without isolation it cannot start at all.
  if (f.wasm && !f.isolated) {
    out.push('This page is not cross-origin isolated, so the browser gives it no SharedArrayBuffer, which the ' +
             'worker\'s memory and threads are built on. The coordinator sends the Cross-Origin-Opener-Policy and ' +
             'Cross-Origin-Embedder-Policy headers that grant it: something between it and this browser (a proxy?) ' +
             'dropped them, or this browser does not support them.');
  }
  if (!f.secure) {
    out.push(`This page is not a secure context (${location.origin}), so the browser withholds what the worker needs ` +
             'to check model files (crypto.subtle) and keep them (the Cache API). Serve the coordinator over ' +
             'https (bonfire serve --tls-cert CERT --tls-key KEY) and open https://…/lend, or open it as ' +
             'http://localhost or http://127.0.0.1 on the coordinator\'s own machine.');
  }
  return out;
}

function showNotices(lines, kind) {
  $('notices').replaceChildren(...lines.map((t) => h('li', { class: kind }, t)));
}

// ---- state ----

function setState(state, message = '') {
  page.state = state;
  const [title, dot] = STATES[state] || [state, 'connecting'];
  $('state-panel').dataset.state = state;
  $('state').textContent = title;
  $('state-detail').textContent = message;
  $('status').dataset.state = dot;
  $('status-text').textContent = title.toLowerCase();
  document.title = `bonfire · ${title.toLowerCase()}`;
  const running = !!page.worker || page.starting;
  $('start').hidden = running;
  $('stop').hidden = !running;
  $('start').disabled = state === 'unsupported';
  for (const id of ['token', 'memory', 'threads']) $(id).disabled = running || state === 'unsupported';
  $('settings-hint').textContent = running ? 'Press Stop to change these; they take effect at the next Start.'
    : 'They take effect when you press Start.';
}

function stateMessage(state, message) {
  if (state === 'joined') return message ? `Joined as ${message}. The coordinator sends this tab work as it needs it.` : 'Joined.';
  if (state === 'refused') return `${message || 'no reason given'}. Check the token above and press Start to try again.`;
  if (state === 'disconnected') return message ? `${message}. Trying again…` : 'Trying again…';
  return message || '';
}

// ---- settings ----

function initialSettings() {
  const q = new URLSearchParams(location.search);
  const threadsDefault = page.features.isolated ? Math.min(navigator.hardwareConcurrency || 1, 8) : 1;
  $('token').value = q.get('token') ?? localStorage.getItem(STORE.token) ?? '';
  $('memory').value = q.get('memory') ?? localStorage.getItem(STORE.memory) ?? MEMORY_MIB.default;
  $('threads').value = q.get('threads') ?? localStorage.getItem(STORE.threads) ?? threadsDefault;
  $('threads').max = page.features.isolated ? MAX_THREADS : 1;
}

// The settings as the worker gets them, clamped and shown back as used.
function readSettings() {
  const memory = clamp(Math.round(Number($('memory').value) || MEMORY_MIB.default), MEMORY_MIB.min, MEMORY_MIB.max);
  let threads = clamp(Math.round(Number($('threads').value) || 1), 1, MAX_THREADS);
  if (!page.features.isolated) threads = 1;
  const token = $('token').value.trim();
  $('memory').value = memory;
  $('threads').value = threads;
  if (token) localStorage.setItem(STORE.token, token);
  else localStorage.removeItem(STORE.token);
  localStorage.setItem(STORE.memory, String(memory));
  localStorage.setItem(STORE.threads, String(threads));
  return { token, memoryMiB: memory, threads };
}

// ---- the coordinator's models (for a warning before anything downloads) ----

async function loadModels() {
  try {
    const r = await fetch('/api/v3/models', { cache: 'no-store' });
    if (!r.ok) return;  // it asks clients for an API key: the worker's own log says what it fetches
    page.models = ((await r.json()).models || []).map((m) => ({ id: m.id, bytes: m.bytes }));
  } catch { /* the worker reports connection trouble itself */ }
}

// A sentence when the memory limit is below every model served (the
// coordinator then offers this tab none), naming the sizes; '' otherwise.
function memoryWarning(limitMiB) {
  const sized = page.models.filter((m) => Number.isFinite(m.bytes));
  if (!sized.length || sized.some((m) => m.bytes <= limitMiB * 1024 * 1024)) return '';
  const needs = sized.map((m) => `${m.id} needs ${bytes(m.bytes)}`).join(', ');
  return `The memory limit (${limitMiB} MiB) is smaller than every model this coordinator serves (${needs}), so ` +
         'no model will be downloaded into this tab. Stop, raise the memory limit, and Start again.';
}

// ---- the worker ----

function workerUrl() {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/api/v3/worker`;
}

async function start() {
  if (page.worker || page.starting || page.state === 'unsupported') return;
  const s = readSettings();
  // Said at once: the state shown must never be the last attempt's.
  page.starting = true;
  setState('loading', 'starting');
  const notes = [];
  await loadModels();
  page.starting = false;
  const warning = memoryWarning(s.memoryMiB);
  if (warning) {
    notes.push(warning);
    log(warning);
  }
  showNotices(notes, 'warn');
  $('coordinator').textContent = location.host;
  log(`starting: ${s.threads} thread${s.threads === 1 ? '' : 's'}, memory limit ${s.memoryMiB} MiB, ` +
      `${s.token ? 'with a token' : 'no token'}`);
  let w;
  try {
    w = new Worker('/web/lend-worker.js');
  } catch (e) {
    return setState('error', `the browser worker (web/lend-worker.js) could not start: ${e.message || e}`);
  }
  page.worker = w;
  w.onmessage = (ev) => onWorkerMessage(w, ev.data);
  w.onerror = (ev) => onWorkerError(w, ev);
  w.onmessageerror = () => log('a message from the worker could not be read');
  w.postMessage({ cmd: 'start', url: workerUrl(), token: s.token, memory: s.memoryMiB * 1024 * 1024,
                  threads: s.threads, id: '',
                  // ?gpu=0: steps stay in WebAssembly even where the browser offers WebGPU.
                  gpu: new URLSearchParams(location.search).get('gpu') !== '0' });
  w.postMessage({ cmd: 'visible', visible: !document.hidden });
  clearTimeout(page.silence);
  page.silence = setTimeout(() => {
    if (page.worker === w) setState('error', `the browser worker has said nothing for ${SILENCE_MS / 1000} s after start`);
  }, SILENCE_MS);
  setState('loading', 'fetching and compiling the worker');
}

function onWorkerMessage(w, m) {
  if (page.worker !== w || !m || typeof m !== 'object') return;  // a stopped worker's last words
  clearTimeout(page.silence);
  if (m.type === 'state') onWorkerState(String(m.state), m.message ? String(m.message) : '');
  else if (m.type === 'stats' && m.stats) showStats(m.stats);
  else if (m.type === 'log') log(m.text);
}

function onWorkerState(state, message) {
  if (state !== 'stopped') log(`${state}${message ? `: ${message}` : ''}`);
  if (state === 'joined' && message) $('worker-id').textContent = message;
  if (state === 'stopped') return finishStop();
  if (page.state === 'stopping') return;  // the stop is on its way
  // A refused worker does not retry: let it go, so Start makes a fresh one
  // with the token as corrected.
  if (state === 'refused') {
    discard();
    setState('refused', stateMessage(state, message));
    $('token').focus();
    return;
  }
  setState(state, stateMessage(state, message));
}

function onWorkerError(w, ev) {
  if (page.worker !== w) return;
  ev.preventDefault?.();
  const why = ev.message || 'web/lend-worker.js failed to load (is it on the coordinator?)';
  log(`worker error: ${why}`);
  discard();
  setState('error', `the browser worker stopped: ${why}`);
}

// Drops the worker without waiting for it.
function discard() {
  const w = page.worker;
  page.worker = null;
  clearTimeout(page.silence);
  clearTimeout(page.stopTimer);
  $('download').hidden = true;
  if (!w) return;
  try { w.postMessage({ cmd: 'stop' }); } catch { /* gone */ }
  w.terminate();
}

function stop() {
  if (!page.worker || page.state === 'stopping') return;
  setState('stopping', 'asking the worker to leave the network');
  page.worker.postMessage({ cmd: 'stop' });
  page.stopTimer = setTimeout(finishStop, STOP_GRACE_MS);
}

function finishStop() {
  discard();
  setState('stopped', 'This tab lends nothing now. Press Start to lend it again.');
}

// ---- stats ----

function layersText(layers) {
  if (Array.isArray(layers) && layers.length === 2) return `layers ${layers[0]}–${layers[1] - 1}`;
  if (Number.isFinite(layers)) return `${layers} layer${layers === 1 ? '' : 's'}`;
  return layers ? `layers ${layers}` : '';
}

function showStats(s) {
  if (s.id) $('worker-id').textContent = s.id;
  $('steps').textContent = count(s.steps);
  $('tps').textContent = rate(s.tokensPerSecond);
  $('sessions').textContent = count(s.sessions);
  $('threads-used').textContent = count(s.threads);
  $('simd').textContent = typeof s.simd === 'boolean' ? (s.simd ? 'yes' : 'no') : String(s.simd ?? '–');
  const mem = s.memory || {};
  $('memory-used').textContent = `${bytes(mem.used)} / ${bytes(mem.limit)}`;
  const models = Array.isArray(s.models) ? s.models : [];
  $('models').replaceChildren(...(models.length
    ? models.map((m) => h('span', { class: 'chip model', 'data-model': m.id },
      [m.id, layersText(m.layers), Number.isFinite(m.bytes) ? bytes(m.bytes) : ''].filter(Boolean).join(' · ')))
    : [h('span', { class: 'muted' }, 'none yet')]));
  showDownload(s.fetching);
}

function showDownload(f) {
  $('download').hidden = !f;
  if (!f) return;
  const part = f.total > 0 ? clamp(f.done / f.total, 0, 1) : 0;
  $('download-bar').style.cssText = `left:0;width:${(100 * part).toFixed(1)}%`;
  $('download-text').textContent = `${f.model} · ${f.file}: ${bytes(f.done)} of ${f.total > 0 ? bytes(f.total) : '?'}` +
    (f.total > 0 ? ` (${Math.floor(100 * part)}%)` : '');
}

// ---- start ----

function setup() {
  page.features = detect();
  initialSettings();
  $('coordinator').textContent = location.host;
  $('simd').textContent = page.features.simd ? 'wasm simd128' : 'none';
  $('start').addEventListener('click', () => { start(); });
  $('stop').addEventListener('click', stop);
  $('settings').addEventListener('submit', (e) => { e.preventDefault(); start(); });
  document.addEventListener('visibilitychange', () => {
    page.worker?.postMessage({ cmd: 'visible', visible: !document.hidden });
  });
  // Leaving the page ends the worker with it; saying so first lets the
  // coordinator move the work at once rather than at a timeout.
  window.addEventListener('pagehide', () => page.worker?.postMessage({ cmd: 'stop' }));
  const blocked = blockers(page.features);
  if (blocked.length) {
    showNotices(blocked, 'bad');
    blocked.forEach(log);
    return setState('unsupported', 'Nothing was started. The reasons:');
  }
  setState('idle', '');
  // The volunteer opened this page to lend the tab: start at once. A wrong
  // or missing token is refused, and the page then asks for it.
  start();
}

setup();
