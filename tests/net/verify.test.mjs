// Checking workers (docs/NETWORK.md "Checking workers"): a worker that lies
// (`--fault lie=P`: the second-best token, or a hidden state moved by 1%)
// among two honest ones is caught by spot checks and banned, never an honest
// one; generations after the ban equal the one-process run; `"verify": true`
// gives the one-process tokens even while a liar stays connected; honest
// workers on different SIMD targets never disagree under the verifier.
// Prints how fast the liar was caught, what it corrupted meanwhile, and the
// throughput cost of spot checks.
import path from 'node:path';
import {
  SRC, check, checkEqual, getJson, log, main, postJson, runBonfireJson, startServe, startWorker, stderrOf,
  stopProcess, streamGenerate, testModel, waitFor, workers,
} from './harness.mjs';

const MODEL = path.join(SRC, 'models', 'demo');
const N = 64;
const RUNS = Number(process.env.BONFIRE_VERIFY_RUNS || 20);

// Three requests per round: greedy and seeded, their prompts varying by round.
function bodies(round) {
  return [0, 1, 2].map((i) => ({
    tokens: [1, 10 + ((round * 3 + i) % 200), 42, 7 + i],
    maxTokens: N,
    ignoreEos: true,
    ...(i === 1 ? { temperature: 0.8, seed: 1000 + round, topP: 0.95 } : { temperature: 0 }),
  }));
}

// The one-process run of a request (`bonfire generate`).
function oneProcess(b) {
  const args = ['generate', '--model', MODEL, '--tokens', b.tokens.join(','), '--max-tokens', String(b.maxTokens),
                '--ignore-eos', '--json', '--temperature', String(b.temperature ?? 0)];
  if (b.seed !== undefined) args.push('--seed', String(b.seed), '--top-p', String(b.topP));
  return runBonfireJson(args).tokens;
}

async function coordinatorView(serve) {
  const r = await getJson(serve.url, '/api/v3/workers', { timeoutMs: 10000 });
  check(r.status === 200, `/api/v3/workers: HTTP ${r.status}`);
  return r.json;
}

async function generateAll(serve, list) {
  const rs = await Promise.all(list.map((b) => postJson(serve.url, '/api/v3/generate', b)));
  rs.forEach((r, i) => check(r.status === 200, `request ${i}: HTTP ${r.status}: ${r.text}`));
  return rs.map((r) => r.json);
}

const lies = (w) => (stderrOf(w).match(/fault: lied on call/g) || []).length;
// Lies about a token: what reached a user (the rest went to checks).
const tokenLies = (w) => (stderrOf(w).match(/fault: lied on call [^\n]*: token/g) || []).length;

await main('verify', async () => {
  // ---- a liar at P = 0.05 among two honest workers, verify-rate 0.05 ----
  const after = bodies(999);
  const wantAfter = after.map(oneProcess);
  const caughtAt = [];
  let slow = 0;
  for (let run = 0; run < RUNS; ++run) {
    const serve = await startServe(['--no-local-worker', '--model', MODEL, '--verify-rate', '0.05',
                                    '--verify-seed', String(run + 1)], { name: `serve ${run}` });
    const honest = ['h1', 'h2'].map((id) => startWorker(serve.url, ['--model', MODEL, '--id', id, '--no-fetch'], { name: `${id} ${run}` }));
    const liar = startWorker(serve.url, ['--model', MODEL, '--id', 'liar', '--no-fetch', '--fault', 'lie=0.05',
                                         '--fault-seed', String(7 * run + 3)], { name: `liar ${run}` });
    await waitFor(async () => (await workers(serve.url)).filter((w) => w.models.length === 1).length === 3, 60000, '3 workers');
    let ban = null;
    let liarSteps = 0;
    let nearTies = 0;
    for (let round = 0; !ban && liarSteps < 1000; ++round) {
      await generateAll(serve, bodies(round));
      // A check drawn near the end of a round may still be running.
      const view = await waitFor(async () => {
        const v = await coordinatorView(serve);
        return v.verifier.waiting === 0 ? v : null;
      }, 60000, 'the checks to finish');
      ban = view.bans.find((b) => b.id === 'liar');
      nearTies = view.verifier.nearTies;
      for (const b of view.bans) check(b.id === 'liar', `an honest worker was banned: ${JSON.stringify(b)}`);
      const w = view.workers.find((x) => x.id === 'liar');
      if (w) liarSteps = w.load.steps;
    }
    check(ban, `run ${run}: the liar was not caught within ${liarSteps} of its steps`);
    caughtAt.push(ban.steps);
    if (ban.steps > 200) ++slow;
    log(`run ${run}: the liar was banned after ${ban.steps} of its steps; it had corrupted ${tokenLies(liar)} ` +
        `tokens sent to users (and lied ${lies(liar) - tokenLies(liar)} times to checks it ran); ${nearTies} near ties ` +
        'forgiven');
    // Generations that start after the ban equal the one-process run.
    const got = await generateAll(serve, after);
    got.forEach((r, i) => checkEqual(r.tokens, wantAfter[i], `run ${run}: request ${i} after the ban`));
    const view = await coordinatorView(serve);
    check(view.workers.map((w) => w.id).sort().join() === 'h1,h2', `run ${run}: workers after the ban: ${view.workers.map((w) => w.id)}`);
    check(view.bans.length === 1, `run ${run}: bans ${JSON.stringify(view.bans)}`);
    for (const h of honest) check(!/banned/.test(stderrOf(h)), `${h.name} was banned:\n${stderrOf(h)}`);
    await Promise.all([serve, ...honest, liar].map((p) => stopProcess(p)));
  }
  caughtAt.sort((a, b) => a - b);
  log(`liar caught in ${RUNS} runs; its steps before the ban: median ${caughtAt[RUNS >> 1]}, max ` +
      `${caughtAt[RUNS - 1]}; within 200 steps in ${RUNS - slow} of ${RUNS}`);
  check(RUNS - slow >= Math.ceil(0.95 * RUNS), `the liar was caught within 200 of its steps in only ${RUNS - slow} of ${RUNS} runs`);

  // ---- "verify": true while a liar stays connected ----
  {
    // --ban-time 0: the liar is shut out and rejoins at once, so it is
    // connected (and lying) the whole time.
    const serve = await startServe(['--no-local-worker', '--model', MODEL, '--ban-time', '0']);
    for (const id of ['h1', 'h2']) startWorker(serve.url, ['--model', MODEL, '--id', id, '--no-fetch']);
    const liar = startWorker(serve.url, ['--model', MODEL, '--id', 'liar', '--no-fetch', '--fault', 'lie=0.3', '--fault-seed', '5']);
    await waitFor(async () => (await workers(serve.url)).filter((w) => w.models.length === 1).length === 3, 60000, '3 workers');
    let caught = 0;
    for (let round = 0; round < 3; ++round) {
      const list = bodies(round + 500).map((b) => ({ ...b, verify: true }));
      const want = list.map(oneProcess);
      const got = await generateAll(serve, list);
      got.forEach((r, i) => {
        checkEqual(r.tokens, want[i], `verify:true round ${round} request ${i}`);
        check(r.verified && r.verified.verified === r.verified.tokens && r.verified.tokens === N,
              `verify:true: the response says ${JSON.stringify(r.verified)}`);
        if (r.verified.wrongFound) ++caught;
      });
      // Streamed: the tokens are checked before they are sent.
      const events = [];
      await streamGenerate(serve.url, { ...list[0], stream: true }, { onEvent: (e) => events.push(e) });
      const done = events.find((e) => e.done);
      check(done && done.verified && done.verified.verified === N, `streamed verify: ${JSON.stringify(done)}`);
      checkEqual(events.filter((e) => !e.done && e.token !== undefined).map((e) => e.token), want[0], 'streamed verify:true tokens');
    }
    check(lies(liar) > 0, 'the liar never lied: the test proves nothing');
    log(`verify:true: every token equal to the one-process run while the liar lied ${lies(liar)} times; ` +
        `${caught} responses had a wrong token replaced`);
    const view = await coordinatorView(serve);
    check(view.verifier.banned >= 1, `the liar was never banned: ${JSON.stringify(view.verifier)}`);
    await stopProcess(liar);
  }

  // ---- honest workers on different SIMD targets: no false positives ----
  // The demo model (f32) and a q8_0 GGUF (int8 activations in steps), with
  // 20-token prompts so the prefill takes the many-row path.
  for (const model of [MODEL, path.join(testModel('llama', 'f32,q8_0'), 'model-q8_0.gguf')]) {
    const serve = await startServe(['--no-local-worker', '--model', model, '--verify-rate', '1']);
    startWorker(serve.url, ['--model', model, '--id', 'best', '--no-fetch']);
    startWorker(serve.url, ['--model', model, '--id', 'sse4', '--no-fetch', '--simd', 'sse4']);
    const ws = await waitFor(async () => {
      const w = await workers(serve.url);
      return w.filter((x) => x.models.length === 1).length === 2 ? w : null;
    }, 60000, '2 workers');
    // A CPU with the tiled int8 kernel (VNNI) takes int8 activations at any
    // row count ("int8Rows": "any"), sse4 only below 16 rows ("few"): the
    // checker must follow the generating worker's rule in the prompt.
    const targets = ws.map((w) => `${w.id}: ${w.simd}, int8Rows ${w.int8Rows}`).join('; ');
    check(new Set(ws.map((w) => w.simd)).size === 2, `the workers run the same SIMD target (${targets})`);
    for (const w of ws) check(['few', 'any'].includes(w.int8Rows), `worker ${w.id} announces no int8 rule (${targets})`);
    let view;
    for (let round = 0; ; ++round) {
      const list = bodies(round + 100).map((b, i) => ({
        ...b, maxTokens: 128, tokens: Array.from({ length: 20 }, (_, k) => 1 + ((round * 31 + i * 7 + k * 13) % 250)),
      }));
      await generateAll(serve, list);
      view = await waitFor(async () => {
        const v = await coordinatorView(serve);
        return v.verifier.waiting === 0 ? v : null;
      }, 120000, 'the checks to finish');
      if (view.verifier.stepsPassed >= 1000 || round > 20) break;
    }
    const v = view.verifier;
    log(`${path.basename(model)}, SIMD targets ${targets}: ${v.stepsPassed} steps checked, ${v.disagreements} ` +
        `disagreements, ${v.nearTies} near ties forgiven, ${v.inconclusive} inconclusive checks`);
    check(v.stepsPassed >= 1000, `only ${v.stepsPassed} steps were checked`);
    check(v.disagreements === 0 && v.banned === 0, `false positives between honest workers: ${JSON.stringify(v)}`);
    await stopProcess(serve);
  }

  // ---- no referee: a disagreement nobody can decide is counted once ----
  // One honest worker and a liar: every disagreement between them is
  // inconclusive (nobody is banned), and a later check of the same
  // generation starts after the undecided step instead of meeting it again
  // (each retry recomputed the whole prefix, and counted it again). The
  // honest worker is slow: once placement has measured both, generations go
  // to the liar, and the honest worker checks them.
  {
    const serve = await startServe(['--no-local-worker', '--model', MODEL, '--verify-rate', '1']);
    startWorker(serve.url, ['--model', MODEL, '--id', 'h1', '--no-fetch', '--fault', 'slow=20']);
    const liar = startWorker(serve.url, ['--model', MODEL, '--id', 'liar', '--no-fetch', '--fault', 'lie=0.2',
                                         '--fault-seed', '11']);
    await waitFor(async () => (await workers(serve.url)).filter((w) => w.models.length === 1).length === 2, 60000, '2 workers');
    let v;
    for (let round = 0; round < 2; ++round) {
      await generateAll(serve, bodies(700 + round));
      v = (await waitFor(async () => {
        const x = await coordinatorView(serve);
        return x.verifier.waiting === 0 ? x : null;
      }, 120000, 'the checks to finish')).verifier;
    }
    log(`no referee: ${lies(liar)} lies (${tokenLies(liar)} tokens), ${v.disagreements} disagreements, ${v.inconclusive} inconclusive checks, ` +
        `${v.stepsPassed} steps passed; last: ${v.lastDisagreement}`);
    check(v.banned === 0, `a worker was banned without a referee: ${JSON.stringify(v)}`);
    check(tokenLies(liar) >= 1 && v.disagreements >= 1 && v.inconclusive >= 1,
          `no token lie was checked (${tokenLies(liar)} token lies): ${JSON.stringify(v)}`);
    check(v.disagreements <= lies(liar), `${v.disagreements} disagreements from ${lies(liar)} lies: ` +
          `an undecided step was met again`);
    check(/no referee/.test(v.lastDisagreement), `lastDisagreement: ${v.lastDisagreement}`);
    await stopProcess(serve);
    await stopProcess(liar);
  }

  // ---- a pipeline: a liar on the first stage, its hidden state pinned on it ----
  {
    // Where the liar runs follows the workers' speeds: its hidden-state lies
    // come from a first stage (layers 0-k).
    const serve = await startServe(['--no-local-worker', '--model', MODEL, '--stages', '2', '--verify-rate', '0.2',
                                    '--verify-seed', '11']);
    const honest = ['h1', 'h2', 'h3'].map((id) => startWorker(serve.url, ['--model', MODEL, '--id', id, '--no-fetch']));
    const liar = startWorker(serve.url, ['--model', MODEL, '--id', 'a-liar', '--no-fetch', '--fault', 'lie=0.1',
                                         '--fault-seed', '5']);
    await waitFor(async () => (await workers(serve.url)).filter((w) => w.models.length === 1).length === 4, 60000, '4 workers');
    let ban = null;
    for (let round = 0; !ban && round < 40; ++round) {
      await generateAll(serve, bodies(round + 300).slice(0, 2));
      const view = await waitFor(async () => {
        const v = await coordinatorView(serve);
        return v.verifier.waiting === 0 ? v : null;
      }, 60000, 'the checks to finish');
      for (const b of view.bans) check(b.id === 'a-liar', `an honest worker was banned: ${JSON.stringify(b)}`);
      ban = view.bans.find((b) => b.id === 'a-liar');
    }
    check(ban, 'the pipeline liar was never banned');
    const hidden = (stderrOf(liar).match(/carry\.\S+ moved by 1%/g) || []).length;
    log(`pipeline: the liar was banned after ${ban.steps} of its steps (${hidden} hidden-state lies, ` +
        `${tokenLies(liar)} token lies): ${ban.reason}`);
    check(/stage by stage/.test(ban.reason), `the ban does not say how the stage was found: ${ban.reason}`);
    // Caught lying on a stage it ran (pinned on its layers 0-k), or on a
    // check it ran for others as the verifier (the referee contradicts it).
    if (hidden > 0 && tokenLies(liar) === 0)
      check(/output of layers 0-\d+ |contradicted it as a verifier/.test(ban.reason),
            `a hidden-state liar not pinned on its stage: ${ban.reason}`);
    for (const h of honest) check(!/banned/.test(stderrOf(h)), `${h.name} was banned`);
    await Promise.all([serve, ...honest, liar].map((p) => stopProcess(p)));
  }

  // ---- an honest pipeline on two SIMD targets: stage outputs agree too ----
  {
    const serve = await startServe(['--no-local-worker', '--model', MODEL, '--stages', '2', '--verify-rate', '1']);
    const ws = [['p1', []], ['p2', ['--simd', 'sse4']], ['p3', []]].map(([id, extra]) =>
      startWorker(serve.url, ['--model', MODEL, '--id', id, '--no-fetch', ...extra]));
    await waitFor(async () => (await workers(serve.url)).filter((w) => w.models.length === 1).length === 3, 60000, '3 workers');
    let v;
    for (let round = 0; round < 10; ++round) {
      await generateAll(serve, bodies(round + 200));
      v = (await waitFor(async () => {
        const x = await coordinatorView(serve);
        return x.verifier.waiting === 0 ? x : null;
      }, 120000, 'the checks to finish')).verifier;
      if (v.stepsPassed >= 500) break;
    }
    log(`honest pipeline (2 stages, avx2 and sse4 workers): ${v.stepsPassed} steps checked stage by stage, ` +
        `${v.disagreements} disagreements`);
    check(v.stepsPassed >= 500 && v.disagreements === 0 && v.banned === 0, `honest pipeline checks: ${JSON.stringify(v)}`);
    await Promise.all([serve, ...ws].map((p) => stopProcess(p)));
  }

  // ---- the throughput cost of verify-rate 0.05 (printed, not asserted) ----
  {
    const rates = {};
    for (const rate of ['0', '0.05']) {
      const serve = await startServe(['--model', MODEL, '--verify-rate', rate]);
      startWorker(serve.url, ['--model', MODEL, '--id', 'w2', '--no-fetch']);
      await waitFor(async () => (await workers(serve.url)).filter((w) => w.models.length === 1).length === 2, 60000, '2 workers');
      await generateAll(serve, bodies(0));  // warm up
      const t0 = performance.now();
      let tokens = 0;
      for (let round = 0; round < 6; ++round)
        for (const r of await generateAll(serve, [...bodies(round), ...bodies(round + 50)])) tokens += r.tokens.length;
      await waitFor(async () => (await coordinatorView(serve)).verifier.waiting === 0, 120000, 'the checks to finish');
      rates[rate] = tokens / ((performance.now() - t0) / 1000);
      await stopProcess(serve);
    }
    log(`throughput on the demo model, 6 concurrent streams over 2 workers: ${rates['0'].toFixed(1)} tokens/s ` +
        `without checks, ${rates['0.05'].toFixed(1)} with verify-rate 0.05 (cost ${((1 - rates['0.05'] / rates['0']) * 100).toFixed(1)}%)`);
  }
}, { timeoutMs: 1500000 });
