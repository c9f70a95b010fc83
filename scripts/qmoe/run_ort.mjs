#!/usr/bin/env node
// Runs a single-node ONNX model on ONNX Runtime's CPU provider (onnxruntime-node,
// installed into refs/ort by scripts/qmoe/setup_ort.sh), feeding the raw
// little-endian input files a QMoE case directory lists.
//
//   node scripts/qmoe/run_ort.mjs --case DIR [--model FILE] [--out FILE]
//                                 [--threads N] [--reps N]
//       Feeds every graph input of FILE (default DIR/model.onnx) from
//       DIR/case.json's "inputs" (an input named like a role gets that role's
//       file), writes output 0 raw to FILE (default DIR/out/ort_output.bin) and
//       prints one JSON line {"ok":true,"ms":[...],"shape":[...],"out":...}
//       or {"ok":false,"error":"..."}.
//   node scripts/qmoe/run_ort.mjs --batch JOBS.json [--threads N]
//       JOBS.json = [{"case": DIR, "model": FILE, "out": FILE}, ...]: runs them
//       in one process (model/out default as above) and prints one JSON line per
//       job, in order, each with its "case". Exit code 0 even when jobs fail.
//
// --threads sets intra-op threads (default 1: the reference outputs do not depend
// on it beyond float summation order); inter-op is 1, sequential execution.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');

export function loadOrt() {
  const req = createRequire(path.join(root, 'refs', 'ort', 'package.json'));
  try {
    return req('onnxruntime-node');
  } catch (e) {
    throw new Error(`onnxruntime-node not found under refs/ort (run scripts/qmoe/setup_ort.sh): ${e.message}`);
  }
}

const TYPED = {
  float32: Float32Array,
  uint8: Uint8Array,
  int32: Int32Array,
  int64: BigInt64Array,
  float16: Uint16Array,
};

export function readFeeds(ort, caseDir, inputNames) {
  const spec = JSON.parse(fs.readFileSync(path.join(caseDir, 'case.json'), 'utf8'));
  const feeds = {};
  for (const name of inputNames) {
    const t = spec.inputs[name];
    if (!t) throw new Error(`case.json has no input "${name}" the model needs`);
    const Ctor = TYPED[t.dtype];
    if (!Ctor) throw new Error(`unsupported dtype ${t.dtype}`);
    const buf = fs.readFileSync(path.join(caseDir, t.file));
    // Copy into a fresh, aligned ArrayBuffer (Buffers may sit at any offset in a pool).
    const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
    const data = new Ctor(ab);
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (data.length !== n) throw new Error(`${t.file}: ${data.length} elements, shape ${JSON.stringify(t.shape)} needs ${n}`);
    feeds[name] = new ort.Tensor(t.dtype === 'float16' ? 'float16' : t.dtype, data, t.shape);
  }
  return { spec, feeds };
}

export async function createSession(ort, modelPath, threads) {
  return ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    logSeverityLevel: 3,
  });
}

async function runJob(ort, job, threads, reps) {
  const caseDir = job.case;
  const model = job.model || path.join(caseDir, 'model.onnx');
  const out = job.out || path.join(caseDir, 'out', 'ort_output.bin');
  try {
    const session = await createSession(ort, model, threads);
    const { feeds } = readFeeds(ort, caseDir, session.inputNames);
    const ms = [];
    let result;
    for (let r = 0; r < reps; r++) {
      const t0 = process.hrtime.bigint();
      result = await session.run(feeds);
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const o = result[session.outputNames[0]];
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, Buffer.from(o.data.buffer, o.data.byteOffset, o.data.byteLength));
    await session.release();
    return { case: caseDir, ok: true, ms, shape: o.dims, out };
  } catch (e) {
    return { case: caseDir, ok: false, error: String(e && e.message ? e.message : e) };
  }
}

function parseArgs(argv) {
  const a = { threads: 1, reps: 1 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => argv[++i];
    if (k === '--case') a.case = v();
    else if (k === '--model') a.model = v();
    else if (k === '--out') a.out = v();
    else if (k === '--batch') a.batch = v();
    else if (k === '--threads') a.threads = parseInt(v(), 10);
    else if (k === '--reps') a.reps = parseInt(v(), 10);
    else throw new Error(`unknown argument ${k}`);
  }
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  if (a.batch) {
    const jobs = JSON.parse(fs.readFileSync(a.batch, 'utf8'));
    for (const job of jobs) {
      console.log(JSON.stringify(await runJob(ort, job, a.threads, a.reps)));
    }
    return;
  }
  if (!a.case) throw new Error('usage: run_ort.mjs --case DIR [--model FILE] [--out FILE] [--threads N] [--reps N] | --batch JOBS.json');
  const r = await runJob(ort, a, a.threads, a.reps);
  console.log(JSON.stringify(r));
  if (!r.ok) process.exitCode = 1;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => { console.error(e.message); process.exit(2); });
}
