"""``--fail-on``: which findings fail a scan. One rule for the exit code, JUnit failures and LOG001.

A criterion is a severity (``error``, or ``fail`` as every command says; ``warn`` includes error; ``fallback``;
``info``), a finding kind
(``cpu_fallback``) or an error code (``EZ9999``, ``507011``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Sequence

from npudoctor.logs.codes import CODE_SHAPE, normalize
from npudoctor.logs.model import SEVERITIES

if TYPE_CHECKING:
    from npudoctor.logs.model import LogFinding, ScanResult

DEFAULT_FAIL_ON = ("error",)
# The words every command takes (npudoctor.cli.common.FAIL_ON_SEVERITIES): fail is the log doctor's error.
SEVERITY_ALIASES = {"fail": "error", "warning": "warn"}
# The severities each severity criterion selects.
_SELECTS = {"error": ("error",), "warn": ("error", "warn"), "fallback": ("fallback",), "info": ("info",)}


def parse_fail_on(items: Iterable[str], known_kinds: Sequence[str]) -> List[str]:
    """Validated criteria (ValueError with a one-line reason for an unknown one); none given: error."""
    criteria = []
    for item in items:
        word = SEVERITY_ALIASES.get(item.lower(), item.lower())
        if word in SEVERITIES:
            criteria.append(word)
        elif item in known_kinds:
            criteria.append(item)
        elif CODE_SHAPE.match(normalize(item)):
            criteria.append(normalize(item))
        else:
            raise ValueError(f"--fail-on {item!r}: expected fail (or error), warn, fallback, info, a finding kind "
                             f"({', '.join(sorted(known_kinds))}) or an error code such as EZ9999 or 507011")
    return criteria or list(DEFAULT_FAIL_ON)


def finding_fails(finding: LogFinding, criteria: Sequence[str]) -> bool:
    """True when ``finding`` matches one of the criteria."""
    for criterion in criteria:
        if finding.severity in _SELECTS.get(criterion, ()):
            return True
        if criterion == finding.kind or (finding.kind == "error_code" and criterion == finding.subject):
            return True
    return False


def matches_fail_on(result: ScanResult, criteria: Sequence[str]) -> bool:
    """True when any finding of ``result`` matches one of the criteria (a code is an error_code finding)."""
    return any(finding_fails(f, criteria) for f in result.findings)
