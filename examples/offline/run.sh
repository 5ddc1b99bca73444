#!/usr/bin/env bash
# The offline demo, start to finish, on a fresh clone: build `opc` and the scripted LLM server (release),
# start the server on 127.0.0.1:7431, wait until it listens (at most 30 s), run `opc chat` against the
# four-level demo org, and stop the server however the chat ends.
#
#   examples/offline/run.sh                          # "Launch a public status page"
#   examples/offline/run.sh "Plan a mobile app"      # your own message (the script answers any)
#
# The chat asks for one approval on the terminal: type y (or 1, or approve). Exit status is `opc chat`'s.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
listen="127.0.0.1:7431"

echo "building opc and the scripted LLM server (release; the first build takes a few minutes)…" >&2
cargo build --release --quiet -p opc-bot --bin opc -p opc-tests --bin scripted-llm
bin="${CARGO_TARGET_DIR:-$root/target}/release"

ready="$(mktemp)"
"$bin/scripted-llm" --script examples/offline/script.json --listen "$listen" --quiet >"$ready" &
server=$!
stop() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -f "$ready"
}
trap stop EXIT

# The server prints `listening on http://…` once its socket is bound.
for _ in $(seq 1 300); do
    grep -q "listening on" "$ready" && break
    if ! kill -0 "$server" 2>/dev/null; then
        echo "error: the scripted LLM server exited before listening (is $listen in use?)" >&2
        exit 1
    fi
    sleep 0.1
done
if ! grep -q "listening on" "$ready"; then
    echo "error: the scripted LLM server did not listen on $listen within 30 s" >&2
    exit 1
fi

status=0
"$bin/opc" chat --config examples/offline/opc.config.yaml "${1:-Launch a public status page}" || status=$?
exit "$status"
