// POST /api/v3/graph over a network whose workers differ in features: a
// call that needs a feature no worker has is refused naming it, and runs
// once a worker that has it joins; basic graphs run anywhere; bad graphs,
// malformed JSON and oversized bodies are refused with the protocol's codes;
// sessions live on one worker, are freed by DELETE, and are reported lost
// when their worker goes. A worker's --threads and --background are shown.
import fs from 'node:fs';
import path from 'node:path';
import {
  check, checkEqual, http, log, main, postJson, runBonfireJson, startServe, startWorker, stopProcess, tempDir,
  waitFor, workers,
} from './harness.mjs';

const MAX_BODY = 1 << 20;
const eye = (n) => Array.from({ length: n * n }, (_, i) => (i % (n + 1) === 0 ? 1 : 0));
const x = { shape: [2, 8], data: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8] };

// attention with `softcap` (ops-v3.json: the param is under the feature
// attention.softcap); weights and inputs inline.
const softcapGraph = {
  inputs: { x },
  weights: { wq: { shape: [8, 8], data: eye(8).map((v) => v * 3) } },
  nodes: [
    { id: 'q', op: 'matmul', in: ['x', 'w:wq'] },
    { id: 'att', op: 'attention', in: ['q', 'x', 'x'], params: { heads: 2, headDim: 4, softcap: 0.5 } },
  ],
  outputs: ['att'],
};
const basicGraph = {
  inputs: { x: { shape: [2, 3], data: [1, 2, 3, 4, 5, 6] } },
  weights: { w: { shape: [3, 2], data: [0.5, -1, 0.25, 2, -0.75, 1.5] }, b: { shape: [2], data: [10, 20] } },
  nodes: [
    { id: 'y', op: 'matmul', in: ['x', 'w:w'] },
    { id: 'z', op: 'add', in: ['y', 'w:b'] },
    { id: 'r', op: 'relu', in: ['z'] },
  ],
  outputs: ['z', 'r'],
};

// What `bonfire graph run` gives for the same call in one process.
function localRun(graph, dir) {
  const f = path.join(dir, `g${Math.random().toString(16).slice(2)}.json`);
  fs.writeFileSync(f, JSON.stringify(graph));
  return runBonfireJson(['graph', 'run', f, '--session-dir', '']).outputs;
}

function checkOutputs(got, want, what) {
  checkEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${what}: output names`);
  for (const k of Object.keys(want)) {
    checkEqual(got[k].shape, want[k].shape, `${what}: shape of ${k}`);
    check(got[k].data.every((v) => typeof v === 'number' && Number.isFinite(v)), `${what}: ${k} is not finite`);
    checkEqual(got[k].data, want[k].data, `${what}: values of ${k} (network and bonfire graph run)`);
  }
}

async function refused(serve, body, status, code, what, extra = {}) {
  const r = await postJson(serve.url, '/api/v3/graph', body);
  check(r.status === status && r.json?.code === code,
        `${what}: want HTTP ${status} "${code}", got HTTP ${r.status}: ${r.text}`);
  check(typeof r.json.error === 'string' && r.json.error.length > 0, `${what}: no "error" sentence: ${r.text}`);
  for (const [k, v] of Object.entries(extra)) checkEqual(r.json[k], v, `${what}: "${k}"`);
  return r.json;
}

async function ran(serve, body, what) {
  const r = await postJson(serve.url, '/api/v3/graph', body);
  check(r.status === 200 && r.json?.outputs, `${what}: HTTP ${r.status}: ${r.text}`);
  return r.json;
}

await main('features', async () => {
  const dir = tempDir();
  const serve = await startServe(['--no-local-worker', '--no-model', '--max-body', String(MAX_BODY)]);
  const nosoft = startWorker(serve.url, ['--id', 'nosoft', '--disable-feature', 'attention.softcap']);
  const only = (await waitFor(async () => (await workers(serve.url)).length === 1 && workers(serve.url), 30000,
                              'worker nosoft'))[0];
  check(only.id === 'nosoft' && !only.features.includes('attention.softcap') &&
        only.features.includes('attention.window'), `worker nosoft announces ${JSON.stringify(only.features)}`);

  // Needs a feature no connected worker has: 4xx naming it.
  const e = await refused(serve, softcapGraph, 422, 'unsupported_feature', 'softcap with no capable worker',
                          { feature: 'attention.softcap', node: 'att' });
  check(e.error.includes('attention.softcap'), `the error does not name the feature: ${e.error}`);

  const wantBasic = localRun(basicGraph, dir);
  const b1 = await ran(serve, basicGraph, 'basic ops on nosoft');
  check(b1.worker === 'nosoft', `basic ops ran on ${b1.worker}`);
  checkOutputs(b1.outputs, wantBasic, 'basic ops on nosoft');

  // Bad input: the protocol's codes, and the coordinator stays up.
  const unknown = { ...basicGraph, nodes: [...basicGraph.nodes, { id: 'f', op: 'frobnicate', in: ['z'] }] };
  const u = await refused(serve, unknown, 400, 'bad_graph', 'an unknown op');
  check(u.error.includes('frobnicate'), `the unknown op's error does not name it: ${u.error}`);
  const m = await postJson(serve.url, '/api/v3/graph', '{"nodes": [{"id": "a", "op": ');
  check(m.status === 400 && m.json?.code === 'bad_graph', `malformed JSON: HTTP ${m.status}: ${m.text}`);
  const big = JSON.stringify({ ...basicGraph, pad: 'x'.repeat(MAX_BODY + 1000) });
  const tooBig = await postJson(serve.url, '/api/v3/graph', big);
  check(tooBig.status === 413, `a body over --max-body: HTTP ${tooBig.status}: ${tooBig.text.slice(0, 300)}`);
  check(tooBig.json?.code === 'too_large', `a body over --max-body: code ${tooBig.json?.code}`);
  const badParam = { ...basicGraph, nodes: [{ id: 'y', op: 'matmul', in: ['x', 'w:w'], params: { transB: 'yes' } }],
                     outputs: ['y'] };
  await refused(serve, badParam, 400, 'bad_graph', 'a mistyped param');
  log('bad graphs, malformed JSON and an oversized body refused');

  // A session: a cache allocated by zeros + retain, rows written in place by
  // later calls; a refused call leaves it as it was.
  const alloc = { nodes: [{ id: 'c', op: 'zeros', params: { shape: [3, 2] } }], outputs: ['c'], session: 's1',
                  retain: { cache: 'c' } };
  const write = (row, vals) => ({ inputs: { v: { shape: [1, 2], data: vals } }, session: 's1', bind: { pos: row },
                                  nodes: [{ id: 'w', op: 'cache_write', in: ['s:cache', 'v'], params: { offset: 'pos' } }],
                                  outputs: ['w'] });
  check((await ran(serve, alloc, 'session alloc')).worker === 'nosoft', 'the session is not on nosoft');
  await ran(serve, write(0, [1, 2]), 'session write row 0');
  await refused(serve, { ...write(1, [9, 9]), nodes: [{ id: 'w', op: 'frobnicate', in: ['s:cache'] }] }, 400,
                'bad_graph', 'a bad call on the session');
  const w2 = await ran(serve, write(2, [5, 6]), 'session write row 2');
  checkEqual(w2.outputs.w, { shape: [3, 2], data: [1, 2, 0, 0, 5, 6] }, 'the session cache after two writes');
  const del = await http(serve.url, 'DELETE', '/api/v3/sessions/s1');
  check(del.status === 200, `DELETE a session: HTTP ${del.status}: ${del.text}`);
  const del2 = await http(serve.url, 'DELETE', '/api/v3/sessions/s1');
  check(del2.status === 404 && del2.json?.code === 'session_not_found', `DELETE it again: HTTP ${del2.status}: ${del2.text}`);
  const never = await http(serve.url, 'DELETE', '/api/v3/sessions/never-made');
  check(never.status === 404 && never.json?.code === 'session_not_found', `DELETE an unknown session: ${never.text}`);
  log('session: allocated, written, kept through a refused call, freed, then not found');

  // A full worker joins: the softcap call now runs, on it.
  // It lends idle time only, on one thread: the coordinator shows both.
  const full = startWorker(serve.url, ['--id', 'full', '--threads', '1', '--background']);
  await waitFor(async () => (await workers(serve.url)).length === 2, 30000, 'worker full');
  const fullInfo = (await workers(serve.url)).find((w) => w.id === 'full');
  check(fullInfo.threads === 1 && fullInfo.background === true,
        `worker full announced threads ${fullInfo.threads}, background ${fullInfo.background}`);
  check((await workers(serve.url)).find((w) => w.id === 'nosoft').background === false, 'nosoft is not in background');
  const wantSoft = localRun(softcapGraph, dir);
  const s1 = await ran(serve, softcapGraph, 'softcap with worker full');
  check(s1.worker === 'full', `the softcap call ran on ${s1.worker}, which lacks the feature`);
  checkOutputs(s1.outputs, wantSoft, 'softcap');
  // Softcap changes the result (so the param was not ignored).
  const noCap = structuredClone(softcapGraph);
  delete noCap.nodes[1].params.softcap;
  check(JSON.stringify(localRun(noCap, dir).att.data) !== JSON.stringify(wantSoft.att.data),
        'softcap 0.5 gives the same result as no softcap: the test graph checks nothing');
  for (let i = 0; i < 4; ++i) checkOutputs((await ran(serve, basicGraph, 'basic ops, two workers')).outputs, wantBasic,
                                           'basic ops, two workers');

  // A session that needs softcap lives on full; full dies; the session is lost.
  const softSession = { ...softcapGraph, session: 's2', retain: { kept: 'att' } };
  check((await ran(serve, softSession, 'softcap session')).worker === 'full', 'the softcap session is not on full');
  const use = { session: 's2', nodes: [{ id: 'o', op: 'relu', in: ['s:kept'] }], outputs: ['o'] };
  await ran(serve, use, 'using the softcap session');
  full.proc.kill('SIGKILL');
  await waitFor(async () => (await workers(serve.url)).length === 1, 10000, 'the coordinator to drop worker full');
  await refused(serve, use, 404, 'session_not_found', 'a session whose worker was killed');
  await refused(serve, softcapGraph, 422, 'unsupported_feature', 'softcap after full left',
                { feature: 'attention.softcap', node: 'att' });
  const b2 = await ran(serve, basicGraph, 'basic ops after full left');
  check(b2.worker === 'nosoft', `basic ops ran on ${b2.worker}`);
  checkOutputs(b2.outputs, wantBasic, 'basic ops after full left');

  // No worker at all: no_worker, and the coordinator stays up.
  await stopProcess(nosoft);
  await waitFor(async () => (await workers(serve.url)).length === 0, 10000, 'no worker');
  await refused(serve, basicGraph, 503, 'no_worker', 'no worker connected');
  check(!serve.exited, 'the coordinator exited');
});
