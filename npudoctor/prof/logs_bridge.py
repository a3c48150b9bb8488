"""``prof analyze --logs DIR``: the log doctor's CPU-fallback findings, by operator type, for PROF001.

The log engine (:func:`npudoctor.logs.scan_paths`) walks, opens and reads the logs exactly as ``logs scan DIR``
does (regular files only, no symlink out of the folder, ``.gz`` included); this module only keeps the fallback
kinds.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

FALLBACK_KINDS = ("cpu_fallback", "op_rejected", "aicpu_placed", "host_cpu_placed")


def fallback_findings(roots: Sequence[str]) -> List[Dict[str, Any]]:
    """``[{op_type, kind, title, count, first, fix}]`` for every CPU/AI CPU fallback the logs under ``roots`` show."""
    from npudoctor.logs import scan_paths

    result = scan_paths(list(roots))
    return [{"op_type": finding.subject, "kind": finding.kind, "title": finding.title or finding.kind,
             "count": finding.count, "first": str(finding.first), "fix": finding.fix}
            for finding in result.findings if finding.kind in FALLBACK_KINDS]
