"""The profiling doctor's engine: find the data, read it per rank, run the PROF checks, return one result.

:func:`analyze` is the one public entry (the CLI, ``check --prof`` and the benchmark call it). It never prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Optional, Sequence

from npudoctor.errors import InputError
from npudoctor.prof.layout import discover
from npudoctor.prof.model import ProfResult, Rank

if TYPE_CHECKING:
    from npudoctor.model.profile import NodeProfile


class ProfInputError(InputError):
    """Nothing readable to analyse (one line for the user, exit code 2)."""


def _thresholds(profile: Optional[NodeProfile]) -> Mapping[str, Any]:
    if profile is None:  # the shipped default profile's thresholds (the room does not reach up into api)
        from npudoctor.knowledge import data_dir, load_yaml_file

        return (load_yaml_file(data_dir("profiles") / "default.yaml") or {}).get("prof", {}) or {}
    return profile.get("prof", {}) or {}


def analyze(paths: Sequence[str], profile: Optional[NodeProfile] = None, steps: int = 0,
            logs_dirs: Sequence[str] = (), progress: Optional[Callable[[str], None]] = None) -> ProfResult:
    """Read every profiling layout under ``paths`` and run the PROF checks over all ranks found.

    ``progress`` is told what is being read (for a progress line on a terminal). Raises
    :class:`ProfInputError` when no profiling table can be found or read at all.
    """
    from npudoctor.prof import readers
    from npudoctor.prof.checks import ProfContext, run_all

    settings = _thresholds(profile)
    sources, problems = discover(list(paths))
    if not sources:
        reason = "; ".join(problems[:3]) if problems else f"{', '.join(paths)}: no profiling data found"
        raise ProfInputError(f"{reason} (expected a *_ascend_pt or PROF_* folder, or a kernel_details / "
                             "op_summary CSV)")
    ranks: List[Rank] = []
    for number, source in enumerate(sources, 1):
        if progress is not None:
            progress(f"reading {number}/{len(sources)}: {source.label}")
        ranks.extend(readers.read_source(source, settings, steps))
    readable = [r for r in ranks if r.tables_read]
    if not readable:
        details = [p for r in ranks for p in r.problems] + problems
        if not details:  # tables of known names whose columns are foreign or that hold no row said nothing
            details = [f"{', '.join(paths)}: no rows with the columns of an Ascend profiling table"]
        raise ProfInputError("no profiling table could be read: " + "; ".join(details[:3]))
    for rank in ranks:
        problems.extend(rank.problems)
    ctx = ProfContext(ranks=ranks, settings=settings, logs_dirs=tuple(logs_dirs))
    findings = run_all(ctx)
    return ProfResult(ranks=ranks, findings=findings, problems=problems, paths=tuple(paths))
