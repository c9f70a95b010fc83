// The coordinator's static routes for browsers: GET /, /web/NAME, /lend
// (with or without a query) and /wasm/NAME (the browser worker's build,
// --wasm-dir) carry the cross-origin isolation headers the lend page's
// threads need (COOP/COEP, and CORP), need no API key, serve the right
// content types and caching, refuse names outside their folder, and a
// missing build is a 404 that says how to build it.
import fs from 'node:fs';
import path from 'node:path';
import { check, checkEqual, http, log, main, startServe, tempDir } from './harness.mjs';

const ISOLATION = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
};
const NOT_BUILT = 'the browser worker is not built: run scripts/build_wasm.sh';

function checkHeaders(r, p, { status = 200, type, cache = 'no-store' } = {}) {
  check(r.status === status, `GET ${p}: HTTP ${r.status}, want ${status}: ${r.text.slice(0, 200)}`);
  for (const [k, v] of Object.entries(ISOLATION)) checkEqual(r.headers.get(k), v, `GET ${p}: ${k}`);
  if (type) check((r.headers.get('content-type') || '').startsWith(type), `GET ${p}: content-type ${r.headers.get('content-type')}`);
  if (cache) checkEqual(r.headers.get('cache-control'), cache, `GET ${p}: cache-control`);
}

await main('web routes', async () => {
  const dir = tempDir();
  const wasmDir = path.join(dir, 'wasm');
  const key = { authorization: 'Bearer K' };
  // An API key: none of these routes may ask for it.
  const serve = await startServe(['--no-local-worker', '--no-model', '--api-key', 'K', '--wasm-dir', wasmDir]);
  check((await http(serve.url, 'GET', '/api/v3/workers')).status === 401, '/api/v3/workers without the key is not 401');

  const pages = { '/': 'text/html', '/web/app.js': 'text/javascript', '/web/style.css': 'text/css',
                  '/lend': 'text/html', '/lend?token=T&memory=512': 'text/html', '/web/lend.js': 'text/javascript' };
  for (const [p, type] of Object.entries(pages)) checkHeaders(await http(serve.url, 'GET', p), p, { type });
  check((await http(serve.url, 'GET', '/lend')).text.includes('lend.js'), 'GET /lend is not web/lend.html');
  checkHeaders(await http(serve.url, 'GET', '/web/nothing.js'), '/web/nothing.js', { status: 404 });

  // No build yet: a 404 naming the fix, for the folder missing and for a file missing.
  for (const p of ['/wasm/bonfire-worker.wasm', '/wasm/bonfire-worker.js']) {
    const r = await http(serve.url, 'GET', p);
    checkHeaders(r, p, { status: 404, type: 'text/plain' });
    check(r.text.includes(NOT_BUILT), `GET ${p} without a build: ${JSON.stringify(r.text)}`);
  }
  fs.mkdirSync(wasmDir);
  const wasm = Buffer.from([0, 97, 115, 109, 1, 0, 0, 0]);  // the smallest valid module
  fs.writeFileSync(path.join(wasmDir, 'bonfire-worker.wasm'), wasm);
  fs.writeFileSync(path.join(wasmDir, 'bonfire-worker.js'), '// glue\n');
  fs.writeFileSync(path.join(wasmDir, 'bonfire-worker.worker.js'), '// pthread\n');
  fs.writeFileSync(path.join(dir, 'secret.txt'), 'outside\n');
  const missing = await http(serve.url, 'GET', '/wasm/other.wasm');
  checkHeaders(missing, '/wasm/other.wasm', { status: 404 });
  check(missing.text.includes(NOT_BUILT), `GET /wasm/other.wasm: ${JSON.stringify(missing.text)}`);

  // Built: served as the browser needs each (compiled streaming: application/wasm).
  const bin = await fetch(`${serve.url}/wasm/bonfire-worker.wasm`);
  const body = Buffer.from(await bin.arrayBuffer());
  checkHeaders({ status: bin.status, headers: bin.headers, text: '' }, '/wasm/bonfire-worker.wasm',
               { type: 'application/wasm', cache: 'no-cache' });
  check(body.equals(wasm), 'GET /wasm/bonfire-worker.wasm: not the file\'s bytes');
  const etag = bin.headers.get('etag');
  check(etag, 'GET /wasm/bonfire-worker.wasm: no ETag to revalidate with');
  const again = await http(serve.url, 'GET', '/wasm/bonfire-worker.wasm', undefined, { headers: { 'if-none-match': etag } });
  checkHeaders(again, '/wasm/bonfire-worker.wasm (revalidated)', { status: 304, cache: 'no-cache' });
  for (const p of ['/wasm/bonfire-worker.js', '/wasm/bonfire-worker.worker.js'])
    checkHeaders(await http(serve.url, 'GET', p), p, { type: 'text/javascript' });
  // (fetch resolves a plain or %2e "..": those reach /secret.txt, which asks for the key.)
  for (const p of ['/wasm/..%2fsecret.txt', '/wasm/../secret.txt', '/wasm/%2e%2e/secret.txt', '/wasm/', '/wasm/a/b.js']) {
    const r = await http(serve.url, 'GET', p);
    check([401, 404].includes(r.status) && !r.text.includes('outside'), `GET ${p}: HTTP ${r.status} ${r.text}`);
  }
  // The API still asks for its key; with it, it answers.
  check((await http(serve.url, 'GET', '/api/v3/workers', undefined, { headers: key })).status === 200,
        '/api/v3/workers with the key');
  log('/, /web/, /lend and /wasm/ carry COOP/COEP/CORP, need no key, and a missing build names the fix');
});
