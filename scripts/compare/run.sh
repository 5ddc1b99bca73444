#!/usr/bin/env bash
# Speed of OPC's privacy detection beside Presidio + spaCy and beside onnxruntime, in one run on the
# same inputs. See README.md beside this file. Usage: scripts/compare/run.sh [RUNS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
RUNS="${1:-3}"
PY="$("$ROOT/scripts/compare/venv.sh" | tail -1)"
cd "$ROOT"
cargo build --release -q -p opc-bot --bin opc
cargo build --release -q -p opc-privacy --example pii_corpus --example ner_speed
WORK="${OPC_CMP_WORK:-$(mktemp -d)}"
mkdir -p "$WORK"
if [ ! -s "$WORK/input.jsonl" ]; then
  for seed in $(seq 1 40); do
    target/release/examples/pii_corpus --seed "$seed" --count 1000 > "$WORK/corpus-$seed.jsonl"
  done
  "$PY" scripts/compare/make_input.py "$WORK/input.jsonl" --bytes 2000000 "$WORK"/corpus-*.jsonl
fi
"$PY" scripts/compare/compare.py --opc target/release/opc --ner-speed target/release/examples/ner_speed \
  --input "$WORK/input.jsonl" --runs "$RUNS" --sentences 1000 2> "$WORK/raw.jsonl"
echo "raw figures: $WORK/raw.jsonl"
