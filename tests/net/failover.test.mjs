// A worker killed (SIGKILL) in the middle of a generation: the coordinator
// replaces it, replays the session on the survivors and the response ends
// with exactly the tokens of the undisturbed run (the sampling RNG is keyed
// on (seed, step)), reports the failover, and no longer names the dead
// worker; the network keeps serving afterwards.
import {
  check, checkEqual, checkStream, getJson, log, main, postJson, runBonfireJson, startServe, startWorker,
  streamGenerate, testModel, waitFor, workers,
} from './harness.mjs';

// Big enough that 64 decode steps over two stages take a few hundred ms
// (so there is time to kill a worker mid-generation), small enough to write
// in a second: ~5M parameters, 10 MB of bf16 safetensors.
const MODEL_ARGS = ['--layers', '4', '--hidden', '256', '--intermediate', '1024', '--vocab', '4096'];
const PROMPT = [1, 17, 42, 99, 7, 250, 31, 8, 64, 5];
const N = 64;

const idOf = (stage) => stage.split(':')[0];

// Streams `body`; when `killAt` tokens have arrived, SIGKILLs a worker that
// is running this generation (its call count grew since the request began).
async function disturbedRun(serve, procs, body, killAt) {
  const before = new Map((await workers(serve.url)).map((w) => [w.id, w.load.calls]));
  let killed = null;
  const events = await streamGenerate(serve.url, body, {
    onEvent: async (e, i) => {
      if (i + 1 !== killAt) return;
      const now = await workers(serve.url);
      const busy = now.filter((w) => w.load.calls > (before.get(w.id) ?? 0) || w.load.inFlight > 0);
      check(busy.length === 2, `after ${killAt} tokens, ${busy.length} workers are in use (want the 2 stages): ` +
                               JSON.stringify(now.map((w) => [w.id, w.load])));
      killed = busy[0].id;
      procs[killed].proc.kill('SIGKILL');
      log(`killed worker ${killed} (pid ${procs[killed].proc.pid}) after ${killAt} tokens`);
    },
  });
  check(killed, `the generation ended before ${killAt} tokens arrived`);
  return { done: checkStream(events, `disturbed run ${JSON.stringify(body)}`), killed, events };
}

function checkDisturbed(done, killed, want, what) {
  checkEqual(done.tokens, want.tokens, `${what}: tokens of the disturbed and the undisturbed run`);
  checkEqual(done.text, want.text, `${what}: text of the disturbed and the undisturbed run`);
  check(done.failovers >= 1, `${what}: "failovers" is ${done.failovers} after worker ${killed} was killed ` +
                             '(did the generation finish before the kill took effect?)');
  check(done.workers.length === 2 && !done.workers.map(idOf).includes(killed),
        `${what}: the final placement ${JSON.stringify(done.workers)} names the killed worker ${killed}`);
}

async function waitGone(serve, id) {
  await waitFor(async () => !(await workers(serve.url)).some((w) => w.id === id), 10000,
                `the coordinator to drop worker ${id}`);
}

await main('failover', async () => {
  const model = `${testModel('llama', 'f32', MODEL_ARGS)}/hf`;
  const serve = await startServe(['--no-local-worker', '--model', model, '--stages', '2']);
  const procs = {};
  for (const id of ['a', 'b', 'c']) procs[id] = startWorker(serve.url, ['--model', model, '--id', id, '--no-fetch']);
  const waitN = async (n) => waitFor(async () => {
    check(!serve.exited, 'the coordinator exited');
    const ws = await workers(serve.url);
    return ws.length === n && ws.every((w) => w.models.length === 1) && ws;
  }, 60000, `${n} workers`);
  await waitN(3);

  const sampled = { tokens: PROMPT, maxTokens: N, temperature: 0.8, seed: 42 };
  const greedy = { tokens: PROMPT, maxTokens: N, temperature: 0 };
  const ref = {};
  for (const [name, body] of [['sampled', sampled], ['greedy', greedy]]) {
    const t0 = Date.now();
    const r = await postJson(serve.url, '/api/v3/generate', body);
    check(r.status === 200, `undisturbed ${name}: HTTP ${r.status}: ${r.text}`);
    check(r.json.tokens.length === N, `undisturbed ${name}: ${r.json.tokens.length} tokens (${r.json.finishReason}), ` +
                                      `want ${N}: pick another seed or prompt`);
    check(r.json.failovers === 0, `undisturbed ${name}: failovers ${r.json.failovers}`);
    // The network and one process agree, so "the undisturbed tokens" are the model's.
    const local = runBonfireJson(['generate', '--model', model, '--tokens', PROMPT.join(','), '--max-tokens', String(N),
                                  '--temperature', String(body.temperature), '--seed', String(body.seed ?? 0),
                                  '--json']);
    checkEqual(r.json.tokens, local.tokens, `undisturbed ${name}: the network's and bonfire generate's tokens`);
    ref[name] = r.json;
    log(`undisturbed ${name}: ${N} tokens in ${Date.now() - t0} ms (decode ${r.json.timings.decodeMs.toFixed(0)} ms) ` +
        `on ${r.json.workers}`);
  }

  // Kill a stage's worker halfway through the sampled run.
  const t0 = Date.now();
  const s = await disturbedRun(serve, procs, sampled, N / 2);
  checkDisturbed(s.done, s.killed, ref.sampled, 'sampled');
  log(`disturbed sampled run: ${N} tokens equal in ${Date.now() - t0} ms, failovers ${s.done.failovers}, ` +
      `final placement ${s.done.workers}`);
  const exit = await procs[s.killed].exit;
  check(exit === 'signal SIGKILL', `worker ${s.killed} ended with ${exit}, not by the SIGKILL`);
  await waitGone(serve, s.killed);

  // The two survivors still serve, one stage each.
  const after = await postJson(serve.url, '/api/v3/generate', greedy);
  check(after.status === 200, `after the failover: HTTP ${after.status}: ${after.text}`);
  checkEqual(after.json.tokens, ref.greedy.tokens, 'the greedy run after the failover');
  const survivors = ['a', 'b', 'c'].filter((id) => id !== s.killed);
  checkEqual(after.json.workers.map(idOf).sort(), survivors, 'the stages after the failover');
  check(after.json.failovers === 0, `after the failover: failovers ${after.json.failovers}`);
  log(`after the failover: greedy run equal on ${after.json.workers}`);

  // A new worker joins; the greedy run survives losing a worker too.
  procs.d = startWorker(serve.url, ['--model', model, '--id', 'd', '--no-fetch']);
  await waitN(3);
  const g = await disturbedRun(serve, procs, greedy, 24);
  checkDisturbed(g.done, g.killed, ref.greedy, 'greedy');
  log(`disturbed greedy run: equal, failovers ${g.done.failovers}, final placement ${g.done.workers}`);
  await waitGone(serve, g.killed);

  // The coordinator counted the failovers it did.
  const metrics = await getJson(serve.url, '/metrics');
  check(metrics.status === 200, `GET /metrics: HTTP ${metrics.status}`);
  const m = /^bonfire_worker_events_total\{event="failover"\} (\d+)$/m.exec(metrics.text);
  check(m && Number(m[1]) >= 2, `/metrics counts ${m ? m[1] : 'no'} failover events, want 2 or more`);
  const left = (await workers(serve.url)).map((w) => w.id).sort();
  checkEqual(left, ['a', 'b', 'c', 'd'].filter((id) => id !== s.killed && id !== g.killed), 'the workers left');
  const last = await postJson(serve.url, '/api/v3/generate', { ...sampled, maxTokens: 8 });
  check(last.status === 200, `the last generation: HTTP ${last.status}: ${last.text}`);
  checkEqual(last.json.tokens, ref.sampled.tokens.slice(0, 8), 'the first 8 sampled tokens on the last two workers');
});
