// Shared helpers of the network's end-to-end tests (tests/net/*.test.mjs):
// real `bonfire serve` and `bonfire worker` processes on loopback, driven
// over HTTP. Every process started here is killed when the test exits, pass
// or fail, and the stderr of each is printed when a test fails, since that
// is where the coordinator and workers say what went wrong.
//
// Node 18 is enough (global fetch, child_process); nothing here needs npm.
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const SRC = process.env.BONFIRE_SOURCE_DIR ||
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = process.env.BONFIRE_BINARY || path.join(SRC, 'build', 'bonfire');
const PYTHON = '/usr/bin/python3';

// The children's environment: this process's (bonfire's own thread pool
// polls only briefly before it sleeps, so no setting is needed to keep
// several processes on a few cores from starving each other).
const CHILD_ENV = { ...process.env };

const children = [];  // {name, proc, log: string[], exit: Promise<code>}
const started = Date.now();

export function log(...a) {
  console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s]`, ...a);
}

export class TestFailure extends Error {}

export function check(cond, message) {
  if (!cond) throw new TestFailure(message);
}

// JSON with object keys sorted: equal values, equal strings.
const canon = (v) => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x)
  ? Object.fromEntries(Object.keys(x).sort().map((key) => [key, x[key]])) : x));

// Deep equality of JSON values, with a message saying where they differ.
export function checkEqual(got, want, what) {
  const g = String(canon(got)), w = String(canon(want));  // undefined prints as "undefined"
  if (g === w) return;
  let detail = '';
  if (Array.isArray(got) && Array.isArray(want)) {
    let i = 0;
    while (i < got.length && i < want.length && canon(got[i]) === canon(want[i])) ++i;
    detail = ` (first difference at index ${i}: got ${JSON.stringify(got[i])}, want ${JSON.stringify(want[i])};` +
      ` lengths ${got.length} and ${want.length})`;
  }
  throw new TestFailure(`${what} differ${detail}\n  got:  ${g.slice(0, 2000)}\n  want: ${w.slice(0, 2000)}`);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Rejects after `ms` with a message naming what was awaited.
export function withTimeout(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new TestFailure(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

// Polls `fn` until it returns a truthy value.
export async function waitFor(fn, ms, what, every = 100) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new TestFailure(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(every);
  }
}

// ---- processes ----

export function startProcess(name, args, { env = {}, cwd } = {}) {
  const proc = spawn(BIN, args, { env: { ...CHILD_ENV, ...env }, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const child = { name, proc, log: [], stdout: '', bytes: 0 };
  const keep = (chunk) => {
    // The tail is what explains a failure; keep at most ~1 MB per process.
    child.log.push(chunk.toString());
    child.bytes += chunk.length;
    while (child.bytes > 1 << 20 && child.log.length > 1) child.bytes -= child.log.shift().length;
  };
  proc.stderr.on('data', keep);
  proc.stdout.on('data', (c) => { child.stdout += c; });
  child.exit = new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? `signal ${signal}`)));
  child.exited = false;
  child.exit.then(() => { child.exited = true; });
  children.push(child);
  return child;
}

export const stderrOf = (child) => child.log.join('');

// `bonfire serve --port 0 ...` (or `listen`): resolves when it prints the
// port it listens on. child.url is https:// when serve speaks TLS.
export async function startServe(args, { name = 'serve', env, port: listen = 0 } = {}) {
  const child = startProcess(name, ['serve', '--port', String(listen), ...args], { env });
  const [scheme, port] = await waitFor(() => {
    if (child.exited) throw new TestFailure(`${name} exited before listening:\n${stderrOf(child)}`);
    const m = /listening on (https?):\/\/[^\s:]+:(\d+)/.exec(stderrOf(child));
    return m && [m[1], Number(m[2])];
  }, 60000, `${name} to print "listening on"`, 50);
  child.port = port;
  child.url = `${scheme}://127.0.0.1:${port}`;
  return child;
}

// Makes this process's fetch (and so the OpenAI client) trust the CA
// certificate in `caFile`: Node reads NODE_EXTRA_CA_CERTS only at start-up,
// so the test runs again in a child node that has it, with `env` added, and
// this process exits with the child's status. Returns in the child.
export function trustCA(caFile, env = {}) {
  if (process.env.NODE_EXTRA_CA_CERTS === caFile) return;
  const r = spawnSync(process.execPath, process.argv.slice(1), {
    env: { ...process.env, ...env, NODE_EXTRA_CA_CERTS: caFile }, stdio: 'inherit', timeout: 590000,
  });
  if (r.error) console.error(`the test's child node: ${r.error.message}`);
  process.exit(r.status ?? 1);
}

export function startWorker(url, args, { name, env } = {}) {
  const id = args.includes('--id') ? args[args.indexOf('--id') + 1] : undefined;
  return startProcess(name || `worker ${id ?? children.length}`, ['worker', '--join', url, ...args], { env });
}

// Stops a process: SIGTERM (or `signal`), then SIGKILL if it lingers.
export async function stopProcess(child, signal = 'SIGTERM', graceMs = 5000) {
  if (child.exited) return child.exit;
  child.proc.kill(signal);
  let timer;
  const late = new Promise((r) => { timer = setTimeout(r, graceMs, 'late'); });
  if ((await Promise.race([child.exit, late])) === 'late') {
    log(`${child.name} did not stop within ${graceMs} ms of ${signal}: SIGKILL`);
    if (process.env.BONFIRE_TEST_GDB) {  // where it hangs, when debugging
      const r = spawnSync('gdb', ['-batch', '-p', String(child.proc.pid), '-ex', 'thread apply all bt 12'],
                          { encoding: 'utf8', timeout: 60000 });
      log(r.stdout.split('\n').filter((l) => /^#|^Thread/.test(l)).join('\n'));
    }
    child.proc.kill('SIGKILL');
  }
  clearTimeout(timer);
  return child.exit;
}

function killAll() {
  for (const c of children) if (!c.exited) try { c.proc.kill('SIGKILL'); } catch { /* gone */ }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'])
  process.on(sig, () => { killAll(); process.exit(1); });

// Runs bonfire to completion (a CLI command), with a timeout.
export function runBonfire(args, { timeoutMs = 120000, input } = {}) {
  const r = spawnSync(BIN, args, { env: CHILD_ENV, timeout: timeoutMs, input, encoding: 'utf8',
                                   maxBuffer: 64 << 20 });
  if (r.error) throw new TestFailure(`bonfire ${args.join(' ')}: ${r.error.message}`);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function runBonfireJson(args, opts) {
  const r = runBonfire(args, opts);
  if (r.code !== 0) throw new TestFailure(`bonfire ${args.join(' ')} exited ${r.code}:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

// ---- HTTP ----

// One request; resolves {status, json, text, headers}. JSON bodies are sent
// as given when `body` is a string (malformed JSON tests), else stringified.
export async function http(base, method, p, body, { headers = {}, timeoutMs = 120000 } = {}) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const res = await fetch(base + p, {
      method, headers: { 'content-type': 'application/json', ...headers }, signal: ctl.signal,
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json;
    try { json = JSON.parse(text); } catch { json = undefined; }
    return { status: res.status, json, text, headers: res.headers };
  } catch (e) {
    throw new TestFailure(`${method} ${p}: ${ctl.signal.aborted ? `no answer within ${timeoutMs} ms` : `${e.message} (${e.cause?.code ?? e.cause?.message ?? ''})`}`);
  } finally {
    clearTimeout(timer);
  }
}

export const getJson = (base, p, o) => http(base, 'GET', p, undefined, o);
export const postJson = (base, p, body, o) => http(base, 'POST', p, body, o);

// The data: payloads of a server-sent event stream, parsed as they arrive.
export async function* sseEvents(res) {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true });
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, at);
      buf = buf.slice(at + 2);
      for (const line of event.split('\n'))
        if (line.startsWith('data: ')) yield line.slice(6) === '[DONE]' ? '[DONE]' : JSON.parse(line.slice(6));
    }
  }
  if (buf.trim()) throw new TestFailure(`the event stream ended inside an event: ${JSON.stringify(buf)}`);
}

// A streamed /api/v3/generate: every event, in order; `onEvent(e, i)` may
// act between them (kill a worker...). Bounded by `timeoutMs`.
export async function streamGenerate(base, body, { onEvent, timeoutMs = 120000, headers = {} } = {}) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const res = await fetch(base + '/api/v3/generate', {
      method: 'POST', headers: { 'content-type': 'application/json', ...headers }, signal: ctl.signal,
      body: JSON.stringify({ ...body, stream: true }),
    });
    if (res.status !== 200) throw new TestFailure(`streamed generate: HTTP ${res.status}: ${await res.text()}`);
    check((res.headers.get('content-type') || '').startsWith('text/event-stream'),
          `streamed generate: content-type ${res.headers.get('content-type')}`);
    const events = [];
    for await (const e of sseEvents(res)) {
      events.push(e);
      if (onEvent) await onEvent(e, events.length - 1);
    }
    return events;
  } catch (e) {
    if (ctl.signal.aborted) throw new TestFailure(`streamed generate: not finished within ${timeoutMs} ms`);
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

// Checks a generate event stream's shape and returns its final event.
export function checkStream(events, what) {
  check(events.length >= 1, `${what}: no events`);
  const done = events[events.length - 1];
  check(done.done === true, `${what}: the last event is not {"done": true}: ${JSON.stringify(done)}`);
  const toks = events.slice(0, -1);
  for (const e of toks)
    check(Number.isInteger(e.token) && typeof e.text === 'string' && e.done === undefined,
          `${what}: an event that is not {"token", "text"}: ${JSON.stringify(e)}`);
  checkEqual(toks.map((e) => e.token), done.tokens, `${what}: streamed tokens and the done event's tokens`);
  // The texts add up to the final text; after an eos, text the loop held
  // back (an incomplete UTF-8 sequence) has no token left to carry it.
  const joined = toks.map((e) => e.text).join('');
  if (done.finishReason === 'eos') check(done.text.startsWith(joined), `${what}: streamed texts ${JSON.stringify(joined)} do not begin the done event's text ${JSON.stringify(done.text)}`);
  else checkEqual(joined, done.text, `${what}: streamed texts and the done event's text`);
  return done;
}

export async function workers(base, headers) {
  const r = await getJson(base, '/api/v3/workers', { headers, timeoutMs: 10000 });
  check(r.status === 200, `GET /api/v3/workers: HTTP ${r.status} ${r.text}`);
  return r.json.workers;
}

// Waits until the coordinator lists `n` workers (ids optional) that hold
// `model` when given. A serve that dies meanwhile fails at once.
export async function waitWorkers(serve, n, { ids, model, timeoutMs = 60000, headers } = {}) {
  return waitFor(async () => {
    if (serve.exited) throw new TestFailure(`${serve.name} exited:\n${stderrOf(serve)}`);
    const ws = await workers(serve.url, headers);
    const ok = ws.filter((w) => (!model || w.models.some((m) => m.id === model)) && (!ids || ids.includes(w.id)));
    return ok.length === n && ws.length === n ? ws : null;
  }, timeoutMs, `${n} workers${ids ? ` (${ids.join(', ')})` : ''} at ${serve.url}`);
}

// ---- test models ----

// build/testmodels/<family>-<gguf types>[-<args suffix>], named exactly as
// tests/test_models.h names them so the C++ tests and these share folders.
function writerArgsSuffix(args) {
  const short = { '--sliding-window': 'sw', '--layers': 'l', '--hidden': 'h', '--heads': 'nh', '--kv-heads': 'kv',
    '--head-dim': 'hd', '--intermediate': 'ff', '--experts': 'e', '--experts-used': 'eu', '--moe-intermediate': 'mff',
    '--vocab': 'v', '--vocab-multiple': 'vm', '--seed': 's', '--std': 'std', '--dtype': 'dt', '--pre': 'pre' };
  const plain = (v) => /^[A-Za-z0-9._]+$/.test(v);
  const parts = [];
  let hash = false;
  for (let i = 0; i < args.length; ++i) {
    if (short[args[i]] && i + 1 < args.length && plain(args[i + 1])) parts.push(short[args[i]] + args[++i]);
    else hash = true;
  }
  if (hash) {
    let h = 2166136261;
    for (const a of args) {
      for (const c of Buffer.from(a, 'utf8')) h = Math.imul(h ^ c, 16777619) >>> 0;
      h = Math.imul(h ^ 0, 16777619) >>> 0;
    }
    parts.push(h.toString(16).padStart(8, '0'));
  }
  return parts.join('-');
}

// The folder holding hf/ (and the GGUF files) of a random test model,
// written on first use (aside, then renamed, so concurrent writers are safe).
export function testModel(family, ggufTypes = 'f32,q8_0', extraArgs = []) {
  const root = path.join(SRC, 'build', 'testmodels');
  let name = `${family}-${ggufTypes}`;
  if (extraArgs.length) name += '-' + writerArgsSuffix(extraArgs);
  const dir = path.join(root, name);
  if (fs.existsSync(path.join(dir, 'hf', 'config.json'))) return dir;
  fs.mkdirSync(root, { recursive: true });
  const tmp = path.join(root, `${name}.tmp.${process.pid}`);
  log(`writing test model ${name}`);
  const r = spawnSync(PYTHON, [path.join(SRC, 'scripts', 'write_test_model.py'), '--family', family, '--out', tmp,
                               '--gguf', ggufTypes, ...extraArgs], { encoding: 'utf8', timeout: 600000 });
  if (r.status !== 0) throw new TestFailure(`write_test_model.py failed:\n${r.stderr}`);
  try { fs.renameSync(tmp, dir); } catch { fs.rmSync(tmp, { recursive: true, force: true }); }  // lost a race
  check(fs.existsSync(path.join(dir, 'hf', 'config.json')), `no test model at ${dir}`);
  return dir;
}

// A fresh temporary folder, removed at exit.
export function tempDir(prefix = 'bonfire-net-') {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  process.on('exit', () => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

// ---- running a test ----

// Runs `fn`; on failure prints the error and every process's stderr, exits
// 1. Always kills what was started. A whole test is bounded by `timeoutMs`.
export async function main(name, fn, { timeoutMs = 540000 } = {}) {
  check(fs.existsSync(BIN), `no bonfire binary at ${BIN} (set BONFIRE_BINARY)`);
  const hard = setTimeout(() => {
    console.error(`FAIL ${name}: the test did not finish within ${timeoutMs / 1000} s`);
    dumpLogs();
    killAll();
    process.exit(1);
  }, timeoutMs);
  try {
    await fn();
    // What is still running must stop cleanly on SIGTERM (a crash while
    // shutting down is a bug too).
    const running = children.filter((c) => !c.exited);
    const codes = await Promise.all(running.map((c) => stopProcess(c)));
    running.forEach((c, i) => check(codes[i] === 0, `${c.name} exited with ${codes[i]} on SIGTERM`));
    log(`PASS ${name}`);
    clearTimeout(hard);
    process.exit(0);
  } catch (e) {
    console.error(`FAIL ${name}: ${e instanceof TestFailure ? e.message : e.stack || e}`);
    dumpLogs();
    killAll();
    clearTimeout(hard);
    process.exit(1);
  }
}

function dumpLogs() {
  for (const c of children) {
    const text = stderrOf(c);
    console.error(`\n----- stderr of ${c.name} (pid ${c.proc.pid}, ${c.exited ? 'exited' : 'running'}) -----`);
    console.error(text.length > 20000 ? '...' + text.slice(-20000) : text);
  }
}

// The official OpenAI client (scripts/fetch_node_clients.sh installs it into
// refs/node-clients, which is not committed).
export async function loadOpenAI() {
  const p = path.join(SRC, 'refs', 'node-clients', 'node_modules', 'openai', 'index.mjs');
  check(fs.existsSync(p), `the OpenAI client is missing at ${p}: run scripts/fetch_node_clients.sh`);
  return (await import(p)).default;
}

// The test models have no chat template; this one writes the BOS and an
// end-of-turn token as text (matched as the special tokens when the prompt
// is tokenized) like real templates do.
export const CHAT_TEMPLATE =
  "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}<|eot_id|>\n{% endfor %}" +
  "{% if add_generation_prompt %}assistant:{% endif %}";

// A copy of the random test llama with CHAT_TEMPLATE, in a folder named
// `tinychat` (the folder's name is the model's id) under `parent`.
export function tinyChatModel(parent) {
  const src = path.join(testModel('llama'), 'hf');
  const dir = path.join(parent, 'tinychat');
  fs.mkdirSync(dir);
  for (const f of fs.readdirSync(src)) fs.copyFileSync(path.join(src, f), path.join(dir, f));
  const cfgPath = path.join(dir, 'tokenizer_config.json');
  const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
  cfg.chat_template = CHAT_TEMPLATE;
  fs.writeFileSync(cfgPath, JSON.stringify(cfg, null, 2));
  return dir;
}

// ---- a fake worker, for the tests of a misbehaving peer ----

// A minimal WebSocket client (Node 20 has no global WebSocket): the
// handshake, masked binary frames out, and the server's frames and close in.
export async function fakeWorker(port, host = '127.0.0.1') {
  const s = net.connect(port, host);
  s.on('error', () => {});
  const key = crypto.randomBytes(16).toString('base64');
  const state = { buf: Buffer.alloc(0), upgraded: false, frames: [], closed: false };
  state.done = new Promise((resolve) => s.on('close', () => { state.closed = true; resolve(); }));
  const upgraded = new Promise((resolve, reject) => {
    s.on('data', (d) => {
      state.buf = Buffer.concat([state.buf, d]);
      if (!state.upgraded) {
        const end = state.buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = state.buf.subarray(0, end).toString();
        state.buf = state.buf.subarray(end + 4);
        if (!head.startsWith('HTTP/1.1 101')) return reject(new Error(`no upgrade: ${head}`));
        state.upgraded = true;
        resolve();
      }
      // Server frames are unmasked.
      while (state.buf.length >= 2) {
        let len = state.buf[1] & 0x7f, at = 2;
        if (len === 126) { if (state.buf.length < 4) return; len = state.buf.readUInt16BE(2); at = 4; }
        else if (len === 127) { if (state.buf.length < 10) return; len = Number(state.buf.readBigUInt64BE(2)); at = 10; }
        if (state.buf.length < at + len) return;
        const fin = (state.buf[0] & 0x80) !== 0;
        let frame = { opcode: state.buf[0] & 0x0f, payload: state.buf.subarray(at, at + len) };
        state.buf = state.buf.subarray(at + len);
        // A long message comes in fragments: opcode 2 without FIN, then continuations (0).
        if (frame.opcode === 0 || ((frame.opcode === 1 || frame.opcode === 2) && !fin)) {
          state.partial = state.partial ? { ...state.partial, payload: Buffer.concat([state.partial.payload, frame.payload]) }
            : frame;
          if (!fin) continue;
          frame = state.partial;
          state.partial = null;
        }
        state.frames.push(frame);
        if (frame.opcode === 9 && !state.closing) {  // a ping: pong, or the link times out
          const mask = crypto.randomBytes(4);
          const body = Buffer.from(frame.payload.map((b, i) => b ^ mask[i & 3]));
          s.write(Buffer.concat([Buffer.from([0x8a, 0x80 | body.length]), mask, body]));
        }
        if (frame.opcode === 8 && !state.closing) {  // a close: answer it, as a WebSocket client does
          state.closing = true;
          const mask = crypto.randomBytes(4);
          s.end(Buffer.concat([Buffer.from([0x88, 0x80]), mask]));
        }
        if (frame.opcode === 2 && state.onMessage && frame.payload.length >= 4) {
          const n = frame.payload.readUInt32LE(0);
          try { state.onMessage(JSON.parse(frame.payload.subarray(4, 4 + n).toString())); } catch { /* not ours */ }
        }
      }
    });
  });
  s.write(`GET /api/v3/worker HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  await withTimeout(upgraded, 10000, 'the WebSocket handshake');
  state.send = (payload) => {
    const mask = crypto.randomBytes(4);
    const n = payload.length;
    let head;
    if (n < 126) head = Buffer.from([0x82, 0x80 | n]);
    else if (n < 65536) head = Buffer.from([0x82, 0x80 | 126, n >> 8, n & 0xff]);
    else {
      head = Buffer.alloc(10);
      head[0] = 0x82;
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(BigInt(n), 2);
    }
    const body = Buffer.alloc(n);
    for (let i = 0; i < n; ++i) body[i] = payload[i] ^ mask[i & 3];
    s.write(Buffer.concat([head, mask, body]));
  };
  state.socket = s;
  return state;
}

// A worker-link message (src/net/frame.h): u32 LE header length, header
// JSON, tensors: `tensors` maps a name to {shape, data: Float32Array}.
export function message(header, tensors = {}) {
  const list = [];
  const bodies = [];
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    list.push({ name, shape: t.shape, offset, bytes: bytes.length });
    bodies.push(bytes);
    offset += bytes.length;
  }
  const h = Buffer.from(JSON.stringify(list.length ? { ...header, tensors: list } : header));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(h.length);
  return Buffer.concat([len, h, ...bodies]);
}

