"""`npudoctor logs scan PATH...`: find what matters in CANN plogs, device logs, ATC and torch_npu output.

Reads the user's files directly (they are inputs, not system probes): files, directories (walked for log
files), ``.gz`` files and ``-`` for stdin. Exit codes: 0 nothing matched ``--fail-on``; 1 findings matched;
2 usage error or nothing readable at all.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple

import click

from npudoctor.cli.common import EXIT_FINDINGS, EXIT_OK, PATH, PATH_OR_STDIN, fail_usage, quoted_topics, split_list

if TYPE_CHECKING:
    from npudoctor.logs.job import JobScan


class StderrProgress:
    """``logs scan`` progress on a terminal's stderr: files, bytes and bytes/s on one line, redrawn at most
    five times a second and cleared at the end. Implements :data:`npudoctor.logs.engine.Progress`."""

    def __init__(self, stream: Any, delay_s: float = 0.5) -> None:
        import time

        self._clock = time.monotonic
        self._stream = stream
        self._start = self._clock()
        self._next = self._start + delay_s  # short scans print nothing at all
        self._shown = False

    def __call__(self, done_bytes: int, total_bytes: int, files_done: int, files_total: int) -> None:
        now = self._clock()
        if now < self._next:
            return
        self._next = now + 0.2
        rate = done_bytes / max(now - self._start, 1e-6)
        line = (f"scanning: {min(files_done + 1, files_total)}/{files_total} files, "
                f"{_mb(done_bytes)}/{_mb(total_bytes)}, {_mb(rate)}/s")
        self._stream.write("\r" + line[:79].ljust(79))
        self._stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self._stream.write("\r" + " " * 79 + "\r")
            self._stream.flush()


def progress_for(stream: Any) -> Optional[StderrProgress]:
    """Progress on ``stream`` when it is a terminal; none when piped (output stays byte-identical)."""
    isatty = getattr(stream, "isatty", None)
    return StderrProgress(stream) if isatty is not None and isatty() else None


def _mb(count: float) -> str:
    return f"{count / 1e6:,.0f} MB" if count >= 1e7 else f"{count / 1e6:.1f} MB"


@click.group()
def logs() -> None:
    """Scan CANN logs (plog/slog/device), ATC and torch_npu output; explain error codes."""


@logs.command("scan")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", type=PATH_OR_STDIN)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit", "github"]), default="text",
              show_default=True)
@click.option("--fail-on", "fail_on", multiple=True, metavar="fail|warn|fallback|KIND|CODE",
              help="Exit 1 when a finding matches (repeat or comma-separate; given criteria replace the "
                   "default, fail). fail (or error): errors; warn includes them; a CODE such as EZ3002 or "
                   "507011 matches that code.")
@click.option("--expect-success", "expect_success", metavar="atc|TEXT",
              help="A finished run's log holds this line (atc: \"ATC run success\"); each log without it "
                   "is an unfinished_run error: the run was not found, crashed, was killed or stopped.")
@click.option("--rules", "rule_files", type=PATH, multiple=True, metavar="FILE",
              help="Site rules file (same layout as checks/log_rules.yaml); adds or replaces rules by id.")
@click.option("-j", "--jobs", type=click.IntRange(0, 256), default=0, show_default=True,
              help="Worker processes for big files (0: one per CPU, at most 8; 1: scan in this process).")
@click.option("--follow-symlinks", is_flag=True,
              help="Read symbolic links too, named or met in folders (not followed by default).")
@click.option("--from", "bundle", type=PATH, metavar="BUNDLE",
              help="Explain codes in CANN's own texts from a bundle's node.")
@click.option("--root", type=PATH, metavar="DIR", help="Explain codes in CANN's own texts from the install under DIR.")
@click.option("--node", metavar="NAME", default="",
              help="The node the scanned logs come from (names it in the diagnosis and the JSON document).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show every incident, every finding's sample line and explanation, and every file.")
def scan(paths: Tuple[str, ...], fmt: str, fail_on: Tuple[str, ...], expect_success: Optional[str],
         rule_files: Tuple[str, ...], jobs: int, follow_symlinks: bool, bundle: Optional[str], root: Optional[str],
         node: str, verbose: bool) -> None:
    """Scan files, directories, .gz files, - (stdin) or other nodes' --format json documents; report the
    diagnosis (root cause, consequences, independent incidents) and the merged findings.

    A job folder is read as it is kept: a folder per node, plog/device-N, torchrun's attempt_N/<rank>/,
    MindSpore's rank_N/, consoles with [rankN]: or Ray (RayWorkerWrapper pid=..) prefixes.

    Exit codes: 0 nothing matched --fail-on; 1 findings matched or a file could not be read; 2 usage error or
    nothing readable.
    """
    from npudoctor.logs.engine import default_jobs
    from npudoctor.logs.failon import matches_fail_on, parse_fail_on
    from npudoctor.logs.finished import expectation, extra_rules, judge_job_finished
    from npudoctor.logs.job import scan_job
    from npudoctor.logs.rules import RulesError, known_kinds, load_rules
    from npudoctor.model import inputs
    from npudoctor.probes.cann_codes import texts_on_node
    from npudoctor.untrusted import printable

    # Codes read as `explain` shows them on this node (or --root/--from): its CANN registry's texts first.
    installed = texts_on_node(root, bundle)
    try:
        rules = load_rules(rule_files)
        criteria = parse_fail_on(split_list(fail_on), known_kinds(rules))
        expected = expectation(expect_success) if expect_success is not None else None
    except (RulesError, ValueError) as exc:
        raise fail_usage(str(exc)) from None
    progress = progress_for(sys.stderr)
    try:
        job = scan_job(paths, rules=rules, rule_files=rule_files, jobs=jobs or default_jobs(),
                       progress=progress, stdin=sys.stdin.buffer, follow_symlinks=follow_symlinks,
                       installed=installed, node=printable(node),
                       extra_rules=extra_rules(expected) if expected else ())
    finally:
        if progress is not None:
            progress.close()
    result = job.result
    if not result.readable_files:  # one line, as for every command that reads many inputs (model.inputs)
        unread = [s for s in result.files if s.status != "ok"]
        first = f": {unread[0].path}: {unread[0].error}" if unread else ""
        more = f" (and {len(unread) - 1} more)" if len(unread) > 1 else ""
        raise fail_usage(f"nothing readable to scan{first}{more}")
    if expected is not None:
        judge_job_finished(job, expected)
    for summary in result.files:
        if summary.status == "partial":
            click.echo(printable(f"npudoctor: warning: {summary.path}: {summary.error}; scanned what was read "
                                 f"before it (partial)"), err=True)
        elif summary.status != "ok":
            click.echo(printable(f"npudoctor: warning: {summary.path}: {summary.error}"), err=True)
    # An input that could not be read makes the exit at least 1, whatever matched (npudoctor.model.inputs);
    # files a folder walk skips on purpose (links out, FIFOs, binaries) are no inputs.
    unreadable = [s for s in result.files if s.status == "unreadable"]
    code = inputs.exit_code(EXIT_FINDINGS if matches_fail_on(result, criteria) else EXIT_OK, len(unreadable))
    if unreadable:
        click.echo(printable(inputs.warning_line([(s.path, s.error or "unreadable") for s in unreadable])), err=True)
    _emit(job, fmt, verbose, criteria, code)
    raise click.exceptions.Exit(code)


def _emit(job: JobScan, fmt: str, verbose: bool, criteria: Sequence[str], code: int) -> None:
    result = job.result
    if fmt == "json":
        from npudoctor.report import json_report, logs_json

        json_report.emit(logs_json.to_dict(result, criteria, code, job))
    elif fmt == "junit":
        from npudoctor.report import junit

        junit.emit(junit.scan_document(result, criteria, job))
    elif fmt == "github":
        from npudoctor.report import github

        click.echo(github.scan_document(result, criteria, code, job=job), nl=False)
    else:
        from npudoctor.report import console, logs_console

        logs_console.render(result, console.make_console(), verbose=verbose, fail_on=criteria, exit_code=code,
                            job=job)


@logs.command("explain", context_settings={"ignore_unknown_options": True})
@click.argument("codes", nargs=-1, required=True, metavar="CODE...")
@click.option("--from", "bundle", metavar="BUNDLE", help="Read CANN's own code texts from a bundle's node.")
@click.option("--root", metavar="DIR", help="Read CANN's own code texts from the install under DIR.")
def explain(codes: Tuple[str, ...], bundle: Optional[str], root: Optional[str]) -> None:
    """Explain CANN / torch_npu error codes (EZ9999, EI0006, ERR00100, 507011, -8005, 0x05000004).

    Shows what `npudoctor explain CODE` shows."""
    from npudoctor.logs.codes import explain as explain_code
    from npudoctor.probes.cann_codes import texts_on_node
    from npudoctor.report import explain as explain_report
    from npudoctor.report.console import make_console

    installed = texts_on_node(root, bundle)  # a bad --root/--from is an InputError: one line, exit 2
    found = [(code, explain_code(code, installed)) for code in codes]
    entries = [info for _code, info in found if info is not None]
    unknown = [code for code, info in found if info is None]
    explain_report.render(entries, make_console())
    if unknown:
        raise fail_usage(f"not a known error code: {quoted_topics(unknown)}")
