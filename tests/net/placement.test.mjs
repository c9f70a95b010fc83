// Placement weighs each worker's speed (docs/NETWORK.md "Routing and
// placement"): workers announce the read bandwidth they measured, the
// coordinator times their decode steps, and
// - a two-stage pipeline over a fast and a slow worker gives the fast one
//   most of the layers once both are timed;
// - with one stage, generations go to the fast worker;
// - /api/v3/workers shows both figures;
// and in every placement the tokens equal `bonfire generate`'s.
// The slow worker is made slow with `--fault slow=MS` (every graph call
// waits MS ms), so the difference does not depend on this machine's load.
import {
  check, checkEqual, log, main, postJson, runBonfireJson, startServe, startWorker, stopProcess, testModel, waitWorkers,
  workers,
} from './harness.mjs';

const LAYERS = 8;
const MODEL_ARGS = ['--layers', String(LAYERS), '--hidden', '128', '--intermediate', '256', '--vocab', '1024'];
const PROMPT = [1, 17, 42, 99, 7, 250, 31, 8];
const SLOW_MS = 25;

const parseStage = (s) => {
  const m = /^(\w+):(\d+)-(\d+)$/.exec(s);
  check(m, `"workers" entry ${JSON.stringify(s)} is not id:first-end`);
  return { id: m[1], first: Number(m[2]), end: Number(m[3]), layers: Number(m[3]) - Number(m[2]) };
};

async function generate(serve, want, what) {
  const r = await postJson(serve.url, '/api/v3/generate', { tokens: PROMPT, maxTokens: want.tokens.length, temperature: 0 });
  check(r.status === 200, `${what}: HTTP ${r.status}: ${r.text}`);
  checkEqual(r.json.tokens, want.tokens, `${what}: tokens against bonfire generate`);
  return r.json.workers.map(parseStage);
}

await main('placement', async () => {
  const model = `${testModel('llama', 'f32', MODEL_ARGS)}/hf`;
  const want = runBonfireJson(['generate', '--model', model, '--tokens', PROMPT.join(','), '--max-tokens', '12',
                               '--temperature', '0', '--json']);
  check(want.tokens.length === 12, `the reference generated ${want.tokens.length} tokens, not 12`);

  // ---- two stages: the fast worker takes most layers ----
  {
    const serve = await startServe(['--no-local-worker', '--model', model, '--stages', '2']);
    const procs = [startWorker(serve.url, ['--model', model, '--id', 'fast', '--no-fetch']),
                   startWorker(serve.url, ['--model', model, '--id', 'slow', '--no-fetch', '--fault', `slow=${SLOW_MS}`])];
    await waitWorkers(serve, 2, { ids: ['fast', 'slow'] });
    for (const w of await workers(serve.url))
      check(w.device.readGBs > 0 && w.speed.announcedGBs === w.device.readGBs && w.speed.samples === 0,
            `worker ${w.id} before any step: device ${JSON.stringify(w.device)}, speed ${JSON.stringify(w.speed)}`);

    const first = await generate(serve, want, 'two stages, untimed');
    log(`untimed placement: ${first.map((s) => `${s.id}:${s.first}-${s.end}`).join(' ')}`);
    check(first.length === 2 && first[0].id !== first[1].id, `not two stages on two workers: ${JSON.stringify(first)}`);
    let last = first;
    for (let i = 0; i < 3; ++i) last = await generate(serve, want, `two stages, run ${i + 2}`);
    const byId = Object.fromEntries(last.map((s) => [s.id, s]));
    log(`timed placement: ${last.map((s) => `${s.id}:${s.first}-${s.end}`).join(' ')}`);
    const ws = Object.fromEntries((await workers(serve.url)).map((w) => [w.id, w]));
    const fast = ws.fast.speed, slow = ws.slow.speed;
    log(`measured: fast ${fast.measuredGBs} GB/s (${fast.samples} steps), slow ${slow.measuredGBs} GB/s (${slow.samples})`);
    check(fast.measuredGBs > 0 && slow.measuredGBs > 0, `a worker was not timed: ${JSON.stringify({ fast, slow })}`);
    check(fast.measuredGBs > 3 * slow.measuredGBs,
          `the fast worker measured ${fast.measuredGBs} GB/s against the slow one's ${slow.measuredGBs}`);
    check(byId.fast && byId.slow, `the timed placement is not on both workers: ${JSON.stringify(last)}`);
    check(byId.fast.layers >= LAYERS - 2 && byId.slow.layers >= 1,
          `the fast worker holds ${byId.fast.layers} of ${LAYERS} layers, the slow one ${byId.slow.layers}`);
    checkEqual(last[0].first, 0, 'the first stage starts at layer 0');
    checkEqual(last[1].first, last[0].end, 'the stages meet');
    checkEqual(last[1].end, LAYERS, 'the last stage ends at the last layer');
    for (const p of [...procs, serve]) await stopProcess(p);
  }

  // ---- one stage: generations go to the fast worker once both are timed ----
  {
    const serve = await startServe(['--no-local-worker', '--model', model]);
    startWorker(serve.url, ['--model', model, '--id', 'fast', '--no-fetch']);
    startWorker(serve.url, ['--model', model, '--id', 'slow', '--no-fetch', '--fault', `slow=${SLOW_MS}`]);
    await waitWorkers(serve, 2, { ids: ['fast', 'slow'] });
    const placed = [];
    for (let i = 0; i < 5; ++i) {
      const stages = await generate(serve, want, `one stage, run ${i + 1}`);
      checkEqual(stages.length, 1, `one stage, run ${i + 1}: stages`);
      checkEqual([stages[0].first, stages[0].end], [0, LAYERS], `one stage, run ${i + 1}: layers`);
      placed.push(stages[0].id);
    }
    log(`one stage, runs placed on: ${placed.join(' ')}`);
    // Each is tried while it is untimed; once both are, the fast one wins.
    checkEqual(placed.slice(-2), ['fast', 'fast'], 'the last two runs\' worker');
  }
});
