// The web page at GET /, in a real browser: Debian's chromium (headless,
// driven by playwright-core, which scripts/fetch_web_test_deps.sh installs
// into refs/web-test) loads the page that `bonfire serve` finds beside its
// binary, checks that the workers and models panels show the in-process
// worker and the model, sends a chat message, waits for the streamed answer
// and checks that it grew token by token, then saves a screenshot
// (BONFIRE_SCREENSHOT, default web-screenshot.png beside the binary).
//
// The model is models/demo when it exists, else a copy of the network
// tests' random llama with a small chat template. The page may only talk to
// the coordinator: every other request is blocked and fails the test.
// BONFIRE_CHROMIUM names another chromium binary; none is a failure, not a
// skip.
import fs from 'node:fs';
import path from 'node:path';
import {
  BIN, SRC, check, getJson, http, log, main, startServe, streamGenerate, tempDir, tinyChatModel, waitFor, waitWorkers,
} from '../net/harness.mjs';

const CHROMIUM = process.env.BONFIRE_CHROMIUM || '/usr/bin/chromium';
const PLAYWRIGHT = path.join(SRC, 'refs', 'web-test', 'node_modules', 'playwright-core', 'index.mjs');
const SCREENSHOT = process.env.BONFIRE_SCREENSHOT || path.join(path.dirname(BIN), 'web-screenshot.png');

function chooseModel() {
  const demo = path.join(SRC, 'models', 'demo');
  if (fs.existsSync(path.join(demo, 'config.json'))) return { dir: demo, id: 'demo' };
  const dir = tinyChatModel(tempDir('bonfire-web-'));
  return { dir, id: 'tinychat' };
}

const isLoopback = (u) => {
  try {
    const { protocol, hostname } = new URL(u);
    if (protocol === 'data:' || protocol === 'blob:' || protocol === 'about:') return true;
    return ['127.0.0.1', 'localhost', '[::1]'].includes(hostname);
  } catch {
    return false;
  }
};

await main('web browser', async () => {
  check(fs.existsSync(CHROMIUM), `no chromium at ${CHROMIUM}: apt-get install chromium (scripts/setup.sh does)`);
  check(fs.existsSync(PLAYWRIGHT), `playwright-core is missing at ${PLAYWRIGHT}: run scripts/fetch_web_test_deps.sh`);
  const { chromium } = await import(PLAYWRIGHT);

  const model = chooseModel();
  // No --web-dir: the coordinator finds web/ from where its binary is.
  const extra = process.env.BONFIRE_WEB_DIR ? ['--web-dir', process.env.BONFIRE_WEB_DIR] : [];
  const serve = await startServe(['--model', model.dir, ...extra]);
  await waitWorkers(serve, 1, { ids: ['local'], model: model.id });
  log(`serve at ${serve.url} with ${model.id}`);

  // The files, as a browser gets them.
  const types = { '/': 'text/html', '/web/app.js': 'text/javascript', '/web/style.css': 'text/css',
                  '/web/favicon.svg': 'image/svg+xml' };
  for (const [p, type] of Object.entries(types)) {
    const r = await http(serve.url, 'GET', p);
    check(r.status === 200, `GET ${p}: HTTP ${r.status}`);
    check((r.headers.get('content-type') || '').startsWith(type), `GET ${p}: content-type ${r.headers.get('content-type')}`);
    check(r.headers.get('cache-control') === 'no-store', `GET ${p}: cache-control ${r.headers.get('cache-control')}`);
  }
  check((await http(serve.url, 'GET', '/')).text.includes('app.js'), 'GET / is not the page of web/ (the placeholder?)');
  for (const p of ['/web/nothing.js', '/web/..%2fREADME.md', '/web/../README.md', '/web/%2e%2e/README.md'])
    check((await http(serve.url, 'GET', p)).status === 404, `GET ${p} is not a 404`);

  // The added fields the page reads: stages while a generation runs.
  // (Tried a few times: a generation may end before the first look.)
  let sawStage = false;
  for (let seed = 0; seed < 5 && !sawStage; ++seed) await streamGenerate(serve.url,
    { model: model.id, prompt: 'Once upon a time', maxTokens: 200, temperature: seed ? 0.8 : 0, seed }, {
    onEvent: async (e, i) => {
      if (i !== 0) return;
      const [ws, stats] = await Promise.all([getJson(serve.url, '/api/v3/workers'), getJson(serve.url, '/api/v3/stats')]);
      const local = ws.json.workers.find((w) => w.id === 'local');
      sawStage = local.stages.some((s) => s.model === model.id && s.first === 0 && s.end > 0 && s.generations >= 1);
      check(Number.isInteger(stats.json.activeGenerations) && stats.json.tokensGenerated >= 1 &&
            typeof stats.json.tokensPerSecond === 'number',
            `GET /api/v3/stats during a generation: ${stats.text}`);
    },
  });
  check(sawStage, 'GET /api/v3/workers did not show the running generation\'s stage on worker local');

  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, colorScheme: 'light' });
    const blocked = [];
    await context.route('**/*', (route) => {
      const u = route.request().url();
      if (isLoopback(u)) return route.continue();
      blocked.push(u);
      return route.abort('blockedbyclient');
    });
    const page = await context.newPage();
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') log(`page console: ${m.text()}`); });

    const t0 = Date.now();
    await page.goto(serve.url, { waitUntil: 'load' });
    check((await page.title()) === 'bonfire', `the page's title is ${JSON.stringify(await page.title())}`);

    // The panels: the in-process worker (with the model it holds) and the model.
    const worker = page.locator('[data-worker-id="local"]');
    await worker.waitFor({ timeout: 15000 });
    const workerText = await worker.innerText();
    check(workerText.includes(model.id), `the worker card does not name the model it holds: ${workerText}`);
    check(/threads/.test(workerText) && /memory/.test(workerText), `the worker card: ${workerText}`);
    // Spot checks: the coordinator's own worker is trusted from the start.
    check(/checks\s*0 ✓ \/ 0 ✗ · trusted/.test(workerText), `the worker card shows no checks: ${workerText}`);
    // The speed placement weighs: announced by the worker, or measured once its steps ran.
    check(/speed\s*~?[\d.]+ GB\/s/.test(workerText), `the worker card shows no speed: ${workerText}`);
    const row = page.locator(`[data-model-id="${model.id}"]`);
    await row.waitFor({ timeout: 15000 });
    const layers = JSON.parse(fs.readFileSync(path.join(model.dir, 'config.json'), 'utf8')).num_hidden_layers;
    const rowText = await row.innerText();
    check(rowText.includes(String(layers)) && rowText.includes('local'), `the model row: ${rowText}`);
    await waitFor(() => page.evaluate(() => document.getElementById('status').dataset.state === 'up'), 10000,
                  'the page to say it is connected');
    await waitFor(async () => (await page.inputValue('#model')) === model.id, 10000, 'the model picker');

    // Watch the reply grow: each batch of DOM changes records the reply's length.
    await page.evaluate(() => {
      window.__lengths = [];
      new MutationObserver(() => {
        const t = document.querySelector('.msg.assistant:last-of-type .text');
        if (t) window.__lengths.push(t.textContent.length);
      }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
    });
    const tokensFigure = async () => Number((await page.innerText('#total-tokens')).replace(/,/g, ''));
    await waitFor(async () => (await tokensFigure()) > 0, 10000, 'the tokens-generated figure');
    const before = await tokensFigure();
    await page.fill('#max-tokens', '48');
    await page.fill('#temperature', '0');  // greedy: the same reply every run
    await page.fill('#input', 'Hello! Tell me a story about a fire.');
    const tSend = Date.now();
    await page.click('#send');
    const reply = page.locator('.msg.assistant').last();
    await waitFor(async () => (await reply.getAttribute('data-state')) !== 'streaming', 120000, 'the streamed reply to end');
    const state = await reply.getAttribute('data-state');
    const text = await reply.locator('.text').innerText();
    check(state === 'done', `the reply ended as ${state}: ${await reply.innerText()}`);
    check(text.trim().length > 0, 'the streamed reply has no text');
    const lengths = await page.evaluate(() => window.__lengths);
    const partial = [...new Set(lengths)].filter((n) => n > 0 && n < text.length);
    check(partial.length >= 2, `the reply did not grow token by token: lengths seen ${JSON.stringify(lengths)}`);
    const meta = await reply.locator('.meta').innerText();
    check(/\d+ tokens?/.test(meta) && /first token \d+ ms/.test(meta), `the reply's stats line: ${meta}`);
    log(`reply in ${Date.now() - tSend} ms, ${partial.length} partial lengths; ${meta}`);

    // The live numbers catch up with the generation within a poll or two.
    await waitFor(async () => (await tokensFigure()) > before, 10000, 'the tokens-generated figure to count the reply');

    // Generations in the background, one after another (one may end early
    // at an end-of-sequence token): the worker card shows the stage they run
    // and the live figures move (and the screenshot shows them).
    const bg = new AbortController();
    const bgDone = (async () => {
      for (let seed = 0; !bg.signal.aborted; ++seed) {
        try {
          const r = await fetch(`${serve.url}/api/v3/generate`, {
            method: 'POST', headers: { 'content-type': 'application/json' }, signal: bg.signal,
            body: JSON.stringify({ model: model.id, prompt: 'Once upon a time', maxTokens: 4000, temperature: 0.8,
                                   seed, stream: true }),
          });
          await r.body.pipeTo(new WritableStream());
        } catch { /* aborted */ }
      }
    })();
    try {
      await page.locator('[data-worker-id="local"] .stage').waitFor({ timeout: 20000 });
      const stageText = await page.locator('[data-worker-id="local"] .stage').first().innerText();
      check(stageText.includes(model.id) && stageText.includes(`layers 0–${layers - 1}`),
            `the worker card's stage: ${stageText}`);
      await waitFor(async () => (await page.innerText('#active')) !== '0', 10000, 'the page to count the running generation');
      // The batch it decodes in, and the queue beyond it (continuous batching).
      await page.locator('[data-worker-id="local"] .batch').waitFor({ timeout: 20000 });
      const batchText = await page.locator('[data-worker-id="local"] .batch').first().innerText();
      check(batchText.includes(model.id) && /\d+ decoding · \d+ queued · last call \d+ rows/.test(batchText),
            `the worker card's batch line: ${batchText}`);
      check(/^\d+$/.test((await page.innerText('#waiting')).trim()), 'the page shows the generations waiting for room');
      const sessionsText = await page.locator('[data-worker-id="local"] .sessions').innerText();
      check(/\d.* reserved of \d/.test(sessionsText), `the worker card's sessions: ${sessionsText}`);
      // Every figure on the card fits its cell (the screenshot's width):
      // a value wider than its column ran into the next one.
      const cut = await page.$$eval('[data-worker-id="local"] .facts dd', (dds) =>
        dds.filter((dd) => dd.scrollWidth > dd.clientWidth + 1)
           .map((dd) => `${dd.previousElementSibling.textContent} "${dd.textContent}" (${dd.scrollWidth} > ${dd.clientWidth} px)`));
      check(cut.length === 0, `worker card values wider than their cells: ${cut.join('; ')}`);
      fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT });
      log(`screenshot: ${SCREENSHOT} (page ${Date.now() - t0} ms)`);
    } finally {
      bg.abort();  // the coordinator cancels it at its next write
      await bgDone;
    }

    check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
    check(blocked.length === 0, `the page asked for something not on loopback: ${blocked.join(', ')}`);
  } finally {
    await browser.close();
  }
}, { timeoutMs: 300000 });
