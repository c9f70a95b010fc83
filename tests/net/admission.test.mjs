// Admission by session memory (docs/NETWORK.md "Admission by session
// memory"): a worker takes sessions up to 3/4 of the memory it lends. A
// generation that does not fit waits for one to end instead of failing, is
// counted as waiting in /api/v3/stats and /metrics, and then runs with the
// tokens it gives alone; the reservation goes back when a generation ends.
// Another worker with room takes it at once instead. A session larger than
// a worker's whole share is refused at once, with the sizes named.
import {
  check, checkEqual, getJson, log, main, postJson, startServe, startWorker, stopProcess, testModel, waitFor, waitWorkers,
  workers,
} from './harness.mjs';

// Tiny weights and a long context: a session's caches outweigh the weights,
// so a worker's memory can hold the model and exactly one session.
const MODEL_ARGS = ['--layers', '2', '--hidden', '64', '--intermediate', '128', '--vocab', '512'];
const CTX = 16384;

const body = (i, maxTokens) => ({ tokens: [1, 5 + i, 9, 33], maxTokens, ignoreEos: true, temperature: 0 });

async function metric(serve, name) {
  const text = await (await fetch(`${serve.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' ') || l.startsWith(name + '{'));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

async function ready(serve) {
  await waitFor(async () => (await workers(serve.url)).some((w) => w.models.length === 1), 60000, 'the local worker');
}

await main('admission', async () => {
  const model = `${testModel('llama', 'f32', MODEL_ARGS)}/hf`;

  // What one session keeps at this context, and the model's whole size.
  let kv, total;
  {
    const serve = await startServe(['--model', model, '--ctx', String(CTX)]);
    try {
      await ready(serve);
      const m = (await getJson(serve.url, '/api/v3/models')).json.models[0];
      kv = m.kv.bytes;
      total = m.bytes;
    } finally {
      await stopProcess(serve);
    }
  }
  log(`a session keeps ${kv} bytes; the model with one session ${total}`);
  check(total - kv < kv / 3, `the weights (${total - kv} bytes) must be under a third of a session (${kv})`);

  // Twice a session: sessions may take 1.5 of them, so one runs at a time.
  {
    const serve = await startServe(['--model', model, '--ctx', String(CTX), '--local-worker-memory', String(2 * kv)]);
    try {
      await ready(serve);
      const N = 3000;
      const solo = [];
      for (const i of [0, 1]) {
        const r = await postJson(serve.url, '/api/v3/generate', body(i, 64));
        check(r.status === 200, `solo ${i}: HTTP ${r.status}: ${r.text}`);
        solo.push(r.json.tokens);
      }
      // A long generation, then a second while it runs: the second waits.
      const first = postJson(serve.url, '/api/v3/generate', body(0, N));
      await waitFor(async () => (await getJson(serve.url, '/api/v3/stats')).json.activeGenerations === 1, 20000,
                    'the first generation to start');
      const second = postJson(serve.url, '/api/v3/generate', body(1, 64));
      await waitFor(async () => (await getJson(serve.url, '/api/v3/stats')).json.waitingForMemory === 1, 20000,
                    'the second generation to wait for room');
      checkEqual(await metric(serve, 'bonfire_generations_waiting_for_memory'), 1, 'the waiting gauge in /metrics');
      const w = (await workers(serve.url)).find((x) => x.id === 'local');
      checkEqual(w.sessions.reserved, kv, 'the session memory reserved on the worker while one runs');
      checkEqual(w.sessions.budget, Math.floor(2 * kv / 4) * 3, 'what sessions may take on it');
      const [a, b] = await Promise.all([first, second]);
      check(a.status === 200 && b.status === 200, `HTTP ${a.status} / ${b.status}: ${a.text} ${b.text}`);
      checkEqual(a.json.tokens.slice(0, 64), solo[0], 'the first generation\'s tokens');
      checkEqual(b.json.tokens, solo[1], 'the waiting generation\'s tokens, once it ran');
      checkEqual((await getJson(serve.url, '/api/v3/stats')).json.waitingForMemory, 0, 'no one waits after');
      await waitFor(async () => (await workers(serve.url)).find((x) => x.id === 'local').sessions.reserved === 0, 5000,
                    'the reservations to go back');

      // A second worker with room, slower (30 ms a call), so the full one
      // ranks first: a generation that finds the first full goes to it,
      // without waiting. A new worker's stand-in speed ranks it first until
      // it is timed: one short generation times it.
      const roomy = startWorker(serve.url, ['--model', model, '--id', 'roomy', '--no-fetch', '--memory', String(8 * kv),
                                            '--fault', 'slow=30']);
      try {
        await waitWorkers(serve, 2, { ids: ['local', 'roomy'] });
        const timing = await postJson(serve.url, '/api/v3/generate', body(0, 8));
        checkEqual(timing.json.workers, ['roomy:0-2'], 'the untimed worker takes the first generation');
        const long = postJson(serve.url, '/api/v3/generate', body(0, N));
        await waitFor(async () => (await getJson(serve.url, '/api/v3/stats')).json.activeGenerations === 1, 20000,
                      'the long generation to start');
        const busy = (await workers(serve.url)).find((x) => x.sessions.reserved > 0);
        check(busy, 'a worker holds the long generation\'s session');
        let waited = false;
        const poll = setInterval(async () => {
          try { waited ||= (await getJson(serve.url, '/api/v3/stats')).json.waitingForMemory > 0; } catch { /* ended */ }
        }, 20);
        const other = await postJson(serve.url, '/api/v3/generate', body(1, 64));
        clearInterval(poll);
        check(other.status === 200, `the second generation: HTTP ${other.status}: ${other.text}`);
        checkEqual(other.json.tokens, solo[1], 'its tokens');
        checkEqual(busy.id, 'local', 'the faster worker took the long generation');
        checkEqual(other.json.workers, ['roomy:0-2'], 'the worker with room took the second');
        check(!waited, 'it did not wait for room');
        log(`long generation on ${busy.id}; the other on ${other.json.workers}`);
        check((await long).status === 200, 'the long generation ends well');
      } finally {
        await stopProcess(roomy);
      }
    } finally {
      await stopProcess(serve);
    }
  }

  // Memory for the model and one session (placement wants them in 90% of
  // it), but a share (3/4) below a session: refused at once, naming the
  // sizes; the server stays up.
  {
    const memory = Math.ceil(total / 0.9) + 65536;
    check(memory / 4 * 3 < kv, `3/4 of ${memory} bytes must be under a session (${kv})`);
    const serve = await startServe(['--model', model, '--ctx', String(CTX), '--local-worker-memory', String(memory)]);
    try {
      await ready(serve);
      const t0 = Date.now();
      const r = await postJson(serve.url, '/api/v3/generate', body(0, 8));
      check(r.status === 413, `a session over the worker's share: HTTP ${r.status}: ${r.text}`);
      log(`refused: ${r.text}`);
      check(/takes sessions up to [\d.]+ MiB/.test(r.text) && /keeps [\d.]+ MiB/.test(r.text),
            `the error names the sizes: ${r.text}`);
      check(Date.now() - t0 < 10000, 'refused at once, not after a wait');
      checkEqual((await getJson(serve.url, '/api/v3/stats')).status, 200, 'the server is still up');
    } finally {
      await stopProcess(serve);
    }
  }
});
