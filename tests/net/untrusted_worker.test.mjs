// A volunteer's worker may be malicious. These fakes join a real serve
// beside an honest worker and misbehave in ways an audit found the
// coordinator mishandled; each must cost the liar, never the client:
// - a step result whose "ms" is a string, or an error whose code is a
//   number: struck as a malformed reply and failed over (one such reply
//   used to wedge the step scheduler and serve's shutdown; the other was a
//   500 with the JSON library's text);
// - a graph result that leaves out an asked-for output: never a 200;
// - a graph call the worker never answers: it times out, and the next
//   calls go to a worker that answers;
// - a token outside the vocabulary: the worker is banned, and when no one
//   is left the client is told what happened;
// - a hello with absurd numbers or malformed lists: refused;
// - an application-level ping: answered (docs/NETWORK.md).
import path from 'node:path';
import {
  check, checkEqual, fakeWorker, getJson, main, message, postJson, SRC, startServe, startWorker, stopProcess, waitFor,
  waitWorkers, workers,
} from './harness.mjs';

const GEN = { tokens: [1, 2, 3], maxTokens: 6, temperature: 0.8, topK: 20, seed: 7 };
const GRAPH = { inputs: { a: { shape: [2], data: [1, 2] } }, nodes: [{ id: 'y', op: 'add', in: ['a', 'a'] }], outputs: ['y'] };
const T = (shape, values) => ({ shape, data: new Float32Array(values) });

// A fake that announces what the honest worker does (and the model), on a
// device fast enough that placement prefers it; answer(header) is its reply.
async function liar(serve, id, caps, answer, hello = {}) {
  const fw = await fakeWorker(serve.port);
  fw.onMessage = (h) => {
    if (h.type === 'refused') fw.refused = h;
    if (h.type === 'pong') fw.pong = h;
    if (h.type !== 'run' || h.req === undefined) return;
    const reply = answer(h);
    if (reply) fw.send(reply);
  };
  fw.send(message({ type: 'hello', protocol: 3, id, ops: caps.ops, features: caps.features.filter((f) => f !== 'ext.rows'),
                    threads: 2, memory: caps.memory, fetch: false, device: { type: 'cpu', readGBs: 1000 },
                    models: [{ id: 'demo', hash: caps.hash }], ...hello }));
  await waitFor(async () => fw.refused || (await workers(serve.url)).some((w) => w.id === id), 10000, `${id} to join`);
  return fw;
}

const connected = async (serve, id) => (await workers(serve.url)).some((w) => w.id === id);

await main('untrusted worker', async () => {
  const demo = path.join(SRC, 'models', 'demo');
  const serve = await startServe(['--model', demo, '--no-local-worker', '--graph-timeout', '2']);
  const honest = startWorker(serve.url, ['--model', demo, '--threads', '1', '--id', 'honest']);
  try {
    await waitWorkers(serve, 1, { model: 'demo' });
    const real = (await workers(serve.url))[0];
    const caps = { ops: real.ops, features: real.features, memory: 1 << 30,
                   hash: (await getJson(serve.url, '/api/v3/models')).json.models[0].hash };
    const want = (await postJson(serve.url, '/api/v3/generate', GEN)).json?.tokens;
    check(Array.isArray(want) && want.length > 0, 'the honest run');

    // Malformed replies to steps: failover, the same tokens, and serve stays whole.
    for (const [id, answer] of [
      ['ms', (h) => message({ type: 'result', req: h.req, ms: 'x' }, { token: T([1], [want[0]]) })],
      ['code', (h) => message({ type: 'error', req: h.req, error: { error: 'x', code: 42 } })],
    ]) {
      await liar(serve, id, caps, answer);
      for (let i = 0; i < 3; ++i) {  // three strikes drop it
        const r = await postJson(serve.url, '/api/v3/generate', GEN, { timeoutMs: 30000 });
        checkEqual([r.status, r.json?.tokens], [200, want], `generation ${i} beside a worker whose replies are malformed (${id})`);
      }
      await waitFor(async () => !(await connected(serve, id)), 10000, `the malformed worker (${id}) to be dropped`);
    }

    // A token no model has: banned, and the client hears why when no one is left.
    await stopProcess(honest);
    await waitFor(async () => !(await connected(serve, 'honest')), 10000, 'the honest worker to leave');
    await liar(serve, 'vocab', caps, (h) => message({ type: 'result', req: h.req, ms: 1 }, { token: T([1], [1e6]) }));
    const lone = await postJson(serve.url, '/api/v3/generate', GEN, { timeoutMs: 30000 });
    check(lone.status >= 500 && /outside the vocabulary/.test(lone.json?.error), `a lone lying worker: ${lone.status} ${lone.text}`);
    const bans = (await getJson(serve.url, '/api/v3/workers')).json?.bans ?? [];
    check(bans.some((b) => b.id === 'vocab'), `the worker that sent token 1e6 is banned: ${JSON.stringify(bans)}`);

    // Graph calls: a missing output is no answer; a silent worker loses the next call.
    const gap = await liar(serve, 'gap', caps, (h) => message({ type: 'result', req: h.req, ms: 1 }));
    const missing = await postJson(serve.url, '/api/v3/graph', GRAPH);
    check(missing.status !== 200 && /left out an output/.test(missing.json?.error), `a result without "y": ${missing.status} ${missing.text}`);
    gap.socket.destroy();
    await waitFor(async () => !(await connected(serve, 'gap')), 10000, 'the gap worker to leave');
    // Unmeasured, the silent one sorts first and gets the first call; an
    // answer in 50 ms must then beat the 2 s it did not answer in.
    await liar(serve, 'a-silent', caps, () => null);
    const fw = await liar(serve, 'z-adder', caps, (h) => {
      setTimeout(() => fw.send(message({ type: 'result', req: h.req, ms: 50 }, { y: T([2], [2, 4]) })), 50);
      return null;
    });
    const answered = [];
    for (let i = 0; i < 3; ++i) answered.push((await postJson(serve.url, '/api/v3/graph', GRAPH)).json?.worker ?? 'timeout');
    checkEqual(answered, ['timeout', 'z-adder', 'z-adder'], 'graph calls beside a worker that never answers');

    // Hellos that lie about themselves are refused.
    for (const [what, extra] of [['threads 1e20', { threads: 1e20 }], ['memory -1', { memory: -1 }],
                                 ['ops "add"', { ops: 'add' }],
                                 ['a model id with a line break', { models: [{ id: 'de\nmo', hash: caps.hash }] }]]) {
      const fw = await liar(serve, 'hello', caps, () => null, extra);
      check(/malformed hello/.test(fw.refused?.error), `a hello with ${what}: ${JSON.stringify(fw.refused)}`);
    }

    // docs/NETWORK.md: either side may ping.
    const pinger = await liar(serve, 'pinger', caps, () => null);
    pinger.send(message({ type: 'ping', t: 42 }));
    await waitFor(async () => pinger.pong, 5000, 'a pong');
    checkEqual(pinger.pong.t, 42, 'the pong answers the ping');
    checkEqual((await getJson(serve.url, '/api/v3/ops')).status, 200, 'serve is still up');
  } finally {
    await stopProcess(honest);
    await stopProcess(serve);
  }
});
