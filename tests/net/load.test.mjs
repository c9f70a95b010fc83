// 32 concurrent streaming clients on `bonfire serve` (with its in-process
// worker) for 60 s, through scripts/net_load.mjs, then the overhead per
// decode step of the coordinator and the WebSocket hop. Passes on zero
// failed requests and sane figures; speed is printed, never judged.
// BONFIRE_LOAD_SECONDS shortens the load phase when running by hand.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { SRC, TestFailure, check, log, main } from './harness.mjs';

const SECONDS = Number(process.env.BONFIRE_LOAD_SECONDS || 60);

// Runs the script; on a timeout it gets SIGTERM first, so it can kill the
// coordinator it started (its exit handler does), then SIGKILL.
function runScript(args, timeoutMs) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [path.join(SRC, 'scripts', 'net_load.mjs'), ...args],
                    { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; process.stdout.write(d); });
    p.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => {
      p.kill('SIGTERM');
      setTimeout(() => p.kill('SIGKILL'), 10000).unref();
    }, timeoutMs);
    p.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code: code ?? signal, out, err }); });
  });
}

const finitePositive = (x) => typeof x === 'number' && Number.isFinite(x) && x > 0;

await main('load', async () => {
  const r = await runScript(['--concurrency', '32', '--seconds', String(SECONDS)], (SECONDS + 300) * 1000);
  const line = r.out.split('\n').reverse().find((l) => l.startsWith('{"requests"'));
  let s;
  try { s = JSON.parse(line); } catch { s = null; }
  if (r.code !== 0 || !s) {
    throw new TestFailure(`scripts/net_load.mjs exited with ${r.code}${s ? '' : ' without its summary line'}:\n` +
                          `${r.out.slice(-4000)}\n${r.err.slice(-8000)}`);
  }
  check(s.errors === 0, `${s.errors} of the load's requests failed: ${s.errorSamples.join('; ')}`);
  check(s.concurrency === 32, `ran with ${s.concurrency} clients`);
  // Every client finished at least one request; tokens came back.
  check(s.requests >= 32, `only ${s.requests} requests completed in ${SECONDS} s`);
  check(s.tokens >= s.requests, `${s.tokens} tokens for ${s.requests} requests`);
  check(finitePositive(s.tokensPerSecond), `aggregate tokens/s is ${s.tokensPerSecond}`);
  check(finitePositive(s.ttftP50Ms) && finitePositive(s.ttftP99Ms) && s.ttftP50Ms <= s.ttftP99Ms,
        `time to first token p50 ${s.ttftP50Ms} ms, p99 ${s.ttftP99Ms} ms`);
  check(s.seconds >= SECONDS && s.seconds < SECONDS + 300, `the load ran ${s.seconds} s for ${SECONDS}`);
  check(s.activeAfter === 0, `${s.activeAfter} generations still active after every client had its answer`);
  const o = s.overhead;
  check(o.decodeSteps >= 1 && finitePositive(o.inProcessMsPerStep) && finitePositive(o.networkMsPerStep) &&
        Number.isFinite(o.overheadMsPerStep), `overhead figures: ${JSON.stringify(o)}`);
  log(`load: ${s.requests} requests, 0 errors, TTFT p50 ${s.ttftP50Ms.toFixed(1)} ms / p99 ${s.ttftP99Ms.toFixed(1)} ms, ` +
      `${s.tokensPerSecond.toFixed(0)} tokens/s; per decode step: ${o.inProcessMsPerStep.toFixed(3)} ms in one process, ` +
      `${o.networkMsPerStep.toFixed(3)} ms through serve + worker (+${o.overheadMsPerStep.toFixed(3)} ms)`);
}, { timeoutMs: (SECONDS + 330) * 1000 });
