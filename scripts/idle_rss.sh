#!/usr/bin/env bash
# Idle RSS of `opc run` with the example org and both local models loaded (the NER for privacy, MiniLM
# for recall): starts the release binary on a fresh copy of the example org (web chat on a free port,
# no API key: the fresh-machine case), waits for both "loaded" log lines, lets it settle, and reads
# VmRSS and RssAnon from /proc/PID/status. Repeats RUNS times (default 3) and prints the median.
# Target (issue 22): < 120 MB.  Usage: scripts/idle_rss.sh [RUNS] (build first:
# `cargo build --release -p opc-bot`; OPC_BIN overrides the binary). Needs `opc models fetch` done.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUNS="${1:-3}"
BIN="${OPC_BIN:-$ROOT/target/release/opc}"
[ -x "$BIN" ] || { echo "error: $BIN not found: run \`cargo build --release -p opc-bot\` first" >&2; exit 2; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cp -r "$ROOT/prompts" "$WORK/"
sed 's/listen: 127.0.0.1:7420/listen: "127.0.0.1:0"/' "$ROOT/opc.config.yaml" > "$WORK/opc.config.yaml"
field() { awk -v f="$1" '$1 == f { print $2 }' "/proc/$2/status"; }
rss=(); anon=()
for run in $(seq 1 "$RUNS"); do
  rm -rf "$WORK/.opc"
  OPC_LOG=info OPC_MODELS_OFFLINE=1 ANTHROPIC_API_KEY= "$BIN" run --config "$WORK/opc.config.yaml" \
    > "$WORK/out.log" 2> "$WORK/err.log" < /dev/null &
  pid=$!
  loaded=0
  for _ in $(seq 1 600); do   # at most 120 s
    if [ "$(grep -c 'loaded in' "$WORK/err.log" || true)" -ge 2 ]; then loaded=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if [ "$loaded" != 1 ]; then
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
    echo "error: both models did not load within 120 s (is \`opc models fetch\` done?):" >&2
    cat "$WORK/err.log" >&2
    exit 1
  fi
  sleep 3
  r=$(field VmRSS: "$pid"); a=$(field RssAnon: "$pid")
  rss+=("$r"); anon+=("$a")
  echo "run $run: VmRSS $((r / 1024)) MB, RssAnon $((a / 1024)) MB" >&2
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m=$(median "${rss[@]}"); ma=$(median "${anon[@]}")
verdict=$([ $((m / 1024)) -lt 120 ] && echo PASS || echo MISS)
printf '| idle RSS of `opc run`, example org, both models loaded (median of %s) | VmRSS %.1f MB (RssAnon %.1f MB) | < 120 MB: %s |\n' \
  "$RUNS" "$(echo "$m / 1024" | bc -l)" "$(echo "$ma / 1024" | bc -l)" "$verdict"
