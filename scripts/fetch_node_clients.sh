#!/usr/bin/env bash
# Installs the real clients the network tests drive bonfire with: the
# official OpenAI client for Node (the /v1 API must work with it unchanged).
# Into refs/node-clients (not committed).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec "$root/scripts/npm_pin.sh" fetch_node_clients "$root/refs/node-clients" "openai@6.49.0"
