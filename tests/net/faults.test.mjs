// Faults and bad input: a client that goes away mid-stream, a worker id
// already taken, a wrong network token, garbage HTTP, a fake worker sending
// garbage frames, API keys. Whatever happens, the coordinator stays up and
// keeps serving the workers that behave.
import net from 'node:net';
import path from 'node:path';
import {
  check, checkEqual, getJson, http, loadOpenAI, log, main, postJson, sleep, startServe, startWorker, stderrOf,
  testModel, waitFor, waitWorkers, withTimeout, workers, fakeWorker, message,
} from './harness.mjs';

// Sends raw bytes over TCP; resolves with everything the server sent back
// before closing (or what came within `ms`).
function rawExchange(port, bytes, ms = 10000) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => { s.destroy(); resolve({ got, closed: false }); }, ms);
    s.on('connect', () => s.write(bytes));
    s.on('data', (d) => { got += d.toString('latin1'); });
    s.on('error', () => {});
    s.on('close', () => { clearTimeout(timer); resolve({ got, closed: true }); });
  });
}

await main('faults', async () => {
  const model = path.join(testModel('llama'), 'hf');
  const serve = await startServe(['--no-local-worker', '--model', model]);
  const w1 = startWorker(serve.url, ['--model', model, '--id', 'w1', '--no-fetch']);
  await waitWorkers(serve, 1, { ids: ['w1'], model: 'hf' });
  const want = await postJson(serve.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 });
  check(want.status === 200 && want.json.tokens.length > 0, `a first generation: ${want.text}`);

  // ---- a client that goes away mid-stream ----
  const ctl = new AbortController();
  const res = await fetch(`${serve.url}/api/v3/generate`, {
    method: 'POST', signal: ctl.signal,
    body: JSON.stringify({ tokens: [1, 2, 3], maxTokens: 3000, temperature: 0.9, seed: 1, stream: true }),
  });
  check(res.status === 200, `the long stream: HTTP ${res.status}`);
  let seen = 0;
  try {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let text = '';
    while (seen < 3) {
      const { value, done } = await withTimeout(reader.read(), 30000, 'stream events');
      check(!done, 'the 3000-token stream ended early');
      text += dec.decode(value, { stream: true });
      seen = (text.match(/^data: /gm) || []).length;
    }
    ctl.abort();
  } catch (e) {
    if (!ctl.signal.aborted) throw e;
  }
  log(`aborted the stream after ${seen} events`);
  // The generation stops: the worker's call count stops growing (3000
  // steps would take seconds), nothing stays in flight, no generation runs.
  const calls = async () => (await workers(serve.url))[0].load.calls;
  let last = await calls();
  await waitFor(async () => {
    await sleep(300);
    const now = await calls();
    const still = now === last;
    last = now;
    return still;
  }, 15000, 'the aborted generation to stop calling the worker');
  check(last < 1000, `the aborted generation ran ${last} steps before stopping`);
  const w = (await workers(serve.url))[0];
  check(w.load.inFlight === 0, `inFlight is ${w.load.inFlight} after the client left`);
  const metrics = (await getJson(serve.url, '/metrics')).text;
  check(/^bonfire_active_generations 0$/m.test(metrics), 'bonfire_active_generations is not 0 after the client left');
  const again = await postJson(serve.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 });
  check(again.status === 200, `a generation after the abort: ${again.text}`);
  checkEqual(again.json.tokens, want.json.tokens, 'a generation after the abort');
  log(`the aborted generation stopped after ${last} worker calls; the next one is right`);

  // ---- two workers with one id ----
  // The first keeps its id and sessions; the second is refused with the
  // reason and keeps trying (the first may be a link about to be found
  // dead), so it takes the id over once the first is gone.
  const dup = startWorker(serve.url, ['--model', model, '--id', 'w1', '--no-fetch'], { name: 'duplicate w1' });
  await waitFor(() => /already connected/.test(stderrOf(dup)) && /will try again/.test(stderrOf(dup)), 30000,
                'the duplicate worker to be refused');
  await sleep(1500);
  check(!dup.exited, `the duplicate worker exited (${dup.exited}) instead of trying again`);
  check(!w1.exited, 'the first w1 exited');
  const after = await postJson(serve.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 });
  checkEqual(after.json?.tokens, want.json.tokens, 'a generation after the duplicate was refused');
  checkEqual((await workers(serve.url)).map((x) => x.id), ['w1'], 'the workers after the duplicate');
  log('the duplicate id was refused and keeps trying; w1 still serves');

  // ---- garbage HTTP ----
  for (const junk of ['\x00\x01\x02garbage\r\n\r\n', 'GET / HTTP/9.9 nonsense\r\n\r\n', 'POST /api/v3/graph HTTP/1.1\r\n' +
                      'Content-Length: -5\r\n\r\n', 'BREW /coffee HTCPCP/1.0\r\nX: \x7f\x7f\r\n\r\n']) {
    const r = await rawExchange(serve.port, Buffer.from(junk, 'latin1'));
    check(/^HTTP\/1\.1 400 /.test(r.got), `garbage ${JSON.stringify(junk)} got ${JSON.stringify(r.got.slice(0, 200))}`);
    check(r.closed, `the server kept the connection of garbage ${JSON.stringify(junk)} open`);
  }
  check((await getJson(serve.url, '/api/v3/workers')).status === 200, 'the server is down after garbage HTTP');
  log('garbage HTTP gets 400; the server stays up');

  // ---- fake workers sending garbage frames ----
  const fake1 = await fakeWorker(serve.port);
  fake1.send(Buffer.from('this is not a worker message at all'));
  await withTimeout(fake1.done, 15000, 'the coordinator to drop a link that sent garbage before its hello');
  const fake2 = await fakeWorker(serve.port);
  fake2.send(message({ type: 'hello', protocol: 3, id: 'fake', ops: ['add'], features: [], threads: 1, memory: 1000 }));
  await waitFor(async () => (await workers(serve.url)).some((x) => x.id === 'fake'), 10000, 'the fake worker to join');
  const junk = message({ type: 'result', req: 1 });
  junk.writeUInt32LE(0xfffffff0, 0);  // a header longer than the frame
  fake2.send(junk);
  await withTimeout(fake2.done, 15000, 'the coordinator to drop a worker that sent a garbage frame');
  await waitFor(async () => !(await workers(serve.url)).some((x) => x.id === 'fake'), 10000,
                'the fake worker to leave the list');
  check(/worker fake left: garbage/.test(stderrOf(serve)), 'the coordinator did not log why it dropped the fake');
  const after2 = await postJson(serve.url, '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 });
  checkEqual(after2.json?.tokens, want.json.tokens, 'a generation after the garbage frames');
  log('fake workers sending garbage were dropped; the network still serves');

  // ---- a network token and API keys ----
  const locked = await startServe(['--model', model, '--token', 'sesame', '--api-key', 'K1', '--api-key', 'K2'],
                                  { name: 'serve --token --api-key' });
  const auth = { authorization: 'Bearer K1' };
  const wrong = startWorker(locked.url, ['--model', model, '--token', 'not-sesame', '--id', 'intruder', '--no-fetch'],
                            { name: 'wrong token' });
  const wrongExit = await withTimeout(wrong.exit, 30000, 'the worker with a wrong token to exit');
  check(wrongExit !== 0, `the worker with a wrong token exited with ${wrongExit}`);
  check(/token/.test(stderrOf(wrong)) && /refused/.test(stderrOf(wrong)),
        `the worker with a wrong token does not say why it was refused:\n${stderrOf(wrong)}`);
  const none = startWorker(locked.url, ['--model', model, '--id', 'tokenless', '--no-fetch'], { name: 'no token' });
  check((await withTimeout(none.exit, 30000, 'the worker with no token to exit')) !== 0, 'a worker without a token joined');
  startWorker(locked.url, ['--model', model, '--token', 'sesame', '--id', 'friend', '--no-fetch'], { name: 'friend' });
  await waitWorkers(locked, 2, { ids: ['local', 'friend'], headers: auth });
  log('wrong and missing tokens refused with the reason; the right one joins');

  const open = await getJson(locked.url, '/v1/models');
  check(open.status === 401, `/v1/models without a key: HTTP ${open.status}`);
  check(typeof open.json?.error === 'object' || typeof open.json?.error === 'string', `401 body: ${open.text}`);
  check((await getJson(locked.url, '/v1/models', { headers: { authorization: 'Bearer nope' } })).status === 401,
        '/v1/models with a wrong key is not 401');
  check((await getJson(locked.url, '/api/v3/workers')).status === 401, '/api/v3/workers without a key is not 401');
  for (const k of ['K1', 'K2']) {
    const ok = await getJson(locked.url, '/v1/models', { headers: { authorization: `Bearer ${k}` } });
    check(ok.status === 200 && ok.json.data?.[0]?.id === 'hf', `/v1/models with key ${k}: ${ok.status} ${ok.text}`);
  }
  const OpenAI = await loadOpenAI();
  const client = new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: 'K2', maxRetries: 0, timeout: 60000 });
  const c = await client.completions.create({ model: 'hf', prompt: [1, 2, 3], max_tokens: 12, temperature: 0 });
  checkEqual(c.choices[0].text, want.json.text, 'the OpenAI client with the key: completion of tokens [1, 2, 3]');
  const bad = new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: 'K3', maxRetries: 0, timeout: 60000 });
  let status = 0;
  try { await bad.models.list(); } catch (e) { status = e.status; }
  check(status === 401, `the OpenAI client with a wrong key: status ${status}`);
  const gen = await http(locked.url, 'POST', '/api/v3/generate', { tokens: [1, 2, 3], maxTokens: 12 }, { headers: auth });
  checkEqual(gen.json?.tokens, want.json.tokens, 'a generation on the locked network');
  log('API keys: 401 without or with a wrong key, 200 and the OpenAI client with one');
  check(!serve.exited && !locked.exited, 'a coordinator exited');
});
