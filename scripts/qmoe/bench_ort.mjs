#!/usr/bin/env node
// Times ONNX Runtime's CPU QMoE on a case directory.
//
//   node scripts/qmoe/bench_ort.mjs --case DIR [--threads 2] [--reps 20] [--warmup 3]
//                                   [--mode inputs|const] [--mlas-q4]
//
// --mode inputs (default): DIR/model.onnx, every role a graph input: ORT 1.30
//   dequantizes each routed expert per call, then fp32 SGEMM (the path the
//   committed expected outputs come from, and ORT's fastest exact CPU path).
// --mode const: DIR/model_const.onnx (gen_cases.py --bench writes it): the four
//   weight roles are constant initializers (external data = the case's .bin
//   files), as in a real model; ORT prepacks them at session creation (not
//   timed). Same numbers, but in 1.30 slower (a per-element transposed dequant).
// --mlas-q4: sets ORT_USE_MLAS_Q4_GEMM_MOE=1 before the session is made: ORT's
//   opt-in MLAS Q4 GEMM path, fast with const weights but NOT exact (it
//   requantizes; see docs/QMOE.md), reported for context only.
// Prints one JSON object: {"ms_mean", "ms_min", "ms_median", "reps", "threads",
//   "mode", "tokens", "weight_bytes", "gbps"}, where weight_bytes counts the
//   packed weights and scales of the experts that at least one token routes to
//   (top-k with ORT's tie rule) and gbps = weight_bytes / ms_min.
// Intra-op threads as given (the benchmark of issue 6 uses 2), inter-op 1.
import fs from 'node:fs';
import path from 'node:path';
import { loadOrt, readFeeds, createSession } from './run_ort.mjs';

function parseArgs(argv) {
  const a = { threads: 2, reps: 20, warmup: 3 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => argv[++i];
    if (k === '--case') a.case = v();
    else if (k === '--threads') a.threads = parseInt(v(), 10);
    else if (k === '--reps') a.reps = parseInt(v(), 10);
    else if (k === '--warmup') a.warmup = parseInt(v(), 10);
    else if (k === '--mode') a.mode = v();
    else if (k === '--mlas-q4') a.mlasQ4 = true;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.case) throw new Error('usage: bench_ort.mjs --case DIR [--threads N] [--reps N] [--warmup N] [--mode const|inputs]');
  return a;
}

function activeWeightBytes(spec, caseDir) {
  const ins = spec.inputs;
  const k = spec.attributes.k ?? 1;
  const [tokens, experts] = ins.router_probs.shape;
  const buf = fs.readFileSync(path.join(caseDir, ins.router_probs.file));
  const logits = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
  const used = new Set();
  for (let t = 0; t < tokens; t++) {
    const idx = Array.from({ length: experts }, (_, j) => j);
    idx.sort((x, y) => {
      const a = logits[t * experts + x], b = logits[t * experts + y];
      return a !== b ? b - a : y - x; // larger first, ties: higher index first
    });
    for (let j = 0; j < k; j++) used.add(idx[j]);
  }
  const perExpert = ['fc1_experts_weights', 'fc1_scales', 'fc2_experts_weights', 'fc2_scales']
    .map((r) => fs.statSync(path.join(caseDir, ins[r].file)).size / ins[r].shape[0])
    .reduce((x, y) => x + y, 0);
  return { bytes: used.size * perExpert, tokens };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const mode = a.mode || 'inputs';
  if (mode !== 'inputs' && mode !== 'const') throw new Error(`--mode ${mode}: const or inputs`);
  const model = path.join(a.case, mode === 'const' ? 'model_const.onnx' : 'model.onnx');
  if (!fs.existsSync(model)) throw new Error(`${model} missing (gen_cases.py --bench writes both models)`);
  if (a.mlasQ4) process.env.ORT_USE_MLAS_Q4_GEMM_MOE = '1'; // read when the kernel is constructed
  const ort = loadOrt();
  const session = await createSession(ort, model, a.threads);
  const { spec, feeds } = readFeeds(ort, a.case, session.inputNames);
  for (let i = 0; i < a.warmup; i++) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < a.reps; i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  await session.release();
  ms.sort((x, y) => x - y);
  const mean = ms.reduce((x, y) => x + y, 0) / ms.length;
  const { bytes, tokens } = activeWeightBytes(spec, a.case);
  const r3 = (x) => Math.round(x * 1000) / 1000;
  console.log(JSON.stringify({
    ms_mean: r3(mean), ms_min: r3(ms[0]), ms_median: r3(ms[Math.floor(ms.length / 2)]),
    reps: a.reps, threads: a.threads, mode, mlas_q4: !!a.mlasQ4, tokens, weight_bytes: bytes,
    gbps: r3(bytes / (ms[0] * 1e6)),
  }));
}

main().catch((e) => { console.error(e.message); process.exit(1); });
