"""CANN log doctor: scan plog/slog/device logs, ATC and torch_npu console output for what matters.

The engine is pure: :class:`~npudoctor.logs.scanner.Scanner` takes bytes (whole files or a stream of chunks)
and returns records counts and merged findings; it never opens a file. :func:`scan_paths` (in
:mod:`npudoctor.logs.engine`) opens, walks and chunks the inputs: the one entry point of ``logs scan``,
``check --logs`` and the dashboard. Knowledge is data:
``checks/log_rules.yaml`` (pattern -> finding kind) and ``checks/error_codes.yaml`` (code -> meaning, cause,
fix, see :func:`npudoctor.logs.codes.explain`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npudoctor.logs.model import ScanResult


def scan_paths(paths: Any, **options: Any) -> ScanResult:
    """Scan files, folders, ``.gz`` and ``-``: see :func:`npudoctor.logs.engine.scan_paths` (imported on first
    use, so that importing :mod:`npudoctor.logs.codes` stays light)."""
    from npudoctor.logs.engine import scan_paths as scan

    return scan(paths, **options)
