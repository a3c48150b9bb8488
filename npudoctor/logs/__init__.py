"""CANN log doctor: scan plog/slog/device logs, ATC and torch_npu console output for what matters.

The engine is pure: :class:`~npudoctor.logs.scanner.Scanner` takes bytes (whole files or a stream of chunks)
and returns records counts and merged findings; it never opens a file. Knowledge is data:
``checks/log_rules.yaml`` (pattern -> finding kind) and ``checks/error_codes.yaml`` (code -> meaning, cause,
fix, see :func:`npudoctor.logs.codes.explain`).
"""
