"""``logs scan --format json``: the versioned ``npudoctor.logs/1`` document."""

from __future__ import annotations

from typing import Any, Dict, Sequence

from npudoctor import __version__
from npudoctor.logs.model import ScanResult

SCHEMA = "npudoctor.logs/1"


def to_dict(result: ScanResult, fail_on: Sequence[str] = ("error",), exit_code: int = 0) -> Dict[str, Any]:
    files = result.files
    return {
        "schema": SCHEMA,
        "tool": {"name": "npudoctor", "version": __version__},
        "files": [f.to_dict() for f in files],
        "summary": {
            "files": len(files),
            "unreadable": sum(1 for f in files if f.status == "unreadable"),
            "skipped": len(result.skipped),
            "lines": sum(f.lines for f in files),
            "records": sum(f.records for f in files),
            "levels": dict(result.levels.most_common()),
            "modules": dict(result.modules.most_common()),
            "codes": dict(result.codes.most_common()),
            "findings": result.severity_counts(),
        },
        "findings": [f.to_dict() for f in result.findings],
        "skipped": [{"path": path, "reason": reason} for path, reason in result.skipped],
        "fail_on": list(fail_on),
        "exit_code": exit_code,
    }

