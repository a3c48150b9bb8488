"""Stable check IDs, stage order, and the machinery that turns a check's outcomes into findings.

A check is a function ``(ctx) -> Iterable[Outcome]`` registered with :func:`check`. Its docstring is its
user documentation (``npudoctor explain ID`` prints it): say why it matters and how to fix it. Checks never
touch the system: they read facts through ``ctx.facts(NAME)``, which probes gather through the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from npudoctor.model.finding import Finding, Status
from npudoctor.model.profile import NodeProfile

# Stages run in this order; a check belongs to exactly one.
# "site" compares the node with the values a site profile pins (`npudoctor profile derive`): last, it sums up.
STAGES: Sequence[str] = ("pcie", "npu-smi", "versions", "libraries", "hccl", "logs", "workload", "site")

# The cause shared by every check that cannot apply on a machine without Ascend NPUs.
NOT_AN_ASCEND_NODE = "not an Ascend node"
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


def by_severity(ctx: CheckContext, key: str, default: str) -> Callable[..., Outcome]:
    """:func:`warn` or :func:`fail`, as the profile's severity ``key`` says (``default`` when a profile made
    in code lacks it). One rule for every check: the profile schema admits only ``warn`` and ``fail`` (any
    case, normalised at load), so anything else here is a profile built around the loader, and an error
    rather than a silent guess."""
    level = ctx.profile.get(key, default)
    chosen = {"warn": warn, "fail": fail}.get(str(level).strip().lower())
    if chosen is None:
        raise ValueError(f"profile {ctx.profile.name}: {key}: {level!r} is not a severity (warn or fail)")
    return chosen


CheckFunc = Callable[["CheckContext"], Iterable[Outcome]]


@dataclass(frozen=True)
class CheckSpec:
    id: str
    stage: str
    title: str
    func: CheckFunc
    level: int = 1
    # Check IDs whose failure makes this check meaningless: then it reports SKIP "blocked by ...".
    requires: Sequence[str] = ()
    # The check means nothing without Ascend NPUs (HCCL settings): it skips when an earlier check found
    # that this is not an Ascend node.
    needs_npu: bool = False

    @property
    def doc(self) -> str:
        import inspect

        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.split("\n\n", 1)[0].replace("\n", " ")


REGISTRY: Dict[str, CheckSpec] = {}


def check(
    id: str, stage: str, title: str, level: int = 1, requires: Sequence[str] = (), needs_npu: bool = False
) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check under a stable ``id`` (e.g. ``PCI001``). IDs are never reused or renumbered."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")

    def register(func: CheckFunc) -> CheckFunc:
        if id in REGISTRY:
            raise ValueError(f"check id {id} registered twice")
        if not func.__doc__:
            raise ValueError(f"check {id} needs a docstring: it is the check's user documentation")
        REGISTRY[id] = CheckSpec(id, stage, title, func, level, tuple(requires), needs_npu)
        return func

    return register


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


def _blocked_by(spec: CheckSpec, ctx: CheckContext) -> Optional[Tuple[str, str]]:
    """Why ``spec`` cannot run (a required check did not pass) and which check that is, or None.

    A required check left out by ``--only``/``--skip`` still decides: it runs unreported, so a check never
    reads facts its requirement would have refused (``--only SMI002`` on a node where npu-smi fails).
    """
    for required in spec.requires:
        statuses = ctx.statuses(required)
        if any(s in _BLOCKING for s in statuses):
            return f"blocked by {required}", required
        if statuses or required not in REGISTRY:
            continue
        if required not in ctx.unreported:
            ctx.unreported[required] = []  # a requirement cycle ends here instead of recursing
            ctx.unreported[required] = run_check(REGISTRY[required], ctx)
        for hidden in ctx.unreported[required]:
            if hidden.status in _BLOCKING:
                said = f": {hidden.detail}" if hidden.detail else ""
                return f"requires {required} (not run: it would give {hidden.status.name}{said})", required
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
        reason, required = blocker
        return [finding(skip(reason, cause=cause_of(required, ctx)))]
    if spec.needs_npu and _not_an_ascend_node(ctx):
        return [finding(skip(f"{NOT_AN_ASCEND_NODE} (no Ascend NPU on the PCI bus)",
                             cause=NOT_AN_ASCEND_NODE))]
    try:
        outcomes = list(spec.func(ctx))
    except FactsUnavailable as exc:
        outcomes = [error(str(exc))]
    except Exception as exc:  # a bug in a check must not hide the other checks
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcomes = [error(f"check crashed: {exc.__class__.__name__}: {exc} ({where.filename}:{where.lineno})")]
    if not outcomes:
        outcomes = [error("check returned no outcome")]
    return [finding(o) for o in outcomes]


def select(specs: Iterable[CheckSpec], only: Sequence[str] = (), skip_ids: Sequence[str] = (),
           level: int = 1) -> List[CheckSpec]:
    """Filter by ``--only``/``--skip`` (ids, id prefixes such as ``PCI``, or stage names) and ``--level``."""

    def matches(spec: CheckSpec, patterns: Sequence[str]) -> bool:
        return any(spec.id == p.upper() or spec.id.startswith(p.upper()) or spec.stage == p.lower() for p in patterns)

    chosen = []
    for spec in specs:
        if spec.level > level:
            continue
        if only and not matches(spec, only):
            continue
        if skip_ids and matches(spec, skip_ids):
            continue
        chosen.append(spec)
    return chosen
