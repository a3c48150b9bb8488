"""The profiling doctor's engine: find the data, read it per rank, run the PROF checks, return one result.

:func:`analyze` is the one public entry (the CLI, ``check --prof`` and the benchmark call it). It never prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

from npudoctor.errors import InputError
from npudoctor.prof.layout import Source, discover
from npudoctor.prof.model import ProfResult, Rank

if TYPE_CHECKING:
    from npudoctor.model.profile import NodeProfile


class ProfInputError(InputError):
    """Nothing readable to analyse (one line for the user, exit code 2)."""


def analyze(paths: Sequence[str], profile: Optional[NodeProfile] = None, steps: int = 0,
            logs_dirs: Sequence[str] = (), progress: Optional[Callable[[str], None]] = None) -> ProfResult:
    """Read every profiling layout under ``paths`` and run the PROF checks over all ranks found.

    ``progress`` is told what is being read (for a progress line on a terminal). Raises
    :class:`ProfInputError` when no profiling table can be found or read at all.
    """
    from npudoctor.model.profile import NodeProfile
    from npudoctor.prof import readers
    from npudoctor.prof.checks import ProfContext, run_all

    # No profile: every setting is the shipped profiles/default.yaml's (the room does not reach up into api).
    ctx = ProfContext(ranks=[], profile=profile or NodeProfile("default"), logs_dirs=tuple(logs_dirs))
    sources, problems = discover(list(paths))
    if not sources:
        reason = "; ".join(problems[:3]) if problems else f"{', '.join(paths)}: no profiling data found"
        raise ProfInputError(f"{reason} (expected a *_ascend_pt or PROF_* folder, or a kernel_details / "
                             "op_summary CSV)")
    ranks: List[Rank] = []
    for number, source in enumerate(sources, 1):
        if progress is not None:
            progress(f"reading {number}/{len(sources)}: {source.label}")
        ranks.extend(readers.read_source(source, ctx.min_task_us, float(ctx.setting("prof.bound_ratio")), steps,
                                         float(ctx.setting("prof.quiet_idle_min_us"))))
    readable = [r for r in ranks if r.tables_read]
    if not readable:
        details = [p for r in ranks for p in r.problems] + problems
        if not details:  # tables of known names whose columns are foreign or that hold no row said nothing
            details = [f"{', '.join(paths)}: no rows with the columns of an Ascend profiling table"]
        raise ProfInputError("no profiling table could be read: " + "; ".join(details[:3]))
    unreadable = [(path, _reason(path, problems)) for path in paths if not _gave_sources(path, sources)]
    unreadable += [(rank.label, rank.problems[0] if rank.problems else "no table could be read")
                   for rank in ranks if not rank.tables_read]
    for rank in ranks:
        problems.extend(rank.problems)
    ctx.ranks = ranks
    findings = run_all(ctx)
    return ProfResult(ranks=ranks, findings=findings, problems=problems, paths=tuple(paths), unreadable=unreadable)


def _gave_sources(path: str, sources: Sequence[Source]) -> bool:
    """Whether the PATH argument ``path`` led to a source: a table it names, or a source in or around it."""
    import os

    where = os.path.abspath(path)
    for source in sources:
        named = [*source.tables.values(), source.databases, source.analysis_dbs]  # a .db by path counts too
        if any(path in files for files in named):
            return True
        root = os.path.abspath(source.root)
        if source.layout != "file" and (root == where or root.startswith(where + os.sep)
                                        or where.startswith(root + os.sep)):
            return True
    return False


def _reason(path: str, problems: Sequence[str]) -> str:
    mine = next((p for p in problems if p.startswith(path + ":")), "")
    return mine[len(path) + 1:].strip() if mine else "no profiling data found"
