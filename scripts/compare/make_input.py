"""Build the comparison input: ~2 MB of distinct lines, JSON lines ({"text": ...}).

Half personal-data sentences (the synthetic corpus, `privacy/examples/pii_corpus.rs`, read from the
files given, many seeds), half ordinary workplace prose without personal data, generated here from a
seeded vocabulary. Every line is distinct (duplicates are dropped), so no cache can help either side.

usage: python make_input.py OUT.jsonl [--bytes N] CORPUS.jsonl...
"""

import json
import random
import sys

SUBJECTS = ["The team", "Our support queue", "The finance group", "The new dashboard", "Marketing",
            "The nightly batch", "The onboarding flow", "Legal", "The mobile release", "Operations",
            "The data pipeline", "Procurement", "The design review", "Customer success", "The API"]
VERBS = ["reviewed", "postponed", "shipped", "measured", "simplified", "discussed", "approved",
         "rewrote", "tested", "estimated", "documented", "cancelled", "merged", "prioritised"]
OBJECTS = ["the roadmap", "the quarterly budget", "the invoice template", "the caching layer",
           "the hiring plan", "the migration checklist", "the retention report", "the pricing page",
           "the on-call rota", "the release notes", "the vendor contract", "the latency targets",
           "the test suite", "the backlog", "the security review", "the survey results"]
TAILS = ["before the next planning cycle", "after the outage review", "for the second time this month",
         "so the numbers line up with last year", "and asked for a short summary",
         "while the old system stays online", "with two open questions left", "ahead of the audit",
         "because the deadline moved", "and will report back on Friday", "to cut the build time",
         "without changing the public interface", "so customers see fewer errors"]
EXTRA = ["Latency improved by {n}% after the change.", "The backlog shrank to {n} tickets.",
         "Version {a}.{b}.{c} is now the default.", "Build {n} passed every check.",
         "Room {n} is booked for the retro.", "Order {n} shipped on time.",
         "The report covers {n} pages and {a} charts.", "Cost fell by {n} dollars a month."]


def prose(rng: random.Random) -> str:
    parts = [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}."]
    for _ in range(rng.randint(0, 2)):
        parts.append(rng.choice(EXTRA).format(n=rng.randint(2, 9999), a=rng.randint(1, 9),
                                              b=rng.randint(0, 30), c=rng.randint(0, 99)))
    return " ".join(parts)


def main() -> None:
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: make_input.py OUT.jsonl [--bytes N] CORPUS.jsonl...")
    out = args.pop(0)
    target = 2_000_000
    if "--bytes" in args:
        i = args.index("--bytes")
        target = int(args[i + 1])
        del args[i : i + 2]
    pii = []
    seen = set()
    for path in args:
        with open(path, encoding="utf-8") as f:
            for line in f:
                text = json.loads(line)["text"]
                if text not in seen:
                    seen.add(text)
                    pii.append(text)
    rng = random.Random(22)
    lines, size, k = [], 0, 0
    while size < target:
        if k < len(pii) and (len(lines) % 2 == 0):
            text = pii[k]
            k += 1
        else:
            text = prose(rng)
            if text in seen:
                continue
            seen.add(text)
        lines.append(text)
        size += len(text.encode("utf-8"))
    with open(out, "w", encoding="utf-8") as f:
        for text in lines:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    print(f"{out}: {len(lines)} lines, {size} bytes ({k} personal-data sentences)", file=sys.stderr)


if __name__ == "__main__":
    main()
