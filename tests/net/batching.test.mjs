// Continuous batching (docs/NETWORK.md "The step scheduler"): eight
// concurrent generations share each decode step on a worker, and every
// sequence's tokens equal its solo run, greedy and seeded, on one worker and
// through a two-stage pipeline, also when a worker is killed mid-batch with
// a standby connected; and a prompt read in chunks while others decode gives
// the tokens it gives alone. The coordinator's metrics show the batches.
import {
  check, checkEqual, getJson, log, main, postJson, startServe, startWorker, testModel, waitFor, workers,
} from './harness.mjs';

const MODEL_ARGS = ['--layers', '4', '--hidden', '256', '--intermediate', '1024', '--vocab', '4096'];
const N = 160;  // long enough that the kill lands mid-batch

// Eight requests: different prompts, half greedy, half sampled with their own seeds.
const bodies = Array.from({ length: 8 }, (_, i) => ({
  tokens: [1, 17 + i, 42, 99 - i, 7, 250, 31 + 2 * i].slice(0, 3 + i % 5),
  maxTokens: N,
  ignoreEos: true,
  ...(i % 2 ? { temperature: 0.8, seed: 100 + i, topP: 0.9 } : { temperature: 0 }),
}));

async function solo(serve) {
  const out = [];
  for (const b of bodies) {
    const r = await postJson(serve.url, '/api/v3/generate', b);
    check(r.status === 200, `solo: HTTP ${r.status}: ${r.text}`);
    check(r.json.tokens.length === N, `solo: ${r.json.tokens.length} tokens, want ${N}`);
    out.push(r.json.tokens);
  }
  return out;
}

async function concurrent(serve, onStarted) {
  const runs = bodies.map((b) => postJson(serve.url, '/api/v3/generate', b));
  if (onStarted) await onStarted();
  return Promise.all(runs);
}

async function metric(serve, name) {
  const text = await (await fetch(`${serve.url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(name + '{')).map((l) => Number(l.split(' ').pop()));
}

let want0 = null;  // the solo runs' tokens on one worker

await main('batching', async () => {
  const model = `${testModel('llama', 'f32', MODEL_ARGS)}/hf`;

  // ---- one worker ----
  {
    const serve = await startServe(['--model', model]);
    await waitFor(async () => (await workers(serve.url)).some((w) => w.models.length === 1), 60000, 'the local worker');
    const want = await solo(serve);
    want0 = want;
    const runs = await concurrent(serve);
    runs.forEach((r, i) => {
      check(r.status === 200, `concurrent ${i}: HTTP ${r.status}: ${r.text}`);
      checkEqual(r.json.tokens, want[i], `sequence ${i} (${bodies[i].temperature ? 'seeded' : 'greedy'}): batched and solo tokens`);
    });
    const rows = await metric(serve, 'bonfire_batch_occupancy');
    check(rows.length === 1 && rows[0] > 1.5, `mean rows per batched call ${rows}: the steps were not batched`);
    const w = (await workers(serve.url))[0];
    check(Array.isArray(w.batching) && w.batching.length === 1 && w.batching[0].batches > 0,
          `/api/v3/workers shows no batching: ${JSON.stringify(w.batching)}`);
    log(`one worker: 8 concurrent sequences equal their solo runs; mean ${rows[0].toFixed(2)} rows per batched call`);
  }

  // ---- a two-stage pipeline, then a worker killed mid-batch with a standby ----
  {
    const serve = await startServe(['--no-local-worker', '--model', model, '--stages', '2']);
    const procs = {};
    for (const id of ['a', 'b', 'c']) procs[id] = startWorker(serve.url, ['--model', model, '--id', id, '--no-fetch']);
    await waitFor(async () => {
      const ws = await workers(serve.url);
      return ws.length === 3 && ws.every((w) => w.models.length === 1);
    }, 60000, '3 workers');
    const want = await solo(serve);
    const runs = await concurrent(serve);
    runs.forEach((r, i) => {
      check(r.status === 200, `pipeline ${i}: HTTP ${r.status}: ${r.text}`);
      checkEqual(r.json.tokens, want[i], `pipeline sequence ${i}: batched and solo tokens`);
    });
    log('two stages: 8 concurrent sequences equal their solo runs');

    let killed = null;
    const disturbed = await concurrent(serve, async () => {
      // Once the batch decodes on two stages, kill one of its workers.
      await waitFor(async () => {
        const ws = await workers(serve.url);
        const busy = ws.filter((w) => (w.batching ?? []).some((b) => b.sequences >= 2));
        if (busy.length < 1) return false;
        killed = busy[0].id;
        return true;
      }, 30000, 'sequences decoding in a batch');
      procs[killed].proc.kill('SIGKILL');
      log(`killed worker ${killed} mid-batch`);
    });
    let failovers = 0;
    disturbed.forEach((r, i) => {
      check(r.status === 200, `after the kill, sequence ${i}: HTTP ${r.status}: ${r.text}`);
      checkEqual(r.json.tokens, want[i], `after the kill, sequence ${i}: tokens`);
      failovers += r.json.failovers ?? 0;
    });
    check(failovers >= 1, 'no sequence reports a failover after the kill');
    log(`worker ${killed} killed mid-batch: every sequence kept its tokens (${failovers} failovers)`);
  }

  // ---- a prompt read in chunks (--prefill-chunk 8) while others decode ----
  {
    const serve = await startServe(['--model', model, '--prefill-chunk', '8']);
    await waitFor(async () => (await workers(serve.url)).some((w) => w.models.length === 1), 60000, 'the local worker');
    const long = { tokens: Array.from({ length: 45 }, (_, i) => 1 + ((i * 37) % 4000)), maxTokens: 16, ignoreEos: true };
    const alone = await postJson(serve.url, '/api/v3/generate', long);
    check(alone.status === 200 && alone.json.tokens.length === 16, `the chunked prompt alone: ${alone.text}`);
    const busy = bodies.map((b) => postJson(serve.url, '/api/v3/generate', b));
    await waitFor(async () => (await workers(serve.url))[0].batching.some((b) => b.sequences >= 2), 30000,
                  'sequences decoding');
    const during = await postJson(serve.url, '/api/v3/generate', long);
    check(during.status === 200, `the chunked prompt while others decode: ${during.text}`);
    checkEqual(during.json.tokens, alone.json.tokens, 'a prompt read in 8-token chunks, alone and beside a batch');
    (await Promise.all(busy)).forEach((r, i) => checkEqual(r.json.tokens, want0[i], `sequence ${i} beside the chunked prompt`));
    log('a 45-token prompt in 8-token chunks gives the same tokens alone and while 8 sequences decode');
  }
});
