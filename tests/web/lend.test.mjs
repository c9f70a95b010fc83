// A browser tab lent to the network (GET /lend, issue 17), in Debian's
// chromium (headless, driven by playwright-core from refs/web-test, as
// tests/web/browser.test.mjs): the WebAssembly build of the worker
// (scripts/build_wasm.sh -> build/wasm, or BONFIRE_WASM_DIR) runs in the
// page's Web Worker (web/lend-worker.js). No build is a failure, not a skip.
//
//  a. the tab joins `serve --no-local-worker --model models/demo` and
//     /api/v3/workers lists it as "kind": "browser";
//  b. greedy and seeded generations, and the OpenAI client's streamed chat,
//     on the tab give `bonfire generate`'s tokens;
//  c. a pipeline (serve --stages 2) of a native worker and the tab too;
//  d. the tab closed mid-generation with a native worker standing by: the
//     generation ends with unchanged tokens;
//  e. decode tokens/s of the tab and of a native worker with as many
//     threads, printed with their ratio (not asserted);
//  f. a wrong token, a memory limit below the model, and a page that is
//     not cross-origin isolated (which cannot lend) each say so on the page;
//  g. a tab frozen mid-generation (as a background tab may be) with a native
//     worker standing by: the generation fails over with unchanged tokens,
//     and the thawed tab is joined again.
// Every request stays on loopback; anything else fails the test.
import fs from 'node:fs';
import path from 'node:path';
import {
  BIN, SRC, check, checkEqual, checkStream, loadOpenAI, log, main, postJson, runBonfire, runBonfireJson, startServe,
  sleep, startWorker, stderrOf, stopProcess, streamGenerate, tempDir, testModel, waitFor, waitWorkers, workers,
} from '../net/harness.mjs';

const CHROMIUM = process.env.BONFIRE_CHROMIUM || '/usr/bin/chromium';
const PLAYWRIGHT = path.join(SRC, 'refs', 'web-test', 'node_modules', 'playwright-core', 'index.mjs');
const WASM_DIR = process.env.BONFIRE_WASM_DIR || path.join(path.dirname(BIN), 'wasm');
const DEMO = path.join(SRC, 'models', 'demo');
const TOKEN = 'lend-test-secret';
const THREADS = 2;                       // the tab's and the native worker's, for a fair speed comparison
const PROMPT = 'In the beginning';
// A native worker standing by announces no read bandwidth: placement weighs
// workers by speed (docs/NETWORK.md), and an untimed native worker's
// announced bandwidth would otherwise put it ahead of the tab these parts
// need the generation on; unannounced, it ties with the tab and sorts after.
const STANDBY = ['--read-gbs', '0'];
const JOIN_MS = 180000;                  // fetch + compile the WASM, download and check the model

const isLoopback = (u) => {
  try {
    const { protocol, hostname } = new URL(u);
    if (['data:', 'blob:', 'about:'].includes(protocol)) return true;
    return ['127.0.0.1', 'localhost', '[::1]'].includes(hostname);
  } catch {
    return false;
  }
};

// `bonfire generate --json` in one process: the reference.
function reference({ tokens, prompt, maxTokens, temperature = 0, seed = 0 }) {
  const args = ['generate', '--model', DEMO, '--max-tokens', String(maxTokens), '--temperature', String(temperature),
                '--seed', String(seed), '--json'];
  if (tokens) args.push('--tokens', tokens.join(','));
  else args.push('--prompt', prompt);
  return runBonfireJson(args);
}

function sameGeneration(got, want, what) {
  for (const k of ['tokens', 'text', 'finishReason']) checkEqual(got[k], want[k], `${what}: ${k}`);
}

const decodeRate = (r) => ((r.tokens.length - 1) * 1000) / r.timings.decodeMs;

// ---- the browser ----

async function launch(chromium) {
  return chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// A context whose every request must be on loopback. `strip` drops the
// cross-origin isolation headers from /lend, as a proxy that does not know
// them would.
async function newContext(browser, blocked, { strip = false } = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.route('**/*', async (route) => {
    const u = route.request().url();
    if (!isLoopback(u)) {
      blocked.push(u);
      return route.abort('blockedbyclient');
    }
    if (!strip || new URL(u).pathname !== '/lend') return route.continue();
    const response = await route.fetch();
    const headers = { ...response.headers() };
    for (const k of ['cross-origin-opener-policy', 'cross-origin-embedder-policy']) delete headers[k];
    return route.fulfill({ response, headers });
  });
  return context;
}

// Opens /lend?QUERY in a new tab of `context`, with the page's errors and log collected.
async function openLend(context, base, query, errors) {
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') log(`page console: ${m.text()}`); });
  await page.goto(`${base}/lend?${query}`, { waitUntil: 'load' });
  return page;
}

const pageState = (page) => page.evaluate(() => document.getElementById('state-panel').dataset.state);
const pageText = (page) => page.evaluate(() => document.body.innerText);

// Waits for the tab to reach `want` (a state of lend.js); any other final
// state fails at once with what the page says.
async function waitState(page, want, ms = JOIN_MS) {
  return waitFor(async () => {
    const s = await pageState(page);
    if (s === want) return true;
    check(!['refused', 'error', 'unsupported', 'stopped'].includes(s),
          `the lend page is "${s}", waiting for "${want}":\n${await pageText(page)}`);
    return false;
  }, ms, `the lend page to be "${want}"`, 250);
}

// The tab as /api/v3/workers lists it, once it holds model `model`.
async function joinedTab(serve, page, model = 'demo') {
  await waitState(page, 'joined');
  const id = (await page.innerText('#worker-id')).trim();
  return waitFor(async () => {
    const tab = (await workers(serve.url)).find((w) => w.id === id);
    return tab && tab.models.some((m) => m.id === model) && tab;
  }, JOIN_MS, `tab ${id} to hold model ${model} at ${serve.url}`, 250);
}

async function stopChecked(child) {
  const code = await stopProcess(child);
  check(code === 0, `${child.name} exited with ${code} on SIGTERM`);
}

// ---- the parts ----

// a: the tab joins and is listed as a browser worker, on the coordinator's page too.
async function partJoin(serve, context, page) {
  const tab = await joinedTab(serve, page);
  checkEqual(tab.kind, 'browser', `/api/v3/workers: "kind" of tab ${tab.id}`);
  checkEqual(tab.threads, THREADS, `/api/v3/workers: threads of tab ${tab.id}`);
  check(await page.evaluate(() => self.crossOriginIsolated), 'the lend page is not cross-origin isolated');
  const text = await pageText(page);
  check(text.includes('Lending this tab') && text.includes(tab.id), `the page does not say it lends as ${tab.id}:\n${text}`);
  await waitFor(async () => (await page.innerText('#models')).includes('demo'), 10000, 'the page to show model demo');
  const coordinatorPage = await context.newPage();
  await coordinatorPage.goto(`${serve.url}/?token=${TOKEN}`, { waitUntil: 'load' });
  checkEqual(await coordinatorPage.getAttribute('#lend-link', 'href'), `/lend?token=${TOKEN}`, 'a. the "Lend this tab" link');
  const card = coordinatorPage.locator(`[data-worker-id="${tab.id}"]`);
  await card.waitFor({ timeout: 15000 });
  checkEqual(await card.getAttribute('data-kind'), 'browser', `a. the coordinator page's card of ${tab.id}`);
  check((await card.innerText()).includes('browser tab'), `a. the card of ${tab.id}: ${await card.innerText()}`);
  await coordinatorPage.close();
  check(tab.device && tab.device.type === 'cpu' && tab.device.adapter === tab.simd,
        `a. the tab's device is its CPU (WebAssembly): ${JSON.stringify(tab.device)}`);
  log(`a. tab ${tab.id} joined as a browser worker (${tab.threads} threads, simd ${tab.simd}, ` +
      `${(tab.memory / 1048576).toFixed(0)} MiB)`);
  return tab.id;
}

// b: generations on the tab alone equal bonfire generate's.
async function partGenerate(serve, tabId) {
  for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 42 }]) {
    const want = reference({ prompt: PROMPT, maxTokens: 48, ...sampling });
    const r = await postJson(serve.url, '/api/v3/generate', { model: 'demo', prompt: PROMPT, maxTokens: 48, ...sampling });
    check(r.status === 200, `generate ${JSON.stringify(sampling)}: HTTP ${r.status}: ${r.text}`);
    sameGeneration(r.json, want, `b. generate ${JSON.stringify(sampling)} on the tab`);
    checkEqual(r.json.workers.map((s) => s.split(':')[0]), [tabId], 'b. the generation\'s workers');
    const events = await streamGenerate(serve.url, { model: 'demo', prompt: PROMPT, maxTokens: 48, ...sampling });
    sameGeneration(checkStream(events, 'b. streamed'), want, `b. streamed ${JSON.stringify(sampling)}`);
    log(`b. ${JSON.stringify(sampling)}: ${want.tokens.length} tokens equal to bonfire generate`);
  }
  await partChat(serve);
}

// b: the OpenAI client's streamed chat: the template's tokens, generated in one process.
async function partChat(serve) {
  const OpenAI = await loadOpenAI();
  const client = new OpenAI({ baseURL: `${serve.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 120000 });
  const messages = [{ role: 'user', content: 'The LORD is my shepherd; I shall not want.' }];
  const msgFile = path.join(tempDir('bonfire-lend-'), 'messages.json');
  fs.writeFileSync(msgFile, JSON.stringify(messages));
  const rendered = runBonfire(['template', '--model', DEMO, '--messages', msgFile, '--generation-prompt']);
  check(rendered.code === 0, `bonfire template: ${rendered.stderr}`);
  const tokens = runBonfireJson(['tokenize', '--model', DEMO, '--text', rendered.stdout, '--no-special']);
  for (const sampling of [{ temperature: 0 }, { temperature: 0.9, seed: 7 }]) {
    const want = reference({ tokens, maxTokens: 32, ...sampling });
    const stream = await client.chat.completions.create({ model: 'demo', messages, max_tokens: 32, stream: true,
                                                          ...sampling });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
    checkEqual(content, want.text, `b. streamed chat ${JSON.stringify(sampling)} and bonfire generate`);
    log(`b. OpenAI streamed chat ${JSON.stringify(sampling)}: ${JSON.stringify(content)}`);
  }
}

// c: a native worker and a tab as the two stages of a pipeline.
async function partPipeline(context, errors) {
  const serve = await startServe(['--no-local-worker', '--model', DEMO, '--token', TOKEN, '--stages', '2', ...wasmArgs()],
                                 { name: 'serve (stages 2)' });
  const page = await openLend(context, serve.url, `token=${TOKEN}&threads=${THREADS}`, errors);
  const native = startWorker(serve.url, ['--model', DEMO, '--id', 'native', '--no-fetch', '--token', TOKEN,
                                         '--threads', String(THREADS)]);
  const tab = await joinedTab(serve, page);
  await waitWorkers(serve, 2, { ids: [tab.id, 'native'], model: 'demo' });
  for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 3 }]) {
    const want = reference({ prompt: PROMPT, maxTokens: 32, ...sampling });
    const r = await postJson(serve.url, '/api/v3/generate', { model: 'demo', prompt: PROMPT, maxTokens: 32, ...sampling });
    check(r.status === 200, `c. pipeline ${JSON.stringify(sampling)}: HTTP ${r.status}: ${r.text}`);
    sameGeneration(r.json, want, `c. pipeline ${JSON.stringify(sampling)}`);
    checkEqual(r.json.workers.map((s) => s.split(':')[0]).sort(), [tab.id, 'native'].sort(), 'c. the stages\' workers');
    log(`c. pipeline ${r.json.workers.join(' + ')} ${JSON.stringify(sampling)}: equal to bonfire generate`);
  }
  await page.close();
  await stopChecked(native);
  await stopChecked(serve);
}

// d: the tab closed mid-generation; the native worker takes over.
async function partFailover(serve, page, tabId, standby) {
  const body = { model: 'demo', prompt: PROMPT, maxTokens: 300, temperature: 0.8, seed: 11 };
  const want = reference(body);
  check(want.tokens.length >= 40, `d. the reference ends after ${want.tokens.length} tokens: pick another seed`);
  let closedAt = 0;
  const events = await streamGenerate(serve.url, body, {
    onEvent: async (e, i) => {
      if (i !== 4) return;
      const ws = await workers(serve.url);
      const running = ws.filter((w) => (w.stages || []).length).map((w) => w.id);
      checkEqual(running, [tabId], 'd. the workers running the generation before the tab closes');
      await page.close();
      closedAt = i + 1;
      log(`d. closed the tab after ${closedAt} tokens`);
    },
  });
  const done = checkStream(events, 'd. the disturbed generation');
  sameGeneration(done, want, 'd. the generation that lost its tab');
  check(closedAt && done.failovers >= 1, `d. failovers ${done.failovers} (did it end before the tab closed?)`);
  checkEqual(done.workers.map((s) => s.split(':')[0]), [standby], 'd. the final placement');
  await waitFor(async () => !(await workers(serve.url)).some((w) => w.id === tabId), 20000, `the coordinator to drop ${tabId}`);
  log(`d. ${done.tokens.length} tokens unchanged after the tab closed; finished on ${done.workers}`);
}

// g: a tab the browser freezes (as it may a background tab) mid-generation,
// with a native worker standing by: the tokens are unchanged whether the
// browser keeps the page's Web Worker running (Chromium does: the tab goes
// on serving) or stalls it (the step times out after --step-timeout and
// the generation fails over); thawed, the tab is joined.
async function partFrozen(browser, errors, blocked) {
  const serve = await startServe(['--no-local-worker', '--model', DEMO, '--token', TOKEN, '--step-timeout', '2',
                                  ...wasmArgs()], { name: 'serve (frozen tab)' });
  const context = await newContext(browser, blocked);
  const page = await openLend(context, serve.url, `token=${TOKEN}&threads=${THREADS}`, errors);
  const tab = await joinedTab(serve, page);
  const standby = startWorker(serve.url, ['--model', DEMO, '--id', 'zz-standby', '--no-fetch', ...STANDBY, '--token', TOKEN,
                                          '--threads', String(THREADS)]);
  await waitWorkers(serve, 2, { ids: [tab.id, 'zz-standby'], model: 'demo' });
  const cdp = await context.newCDPSession(page);
  const body = { model: 'demo', prompt: PROMPT, maxTokens: 200, temperature: 0.7, seed: 5 };
  const want = reference(body);
  let frozenAt = 0;
  const events = await streamGenerate(serve.url, body, {
    onEvent: async (e, i) => {
      if (i !== 3) return;
      const running = (await workers(serve.url)).filter((w) => (w.stages || []).length).map((w) => w.id);
      checkEqual(running, [tab.id], 'g. the workers running the generation before the tab is frozen');
      await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
      frozenAt = i + 1;
      log(`g. froze the tab after ${frozenAt} tokens`);
    },
  });
  const done = checkStream(events, 'g. the generation whose tab froze');
  sameGeneration(done, want, 'g. the generation whose tab froze');
  check(frozenAt, 'g. the generation ended before the tab froze');
  const finishedOn = done.workers.map((w) => w.split(':')[0]);
  checkEqual(finishedOn, [done.failovers ? 'zz-standby' : tab.id], `g. the final placement (${done.failovers} failovers)`);
  await cdp.send('Page.setWebLifecycleState', { state: 'active' });
  const back = await joinedTab(serve, page);
  log(`g. ${done.tokens.length} tokens unchanged after the page froze at token ${frozenAt}: ` +
      (done.failovers ? `the step timed out and ${done.failovers} failover moved it to zz-standby`
                      : `its Web Worker went on serving`) + `; thawed, the tab is joined as ${back.id}`);
  await context.close();
  await stopChecked(standby);
  await stopChecked(serve);
}

// e: decode speed of whatever worker serves `serve` alone now.
async function decodeSpeed(serve) {
  const body = { model: 'demo', prompt: PROMPT, maxTokens: 128, temperature: 0 };
  // Warm up: the browser compiles WebAssembly with a baseline compiler
  // first and optimizes the functions that run hot as they do.
  for (let i = 0; i < 2; ++i) await postJson(serve.url, '/api/v3/generate', body);
  let best = 0;
  for (let i = 0; i < 3; ++i) {
    const r = await postJson(serve.url, '/api/v3/generate', body);
    check(r.status === 200, `e. speed run: HTTP ${r.status}: ${r.text}`);
    best = Math.max(best, decodeRate(r.json));
  }
  return best;
}

// f: a wrong token is refused on the page; the right one then joins.
async function partWrongToken(serve, context, errors) {
  const page = await openLend(context, serve.url, `token=wrong&threads=1`, errors);
  await waitFor(async () => (await pageState(page)) === 'refused', JOIN_MS, 'the page to show the refusal', 250);
  const detail = await page.innerText('#state-panel');
  check(/Refused by the coordinator/.test(detail) && /token/i.test(detail),
        `f. the refusal of a wrong token on the page:\n${detail}`);
  log(`f. wrong token: ${JSON.stringify(detail.replace(/\s+/g, ' ').slice(0, 200))}`);
  await page.fill('#token', TOKEN);
  await page.click('#start');
  const tab = await joinedTab(serve, page);
  log(`f. after entering the right token the tab joined as ${tab.id}`);
  await page.close();
}

// f: a memory limit below the only model: said before any download.
async function partSmallMemory(browser, errors, blocked) {
  const big = path.join(testModel('llama', '', ['--layers', '3', '--hidden', '768', '--intermediate', '3072',
                                                '--dtype', 'f32']), 'hf');
  const serve = await startServe(['--no-local-worker', '--model', big, '--token', TOKEN, ...wasmArgs()],
                                 { name: 'serve (big model)' });
  const context = await newContext(browser, blocked);
  const files = [];
  context.on('request', (r) => { if (r.url().includes('/files/')) files.push(r.url()); });
  const page = await openLend(context, serve.url, `token=${TOKEN}&memory=64&threads=1`, errors);
  await waitState(page, 'joined');
  await sleep(3000);  // time enough for an offer to arrive, which must not
  const notices = await waitFor(async () => {
    const t = await page.innerText('#notices');
    return /64 MiB/.test(t) && /needs \d+(\.\d)? MiB/.test(t) && t;
  }, 20000, 'the page to say the memory limit is below the model');
  await waitFor(() => /lends 64 MiB, less than .* needs \(\d+ MiB\): not offered/.test(stderrOf(serve)), 20000,
                'the coordinator to log that it offered nothing');
  check(files.length === 0, `f. the tab fetched model files with too little memory: ${files.join(', ')}`);
  check(!(await page.isVisible('#download')), 'f. the page shows a download with too little memory');
  log(`f. memory 64 MiB under the model: ${JSON.stringify(notices.slice(0, 200))}`);
  await context.close();
  await stopChecked(serve);
}

// f: served without cross-origin isolation (a proxy dropping COOP/COEP):
// the worker cannot start (its memory is shared), and the page says why.
async function partNotIsolated(serve, browser, errors, blocked) {
  const tabsBefore = (await workers(serve.url)).filter((w) => w.kind === 'browser').length;
  const context = await newContext(browser, blocked, { strip: true });
  const page = await openLend(context, serve.url, `token=${TOKEN}`, errors);
  check(!(await page.evaluate(() => self.crossOriginIsolated)), 'f. the stripped page is still cross-origin isolated');
  await waitFor(async () => (await pageState(page)) === 'unsupported', JOIN_MS, 'the page to say it cannot lend', 250);
  const text = await pageText(page);
  check(/not cross-origin isolated/.test(text) && /SharedArrayBuffer/.test(text),
        `f. the page does not say why it cannot lend:\n${text}`);
  await new Promise((r) => setTimeout(r, 1000));
  checkEqual((await workers(serve.url)).filter((w) => w.kind === 'browser').length, tabsBefore,
             'f. browser workers after a page without isolation');
  log(`f. without COOP/COEP the page says it cannot lend: ${JSON.stringify(text.match(/This page is not cross-origin[^.]*\./)?.[0])}`);
  await context.close();
}

let wasmDirArg = [];
const wasmArgs = () => wasmDirArg;

await main('web lend', async () => {
  check(fs.existsSync(CHROMIUM), `no chromium at ${CHROMIUM}: apt-get install chromium (scripts/setup.sh does)`);
  check(fs.existsSync(PLAYWRIGHT), `playwright-core is missing at ${PLAYWRIGHT}: run scripts/fetch_web_test_deps.sh`);
  check(fs.existsSync(path.join(WASM_DIR, 'bonfire-worker.wasm')),
        `no browser worker build at ${WASM_DIR}/bonfire-worker.wasm: run scripts/build_wasm.sh (or set BONFIRE_WASM_DIR)`);
  check(fs.existsSync(path.join(DEMO, 'config.json')), `no demo model at ${DEMO}`);
  if (process.env.BONFIRE_WASM_DIR) wasmDirArg = ['--wasm-dir', WASM_DIR];
  const { chromium } = await import(PLAYWRIGHT);

  const serve = await startServe(['--no-local-worker', '--model', DEMO, '--token', TOKEN, ...wasmArgs()]);
  const browser = await launch(chromium);
  const errors = [], blocked = [];
  try {
    const context = await newContext(browser, blocked);
    const page = await openLend(context, serve.url, `token=${TOKEN}&threads=${THREADS}`, errors);
    const tabId = await partJoin(serve, context, page);
    await partGenerate(serve, tabId);
    const tabRate = await decodeSpeed(serve);
    await partPipeline(context, errors);

    const native = startWorker(serve.url, ['--model', DEMO, '--id', 'zz-standby', '--no-fetch', ...STANDBY, '--token', TOKEN,
                                           '--threads', String(THREADS)]);
    await waitWorkers(serve, 2, { model: 'demo' });
    await partFailover(serve, page, tabId, 'zz-standby');
    const nativeRate = await decodeSpeed(serve);
    log(`e. decode speed, ${THREADS} threads, model demo: browser tab ${tabRate.toFixed(1)} tok/s, native worker ` +
        `${nativeRate.toFixed(1)} tok/s: the tab runs at ${(tabRate / nativeRate).toFixed(2)}x native`);

    await partWrongToken(serve, context, errors);
    await partSmallMemory(browser, errors, blocked);
    await partNotIsolated(serve, browser, errors, blocked);
    await partFrozen(browser, errors, blocked);
    await stopChecked(native);
    check(errors.length === 0, `errors in the lend page: ${errors.join('; ')}`);
    check(blocked.length === 0, `the lend page asked for something not on loopback: ${blocked.join(', ')}`);
  } finally {
    await browser.close();
  }
}, { timeoutMs: 840000 });
