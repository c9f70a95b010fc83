// The browser worker's Web Worker: runs /wasm/bonfire-worker.js (the worker
// compiled to WebAssembly, src/apps/wasm/browser_worker.cpp) and does what
// only a browser can: the WebSocket to the coordinator, model downloads
// checked by SHA-256 and kept in the Cache API, and reports to the page.
//
// Page → here: {cmd:'start', url, token, memory, threads, id, gpu}, {cmd:'stop'},
//              {cmd:'visible', visible}, {cmd:'profile', on} (for tuning)
// Here → page: {type:'state', state, message}, {type:'stats', stats},
//              {type:'log', text}, {type:'profile', report}
// States: loading, connecting, joined, refused, disconnected, error, stopped.
'use strict';

const CACHE = 'bonfire-models';
const MAX_BACKOFF_MS = 5000;

let opts = null;
let ws = null;
let ready = false;      // the module is running
let stopped = false;
let refused = false;    // for good: a wrong token, a banned worker
let joined = false;
let backoffMs = 250;
let reconnectTimer = null;
let statsTimer = null;
let fetching = null;    // {model, file, done, total} while a model downloads
let lastState = '';
let gpu = null;         // {device, description} while steps run on the tab's GPU
let gpuChain = Promise.resolve();  // GPU steps, one after another
let gpuSteps = 0;
let regainingGpu = false;  // a lost device is being replaced: joining waits for it
const fellBackNodes = new Set();  // nodes whose shader did not compile, logged once

const post = (type, fields) => self.postMessage(Object.assign({ type }, fields));
function setState(state, message = '') {
  lastState = state;
  post('state', { state, message });
}
const log = (text) => post('log', { text });

// The module's memory: a fresh view each time, since it may have grown.
const heap = () => new Uint8Array(self.Module.wasmMemory.buffer);

function toWasm(bytes) {
  const ptr = self.Module._malloc(Math.max(1, bytes.length));
  heap().set(bytes, ptr);
  return ptr;
}
const cString = (text) => toWasm(new TextEncoder().encode(text + '\0'));

self.onmessage = (e) => {
  const m = e.data || {};
  if (m.cmd === 'start') start(m);
  else if (m.cmd === 'stop') stop();
  else if (m.cmd === 'profile' && ready) profile(m.on);
  else if (m.cmd === 'visible' && m.visible && ready && !ws && !stopped && !refused) connect();
};

function start(m) {
  if (opts) return;
  opts = m;
  setState('loading', 'fetching and compiling the worker');
  self.Module = {
    bfThreads: Math.max(1, m.threads | 0),
    locateFile: (path) => '/wasm/' + path,
    mainScriptUrlOrBlob: '/wasm/bonfire-worker.js',
    print: log,
    printErr: log,
    bfSend, bfFetch, bfRefused, bfLog: log, bfGpuStep, bfGpuRelease,
    onAbort: (what) => setState('error', 'the worker stopped: ' + what),
    onRuntimeInitialized: begin,
  };
  try {
    importScripts('/wasm/bonfire-worker.js');
  } catch (err) {
    setState('error', 'cannot load /wasm/bonfire-worker.js (' + err.message +
             '); the coordinator\'s owner builds it with scripts/build_wasm.sh');
  }
}

// The tab's WebGPU device, if the browser offers one: announced to the
// coordinator (hello "device.webgpu") and, unless the page said gpu: false,
// kept open to run steps on (src/apps/wasm/gpu_steps.h).
async function openGpu() {
  try {
    if (!self.BonfireWebGpu) importScripts('/web/webgpu.js');
    // A browser may take its time to say it has no adapter; joining does not wait for it.
    const opened = await Promise.race([self.BonfireWebGpu.open(),
      new Promise((resolve) => setTimeout(() => resolve({ error: 'no answer from requestAdapter in 3 s' }), 3000))]);
    if (opened.error) {
      log('WebGPU: ' + opened.error);
      return null;
    }
    return opened;
  } catch (err) {
    log('WebGPU: ' + err.message);
    return null;
  }
}

async function webgpuDevice() {
  const opened = await openGpu();
  if (!opened) return null;
  if (opts.gpu === false) {
    opened.device.destroy();  // announced only; steps run in WebAssembly
  } else {
    gpu = opened;
    log(`WebGPU: steps run on ${opened.description.name}`);
  }
  return opened.description;
}

async function begin() {
  const webgpu = await webgpuDevice();
  const o = JSON.stringify({ token: opts.token || '', id: opts.id || '', memory: opts.memory, threads: opts.threads,
                             coordinator: opts.url, webgpu, gpuSteps: !!gpu });
  const p = cString(o);
  const rc = self.Module._bf_start(p);
  self.Module._free(p);
  if (rc !== 0) return setState('error', 'the worker did not start (see the log)');
  ready = true;
  statsTimer = setInterval(sendStats, 500);
  connect();
}

function connect() {
  clearTimeout(reconnectTimer);
  reconnectTimer = null;
  if (stopped || refused || ws || regainingGpu) return;
  setState('connecting', opts.url);
  joined = false;
  let socket;
  try {
    socket = new WebSocket(opts.url);
  } catch (err) {
    return retry('cannot open ' + opts.url + ': ' + err.message);
  }
  socket.binaryType = 'arraybuffer';
  ws = socket;
  socket.onopen = () => {
    log('connected to ' + opts.url);
    self.Module._bf_link_opened();
  };
  socket.onmessage = (e) => {
    if (!(e.data instanceof ArrayBuffer)) return;
    const bytes = new Uint8Array(e.data);
    // The module takes the buffer and frees it; non-zero: a malformed frame.
    if (self.Module._bf_receive(toWasm(bytes), bytes.length) !== 0) socket.close(1002, 'malformed frame');
  };
  socket.onclose = (e) => {
    if (ws !== socket) return;
    ws = null;
    self.Module._bf_link_closed();
    if (stopped || refused) return;
    retry('the link closed' + (e.reason ? ': ' + e.reason : ` (code ${e.code})`));
  };
}

function retry(why) {
  setState('disconnected', why + '; joining again');
  reconnectTimer = setTimeout(connect, backoffMs);
  backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
}

function stop() {
  stopped = true;
  clearTimeout(reconnectTimer);
  clearInterval(statsTimer);
  if (ws) ws.close(1000, 'the volunteer stopped lending');
  if (ready) self.Module._bf_stop();
  setState('stopped', 'this tab no longer lends');
}

// ---- called by the module ----

// A step program for the GPU (kernels/gpu_step.h): run after the ones before it.
function bfGpuStep(job, text) {
  const program = JSON.parse(text);
  gpuChain = gpuChain.then(() => runGpuStep(job, program));
}

function bfGpuRelease(handle) {
  if (gpu) self.BonfireWebGpu.releaseHandle(gpu.device, handle);
}

async function runGpuStep(job, program) {
  const M = self.Module;
  const withName = (id, f) => {
    const p = cString(id);
    try { return f(p); } finally { M._free(p); }
  };
  const host = {
    value(id) {
      const at = withName(id, (p) => M._bf_gpu_value(job, p));
      const [ptr, n] = new Int32Array(M.wasmMemory.buffer, at, 2);
      return ptr ? new Uint8Array(M.wasmMemory.buffer, ptr, n) : null;
    },
    put(id, buffer) {
      const bytes = new Uint8Array(buffer);
      const ptr = toWasm(bytes);  // the module takes it
      if (withName(id, (p) => M._bf_gpu_put(job, p, ptr, bytes.length)) !== 0) throw new Error(`the worker refused ${id}`);
    },
    runCpu(item) {
      const e = M._bf_gpu_run_cpu(job, item);
      if (!e) return;
      const message = M.UTF8ToString(e);
      M._free(e);
      throw new Error(message);
    },
  };
  let retained = {};
  let error = '';
  try {
    if (!gpu) throw new Error('the GPU device is gone');
    const r = await self.BonfireWebGpu.runStep(gpu.device, program, host);
    retained = r.retained;
    for (const f of r.fellBack) {
      const node = f.slice(0, f.indexOf(':'));
      if (!fellBackNodes.has(node)) log('WebGPU: ran on the CPU instead: ' + f);  // once per node
      fellBackNodes.add(node);
    }
    gpuSteps += 1;
  } catch (err) {
    error = err.message || String(err);
  }
  // A step that failed on the GPU leaves the device in doubt (a lost
  // device's promise may settle late or never): it is let go like a lost
  // one. The link closes first, so the call fails as a worker fault and the
  // coordinator moves the generation to another worker.
  try {
    if (error) gpuLost(error);
  } finally {
    withName(JSON.stringify(retained), (r) => withName(error, (e) => M._bf_gpu_finish(job, r, e)));
  }
}

// The device is gone or in doubt: its sessions with it. The tab leaves,
// joins again, and runs its steps on a fresh device if the browser grants
// one, else in WebAssembly.
function gpuLost(why) {
  if (!gpu) return;
  log('WebGPU: ' + why + '; the sessions it held are dropped and the tab joins again');
  gpu.device.destroy();  // a device that stopped answering is let go for good
  gpu = null;
  self.Module._bf_gpu_lost();
  // The tab joins again once it knows whether it has a device, so its hello says where its steps run.
  regainingGpu = true;
  if (ws) ws.close(4000, 'the GPU device was lost');  // 4000-4999: the application's own codes
  openGpu().then((opened) => {
    if (opened && !stopped) {
      gpu = opened;
      self.Module._bf_gpu_enable(1);
      log(`WebGPU: steps run on ${opened.description.name} again`);
    } else {
      log('WebGPU: no fresh device; steps run in WebAssembly');
    }
    regainingGpu = false;
    connect();
  });
}

function bfSend(ptr, n) {
  const bytes = heap().slice(ptr, ptr + n);  // a copy: WebSocket.send takes no shared memory
  self.Module._free(ptr);
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(bytes);
}

function bfRefused(why, retryLater) {
  if (retryLater) return;  // the link closes; retry() joins again
  refused = true;
  setState('refused', why);
  if (ws) ws.close(1000, 'refused');
}

const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
const sha256 = async (buf) => hex(await crypto.subtle.digest('SHA-256', buf));

// Reads a response body, counting bytes for the page's progress line.
async function readBody(response, expected) {
  const reader = response.body.getReader();
  const out = new Uint8Array(expected);
  let at = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (at + value.length > expected) throw new Error(`more than the announced ${expected} bytes`);
    out.set(value, at);
    at += value.length;
    fetching.done += value.length;
  }
  if (at !== expected) throw new Error(`${at} bytes of the announced ${expected}`);
  return out.buffer;
}

// One file: from the cache when its hash still matches, else downloaded
// with the network's token and checked before it is kept.
async function fetchFile(cache, req, f) {
  const url = `/api/v3/models/${encodeURIComponent(req.model)}/files/${encodeURIComponent(f.name)}`;
  const key = `${url}?sha256=${f.sha256}`;
  fetching.file = f.name;
  if (cache) {
    const hit = await cache.match(key);
    if (hit) {
      const buf = await hit.arrayBuffer();
      if ((await sha256(buf)) === f.sha256) {
        fetching.done += f.bytes;
        log(`${req.model}/${f.name}: from this browser's cache`);
        return buf;
      }
      await cache.delete(key);
    }
  }
  log(`${req.model}/${f.name}: downloading ${(f.bytes / 1048576).toFixed(1)} MiB`);
  const headers = opts.token ? { Authorization: 'Bearer ' + opts.token } : {};
  const r = await fetch(url, { headers, cache: 'no-store' });
  if (!r.ok) throw new Error(`GET ${url}: HTTP ${r.status}`);
  const buf = await readBody(r, f.bytes);
  if ((await sha256(buf)) !== f.sha256) throw new Error(`${f.name} does not match its SHA-256`);
  if (cache) {
    try {
      await cache.put(key, new Response(buf));
    } catch (err) {
      log(`${f.name}: not cached (${err.message})`);
    }
  }
  return buf;
}

async function bfFetch(id, text) {
  const req = JSON.parse(text);
  let error = '';
  try {
    const total = req.files.reduce((a, f) => a + f.bytes, 0);
    fetching = { model: req.model, file: '', done: 0, total };
    let cache = null;
    try {
      cache = await caches.open(CACHE);
    } catch (err) {
      log('no cache storage here (' + err.message + '): weights are downloaded each time');
    }
    self.Module.FS.mkdirTree(req.dir);
    for (const f of req.files) {
      const buf = await fetchFile(cache, req, f);
      // canOwn: the file system keeps this buffer instead of a copy (a
      // large model would otherwise sit in the tab's memory twice).
      self.Module.FS.writeFile(`${req.dir}/${f.name}`, new Uint8Array(buf), { canOwn: true });
    }
  } catch (err) {
    error = err.message || String(err);
    log('model ' + req.model + ': ' + error);
  }
  fetching = null;
  const p = cString(error);
  self.Module._bf_fetched(id, p);
  self.Module._free(p);
}

// {cmd:'profile', on} → {type:'profile', report}: the per-op table since the
// last call (graph/profile.h), for tuning; on starts a fresh one.
function profile(on) {
  const p = self.Module._bf_profile(on ? 1 : 0);
  post('profile', { report: self.Module.UTF8ToString(p) });
  self.Module._free(p);
}

function sendStats() {
  if (!ready) return;
  const p = self.Module._bf_stats();
  const stats = JSON.parse(self.Module.UTF8ToString(p));
  self.Module._free(p);
  stats.fetching = fetching;
  stats.gpu = gpu ? { adapter: gpu.description.name, steps: gpuSteps } : null;
  stats.memory.used = stats.memory.heap;
  post('stats', { stats });
  if (stats.id && ws && !joined) {
    joined = true;
    backoffMs = 250;
    setState('joined', stats.id);
  }
}
