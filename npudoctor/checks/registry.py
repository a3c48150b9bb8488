"""Stable check IDs, stage order, and the machinery that turns a check's outcomes into findings.

A check is a function ``(ctx) -> Iterable[Outcome]`` registered with :func:`check`. Its docstring is its
user documentation (``npudoctor explain ID`` prints it): say why it matters and how to fix it. Checks never
touch the system: they read facts through ``ctx.facts(NAME)``, which probes gather through the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from npudoctor.errors import InputError
from npudoctor.knowledge import setting as knowledge_setting
from npudoctor.model import rulebook
from npudoctor.model.finding import Finding, Status
from npudoctor.model.profile import NodeProfile
from npudoctor.model.rulebook import Spec

# Stages run in this order; a check belongs to exactly one.
# "site" compares the node with the values a site profile pins (`npudoctor profile derive`): last, it sums up.
STAGES: Sequence[str] = ("pcie", "npu-smi", "versions", "libraries", "hccl", "logs", "workload", "site")

# The cause shared by every check that cannot apply on a machine without Ascend NPUs.
NOT_AN_ASCEND_NODE = "not an Ascend node"
# The checks that may find that this is not an Ascend node (from the PCI bus, /dev, npu-smi, the driver), in
# stage order: a needs_npu check left alone by --only asks them, unreported, as the full run would have.
ASCEND_NODE_CHECKS: Sequence[str] = ("PCI001", "PCI004", "SMI001", "VER001", "VER007")
# The cause shared by the checks that compare or load an installed CANN.
NO_CANN = "no CANN installed"


def not_installed(package: str, where: str) -> str:
    """The cause shared by the checks that need ``package`` in the interpreter ``where``."""
    return f"{package} not installed in {where}"


@dataclass(frozen=True)
class Outcome:
    """What a check says about one subject; the registry adds the check's id, title and stage."""

    status: Status
    subject: str = ""
    detail: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: str = ""
    cause: str = ""  # see Finding.cause


def passed(subject: str = "", detail: str = "", evidence: Optional[Mapping[str, Any]] = None) -> Outcome:
    return Outcome(Status.PASS, subject, detail, evidence or {})


def warn(subject: str = "", detail: str = "", evidence: Optional[Mapping[str, Any]] = None, fix: str = "") -> Outcome:
    return Outcome(Status.WARN, subject, detail, evidence or {}, fix)


def fail(subject: str = "", detail: str = "", evidence: Optional[Mapping[str, Any]] = None, fix: str = "",
         cause: str = "") -> Outcome:
    """``cause``: set when this failure makes other checks inapplicable (PCI001 on a machine without NPUs)."""
    return Outcome(Status.FAIL, subject, detail, evidence or {}, fix, cause)


def skip(detail: str, subject: str = "", evidence: Optional[Mapping[str, Any]] = None, fix: str = "",
         cause: str = "") -> Outcome:
    """The check could not apply; ``detail`` says why, ``cause`` names a root cause shared with other
    checks (``NOT_AN_ASCEND_NODE``). Never reads as passed."""
    return Outcome(Status.SKIP, subject, detail, evidence or {}, fix, cause)


def error(detail: str, subject: str = "", evidence: Optional[Mapping[str, Any]] = None) -> Outcome:
    """The check could not reach a verdict because something broke (a timeout, an unreadable file)."""
    return Outcome(Status.ERROR, subject, detail, evidence or {})


def setting(ctx: CheckContext, key: str) -> Any:
    """The value in force of the profile key ``key`` (declared in the check's ``settings``; see
    :func:`npudoctor.knowledge.setting`)."""
    return knowledge_setting(ctx.profile, key)


def by_severity(ctx: CheckContext, key: str) -> Callable[..., Outcome]:
    """:func:`warn` or :func:`fail`, as the profile's severity ``key`` says. One rule for every check: the
    profile schema admits only ``warn`` and ``fail`` (any case, normalised at load), so anything else here is
    a profile built around the loader, and an error rather than a silent guess."""
    level = setting(ctx, key)
    chosen = {"warn": warn, "fail": fail}.get(str(level).strip().lower())
    if chosen is None:
        raise ValueError(f"profile {ctx.profile.name}: {key}: {level!r} is not a severity (warn or fail)")
    return chosen


CheckFunc = Callable[["CheckContext"], Iterable[Outcome]]


# A node check's spec is the rulebook's (room "node"); the name stays for the node engine's readers.
CheckSpec = Spec
REGISTRY = rulebook.REGISTRY


def check(
    id: str, stage: str, title: str, level: int = 1, requires: Sequence[str] = (), needs_npu: bool = False,
    settings: Sequence[str] = (),
) -> Callable[[CheckFunc], CheckFunc]:
    """Register a node check under a stable ``id`` (e.g. ``PCI001``), reading the profile keys ``settings``.
    IDs are never reused or renumbered."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")

    return rulebook.check(id, stage, title, "node", level=level, requires=requires, needs_npu=needs_npu,
                          settings=settings)


class CheckContext:
    """What a check may read: facts (gathered lazily, once), the node profile, earlier findings."""

    def __init__(self, runner: Any, profile: NodeProfile, options: Optional[Mapping[str, Any]] = None) -> None:
        from npudoctor.probes import gather

        self.runner = runner
        self.profile = profile
        self.options: Mapping[str, Any] = options or {}
        self._gather = gather
        self._facts: Dict[str, Any] = {}
        self._fact_errors: Dict[str, str] = {}
        self.findings: List[Finding] = []
        # Findings of required checks that --only/--skip left out: they decide blocking, nobody sees them.
        self.unreported: Dict[str, List[Finding]] = {}

    def facts(self, name: str) -> Any:
        """The facts named ``name`` (see ``npudoctor.probes.FACTS``); gathered on first use and cached.

        Raises :class:`FactsUnavailable` when the probe itself broke; the registry turns that into ERROR.
        """
        if name in self._fact_errors:
            raise FactsUnavailable(name, self._fact_errors[name])
        if name not in self._facts:
            try:
                self._facts[name] = self._gather(name, self)
            except FactsUnavailable:
                raise
            except Exception as exc:
                self._fact_errors[name] = f"{exc.__class__.__name__}: {exc}"
                raise FactsUnavailable(name, self._fact_errors[name]) from exc
        return self._facts[name]

    def facts_or_none(self, name: str) -> Any:
        """Like :meth:`facts`, but None when the probe broke: for checks that only consult these facts on the
        side and still reach a verdict without them."""
        try:
            return self.facts(name)
        except FactsUnavailable:
            return None

    def gathered(self, name: str) -> Any:
        """The facts ``name`` if a check already asked for them, else None (gathers nothing: for summaries
        such as the report's inventory, which must not start a slow command a narrowed run left out)."""
        return self._facts.get(name)

    def statuses(self, check_id: str) -> List[Status]:
        return [f.status for f in self.findings if f.id == check_id]


class FactsUnavailable(Exception):
    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"could not gather {name} facts: {reason}")
        self.name = name
        self.reason = reason


def _blocked_by(spec: CheckSpec, ctx: CheckContext) -> Optional[Tuple[str, Optional[Finding]]]:
    """Which required check did not pass (so ``spec`` cannot run), and its finding when ``--only``/``--skip``
    left it out of the report; None when every requirement passed.

    A required check left out by ``--only``/``--skip`` still decides: it runs unreported, so a check never
    reads facts its requirement would have refused (``--only SMI002`` on a node where npu-smi fails), and
    says what it says in the full run.
    """
    for required in spec.requires:
        statuses = ctx.statuses(required)
        if any(s in _BLOCKING for s in statuses):
            return required, None
        if statuses or required not in REGISTRY:
            continue
        if required not in ctx.unreported:
            ctx.unreported[required] = []  # a requirement cycle ends here instead of recursing
            ctx.unreported[required] = run_check(REGISTRY[required], ctx)
        for hidden in ctx.unreported[required]:
            if hidden.status in _BLOCKING:
                return required, hidden
    return None


_BLOCKING = (Status.FAIL, Status.ERROR, Status.SKIP)


def _decided(ctx: CheckContext) -> Iterable[Finding]:
    """Every finding so far, the unreported ones of left-out requirements included."""
    yield from ctx.findings
    for hidden in ctx.unreported.values():
        yield from hidden


def cause_of(check_id: str, ctx: CheckContext) -> str:
    """The root cause an earlier check named (a check blocked by PCI001 shares PCI001's cause)."""
    return next((f.cause for f in _decided(ctx) if f.id == check_id and f.cause), "")


def _not_an_ascend_node(ctx: CheckContext) -> bool:
    """Whether an earlier check found no Ascend NPU. Those of ``ASCEND_NODE_CHECKS`` that ``--only``/``--skip``
    left out run unreported (until one says so), so that a narrowed run says what the full run says."""
    for check_id in ASCEND_NODE_CHECKS:
        if any(f.cause == NOT_AN_ASCEND_NODE for f in _decided(ctx)):
            return True
        if not ctx.statuses(check_id) and check_id not in ctx.unreported and check_id in REGISTRY:
            ctx.unreported[check_id] = []
            ctx.unreported[check_id] = run_check(REGISTRY[check_id], ctx)
    return any(f.cause == NOT_AN_ASCEND_NODE for f in _decided(ctx))


def run_check(spec: CheckSpec, ctx: CheckContext) -> List[Finding]:
    """Run one check; a broken check becomes an ERROR finding, never a crash of the whole report."""

    def finding(outcome: Outcome) -> Finding:
        return Finding(
            id=spec.id, status=outcome.status, title=spec.title, subject=outcome.subject, detail=outcome.detail,
            evidence=dict(outcome.evidence), fix=outcome.fix, stage=spec.stage, cause=outcome.cause,
        )

    blocker = _blocked_by(spec, ctx)
    if blocker is not None:
        required, hidden = blocker
        # The evidence says what the requirement left out of the report would have said.
        unseen = {} if hidden is None else {"not_reported": {"id": required, "status": hidden.status.name,
                                                             "detail": hidden.detail}}
        return [finding(skip(f"blocked by {required}", evidence=unseen, cause=cause_of(required, ctx)))]
    if spec.needs_npu and _not_an_ascend_node(ctx):
        return [finding(skip(f"{NOT_AN_ASCEND_NODE} (no Ascend NPU on the PCI bus)",
                             cause=NOT_AN_ASCEND_NODE))]
    try:
        outcomes = list(spec.func(ctx)) if spec.func is not None else []
    except FactsUnavailable as exc:
        outcomes = [error(str(exc))]
    except Exception as exc:  # a bug in a check must not hide the other checks
        outcomes = [error(rulebook.crash_detail(exc))]
    if not outcomes:
        outcomes = [error("check returned no outcome")]
    return [finding(o) for o in outcomes]


class SelectionError(InputError):
    """``--only``/``--skip`` name something ``check`` cannot run or does not know (one line, exit 2)."""


@dataclass(frozen=True)
class Selection:
    """What ``--only``/``--skip`` leave to run: the node checks in stage order, and the PROF IDs kept (None:
    the profiling checks are not run)."""

    node: List[CheckSpec]
    prof: Optional[FrozenSet[str]]


def _matches(spec: Spec, pattern: str) -> bool:
    wanted = pattern.lower()
    return spec.id.lower().startswith(wanted) or spec.stage == wanted


def _elsewhere(spec: Spec) -> str:
    """Why ``check`` never reports ``spec`` (another command does), or "" when it can."""
    if spec.room == "collective":
        return f"{spec.id} is measured by `npudoctor collective` (and `onboard`), not by `check`"
    if spec.room == "logs":
        return (f"{spec.id} is a log rule: `npudoctor logs scan DIR` reports it (in `check`, LOG001 does, "
                "with --logs DIR)")
    return ""


def select(specs: Sequence[Spec], only: Sequence[str] = (), skip_ids: Sequence[str] = (), level: int = 1,
           level_given: bool = False, prof_given: bool = False) -> Selection:
    """What ``check --only``/``--skip`` (IDs, ID prefixes such as ``PCI``, stage names) run among the rulebook's
    ``specs``, at ``--level``.

    One rule for both options: every ID ``check`` can report is accepted, whatever its level and whether
    ``--prof`` was given; an unknown pattern, or one naming only IDs another command reports (COL*, log
    rules), is refused, with where they are reported. ``--only`` runs an ID it names exactly at the level the
    ID needs (``--only LIB005`` runs LIB005 at level 2) unless ``--level`` was given lower, and a prefix or
    stage at the chosen level (at their own when they have no check there: ``--only workload``). A PROF ID
    needs ``--prof DIR`` to have anything to judge.
    """
    chosen: Set[str] = set()
    skipped: Set[str] = set()
    for option, patterns in (("--only", only), ("--skip", skip_ids)):
        for pattern in patterns:
            matched = [spec for spec in specs if _matches(spec, pattern)]
            if not matched:
                raise SelectionError(f"{option} {pattern} matches no check; see `npudoctor list-checks`")
            reportable = [spec for spec in matched if not _elsewhere(spec)]
            if not reportable:
                raise SelectionError(f"{option} {pattern}: {_elsewhere(matched[0])}")
            if option == "--skip":
                skipped.update(spec.id for spec in reportable)
                continue
            chosen.update(spec.id for spec in _chosen(pattern, reportable, level, level_given, prof_given))
    node = [spec for spec in specs if spec.room == "node" and spec.id not in skipped
            and (spec.id in chosen if only else spec.level <= level)]
    prof_ids = {spec.id for spec in specs if spec.room == "prof" and spec.id not in skipped
                and (spec.id in chosen or not only)}
    prof = frozenset(prof_ids) if prof_given and (prof_ids or not only) else None
    if only and not node and prof is None:
        raise SelectionError(f"--only {' '.join(only)}"
                             f"{' --skip ' + ' '.join(skip_ids) if skip_ids else ''} leaves no check to run")
    return Selection(node, prof)


def _chosen(pattern: str, matched: List[Spec], level: int, level_given: bool, prof_given: bool) -> List[Spec]:
    """What ``--only pattern`` runs of the ``matched`` specs ``check`` can report."""
    exact = [spec for spec in matched if spec.id.lower() == pattern.lower()]
    if exact:
        matched = exact
    elif any(spec.level <= level for spec in matched if spec.room == "node"):
        matched = [spec for spec in matched if spec.room != "node" or spec.level <= level]
    profiling = [spec for spec in matched if spec.room == "prof"]
    if profiling and not prof_given and len(profiling) == len(matched):
        raise SelectionError(f"--only {pattern}: {profiling[0].id} reads profiler output: add --prof DIR")
    needed = min((spec.level for spec in matched if spec.room == "node"), default=1)
    if level_given and needed > level and all(spec.level > level for spec in matched if spec.room == "node"):
        first = next(spec for spec in matched if spec.room == "node" and spec.level == needed)
        raise SelectionError(f"{first.id} runs at --level {needed}: add --level {needed}")
    return matched
