"""``--format json``: the versioned ``npudoctor.report/1`` document."""

from __future__ import annotations

import json

from npudoctor.model.finding import Report


def render(report: Report, ascii_only: bool = False) -> str:
    """The document; ``ascii_only`` writes characters beyond ASCII as ``\\uXXXX`` escapes (same data)."""
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=ascii_only, default=str) + "\n"
