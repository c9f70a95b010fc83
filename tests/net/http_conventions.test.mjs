// What an HTTP client expects of the coordinator beyond PROTOCOL.md's
// endpoints (found by an audit of serve against the spec):
// - HEAD on a GET endpoint: the GET's status and headers, Content-Length
//   included, and no body; a known path with the wrong method: 405 with Allow.
// - Path segments are %-decoded: a session named "a b/c" can be freed as
//   /api/v3/sessions/a%20b%2Fc; a malformed escape is a 400.
// - /v1/* refusals before any endpoint runs (401, 404, 405) are in OpenAI's
//   error shape (the HTTP layer's 413 and 400 too, which /metrics counts),
//   and any model name maps to the one served model on chat
//   and completions alike.
// - CORS (response headers and preflights) only for serve --cors's origins.
// - GET /health (503 while no worker is connected) and GET /v1/models/ID.
// - /api/v3/generate takes "prompt" or "tokens", not both.
// - The JSON answer's size limit names base64 only when base64 would help.
// - The bounds of slice and cache_write hold for offsets near 2^63.
// - Command-line values out of range are refused before anything starts.
import net from 'node:net';
import { check, checkEqual, http, main, postJson, runBonfire, startServe, stopProcess, waitWorkers } from './harness.mjs';

// The raw answer to a request written by hand (fetch will not send HEAD
// bodies or odd paths as written).
function rawRequest(port, text) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.end(text));
    let got = '';
    s.on('data', (d) => { got += d; });
    s.on('end', () => resolve(got));
    s.on('error', reject);
  });
}

await main('http conventions', async () => {
  const serve = await startServe(['--max-body', '65536', '--cors', 'https://app.example']);
  try {
    await waitWorkers(serve, 1);  // its own worker joins just after serve listens
    // HEAD: the GET's headers without its body.
    const get = await http(serve.url, 'GET', '/api/v3/ops');
    const head = await rawRequest(serve.port, 'HEAD /api/v3/ops HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    check(head.startsWith('HTTP/1.1 200'), `HEAD /api/v3/ops: ${head.slice(0, 200)}`);
    const [headers, body] = head.split('\r\n\r\n');
    checkEqual(/content-length: (\d+)/i.exec(headers)?.[1], String(Buffer.byteLength(get.text)), 'HEAD Content-Length');
    checkEqual(body, '', 'HEAD body');

    // CORS, for the origins --cors names only.
    const ask = (method, p, origin, extra = '') => rawRequest(serve.port,
      `${method} ${p} HTTP/1.1\r\nHost: x\r\nOrigin: ${origin}\r\n${extra}Connection: close\r\n\r\n`);
    const friend = await ask('GET', '/api/v3/ops', 'https://app.example');
    check(/\r\naccess-control-allow-origin: https:\/\/app\.example\r\n/i.test(friend), `CORS for --cors's origin: ${friend.slice(0, 400)}`);
    const stranger = await ask('GET', '/api/v3/ops', 'https://evil.example');
    check(stranger.startsWith('HTTP/1.1 200') && !/access-control/i.test(stranger.split('\r\n\r\n')[0]),
          `no CORS for another origin: ${stranger.slice(0, 400)}`);
    const preflight = await ask('OPTIONS', '/v1/chat/completions', 'https://app.example',
                                'Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization\r\n');
    check(preflight.startsWith('HTTP/1.1 204') && /access-control-allow-methods: POST\r\n/i.test(preflight) &&
          /access-control-allow-headers: [^\r]*Authorization/i.test(preflight),
          `a preflight from --cors's origin: ${preflight.slice(0, 400)}`);
    const refused = await ask('OPTIONS', '/v1/chat/completions', 'https://evil.example',
                              'Access-Control-Request-Method: POST\r\n');
    check(refused.startsWith('HTTP/1.1 405'), `a preflight from another origin: ${refused.slice(0, 300)}`);

    // /health for probes (no key), and OpenAI's model retrieval.
    const health = await http(serve.url, 'GET', '/health');
    checkEqual([health.status, health.json?.status, health.json?.workers], [200, 'ok', 1], `/health: ${health.text}`);
    const model = await http(serve.url, 'GET', '/v1/models/demo');
    checkEqual([model.status, model.json?.id, model.json?.object], [200, 'demo', 'model'], `/v1/models/demo: ${model.text}`);
    const noModel = await http(serve.url, 'GET', '/v1/models/gpt-4o');
    checkEqual([noModel.status, noModel.json?.error?.code], [404, 'model_not_found'], `/v1/models/gpt-4o: ${noModel.text}`);

    // The wrong method on a known path.
    const wrong = await http(serve.url, 'GET', '/api/v3/graph');
    checkEqual(wrong.status, 405, 'GET /api/v3/graph');
    checkEqual(wrong.headers.get('allow'), 'POST', 'GET /api/v3/graph: Allow');
    checkEqual(wrong.json?.code, 'method_not_allowed', 'GET /api/v3/graph: code');
    const v1wrong = await http(serve.url, 'GET', '/v1/chat/completions');
    checkEqual(v1wrong.status, 405, 'GET /v1/chat/completions');
    checkEqual(typeof v1wrong.json?.error?.message, 'string', 'GET /v1/chat/completions: OpenAI error shape');
    const v1missing = await http(serve.url, 'GET', '/v1/nothing');
    checkEqual(v1missing.status, 404, 'GET /v1/nothing');
    checkEqual(v1missing.json?.error?.code, 'not_found', 'GET /v1/nothing: OpenAI error shape');
    checkEqual((await http(serve.url, 'GET', '/api/v3/nothing')).json?.code, 'not_found', 'GET /api/v3/nothing');

    // A session name that needs escaping in a path.
    const made = await postJson(serve.url, '/api/v3/graph', {
      session: 'a b/c', nodes: [{ id: 'z', op: 'zeros', params: { shape: [2] } }], retain: { c: 'z' }, outputs: [] });
    checkEqual(made.status, 200, `creating session "a b/c": ${made.text}`);
    const freed = await http(serve.url, 'DELETE', '/api/v3/sessions/a%20b%2Fc');
    checkEqual(freed.status, 200, `DELETE /api/v3/sessions/a%20b%2Fc: ${freed.text}`);
    checkEqual(freed.json?.freed, 'a b/c', 'the freed session');
    checkEqual((await http(serve.url, 'DELETE', '/api/v3/sessions/a%20b%2Fc')).status, 404, 'freed twice');
    const bad = await rawRequest(serve.port, 'DELETE /api/v3/sessions/a%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    check(bad.startsWith('HTTP/1.1 400') && bad.includes('%-escape'), `a malformed escape: ${bad.slice(0, 300)}`);

    // Any model name reaches the one model served, on both OpenAI endpoints.
    for (const [p, extra] of [['/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }] }],
                              ['/v1/completions', { prompt: 'Hi' }]]) {
      const r = await postJson(serve.url, p, { model: 'gpt-4o', max_tokens: 2, ...extra });
      checkEqual(r.status, 200, `${p} with model gpt-4o: ${r.text.slice(0, 300)}`);
    }

    // A prompt given twice over is refused rather than half-read.
    const both = await postJson(serve.url, '/api/v3/generate', { prompt: 'Hi', tokens: [1, 2], maxTokens: 2 });
    checkEqual(both.status, 400, `prompt and tokens: ${both.text.slice(0, 300)}`);
    check(both.json?.error?.includes('not both'), `prompt and tokens: ${both.text.slice(0, 300)}`);

    // The JSON answer's limit suggests base64 only for outputs; a refusal
    // for other reasons says nothing about it.
    const axes = await postJson(serve.url, '/api/v3/graph', {
      nodes: [{ id: 'z', op: 'zeros', params: { shape: [1, 1, 1, 1, 1, 1, 1, 1, 1] } }], outputs: ['z'] });
    checkEqual(axes.json?.code, 'too_large', 'rank 9');
    check(!axes.json.error.includes('b64'), `rank 9 mentions base64: ${axes.json.error}`);

    // Offsets that once wrapped a bounds check (read back the server's
    // memory; wrote before the cache and killed the process).
    const slice = await postJson(serve.url, '/api/v3/graph', {
      inputs: { x: { shape: [1, 4], data: [1, 2, 3, 4] } },
      nodes: [{ id: 'a', op: 'slice', in: ['x'], params: { start: 9223372036854774784, length: 2048, axis: -1 } }],
      outputs: ['a'] });
    checkEqual(slice.status, 400, `slice at 2^63 - 1024: ${slice.text.slice(0, 300)}`);
    const write = await postJson(serve.url, '/api/v3/graph', {
      inputs: { v: { shape: [1024, 1], data: new Array(1024).fill(1e30) } },
      nodes: [{ id: 'z', op: 'zeros', params: { shape: [4, 1] } },
              { id: 'c', op: 'cache_write', in: ['z', 'v'], params: { offset: 9223372036854774784 } }],
      outputs: ['c'] });
    checkEqual(write.status, 400, `cache_write at 2^63 - 1024: ${write.text.slice(0, 300)}`);
    checkEqual((await http(serve.url, 'GET', '/api/v3/ops')).status, 200, 'serve is still up');

    // A body over --max-body is refused by the HTTP layer before any
    // endpoint runs: in the shape the path's clients read, and counted.
    const huge = 'x'.repeat(100000);
    const v1big = await postJson(serve.url, '/v1/chat/completions', { messages: [{ role: 'user', content: huge }] });
    checkEqual(v1big.status, 413, '/v1/chat/completions over --max-body');
    checkEqual(v1big.json?.error?.code, 'too_large', `/v1 413 in OpenAI's shape: ${v1big.text.slice(0, 300)}`);
    check(/65536/.test(v1big.json?.error?.message), `the 413 names the limit: ${v1big.text.slice(0, 300)}`);
    const corsBig = await http(serve.url, 'POST', '/v1/completions', JSON.stringify({ prompt: huge }),
                               { headers: { origin: 'https://app.example' } });
    checkEqual([corsBig.status, corsBig.headers.get('access-control-allow-origin')], [413, 'https://app.example'],
               'a 413 for --cors\'s origin carries its CORS header (a browser could not read it otherwise)');
    const big = await postJson(serve.url, '/api/v3/generate', { prompt: huge });
    checkEqual(big.status, 413, '/api/v3/generate over --max-body');
    checkEqual(big.json?.code, 'too_large', `/api/v3 413 as PROTOCOL.md writes errors: ${big.text.slice(0, 300)}`);
    const metrics = (await http(serve.url, 'GET', '/metrics')).text;
    for (const endpoint of ['/v1/chat/completions', '/v1/completions', '/api/v3/generate'])
      check(metrics.includes(`bonfire_http_requests_total{endpoint="${endpoint}",status="413"} 1`),
            `/metrics counts the 413 on ${endpoint}`);
  } finally {
    await stopProcess(serve);
  }

  // A coordinator with no worker is not healthy: probes see 503.
  const alone = await startServe(['--no-local-worker', '--no-model']);
  try {
    const h = await http(alone.url, 'GET', '/health');
    checkEqual([h.status, h.json?.status, h.json?.workers], [503, 'no_worker', 0], `/health with no worker: ${h.text}`);
  } finally {
    await stopProcess(alone);
  }

  // Values out of range on the command line.
  for (const args of [['serve', '--port', '-1', '--no-model'], ['serve', '--port', '70000', '--no-model'],
                      ['serve', '--verify-rate', 'nan', '--no-model'], ['serve', '--max-tokens', '-5', '--no-model'],
                      ['generate', '--prompt', 'Hi', '--max-tokens', '-5'],
                      ['generate', '--prompt', 'Hi', '--temperature', 'nan'],
                      ['generate', '--prompt', 'Hi', '--ctx', '0'],
                      ['worker', '--join', 'http://127.0.0.1:99999', '--no-reconnect']]) {
    const r = runBonfire(args, { timeoutMs: 30000 });
    // A usage error is 2; the join URL is parsed after the options (its
    // refusal is the error JSON, 1).
    checkEqual(r.code, args[0] === 'worker' ? 1 : 2, `bonfire ${args.join(' ')}: exit status`);
    check(/range|port|number/i.test(r.stdout + r.stderr), `bonfire ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  }
});
