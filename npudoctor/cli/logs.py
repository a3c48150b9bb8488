"""`npudoctor logs scan PATH...`: find what matters in CANN plogs, device logs, ATC and torch_npu output.

Reads the user's files directly (they are inputs, not system probes): files, directories (walked for log
files), ``.gz`` files and ``-`` for stdin. Exit codes: 0 nothing matched ``--fail-on``; 1 findings matched;
2 usage error or nothing readable at all.
"""

from __future__ import annotations

import gzip
import os
import re
import sys
from typing import IO, TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

import click

from npudoctor.cli import EXIT_FINDINGS, EXIT_OK, fail_usage, split_list

if TYPE_CHECKING:
    from npudoctor.logs.scanner import ScanResult

# Files taken from a directory: plog-*.log, device-*.log, slogdlog, atrace ts_*.txt, rotated/zipped copies.
LOG_FILE_NAME = re.compile(r"(?:\.log|\.txt|\.out|^slogdlog)(?:\.\d+)?(?:\.gz)?$")


def read_chunks(handle: IO[bytes], chunk_bytes: int) -> Iterator[bytes]:
    while True:
        data = handle.read(chunk_bytes)
        if not data:
            return
        yield data


def _file_chunks(path: str, chunk_bytes: int) -> Iterator[bytes]:
    handle = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    with handle:
        yield from read_chunks(handle, chunk_bytes)  # type: ignore[arg-type]


# Regular files at least this big are split into ranges scanned by worker processes (`--jobs`).
PARALLEL_MIN_BYTES = 64 * 1024 * 1024
_worker_rules: Dict[Tuple[str, ...], Any] = {}


def _range_chunks(path: str, start: int, stop: int, chunk_bytes: int) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        handle.seek(start)
        left = stop - start
        while left > 0:
            data = handle.read(min(chunk_bytes, left))
            if not data:
                return
            left -= len(data)
            yield data


def _scan_range(path: str, start: int, stop: int, rule_files: Tuple[str, ...]) -> Any:
    """Worker process: scan bytes [start, stop) of ``path`` (cut at line starts) with the pure engine."""
    from npudoctor.logs.rules import load_rules
    from npudoctor.logs.scanner import CHUNK_BYTES, Scanner

    if rule_files not in _worker_rules:
        _worker_rules[rule_files] = load_rules(rule_files)
    scanner = Scanner(_worker_rules[rule_files])
    scanner.scan_stream(path, _range_chunks(path, start, stop, CHUNK_BYTES))
    return scanner.export_part()


def _line_boundaries(path: str, size: int, parts: int) -> List[int]:
    """Offsets just after a newline near each of ``parts`` equal cuts of the file (0 and size included)."""
    cuts = [0]
    with open(path, "rb") as handle:
        for index in range(1, parts):
            handle.seek(max(size * index // parts, cuts[-1]))
            probe = handle.read(1 << 20)
            newline = probe.find(b"\n")
            if newline >= 0 and handle.tell() - len(probe) + newline + 1 < size:
                cuts.append(handle.tell() - len(probe) + newline + 1)
    cuts.append(size)
    return sorted(set(cuts))


def scan_file(scanner: Any, path: str, jobs: int, rule_files: Tuple[str, ...]) -> Any:
    """Scan one user file: a big regular file in ``jobs`` worker processes, anything else in this one."""
    from npudoctor.logs.scanner import CHUNK_BYTES

    size = os.path.getsize(path) if os.path.isfile(path) and not path.endswith(".gz") else 0
    if jobs > 1 and size >= PARALLEL_MIN_BYTES:
        import concurrent.futures

        cuts = _line_boundaries(path, size, jobs)
        try:
            with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = [pool.submit(_scan_range, path, a, b, rule_files) for a, b in zip(cuts, cuts[1:])]
                parts = [f.result() for f in futures]
            return scanner.add_parts(parts)
        except (OSError, concurrent.futures.process.BrokenProcessPool):
            pass  # no worker processes here (sandbox, no /dev/shm): scan in this process
    return scanner.scan_stream(path, _file_chunks(path, CHUNK_BYTES))


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def expand_paths(paths: Sequence[str]) -> Iterator[Tuple[str, Optional[str]]]:
    """(path, problem) for every input: directories walked (sorted) for log files, anything else read as
    given (files, pipes such as ``<(kubectl logs ...)``, ``-`` for stdin)."""
    for path in paths:
        if path == "-":
            yield path, None
        elif os.path.isdir(path):
            found = False
            problems: List[Tuple[str, str]] = []

            def note(exc: OSError, problems: List[Tuple[str, str]] = problems) -> None:
                problems.append((str(exc.filename), exc.strerror or str(exc)))

            for folder, dirs, files in os.walk(path, onerror=note):
                dirs.sort()
                for name in sorted(files):
                    if LOG_FILE_NAME.search(name):
                        found = True
                        yield os.path.join(folder, name), None
            yield from problems
            if not found and not problems:
                yield path, "no log files in this directory"
        elif os.path.exists(path):
            yield path, None
        else:
            yield path, "no such file or directory"


def parse_fail_on(values: Sequence[str], known_kinds: Sequence[str]) -> List[str]:
    """Validate ``--fail-on`` items: a severity (error, warn, fallback, info), a finding kind, or an error code."""
    from npudoctor.logs.codes import CODE_SHAPE, normalize
    from npudoctor.logs.rules import SEVERITIES

    criteria = []
    for item in split_list(values):
        if item.lower() in SEVERITIES:
            criteria.append(item.lower())
        elif item in known_kinds:
            criteria.append(item)
        elif CODE_SHAPE.match(normalize(item)):
            criteria.append(normalize(item))
        else:
            raise fail_usage(f"--fail-on {item!r}: expected {', '.join(SEVERITIES)}, a finding kind "
                             f"({', '.join(sorted(known_kinds))}) or an error code such as EZ9999 or 507011")
    return criteria or ["error"]


@click.group()
def logs() -> None:
    """Scan CANN logs (plog/slog/device), ATC and torch_npu output; explain error codes."""


@logs.command("scan")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit", "github"]), default="text",
              show_default=True)
@click.option("--fail-on", "fail_on", multiple=True, metavar="error|warn|fallback|KIND|CODE",
              help="Exit 1 when a finding matches (repeat or comma-separate; given criteria replace the "
                   "default, error). warn includes error; a CODE such as EZ3002 or 507011 matches that code.")
@click.option("--rules", "rule_files", multiple=True, metavar="FILE",
              help="Site rules file (same layout as checks/log_rules.yaml); adds or replaces rules by id.")
@click.option("-j", "--jobs", type=click.IntRange(0, 256), default=0, show_default=True,
              help="Worker processes for big files (0: one per CPU, at most 8; 1: scan in this process).")
@click.option("-v", "--verbose", is_flag=True, help="Show every finding's sample line and explanation.")
def scan(paths: Tuple[str, ...], fmt: str, fail_on: Tuple[str, ...], rule_files: Tuple[str, ...],
         jobs: int, verbose: bool) -> None:
    """Scan files, directories, .gz files or - (stdin) and report merged findings.

    Exit codes: 0 nothing matched --fail-on; 1 findings matched; 2 usage error or nothing readable.
    """
    from npudoctor.logs.rules import RulesError, load_rules
    from npudoctor.logs.scanner import BUILTIN_KINDS, CHUNK_BYTES, Scanner

    try:
        rules = load_rules(rule_files)
    except RulesError as exc:
        raise fail_usage(str(exc)) from None
    criteria = parse_fail_on(fail_on, sorted({r.kind for r in rules.rules} | set(BUILTIN_KINDS)))
    scanner = Scanner(rules)
    jobs = jobs or default_jobs()
    for path, problem in expand_paths(paths):
        if problem is None:
            try:
                if path == "-":
                    scanner.scan_stream("<stdin>", read_chunks(sys.stdin.buffer, CHUNK_BYTES))
                else:
                    summary = scan_file(scanner, path, jobs, rule_files)
                    problem = summary.error if summary.status != "ok" else None
            except OSError as exc:  # could not even open it
                problem = exc.strerror or str(exc)
                scanner.add_unreadable(path, problem)
        else:  # nothing to open: a missing path, an unreadable folder, a folder without log files
            scanner.add_unreadable(path, problem)
        if problem:
            click.echo(f"npudoctor: warning: {path}: {problem}", err=True)
    result = scanner.result()
    if not result.readable_files:
        raise fail_usage("nothing readable to scan")
    code = EXIT_FINDINGS if matches_fail_on(result, criteria) else EXIT_OK
    _emit(result, fmt, verbose, criteria, code)
    raise click.exceptions.Exit(code)


def matches_fail_on(result: ScanResult, criteria: Sequence[str]) -> bool:
    """True when any finding (or code) of ``result`` matches one of the ``--fail-on`` criteria."""
    severities = {f.severity for f in result.findings}
    kinds = {f.kind for f in result.findings}
    for criterion in criteria:
        if criterion == "error" and "error" in severities:
            return True
        if criterion == "warn" and severities & {"error", "warn"}:
            return True
        if criterion in ("fallback", "info") and criterion in severities:
            return True
        if criterion in kinds or criterion in result.codes:
            return True
    return False


def _emit(result: ScanResult, fmt: str, verbose: bool, criteria: Sequence[str], code: int) -> None:
    if fmt == "json":
        from npudoctor.report import logs_json

        click.echo(logs_json.render(result, criteria, code), nl=False)
    elif fmt == "junit":
        from npudoctor.report import logs_junit

        click.echo(logs_junit.render(result), nl=False)
    elif fmt == "github":
        from npudoctor.report import logs_github

        click.echo(logs_github.render(result), nl=False)
    else:
        from npudoctor.report import console, logs_console

        logs_console.render(result, console.make_console(), verbose=verbose)


@logs.command("explain")
@click.argument("codes", nargs=-1, required=True, metavar="CODE...")
def explain(codes: Tuple[str, ...]) -> None:
    """Explain CANN / torch_npu error codes (EZ9999, EI0006, ERR00100, 507011, 0x05000004)."""
    from npudoctor.logs.codes import explain as explain_code

    unknown = []
    for code in codes:
        info = explain_code(code)
        if info is None:
            unknown.append(code)
            continue
        family = "" if info.exact else "  (known only by its family)"
        click.echo(f"{info.code}: {info.title}{family}\n  meaning: {info.meaning}")
        if info.cause:
            click.echo(f"  cause:   {info.cause}")
        if info.fix:
            click.echo(f"  fix:     {info.fix}")
    if unknown:
        raise fail_usage(f"not a known error code: {', '.join(unknown)}")
