"""Side-by-side speed comparison, one run, same inputs (see README.md beside this file).

(a) `opc privacy detect` end to end (release binary, NER loaded) vs Presidio + spaCy en_core_web_sm on
    the same ~2 MB file of distinct lines: bytes/s. Runs are interleaved (opc, Presidio, opc, ...) so
    both see the same machine load; medians of --runs.
(b) NER alone, sentences/s, one sentence per call: OPC's NER on opc-infer's int8 encoder (examples/ner_speed) vs
    onnxruntime with the Rampart wheel's decoding, each on 1 and 2 threads, on the first --sentences
    lines of the same file.

usage: python compare.py --opc PATH --ner-speed PATH --input FILE [--runs 3] [--sentences 1000]
Prints a Markdown table; the raw figures go to stderr as JSON lines.
"""

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def arg(name: str, default=None):
    a = sys.argv
    return a[a.index(name) + 1] if name in a else default


def timed(cmd, env=None, stdin=None) -> tuple:
    """(wall seconds, CPU seconds: user + system of the child, all its threads)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, stdin=stdin)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def json_out(cmd, env=None) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    print(line, file=sys.stderr)
    return json.loads(line)


def main() -> None:
    opc, ner_speed, path = arg("--opc"), arg("--ner-speed"), arg("--input")
    runs, sentences = int(arg("--runs", 3)), int(arg("--sentences", 1000))
    if not (opc and ner_speed and path):
        sys.exit(__doc__)
    size = os.path.getsize(path)
    with open(path, encoding="utf-8") as f:
        text_bytes = sum(len(json.loads(l)["text"].encode()) for l in f if l.strip())
    py = sys.executable
    # opc without a config file uses the default detection settings; run it in an empty directory.
    scratch = tempfile.mkdtemp(prefix="opc-compare-")
    empty = os.path.join(scratch, "empty.jsonl")
    open(empty, "w").close()
    env = dict(os.environ, OPC_MODELS_OFFLINE="1")
    opc_cmd = lambda f: [opc, "--config", os.path.join(scratch, "none.yaml"), "privacy", "detect", f]

    opc_wall, opc_start, presidio = [], [], []
    for r in range(runs):
        opc_start.append(timed(opc_cmd(empty), env=env))
        opc_wall.append(timed(opc_cmd(path), env=env))
        p = json_out([py, os.path.join(HERE, "presidio_detect.py"), path])
        presidio.append(p)
        print(json.dumps({"run": r, "opc": opc_wall[-1], "opc_empty_input": opc_start[-1]}),
              file=sys.stderr)
    med = statistics.median
    # Wall seconds, and CPU seconds (user + system, every thread): on a shared machine the CPU time
    # is the fairer figure (each side is CPU-bound; wall time depends on what else runs).
    ow, oc = med([w for w, _ in opc_wall]), med([c for _, c in opc_wall])
    sw, sc = med([w for w, _ in opc_start]), med([c for _, c in opc_start])
    pa, pc = med([p["seconds"][0] for p in presidio]), med([p["cpu_seconds"][0] for p in presidio])
    pl = med([p["load_s"] for p in presidio])

    ner = {}
    for threads in (1, 2):
        tenv = dict(env, RAYON_NUM_THREADS=str(threads))
        ner[("opc", threads)] = json_out(
            [ner_speed, path, "--limit", str(sentences), "--runs", str(runs)], env=tenv)
        ner[("ort", threads)] = json_out(
            [py, os.path.join(HERE, "ner_speed.py"), path, "--threads", str(threads),
             "--limit", str(sentences), "--runs", str(runs)], env=tenv)

    mb = text_bytes / 1e6
    print(f"input: {path}, {size} bytes on disk, {text_bytes} bytes of text; medians of {runs} runs\n")
    print("| (a) detection | wall s | MB/s (wall) | CPU s | MB/s per CPU-second | vs Presidio (CPU) |")
    print("|---|---|---|---|---|---|")
    print(f"| `opc privacy detect`, whole process (start and model load included: {sw:.2f} s wall, "
          f"{sc:.2f} s CPU on an empty input) | {ow:.2f} | {mb / ow:.3f} | {oc:.2f} | {mb / oc:.3f} | "
          f"{pc / oc:.2f}x |")
    print(f"| `opc privacy detect`, net of the empty-input run | {ow - sw:.2f} | {mb / (ow - sw):.3f} | "
          f"{oc - sc:.2f} | {mb / (oc - sc):.3f} | {pc / (oc - sc):.2f}x |")
    print(f"| Presidio + spaCy en_core_web_sm, analysis only (load {pl:.2f} s not counted) | {pa:.2f} | "
          f"{mb / pa:.3f} | {pc:.2f} | {mb / pc:.3f} | 1.00x |")
    target = "PASS" if pc / oc >= 2 else "MISS"
    print(f"\ntarget >= 2x Presidio's bytes/s (whole opc process, CPU time): {target}; "
          f"by wall time {pa / ow:.2f}x\n")
    print("| (b) NER alone, one sentence per call | 1 thread | 2 threads |")
    print("|---|---|---|")
    for key, label in (("opc", "OPC (opc-infer int8)"), ("ort", ner[("ort", 1)]["engine"] + " + wheel decoding")):
        print(f"| {label} | {ner[(key, 1)]['median']:.1f}/s | {ner[(key, 2)]['median']:.1f}/s |")
    for threads in (1, 2):
        ratio = ner[("opc", threads)]["median"] / ner[("ort", threads)]["median"]
        print(f"\n{threads} thread(s): OPC / onnxruntime = {ratio:.2f} ({'PASS' if ratio >= 1 else 'MISS'})",
              end="")
    print()


if __name__ == "__main__":
    main()
