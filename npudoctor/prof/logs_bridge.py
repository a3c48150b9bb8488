"""``prof analyze --logs DIR``: the log doctor's CPU-fallback findings, by operator type, for PROF001.

The log engine (:class:`npudoctor.logs.scanner.Scanner`) does the reading and matching; this module only picks
the files the same way ``logs scan DIR`` does and keeps the fallback kinds.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Sequence

FALLBACK_KINDS = ("cpu_fallback", "op_rejected", "aicpu_placed", "host_cpu_placed")
LOG_SUFFIXES = (".log", ".txt", ".out")
CHUNK_BYTES = 1 << 20
MAX_FILES = 2000


def _log_files(roots: Sequence[str]) -> Iterator[str]:
    count = 0
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                if name.endswith(LOG_SUFFIXES) and os.path.isfile(path) and not os.path.islink(path):
                    count += 1
                    if count > MAX_FILES:
                        return
                    yield path


def _chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while True:
            data = handle.read(CHUNK_BYTES)
            if not data:
                return
            yield data


def fallback_findings(roots: Sequence[str]) -> List[Dict[str, Any]]:
    """``[{op_type, kind, title, count, first, fix}]`` for every CPU/AI CPU fallback the logs under ``roots`` show."""
    from npudoctor.logs.scanner import Scanner

    scanner = Scanner()
    for path in _log_files(roots):
        try:
            scanner.scan_stream(path, _chunks(path))
        except OSError as exc:
            scanner.add_unreadable(path, exc.strerror or str(exc))
    out = []
    for finding in scanner.result().findings:
        if finding.kind in FALLBACK_KINDS:
            out.append({"op_type": finding.subject, "kind": finding.kind, "title": finding.title or finding.kind,
                        "count": finding.count, "first": str(finding.first), "fix": finding.fix})
    return out
