#!/usr/bin/env node
// Load on the network, as real processes on loopback:
//
//   node scripts/net_load.mjs [--concurrency 32] [--seconds 60] [--max-tokens 32]
//        [--model PATH] [--url http://host:port] [--overhead-tokens 128] [--repeats 3] [--rounds 1]
//
// 1. `bonfire serve --model M` (with its in-process worker; or --url: a
//    coordinator already running) and `--concurrency` clients, each looping
//    streamed /api/v3/generate requests for `--seconds`. Prints requests
//    completed, errors, p50/p99 time to first token and aggregate tokens/s.
//    With `--rounds N` the load runs N times, and the coordinator's resident
//    memory (VmRSS, when this script started it) is printed after each
//    round: memory that grows round over round is a leak. The check allows
//    10% + 32 MiB of growth from the first round to the last. Per worker:
//    decode steps per second and the mean rows per batched call (batch
//    occupancy) over the round.
// 2. The overhead per decode step: one greedy generation timed in one
//    process (`bonfire generate --json`: timings.decodeMs) and through the
//    coordinator and a worker (/api/v3/generate's timings.decodeMs); the
//    difference per step is what the coordinator and the WebSocket hop add.
//
// The summary is also printed as one line of JSON, {"requests", ...}
// (tests/net/load.test.mjs reads it). Exits 1 when any request failed.
// Speed is reported, never judged.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const harness = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'tests', 'net', 'harness.mjs');
const {
  check, checkEqual, getJson, log, main, postJson, runBonfireJson, startServe, testModel, waitWorkers,
} = await import(harness);

const opts = { concurrency: 32, seconds: 60, 'max-tokens': 32, 'overhead-tokens': 128, repeats: 3, rounds: 1, model: '', url: '' };
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i].replace(/^--/, '');
  if (!(k in opts) || i + 1 >= process.argv.length) {
    console.error(`unknown or incomplete option ${process.argv[i]}; options: ${Object.keys(opts).map((o) => `--${o}`).join(' ')}`);
    process.exit(2);
  }
  opts[k] = typeof opts[k] === 'number' ? Number(process.argv[i + 1]) : process.argv[i + 1];
}

const quantile = (sorted, q) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN);
const median = (xs) => quantile([...xs].sort((a, b) => a - b), 0.5);

// One streamed generation; resolves {ttftMs, tokens} or throws saying what was wrong.
async function oneRequest(url, body) {
  const t0 = performance.now();
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 300000);
  try {
    const res = await fetch(`${url}/api/v3/generate`, { method: 'POST', body: JSON.stringify(body), signal: ctl.signal,
                                                       headers: { 'content-type': 'application/json' } });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
    let buf = '', ttft = null, tokens = 0, done = null;
    const dec = new TextDecoder();
    for await (const chunk of res.body) {
      buf += dec.decode(chunk, { stream: true });
      let at;
      while ((at = buf.indexOf('\n\n')) >= 0) {
        const e = JSON.parse(buf.slice(0, at).replace(/^data: /, ''));
        buf = buf.slice(at + 2);
        if (e.error) throw new Error(`error event: ${JSON.stringify(e)}`);
        if (e.done) { done = e; continue; }
        if (ttft === null) ttft = performance.now() - t0;
        ++tokens;
      }
    }
    if (!done) throw new Error('the stream ended without a done event');
    if (done.tokens.length !== tokens) throw new Error(`${tokens} token events, done lists ${done.tokens.length}`);
    if (tokens > 0 && ttft === null) throw new Error('no first token');
    return { ttftMs: ttft, tokens };
  } finally {
    clearTimeout(timer);
  }
}

async function loadPhase(url) {
  const ttfts = [], errors = [];
  let requests = 0, tokens = 0, seq = 0;
  const t0 = performance.now();
  const end = t0 + opts.seconds * 1000;
  const client = async (c) => {
    while (performance.now() < end) {
      const n = seq++;
      // Varied prompts and seeds: prefills of different lengths interleave with decodes.
      const prompt = Array.from({ length: 4 + (n % 21) }, (_, i) => 1 + ((n * 7 + i * 13) % 300));
      try {
        const r = await oneRequest(url, { tokens: prompt, maxTokens: opts['max-tokens'], temperature: 0.8, seed: n,
                                         stream: true });
        ++requests;
        tokens += r.tokens;
        if (r.ttftMs !== null) ttfts.push(r.ttftMs);
      } catch (e) {
        errors.push(`client ${c} request ${n}: ${e.message}`);
        if (errors.length <= 5) log(`error: ${errors[errors.length - 1]}`);
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, (_, c) => client(c)));
  const seconds = (performance.now() - t0) / 1000;
  ttfts.sort((a, b) => a - b);
  return { requests, errors: errors.length, errorSamples: errors.slice(0, 5), tokens, seconds,
           tokensPerSecond: tokens / seconds, ttftP50Ms: quantile(ttfts, 0.5), ttftP99Ms: quantile(ttfts, 0.99) };
}

// ms per decode step: decodeMs covers every step after the prefill.
const perStep = (r) => r.timings.decodeMs / Math.max(1, r.tokens.length - 1);

async function overheadPhase(url, model) {
  const prompt = [1, 17, 42, 99, 7, 250, 31, 8];
  const n = opts['overhead-tokens'];
  const local = [], network = [];
  let tokens = null;
  for (let i = 0; i < opts.repeats; ++i) {
    const l = runBonfireJson(['generate', '--model', model, '--tokens', prompt.join(','), '--max-tokens', String(n),
                              '--json']);
    const r = await postJson(url, '/api/v3/generate', { tokens: prompt, maxTokens: n, temperature: 0 });
    check(r.status === 200, `the network's greedy generation: HTTP ${r.status}: ${r.text}`);
    checkEqual(r.json.tokens, l.tokens, 'greedy tokens through the network and in one process');
    tokens = l.tokens.length;
    local.push(perStep(l));
    network.push(perStep(r.json));
  }
  const inProcess = median(local), viaNetwork = median(network);
  return { tokens, decodeSteps: tokens - 1, inProcessMsPerStep: inProcess, networkMsPerStep: viaNetwork,
           overheadMsPerStep: viaNetwork - inProcess };
}

await main('net_load', async () => {
  // Per worker, summed over its stages: decode rows run and batched calls
  // sent so far (/api/v3/workers' "batching", docs/NETWORK.md).
  const batchingByWorker = async (u) => {
    const out = {};
    for (const w of (await getJson(u, '/api/v3/workers')).json.workers) {
      out[w.id] = { rows: 0, batches: 0 };
      for (const st of w.batching ?? []) {
        out[w.id].rows += st.rows;
        out[w.id].batches += st.batches;
      }
    }
    return out;
  };
  let url = opts.url;
  let model = opts.model;
  let pid = null;
  if (!model) model = path.join(testModel('llama'), 'hf');
  if (!url) {
    const serve = await startServe(['--model', model]);
    await waitWorkers(serve, 1, { ids: ['local'] });
    url = serve.url;
    pid = serve.proc.pid;
  }
  const rssMiB = () => {
    if (!pid) return null;
    const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  };
  const rounds = [];
  let load;
  for (let round = 1; round <= opts.rounds; ++round) {
    log(`load round ${round}/${opts.rounds}: ${opts.concurrency} clients for ${opts.seconds} s on ${url} ` +
        `(${opts['max-tokens']} tokens per request)`);
    const before = await batchingByWorker(url);
    load = await loadPhase(url);
    const after = await batchingByWorker(url);
    load.workers = Object.entries(after).map(([id, a]) => {
      const b = before[id] ?? { rows: 0, batches: 0 };
      const rows = a.rows - b.rows, batches = a.batches - b.batches;
      return { id, stepsPerSecond: rows / load.seconds, occupancy: batches > 0 ? rows / batches : 0 };
    });
    for (const w of load.workers)
      log(`worker ${w.id}: ${w.stepsPerSecond.toFixed(1)} decode steps/s (tokens/s of its stages), ` +
          `${w.occupancy.toFixed(2)} rows per batched call`);
    const rss = rssMiB();
    rounds.push({ requests: load.requests, errors: load.errors, ttftP50Ms: load.ttftP50Ms, ttftP99Ms: load.ttftP99Ms,
                  tokensPerSecond: load.tokensPerSecond, rssMiB: rss });
    log(`requests completed ${load.requests}, errors ${load.errors}, tokens ${load.tokens} in ${load.seconds.toFixed(1)} s`);
    log(`time to first token p50 ${load.ttftP50Ms.toFixed(1)} ms, p99 ${load.ttftP99Ms.toFixed(1)} ms; ` +
        `aggregate ${load.tokensPerSecond.toFixed(1)} tokens/s` + (rss === null ? '' : `; coordinator RSS ${rss.toFixed(1)} MiB`));
  }
  // Nothing left running once every client has its answer.
  const metrics = (await getJson(url, '/metrics')).text;
  const active = /^bonfire_active_generations (\S+)$/m.exec(metrics);
  const overhead = await overheadPhase(url, model);
  log(`overhead: ${overhead.decodeSteps} greedy decode steps: in one process ${overhead.inProcessMsPerStep.toFixed(3)} ` +
      `ms/step, through serve + worker ${overhead.networkMsPerStep.toFixed(3)} ms/step: ` +
      `${overhead.overheadMsPerStep.toFixed(3)} ms/step of coordinator and WebSocket (median of ${opts.repeats})`);
  console.log(JSON.stringify({ ...load, activeAfter: active ? Number(active[1]) : null, overhead,
                               concurrency: opts.concurrency, rounds }));
  const errors = rounds.reduce((n, r) => n + r.errors, 0);
  check(errors === 0, `${errors} requests failed, e.g.:\n${load.errorSamples.join('\n')}`);
  if (rounds.length > 1 && rounds[0].rssMiB !== null) {
    const first = rounds[0].rssMiB, last = rounds[rounds.length - 1].rssMiB;
    check(last <= first * 1.1 + 32, `the coordinator's RSS grew from ${first.toFixed(1)} to ${last.toFixed(1)} MiB ` +
          `over ${rounds.length} rounds`);
  }
}, { timeoutMs: (opts.seconds + 400) * 1000 });
