"""What a front end hears while checks run: the CLI streams each stage as it ends and shows a spinner."""

from __future__ import annotations

from typing import Any, Sequence

try:
    from typing import Protocol
except ImportError:  # pragma: no cover - Python 3.7
    Protocol = object  # type: ignore[assignment]

from npudoctor.model.finding import Finding, Report


class RunListener(Protocol):
    """``api.run_checks(listener=...)`` calls these, in this order, from the thread that runs the checks."""

    def started(self, report: Report) -> None:
        """Before the first check: ``report`` has its tool/host/source context and no findings yet."""

    def checking(self, spec: Any) -> None:
        """The check ``spec`` (a CheckSpec: ``id``, ``title``, ``stage``) is about to run; it may wait for a
        slow command."""

    def stage_done(self, stage: str, findings: Sequence[Finding]) -> None:
        """Every selected check of ``stage`` has run; ``findings`` are that stage's, in order."""

    # Optional: ``running(self, argv: Sequence[str]) -> None`` hears each external command a check waits
    # for (``npu-smi info``), so that a spinner can name it.


class SilentListener:
    """Hears everything, does nothing (library users, tests)."""

    def started(self, report: Report) -> None:
        pass

    def checking(self, spec: Any) -> None:
        pass

    def stage_done(self, stage: str, findings: Sequence[Finding]) -> None:
        pass
