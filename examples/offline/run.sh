#!/usr/bin/env bash
# The offline demo, start to finish, on a fresh clone: build `opc` and the scripted LLM server (release),
# start the server on 127.0.0.1:7431 (the address the demo config names), wait until it listens (at most
# 30 s), then talk to the four-level demo org, and stop the server however that ends.
#
#   examples/offline/run.sh                          # `opc chat`: "Launch a public status page"
#   examples/offline/run.sh "Plan a mobile app"      # your own message (the script answers any)
#   examples/offline/run.sh --serve                  # `opc run`: the web chat on http://127.0.0.1:7420/
#   examples/offline/run.sh --serve --listen 127.0.0.1:8080   # options after --serve go to `opc run`
#
# Chat mode asks for one approval on the terminal: type y (or 1, or approve); its exit status is
# `opc chat`'s. Serve mode runs until Ctrl-C (or SIGTERM), which stops `opc run` cleanly and then the
# scripted server; the approval is a card in the web chat.
#
# Environment (for tests and other setups):
#   OPC_BIN_DIR             use the `opc` and `scripted-llm` binaries in this directory; no build
#   OPC_OFFLINE_LLM_LISTEN  where the scripted server listens (default 127.0.0.1:7431; port 0 picks a
#                           free one). Any other address than the default runs a copy of the config,
#                           in a temporary directory, that points at it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
default_listen="127.0.0.1:7431"
listen="${OPC_OFFLINE_LLM_LISTEN:-$default_listen}"
config="examples/offline/opc.config.yaml"

serve=0
if [[ "${1:-}" == "--serve" ]]; then
    serve=1
    shift
fi

if [[ -n "${OPC_BIN_DIR:-}" ]]; then
    bin="$OPC_BIN_DIR"
else
    # Two builds, not one: built together, cargo unifies the two packages' dependency features and
    # rebuilds `opc` (17 minutes on 2 cores). Apart, `opc` is the very binary `cargo run --release --
    # run` built, reused as it is, and only the scripted server is new.
    echo "building opc (release; reused when \`cargo run --release -- run\` built it)…" >&2
    cargo build --release --quiet -p opc-bot --bin opc
    echo "building the scripted LLM server (release; the first time takes a few minutes)…" >&2
    cargo build --release --quiet -p opc-tests --bin scripted-llm
    bin="${CARGO_TARGET_DIR:-$root/target}/release"
fi

ready="$(mktemp)"
workdir=""
"$bin/scripted-llm" --script examples/offline/script.json --listen "$listen" --quiet >"$ready" &
server=$!
opc_pid=""
stop() {
    # `opc run` first (it may still be finishing a request), then the server it talks to.
    if [[ -n "$opc_pid" ]]; then
        kill -TERM "$opc_pid" 2>/dev/null || true
        wait "$opc_pid" 2>/dev/null || true
    fi
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -f "$ready"
    if [[ -n "$workdir" ]]; then rm -rf "$workdir"; fi
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

bound="$(sed -n 's|.*listening on http://\([^/ ]*\).*|\1|p' "$ready" | head -n 1)"
if [[ -n "$bound" && "$bound" != "$default_listen" ]]; then
    # The config names 127.0.0.1:7431; point a copy at where the server really is.
    workdir="$(mktemp -d)"
    sed "s|http://$default_listen/v1|http://$bound/v1|" "$config" >"$workdir/opc.config.yaml"
    config="$workdir/opc.config.yaml"
fi

if [[ "$serve" == 1 ]]; then
    echo "the offline org: open the web chat at the address below; Ctrl-C stops it" >&2
    # In the background, so that this shell handles Ctrl-C and SIGTERM itself and stops both in order.
    # (A background job of a script ignores SIGINT, so `opc run` hears it from `stop` as SIGTERM.)
    "$bin/opc" run --config "$config" "$@" &
    opc_pid=$!
    trap 'exit 0' INT TERM
    status=0
    wait "$opc_pid" || status=$?
    opc_pid=""
    exit "$status"
fi

status=0
"$bin/opc" chat --config "$config" "${1:-Launch a public status page}" || status=$?
exit "$status"
