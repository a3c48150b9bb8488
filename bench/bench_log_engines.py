#!/usr/bin/env python3
"""The engines a log scan could find its lines to examine with, side by side on the same plogs, in process.

    python bench/bench_log_engines.py                 # 64 MiB quiet and error-dense plogs, best of 5
    python bench/bench_log_engines.py --size 128MiB --repeat 7

The task is the scan's first step on a plog chunk: the lines holding any of the literals searched in plog
text (``Scanner.plog_markers``: ``[ERROR]``, ``[WARNING]`` and the any-level rules' hints), over 8 MiB chunks
of the plogs bench/bench_logs_scan.py builds from real sample lines (2 % and 40 % of lines to examine).
Contenders, each where it is installed (the libraries are not dependencies of npudoctor):

- ``python searchers``: today's pure-Python pass (``Scanner._lines_with``: one C-speed search per group of
  literals, then Python per line found);
- ``python one regex``: one alternation of all literals, ``finditer`` over the chunk, a line per match;
- ``google-re2``, ``hyperscan`` (Vectorscan on aarch64), ``pyahocorasick``: the multi-pattern libraries,
  the same literals, a line per match (their matches come back through Python, one call each);
- ``compiled plog pass``: ``npudoctor/logs/_plogscan.c``, which also counts every record header and groups
  the lines found by message shape (more work than the others do).

Prints MB/s (best of ``--repeat``, CPU time of this process: a shared machine's load hurts the figures less)
and checks that every engine found the same number of lines. The load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_logs_scan  # noqa: E402  (the same plogs as the end-to-end bench)

from npudoctor.logs.scanner import CHUNK_BYTES, Scanner, compiled_plog_pass  # noqa: E402

Engine = Callable[[bytes], int]  # a chunk (whole lines) -> lines found


def _line_count(data: bytes, ends: List[int]) -> int:
    """Distinct lines holding the match ends ``ends``."""
    return len({data.rfind(b"\n", 0, at) for at in ends})


def engines(literals: Tuple[bytes, ...]) -> Dict[str, Optional[Engine]]:
    scanner = Scanner()
    found: Dict[str, Optional[Engine]] = {}
    found["python searchers"] = lambda data: len(scanner._lines_with(data, 0, len(data), scanner._plog_searchers))
    alternation = b"|".join(re.escape(literal) for literal in literals)
    one = re.compile(alternation)

    def one_regex(data: bytes) -> int:
        lines: Set[int] = set()
        match = one.search(data)
        while match is not None:
            line_end = data.find(b"\n", match.start())
            lines.add(line_end)
            match = one.search(data, line_end)
        return len(lines)

    found["python one regex"] = one_regex
    try:
        import re2  # type: ignore[import-not-found]
    except ImportError:
        found["google-re2"] = None
    else:
        compiled = re2.compile(alternation)

        def with_re2(data: bytes) -> int:
            return _line_count(data, [m.end() for m in compiled.finditer(data)])

        found["google-re2"] = with_re2
    try:
        import hyperscan  # type: ignore[import-not-found]
    except ImportError:
        found["hyperscan"] = None
    else:
        database = hyperscan.Database()
        database.compile(expressions=[re.escape(literal) for literal in literals],
                         ids=list(range(len(literals))), elements=len(literals),
                         flags=[0] * len(literals))

        def with_hyperscan(data: bytes) -> int:
            ends: List[int] = []

            def on_match(_id: int, _start: int, end: int, _flags: int, _context: object) -> None:
                ends.append(end)

            database.scan(data, match_event_handler=on_match)
            return _line_count(data, ends)

        found["hyperscan"] = with_hyperscan
    try:
        import ahocorasick  # type: ignore[import-not-found]
    except ImportError:
        found["pyahocorasick"] = None
    else:
        automaton = ahocorasick.Automaton()
        for index, literal in enumerate(literals):
            automaton.add_word(literal.decode("latin-1"), index)
        automaton.make_automaton()

        def with_ahocorasick(data: bytes) -> int:
            text = data.decode("latin-1")  # its wheels match str; latin-1 keeps one char per byte
            return _line_count(data, [end for end, _ in automaton.iter(text)])

        found["pyahocorasick"] = with_ahocorasick
    plog_pass = compiled_plog_pass()
    if plog_pass is None:
        found["compiled plog pass"] = None
    else:
        found["compiled plog pass"] = lambda data: sum(
            group[2] for group in plog_pass(data, 0, len(data), literals, 0)[3])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=bench_logs_scan.parse_size, default=bench_logs_scan.parse_size("64MiB"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    literals = Scanner().plog_markers
    contenders = engines(literals)
    status = 0
    with tempfile.TemporaryDirectory(prefix="npudoctor-bench-") as tmp:
        for share in (0.02, 0.4):
            path = Path(tmp) / "plog.log"
            bench_logs_scan.build_file(path, args.size, share, 1, literals)
            data = path.read_bytes()
            chunks = []
            at = 0
            while at < len(data):
                cut = data.rfind(b"\n", at, at + CHUNK_BYTES) + 1 or len(data)
                chunks.append(data[at:cut])
                at = cut
            del data
            size = sum(map(len, chunks))
            print(f"workload: {size / (1 << 20):.0f} MiB plog, {share:.0%} of lines to examine; "
                  f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus; best of {args.repeat}")
            counts = {}
            for name, engine in contenders.items():
                if engine is None:
                    print(f"  {name:<20} not installed")
                    continue
                best = float("inf")
                for _ in range(args.repeat):
                    start = time.process_time()
                    lines = sum(engine(chunk) for chunk in chunks)
                    best = min(best, time.process_time() - start)
                counts[name] = lines
                print(f"  {name:<20} {size / best / 1e6:8.1f} MB/s  ({lines:,} lines)")
            if len(set(counts.values())) > 1:
                print(f"MISMATCH: the engines found different numbers of lines: {counts}", file=sys.stderr)
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
