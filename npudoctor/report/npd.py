"""``--format npd``: node-problem-detector's custom-plugin protocol.

NPD runs the plugin, reads the exit code (0 OK, 1 NonOK: a problem, 2 Unknown: the plugin could not tell) and
keeps the first ``max_output_length`` bytes (80 by default) of stdout as the condition's message. So: one
short line, the most important thing first.
"""

from __future__ import annotations

from typing import List, Tuple

from npudoctor.model.finding import Finding, Report, Status, failing

OK, PROBLEM, UNKNOWN = 0, 1, 2
MAX_MESSAGE = 80


def verdict(report: Report, fail_on: str = "fail") -> Tuple[int, str]:
    """The exit code and the one-line message for NPD.

    A FAIL (or a WARN under ``fail_on="warn"``) is a problem; ERROR findings alone mean the doctor could not
    tell (a command hung), which NPD shows as Unknown rather than flapping the condition.
    """
    failed = [finding for status in failing(fail_on) for finding in _with(report, status)]
    errors = _with(report, Status.ERROR)
    if failed:
        return PROBLEM, _message("NPU node problem", failed)
    if errors:
        return UNKNOWN, _message("npudoctor could not tell", errors)
    if report.nothing_checked:
        return UNKNOWN, _short(f"npudoctor could not tell: nothing was checked ({len(report.findings)} skip)")
    counts = report.summary.to_dict()
    warnings = _with(report, Status.WARN)
    if warnings:  # not a problem under this --fail-on, but not "OK" either: name what to look at
        return OK, _message(f"NPU node has {counts['warn']} warning{'s' * (counts['warn'] != 1)}", warnings)
    return OK, _short(f"NPU node OK ({counts['pass']} pass, {counts['skip']} skip)")


def render(report: Report, fail_on: str = "fail") -> str:
    return verdict(report, fail_on)[1] + "\n"


def _with(report: Report, status: Status) -> List[Finding]:
    return [f for f in report.findings if f.status is status]


def _message(head: str, findings: List[Finding]) -> str:
    first = findings[0]
    where = f" {first.subject}" if first.subject else ""
    ids = list(dict.fromkeys(f.id for f in findings))
    more = f" (+{len(findings) - 1} more: {','.join(ids[1:4])})" if len(findings) > 1 else ""
    # the problem itself (the finding's detail), not the check's title: NPD shows this line as the condition
    return _short(f"{head}: {first.id}{where} {first.detail or first.title}{more}")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def could_not_tell(reason: str) -> str:
    """The Unknown line for what is no run's report (a kept report that is stale, missing or unreadable)."""
    return _short(f"npudoctor could not tell: {reason}")
