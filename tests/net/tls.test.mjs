// serve --tls-cert/--tls-key: the whole port speaks TLS. A worker joining
// over https:// (verifying with --ca) fetches its model over HTTPS, and
// generations and the OpenAI client over HTTPS give exactly the tokens of
// the same requests over plain HTTP. A worker refuses, and exits, a
// coordinator whose certificate it does not trust, that expired, or that
// names another host, each with the reason; plain HTTP to the TLS port and
// TLS to a plain port fail at once with a clear error on both sides; a
// connection that never handshakes is closed at the deadline; serve refuses
// to start with a certificate or key it cannot use. The coordinator's own
// worker joins over TLS by pinning serve's certificate, even an expired one.
//
// The certificates are made here with the openssl command: a CA, a server
// certificate for localhost and 127.0.0.1 signed by it, an expired one, one
// for another name, and an unrelated self-signed one.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  check, checkEqual, getJson, loadOpenAI, log, main, postJson, startProcess, startServe, startWorker, stderrOf,
  stopProcess, tempDir, tinyChatModel, trustCA, waitFor, waitWorkers, withTimeout, workers,
} from './harness.mjs';

function openssl(args, cwd) {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8', timeout: 60000 });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
}

// P-256 keys: quick to make, and what a modern setup would use.
const KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function makeCertificates(dir) {
  openssl(['req', '-x509', ...KEY, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '30', '-subj', '/CN=bonfire test CA'],
          dir);
  // Signed by the CA: `days` -1 makes one that expired yesterday.
  const signed = (name, cn, san, days) => {
    openssl(['req', ...KEY, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
    fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
             '-out', `${name}.pem`, '-days', String(days), '-extfile', `${name}.ext`], dir);
  };
  signed('server', 'localhost', 'DNS:localhost,IP:127.0.0.1', 30);
  signed('expired', 'localhost', 'DNS:localhost,IP:127.0.0.1', -1);
  signed('wrongname', 'example.invalid', 'DNS:example.invalid', 30);
  openssl(['req', '-x509', ...KEY, '-keyout', 'other.key', '-out', 'other.pem', '-days', '30', '-subj', '/CN=localhost',
           '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], dir);
  return dir;
}

// Before main(): the HTTPS requests below need Node to trust the CA.
const certs = process.env.BONFIRE_TLS_TEST_DIR || makeCertificates(tempDir('bonfire-tls-'));
trustCA(path.join(certs, 'ca.pem'), { BONFIRE_TLS_TEST_DIR: certs });
const pem = (name) => path.join(certs, name);

// What a worker that must refuse does: exits non-zero within a few seconds,
// its stderr naming the reason.
async function refuses(url, args, reasons, what) {
  const w = startWorker(url, ['--id', 'refuser', ...args], { name: `worker (${what})` });
  const code = await withTimeout(w.exit, 15000, `${what}: the worker to exit`);
  const err = stderrOf(w);
  check(code !== 0, `${what}: the worker exited with ${code}:\n${err}`);
  for (const r of reasons) check(err.includes(r), `${what}: the worker's stderr does not say "${r}":\n${err}`);
  log(`${what}: exit ${code}, "${err.trim().split('\n').pop()}"`);
}

// The requests compared over HTTP and HTTPS.
async function generations(serve) {
  const out = {};
  const prompt = [320, 72, 101, 108, 108, 111, 44, 301, 108, 100];
  for (const [name, sampling] of [['greedy', { temperature: 0 }], ['seeded', { temperature: 0.8, seed: 7 }]]) {
    const r = await postJson(serve.url, '/api/v3/generate', { tokens: prompt, maxTokens: 16, ...sampling });
    check(r.status === 200, `${name} generate at ${serve.url}: HTTP ${r.status}: ${r.text}`);
    check(r.json.tokens.length > 0, `${name} generate at ${serve.url}: no tokens`);
    out[`generate ${name}`] = r.json.tokens;
  }
  const OpenAI = await loadOpenAI();
  const client = new OpenAI({ baseURL: `${serve.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 120000 });
  const messages = [{ role: 'user', content: 'Say hi, fire!' }];
  for (const [name, sampling] of [['greedy', { temperature: 0 }], ['seeded', { temperature: 0.9, seed: 5 }]]) {
    const plain = await client.chat.completions.create({ model: 'tinychat', messages, max_tokens: 16, ...sampling });
    out[`chat ${name}`] = plain.choices[0].message.content;
    const stream = await client.chat.completions.create({ model: 'tinychat', messages, max_tokens: 16, stream: true,
                                                          ...sampling });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    out[`chat ${name}, streamed`] = text;
  }
  return out;
}

// A line in a process's stderr, which may arrive a little after the answer
// that follows it.
const logged = (child, re, what) => waitFor(() => re.test(stderrOf(child)), 5000, what);

// A TCP connection that sends nothing: closed by the server within `ms`.
function closedWithin(port, ms) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const s = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => { s.destroy(); reject(new Error(`still open after ${ms} ms`)); }, ms);
    s.on('error', () => {});
    s.on('close', () => { clearTimeout(timer); resolve(Date.now() - t0); });
  });
}

await main('tls', async () => {
  const model = tinyChatModel(tempDir());
  const serveArgs = ['--no-local-worker', '--model', model];

  // ---- a bad certificate or key: serve does not start ----
  for (const [args, says, what] of [
    [['--tls-cert', pem('missing.pem'), '--tls-key', pem('server.key')], pem('missing.pem'), 'a missing certificate'],
    [['--tls-cert', pem('server.pem'), '--tls-key', pem('other.key')], `--tls-key ${pem('other.key')} does not match`,
     'a key of another certificate'],
    [['--tls-cert', pem('server.key'), '--tls-key', pem('server.key')], `--tls-cert ${pem('server.key')}`,
     'a key given as the certificate'],
    [['--tls-cert', pem('server.pem')], '--tls-key', 'a certificate without its key'],
  ]) {
    const bad = startProcess(`serve (${what})`, ['serve', '--no-model', '--port', '0', ...args]);
    const code = await withTimeout(bad.exit, 30000, `serve with ${what} to exit`);
    const said = bad.stdout + stderrOf(bad);  // the error's JSON is on stdout, as for every command
    check(code !== 0 && said.includes(says) && !said.includes('listening on'),
          `serve with ${what}: exit ${code}, want non-zero and "${says}" said:\n${said}`);
  }
  log('serve refuses a missing certificate, a mismatched key, a key as certificate, a certificate alone');

  // ---- the same requests over plain HTTP and over HTTPS ----
  const plain = await startServe(serveArgs, { name: 'serve (plain)' });
  startWorker(plain.url, ['--id', 'p1', '--model', model, '--no-fetch']);
  await waitWorkers(plain, 1, { model: 'tinychat' });
  const want = await generations(plain);

  const secure = await startServe([...serveArgs, '--tls-cert', pem('server.pem'), '--tls-key', pem('server.key')],
                                  { name: 'serve (TLS)' });
  check(secure.url.startsWith('https://'), `serve with TLS says it listens on ${secure.url}`);
  // No --model: it fetches the model from the coordinator, over HTTPS.
  startWorker(secure.url, ['--id', 's1', '--ca', pem('ca.pem'), '--cache-dir', tempDir()]);
  const listed = await waitWorkers(secure, 1, { ids: ['s1'], model: 'tinychat' });
  log(`worker s1 joined ${secure.url} and fetched tinychat over HTTPS`);
  const got = await generations(secure);
  for (const k of Object.keys(want)) checkEqual(got[k], want[k], `${k}: over HTTPS and over HTTP`);
  log(`HTTPS and HTTP give the same tokens: ${Object.keys(want).join(', ')}`);

  // The wss:// form, and a host name (checked against the DNS name; SNI).
  const port = secure.port;
  startWorker(`wss://localhost:${port}/api/v3/worker`, ['--id', 's2', '--ca', pem('ca.pem'), '--no-fetch']);
  const both = await waitWorkers(secure, 2, { ids: ['s1', 's2'] });
  checkEqual(both.map((w) => w.id).sort(), ['s1', 's2'], '/api/v3/workers over HTTPS');
  check(listed[0].id === 's1', `workers listed ${JSON.stringify(listed)}`);
  log('a worker joined as wss://localhost:PORT/api/v3/worker too');

  // ---- certificates a worker must refuse ----
  await refuses(secure.url, ['--ca', pem('other.pem')],
                ["the coordinator's certificate is not trusted", 'unable to get local issuer certificate'],
                'an unrelated --ca');
  await refuses(secure.url, [], ["the coordinator's certificate is not trusted", 'pass --ca FILE'], 'no --ca');
  await logged(secure, /TLS handshake with 127\.0\.0\.1 failed: .*(unknown ca|bad certificate)/,
               'serve to log the refused handshakes');

  // ---- the wrong protocol, both ways ----
  const t0 = Date.now();
  const wrong = await getJson(`http://127.0.0.1:${port}`, '/api/v3/workers', { timeoutMs: 10000 });
  check(wrong.status === 400 && /speaks HTTPS/.test(wrong.json?.error ?? ''),
        `plain HTTP to the TLS port: HTTP ${wrong.status} ${wrong.text}`);
  await logged(secure, /plain HTTP from 127\.0\.0\.1 on the HTTPS port/, 'serve to log plain HTTP on its TLS port');
  log(`plain HTTP to the TLS port: 400 in ${Date.now() - t0} ms: ${wrong.json.error}`);
  checkEqual((await workers(secure.url)).length, 2, 'workers over HTTPS after a plain HTTP request');
  await refuses(`http://127.0.0.1:${port}`, [], ['speaks HTTPS'], 'http:// to the TLS port');
  await refuses(`https://127.0.0.1:${plain.port}`, ['--ca', pem('ca.pem')], ['does not speak TLS', 'join with http://'],
                'https:// to a plain port');
  await logged(plain, /a TLS handshake from 127\.0\.0\.1 on a plain HTTP port/, 'the plain serve to log a TLS handshake');
  // No handshake at all: closed at the deadline (10 s), not held.
  const held = await closedWithin(port, 20000);
  check(held >= 5000, `a silent connection was closed after ${held} ms, before the handshake deadline`);
  await logged(secure, /TLS handshake with 127\.0\.0\.1 failed: none within 10 s/,
               'serve to log the handshake deadline');
  log(`a connection that never handshakes was closed after ${held} ms`);
  checkEqual((await workers(secure.url)).length, 2, 'workers over HTTPS at the end');
  await stopProcess(plain);
  await stopProcess(secure);

  // ---- an expired certificate: refused by a worker; the built-in worker
  // pins it and joins all the same ----
  const expired = await startServe(['--no-model', '--tls-cert', pem('expired.pem'), '--tls-key', pem('expired.key')],
                                   { name: 'serve (expired)' });
  await waitFor(() => /worker local joined/.test(stderrOf(expired)), 30000, 'the built-in worker to join over TLS');
  await refuses(expired.url, ['--ca', pem('ca.pem')], ["the coordinator's certificate is not valid now",
                                                        'certificate has expired'], 'an expired certificate');
  await stopProcess(expired);

  // ---- a certificate for another name, and a self-signed one ----
  const named = await startServe(['--no-local-worker', '--no-model', '--tls-cert', pem('wrongname.pem'),
                                  '--tls-key', pem('wrongname.key')], { name: 'serve (wrong name)' });
  await refuses(named.url, ['--ca', pem('ca.pem')], ["the coordinator's certificate is not for 127.0.0.1",
                                                     'IP address mismatch'], 'a certificate for another address');
  await refuses(`https://localhost:${named.port}`, ['--ca', pem('ca.pem')],
                ["the coordinator's certificate is not for localhost", 'hostname mismatch'],
                'a certificate for another name');
  await stopProcess(named);
  const self = await startServe(['--no-local-worker', '--no-model', '--tls-cert', pem('other.pem'),
                                 '--tls-key', pem('other.key')], { name: 'serve (self-signed)' });
  await refuses(self.url, ['--ca', pem('ca.pem')], ["the coordinator's certificate is not trusted",
                                                    'self-signed certificate'], 'a self-signed certificate');
  // Trusting that very certificate is how a self-signed setup works.
  startWorker(self.url, ['--id', 'self', '--ca', pem('other.pem')]);
  await waitFor(async () => /worker self joined/.test(stderrOf(self)), 30000, 'a worker trusting the self-signed cert');
  log('a worker with the self-signed certificate as --ca joined');
});
