"""``--format json``: the versioned ``npudoctor.report/1`` document."""

from __future__ import annotations

import json

from npudoctor.model.finding import Report


def render(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"
