// Replays each attack and mistake of issue 13 against real processes and
// asserts the new behaviour: the coordinator stays up, the client gets the
// right 4xx naming what was wrong, a bad peer is dropped, and the other
// users' generations are unaffected (same tokens as a quiet run).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  check, checkEqual, fakeWorker, getJson, http, log, main, message, postJson, sleep, startServe, startWorker,
  stderrOf, stopProcess, tempDir, testModel, waitFor, waitWorkers, withTimeout, workers,
} from './harness.mjs';

const deep = (n) => '['.repeat(n) + ']'.repeat(n);

// A 4xx whose body is valid JSON (so valid UTF-8) naming `field` when given.
async function refusedWith(res, status, what, field) {
  check(res.status === status, `${what}: want HTTP ${status}, got ${res.status}: ${res.text.slice(0, 300)}`);
  check(res.json !== undefined, `${what}: the body is not JSON: ${JSON.stringify(res.text.slice(0, 300))}`);
  const message = typeof res.json.error === 'string' ? res.json.error : res.json.error?.message;
  check(typeof message === 'string' && message.length > 0, `${what}: no error sentence: ${res.text}`);
  if (field) check(message.includes(field), `${what}: the error does not name ${field}: ${message}`);
  return message;
}

// Raw bytes as a request body (invalid UTF-8 cannot go through JSON.stringify).
async function postRaw(base, p, bytes) {
  const res = await fetch(base + p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bytes });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, text, json };
}

// A fake worker that joins holding the model (by hash) with the real
// worker's ops and features, and answers every "run" with `answer(header)`.
async function fakeHolder(serve, id, like, modelHash, answer) {
  const fw = await fakeWorker(serve.port);
  fw.runs = 0;
  fw.onMessage = (h) => {
    if (h.type !== 'run' || h.req === undefined) return;
    ++fw.runs;
    const reply = answer(h);
    if (reply) fw.send(reply);
  };
  fw.send(message({ type: 'hello', protocol: 3, id, ops: like.ops, features: like.features, threads: 2,
                    memory: like.memory, models: [{ id: 'hf', hash: modelHash }] }));
  await waitFor(async () => (await workers(serve.url)).some((x) => x.id === id), 10000, `${id} to join`);
  return fw;
}

// Rounds of twelve concurrent generations, each round right, until the
// coordinator drops the bad worker `id`. How many sequences a round places on
// it depends on how fast the local worker measured (placement prefers the
// least expected wait, and a checked worker), so one round may give it fewer
// than the three calls that drop it.
async function generationsUntilDropped(serve, want, id, what) {
  const deadline = Date.now() + 60000;
  let rounds = 0;
  while ((await workers(serve.url)).some((w) => w.id === id)) {
    check(Date.now() < deadline, `${id} was not dropped after ${rounds} rounds of 12 generations`);
    await concurrentGenerations(serve, want, what);
    ++rounds;
    await sleep(200);  // the drop is logged as the link closes
  }
  return rounds;
}

// Twelve concurrent generations: every one must give the quiet run's tokens.
async function concurrentGenerations(serve, want, what) {
  const runs = await Promise.all(Array.from({ length: 12 }, () =>
    postJson(serve.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 })));
  const ok = runs.filter((r) => r.status === 200 && JSON.stringify(r.json.tokens) === JSON.stringify(want)).length;
  check(ok === 12, `${what}: ${ok} of 12 concurrent generations gave the right tokens; first failure: ` +
        (runs.find((r) => r.status !== 200)?.text ?? '(wrong tokens)'));
}

await main('hardening', async () => {
  const model = path.join(testModel('llama'), 'hf');
  const serve = await startServe(['--model', model, '--graph-timeout', '3']);
  await waitWorkers(serve, 1, { ids: ['local'], model: 'hf' });
  const local0 = (await workers(serve.url))[0];
  const hash = (await getJson(serve.url, '/api/v3/models')).json.models[0].hash;
  const want = (await postJson(serve.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 })).json.tokens;
  check(Array.isArray(want) && want.length > 0, 'a first generation');

  // ---- a worker's device (hello "device") is kept bounded ----
  checkEqual(local0.device?.type, 'cpu', "the local worker's device");
  checkEqual(local0.device?.adapter, local0.simd, "the local worker's adapter is its SIMD target");
  check(local0.device?.readGBs > 0 && local0.speed?.announcedGBs === local0.device.readGBs,
        `the local worker announces its read bandwidth: ${JSON.stringify([local0.device, local0.speed])}`);
  const odd = await fakeWorker(serve.port);
  odd.send(message({ type: 'hello', protocol: 3, id: 'odd-device', ops: local0.ops, features: local0.features,
                     threads: 1, memory: 1 << 20,
                     device: { type: 'quantum', adapter: 'x'.repeat(1000), webgpu: { blob: 'y'.repeat(10000) },
                               readGBs: 1e12 } }));
  const shown = await waitFor(async () => (await workers(serve.url)).find((x) => x.id === 'odd-device'), 10000,
                              'odd-device to join');
  checkEqual(shown.device.type, 'cpu', 'an unknown device type');
  check(shown.device.adapter.length <= 67, `a 1000-character adapter name is cut: ${shown.device.adapter.length}`);
  check(shown.device.webgpu === undefined, 'a 10 KB webgpu description is dropped');
  checkEqual(shown.device.readGBs, 10000, 'an announced read bandwidth of 1e12 GB/s is capped');
  odd.socket.destroy();
  await waitFor(async () => !(await workers(serve.url)).some((x) => x.id === 'odd-device'), 10000, 'odd-device to go');
  for (const readGBs of ['fast', -5, 0, { a: 1 }]) {
    const w = await fakeWorker(serve.port);
    w.send(message({ type: 'hello', protocol: 3, id: 'odd-speed', ops: local0.ops, features: local0.features,
                     threads: 1, memory: 1 << 20, device: { type: 'cpu', adapter: 'x', readGBs } }));
    const s = await waitFor(async () => (await workers(serve.url)).find((x) => x.id === 'odd-speed'), 10000,
                            'odd-speed to join');
    check(s.device.readGBs === undefined && s.speed.announcedGBs === 0,
          `readGBs ${JSON.stringify(readGBs)} is dropped: ${JSON.stringify([s.device, s.speed])}`);
    w.socket.destroy();
    await waitFor(async () => !(await workers(serve.url)).some((x) => x.id === 'odd-speed'), 10000, 'odd-speed to go');
  }

  // ---- deep JSON: 100,000 nested '[' used to overflow the stack in dump() ----
  const graph = (extra) => `{"nodes": [{"id": "z", "op": "zeros", "params": {"shape": [2]}}], "outputs": ["z"]${extra}}`;
  for (const [where, body] of [
    ['an extra field', graph(`, "junk": ${deep(100000)}`)],
    ['bind', graph(`, "bind": {"x": ${deep(100000)}}`)],
    ['a param value', `{"nodes": [{"id": "z", "op": "zeros", "params": {"shape": ${deep(100000)}}}], "outputs": ["z"]}`],
  ]) {
    const m = await refusedWith(await postJson(serve.url, '/api/v3/graph', body), 400, `deep JSON in ${where}`);
    check(/deeper than 64/.test(m), `deep JSON in ${where}: ${m}`);
  }
  await refusedWith(await postJson(serve.url, '/api/v3/generate', `{"prompt": "x", "stop": ${deep(100000)}}`), 400,
                    'deep JSON to generate');
  await refusedWith(await postJson(serve.url, '/v1/chat/completions', `{"messages": ${deep(100000)}}`), 400,
                    'deep JSON to chat');
  log('100,000 nested brackets: 400 at three places of a graph call, at generate and at chat');

  // ---- the hijack chain ----
  // 1. An output that cannot travel is refused before it runs; the link stays.
  const huge = { nodes: [{ id: 'z', op: 'zeros', params: { shape: [16384, 16384] } }], outputs: ['z'], encoding: 'b64' };
  const big = await postJson(serve.url, '/api/v3/graph', huge);
  await refusedWith(big, 413, 'a 1 GiB output');
  check(big.json.code === 'too_large', `a 1 GiB output: code ${big.json.code}`);
  const asJson = await postJson(serve.url, '/api/v3/graph', { ...huge, encoding: undefined,
    nodes: [{ id: 'z', op: 'zeros', params: { shape: [4096, 4096] } }] });
  check(/b64/.test(await refusedWith(asJson, 413, 'a 64 MB output as JSON')), 'the JSON refusal does not point to b64');
  const local1 = (await workers(serve.url)).find((w) => w.id === 'local');
  check(local1 && local1.joined === local0.joined, 'the local worker lost its link over a refused output');
  // 2. A peer claiming the id "local" (and the model) is refused.
  const impostor = await fakeWorker(serve.port);
  impostor.send(message({ type: 'hello', protocol: 3, id: 'local', ops: local0.ops, features: local0.features,
                          threads: 2, memory: 1 << 30, models: [{ id: 'hf', hash }] }));
  await withTimeout(impostor.done, 10000, 'the coordinator to refuse a peer named "local"');
  check(/reserved/.test(stderrOf(serve)), 'the refusal of "local" does not say the id is reserved');
  checkEqual((await workers(serve.url)).map((w) => w.id), ['local'], 'workers after the impostor');
  // 3. A worker refused as a duplicate keeps trying and takes the id once it is free.
  const twin1 = startWorker(serve.url, ['--model', model, '--id', 'twin', '--no-fetch'], { name: 'twin 1' });
  await waitFor(async () => (await workers(serve.url)).some((w) => w.id === 'twin'), 30000, 'twin 1 to join');
  const twin2 = startWorker(serve.url, ['--model', model, '--id', 'twin', '--no-fetch'], { name: 'twin 2' });
  await waitFor(() => /already connected.*will try again/.test(stderrOf(twin2)), 30000, 'twin 2 to be refused');
  await stopProcess(twin1, 'SIGKILL');
  await waitFor(() => /joined .* as twin/.test(stderrOf(twin2)), 15000, 'twin 2 to take the id after twin 1 died');
  check(!twin2.exited, 'twin 2 exited');
  await stopProcess(twin2);
  await waitFor(async () => (await workers(serve.url)).length === 1, 30000, 'twin 2 to leave');
  log('hijack chain: oversized output refused before it ran (413), "local" reserved, a duplicate retries');

  // ---- peers that misbehave are dropped; generations are unaffected ----
  const erring = await fakeHolder(serve, 'erring', local0, hash, (h) =>
    message({ type: 'error', req: h.req, error: { error: 'no', code: 'internal' } }));
  const erringRounds = await generationsUntilDropped(serve, want, 'erring',
                                                    'beside a worker that answers every call with an error');
  await waitFor(() => /worker erring dropped/.test(stderrOf(serve)), 5000, 'the coordinator to log dropping erring');
  log(`a worker answering with errors was dropped after ${erring.runs} calls; ` +
      `${erringRounds} round(s) of 12 generations all right`);

  const padded = await fakeHolder(serve, 'padded', local0, hash, (h) =>
    message({ type: 'result', req: h.req }, { token: { shape: [1], data: new Float32Array([5]) },
                                             extra: { shape: [1024], data: new Float32Array(1024) } }));
  const paddedRounds = await generationsUntilDropped(serve, want, 'padded',
                                                    'beside a worker whose replies carry an extra tensor');
  await waitFor(() => /worker padded dropped.*nobody asked for/.test(stderrOf(serve)), 5000,
                'the coordinator to log why it dropped padded');
  log(`a worker whose replies carry tensors nobody asked for was dropped after ${padded.runs} calls; ` +
      `${paddedRounds} round(s) of 12 generations all right`);

  const flood = await fakeHolder(serve, 'flood', local0, hash, () => null);
  const junkFrame = message({ type: 'result', req: 999999 });
  for (let i = 0; i < 200 && !flood.closed; ++i) flood.send(junkFrame);
  await withTimeout(flood.done, 15000, 'the coordinator to drop a flooding worker');
  await concurrentGenerations(serve, want, 'after a flooding worker');
  log('a worker flooding unsolicited frames was dropped');

  // ---- a frame before hello is at most a few KB ----
  const early = await fakeWorker(serve.port);
  early.send(Buffer.alloc(100 << 10, 0x20));
  await withTimeout(early.done, 10000, 'the coordinator to drop a 100 KB frame before hello');
  log('a 100 KB frame before hello: dropped');

  // ---- a socket hoarder on another address cannot starve the rest ----
  const hoard = [];
  for (let i = 0; i < 300; ++i) {
    const s = net.connect({ port: serve.port, host: '127.0.0.1', localAddress: '127.0.0.2' });
    s.on('error', () => {});
    hoard.push(s);
  }
  await sleep(1000);
  const during = await Promise.all(Array.from({ length: 20 }, () => getJson(serve.url, '/api/v3/models')));
  check(during.every((r) => r.status === 200), `requests during the hoard: ${during.map((r) => r.status).join(',')}`);
  const gen = await postJson(serve.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 });
  checkEqual(gen.json?.tokens, want, 'a generation while another address holds 300 idle sockets');
  for (const s of hoard) s.destroy();
  log('300 idle sockets from 127.0.0.2: that address capped, 127.0.0.1 served (20 of 20)');

  // ---- client mistakes are 400 naming the field, on both APIs ----
  const g = (body) => postJson(serve.url, '/api/v3/generate', body);
  await refusedWith(await g('{"tokens": [1], "maxTokens": 1e400}'), 400, 'maxTokens 1e400', 'maxTokens');
  await refusedWith(await g({ tokens: [1], stream: 'yes' }), 400, 'stream "yes"', 'stream');
  await refusedWith(await g({ tokens: [1], topP: 2 }), 400, 'topP 2', 'topP');
  await refusedWith(await g({ tokens: [1], topK: -5 }), 400, 'topK -5', 'topK');
  await refusedWith(await g({ tokens: [2 ** 40] }), 400, 'token 2^40', 'tokens[0]');
  await refusedWith(await g({ tokens: [1], temperature: 'hot' }), 400, 'temperature "hot"', 'temperature');
  const bad = Buffer.concat([Buffer.from('{"prompt": "caf'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
  for (const p of ['/api/v3/generate', '/v1/completions']) {
    const r = await postRaw(serve.url, p, bad);
    await refusedWith(r, 400, `invalid UTF-8 to ${p}`);
    check(!r.text.includes('\ufffd') && !r.text.includes('caf'), `${p} echoes the raw bytes: ${r.text}`);
  }
  await refusedWith(await postJson(serve.url, '/v1/completions', { prompt: 'x', stream: 'yes' }), 400,
                    'OpenAI stream "yes"', 'stream');
  await refusedWith(await postJson(serve.url, '/v1/completions', { prompt: 'x', top_p: 2 }), 400, 'OpenAI top_p 2',
                    'top_p');
  const longPrompt = await g({ prompt: 'a'.repeat(8 << 20) });
  await refusedWith(longPrompt, 413, 'an 8 MB prompt', 'prompt');
  log('client mistakes: 400 (413 for size) naming the field, no raw bytes echoed');

  // ---- a long client graph neither delays a generation nor costs the worker ----
  const nodes = [{ id: 'a', op: 'zeros', params: { shape: [1536, 1536] } }];
  for (let i = 0; i < 400; ++i) nodes.push({ id: `m${i}`, op: 'matmul', in: [i ? `m${i - 1}` : 'a', 'a'] });
  const slow = postJson(serve.url, '/api/v3/graph', { nodes, outputs: ['m399'], encoding: 'b64' });
  await sleep(300);
  const t0 = Date.now();
  const beside = await postJson(serve.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 });
  const genMs = Date.now() - t0;
  checkEqual(beside.json?.tokens, want, 'a generation beside a long graph call');
  const slowRes = await slow;
  await refusedWith(slowRes, 504, 'a graph call over --graph-timeout 3');
  const local2 = (await workers(serve.url)).find((w) => w.id === 'local');
  check(local2 && local2.joined === local0.joined, 'the coordinator dropped its own worker over a client\'s long call');
  log(`a generation finished in ${genMs} ms beside a long graph call, which got 504; the worker kept its link`);

  // ---- a config that claims 10^9 layers is refused, not allocated ----
  const dir = tempDir();
  const liar = path.join(dir, 'liar');
  fs.mkdirSync(liar);
  for (const f of fs.readdirSync(model)) fs.copyFileSync(path.join(model, f), path.join(liar, f));
  const cfg = JSON.parse(fs.readFileSync(path.join(liar, 'config.json'), 'utf8'));
  cfg.num_hidden_layers = 1000000000;
  fs.writeFileSync(path.join(liar, 'config.json'), JSON.stringify(cfg));
  const liarWorker = startWorker(serve.url, ['--model', liar, '--id', 'liar', '--no-fetch'], { name: 'liar' });
  const liarExit = await withTimeout(liarWorker.exit, 30000, 'a worker with a 10^9-layer config to give up');
  const said = stderrOf(liarWorker) + liarWorker.stdout;  // the CLI prints its error as JSON
  check(liarExit !== 0 && /num_hidden_layers/.test(said),
        `the 10^9-layer config (exit ${liarExit}) is not refused naming num_hidden_layers:\n${said}`);
  log('a config with 10^9 layers: refused naming num_hidden_layers');

  // ---- a coordinator restart is rejoined within about a second ----
  const port = serve.port;
  const w = startWorker(serve.url, ['--model', model, '--id', 'volunteer', '--no-fetch']);
  await waitFor(async () => (await workers(serve.url)).some((x) => x.id === 'volunteer'), 30000, 'volunteer to join');
  await stopProcess(serve);
  await sleep(2000);
  const again = await startServe(['--model', model, '--no-local-worker'], { name: 'serve 2', port });
  const up = Date.now();
  await waitFor(async () => (await workers(again.url)).some((x) => x.id === 'volunteer'), 10000,
                'volunteer to rejoin the restarted coordinator');
  const rejoinMs = Date.now() - up;
  check(rejoinMs < 3000, `the volunteer took ${rejoinMs} ms to rejoin (backoff should be at most 1 s)`);
  const after = await postJson(again.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 });
  checkEqual(after.json?.tokens, want, 'a generation after the restart');
  check(!w.exited, 'the volunteer exited');
  log(`after a coordinator restart the volunteer rejoined in ${rejoinMs} ms`);
});
