#!/bin/sh
# Writes a TinyLlama-1.1B-shaped random llama model for speed measurements:
#   22 layers, hidden 2048, 32 heads (head_dim 64), 4 kv heads,
#   intermediate 5632, vocab 32000
# as OUTDIR/hf (bf16 safetensors) plus OUTDIR/model-q8_0.gguf and
# OUTDIR/model-f16.gguf, with scripts/write_test_model.py (llama family:
# Llama 3.2 layout, i.e. tied embeddings and llama3 rope scaling; only the
# shapes are TinyLlama's, ~1.03B parameters). Takes about 1.5 minutes,
# ~7 GB of RAM at the peak and ~5.2 GB of disk.
#
#   scripts/write_bench_model.sh OUTDIR
#   /usr/bin/python3 scripts/bench_llama_cpp.py --model OUTDIR/model-q8_0.gguf
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec /usr/bin/python3 "$ROOT/scripts/write_test_model.py" --family llama --out "$1" \
  --layers 22 --hidden 2048 --heads 32 --kv-heads 4 --head-dim 64 --intermediate 5632 --vocab 32000 \
  --gguf q8_0,f16
