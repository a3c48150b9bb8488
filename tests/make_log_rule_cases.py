"""Write ``tests/data/cases/logs/<rule-id>.yml`` for the log rules that have none yet (or those named), from the
samples in tests/data: up to three real lines the rule matches alone (one per sample, with the subject it names;
constructed samples only where no real one matches, marked so) and one near miss (a real line holding one of the
rule's hints that it does not match, else a line another rule of its kind matches, else another rule's ERROR
line). Review what it writes like code; tests/test_rulebook.py checks every case against its sample.

    python -m tests.make_log_rule_cases [RULE_ID ...]
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import yaml

from npudoctor.logs.rules import default_rules
from npudoctor.logs.scanner import Scanner
from tests.samples import CONSTRUCTED, SAMPLES, sample_bytes

CASES = Path(__file__).resolve().parent / "data" / "cases" / "logs"
Hit = Tuple[Path, int, str, str]


def _sample_files() -> Tuple[List[Path], List[Path]]:
    real = sorted([p for p in (SAMPLES / "logs").iterdir() if p.name != "INDEX.md" and not p.name.startswith("prof_")]
                  + [p for p in (SAMPLES / "system").iterdir() if p.suffix in (".txt", ".log")])
    constructed = sorted(p for p in CONSTRUCTED.iterdir() if p.suffix in (".txt", ".log")
                         and p.name.startswith(("atc_", "plog_", "stdout_", "torch_npu_")))
    return real, constructed


def _hits(files: Sequence[Path]) -> Tuple[Dict[str, List[Hit]], Dict[Path, List[str]]]:
    hits: Dict[str, List[Hit]] = collections.defaultdict(list)
    lines_of = {}
    for path in files:
        lines = sample_bytes(path).decode("utf-8", "replace").splitlines()
        lines_of[path] = lines
        for number, line in enumerate(lines, 1):
            if line.strip():
                scanner = Scanner()
                scanner.scan_bytes(path.name, line.encode("utf-8") + b"\n")
                for finding in scanner.result().findings:
                    if finding.rule:
                        hits[finding.rule].append((path, number, line, finding.subject))
    return hits, lines_of


def main(wanted: Sequence[str]) -> int:
    rules = default_rules().rules
    todo = [r for r in rules if (r.id in wanted if wanted else not (CASES / f"{r.id}.yml").exists())]
    if not todo:
        return 0
    real, constructed = _sample_files()
    hits, lines_of = _hits([*real, *constructed])
    kinds = {r.id: r.kind for r in rules}
    for rule in todo:
        found = [h for h in hits.get(rule.id, []) if h[0] in real] or hits.get(rule.id, [])
        chosen: List[Hit] = []
        for hit in found:
            if hit[0] not in {c[0] for c in chosen} and len(chosen) < 3:
                chosen.append(hit)
        if not chosen:
            print(f"{rule.id}: no sample line matches it; add a real sample first", file=sys.stderr)
            continue
        near = next(((path, n, line) for path in real for n, line in enumerate(lines_of[path], 1)
                     if any(h in line for h in rule.hints) and not rule.pattern.search(line[:16384])), None)
        if near is None:
            others = [h for r, hs in hits.items() if r != rule.id for h in hs
                      if h[0] in real and not rule.pattern.search(h[2])]
            same_kind = [h for h in others if kinds.get(next(r for r, hs in hits.items() if h in hs)) == rule.kind]
            near = (same_kind or [h for h in others if h[2].startswith("[ERROR]")] or others)[0][:3]
        document = {"rule": rule.id,
                    "match": [{"sample": path.name, "line": n, "text": line, "subject": subject,
                               **({"constructed": True} if path not in real else {})}
                              for path, n, line, subject in chosen],
                    "no_match": [{"sample": near[0].name, "line": near[1], "text": near[2]}]}
        header = (f"# Log rule {rule.id}: real lines that must make it fire (with the subject it names) and one "
                  "that must\n# not. Each line is quoted from the sample it names, at that line "
                  "(tests/test_rulebook.py checks it).\n")
        (CASES / f"{rule.id}.yml").write_text(header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True,
                                                                       width=100000), encoding="utf-8")
        print(f"wrote {CASES / (rule.id + '.yml')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
