"""One rulebook: every ID npudoctor can report, whatever room decides it, declared once with its documentation.

A :class:`Spec` says what an ID is (room, stage, title, level), what it needs to run (its requirements, the
option or command that produces it), which profile settings it reads, and its documentation: the check's
docstring, or a data rule's text. ``list-checks``, ``explain``, ``--only``/``--skip`` and the tests that
demand a firing case per ID all read this one registry. The same guards hold for every room: a unique ID, a
documentation with a ``Fix`` paragraph, every setting a key of the profile schema.

Pure: it imports no room. The rooms register their specs (node checks with ``checks.registry.check``, the
profiling checks with ``prof.checks.prof_check``, the collective probe's findings, the log rules from their
YAML); ``api.rulebook()`` loads them all.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, TypeVar

from npudoctor.model.profile import PROFILE_SCHEMA

# Who decides an ID, and what a run must be given for that room's IDs to be reported.
ROOMS: Sequence[str] = ("node", "prof", "collective", "logs")
ROOM_NEEDS: Dict[str, str] = {
    "node": "",
    "prof": "--prof DIR",
    "collective": "npudoctor collective",
    "logs": "--logs DIR",
}
FIX_PARAGRAPH = re.compile(r"(?:\A|\n\s*\n)\s*Fix\b")


@dataclass(frozen=True)
class Spec:
    """One reportable ID. ``func`` is the check (its docstring documents it); a rule that is data (a log rule)
    has no function and carries its documentation in ``text``."""

    id: str
    stage: str
    title: str
    func: Optional[Callable[..., Any]] = None
    level: int = 1
    # Check IDs whose failure makes this check meaningless: then it reports SKIP "blocked by ...".
    requires: Sequence[str] = ()
    # The check means nothing without Ascend NPUs (HCCL settings): it skips when the PCI bus shows none.
    needs_npu: bool = False
    room: str = "node"
    # The profile keys (dotted, as in the schema) this ID's verdict depends on.
    settings: Sequence[str] = ()
    text: str = ""

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or "") if self.func is not None else inspect.cleandoc(self.text)

    @property
    def summary(self) -> str:
        return self.doc.split("\n\n", 1)[0].replace("\n", " ")

    @property
    def needs(self) -> str:
        """What a ``check`` run must be given for this ID to be reported ("" when nothing more than its level)."""
        return ROOM_NEEDS[self.room]


REGISTRY: Dict[str, Spec] = {}


def guard(spec: Spec) -> None:
    """The rules every spec keeps, whatever its room (ValueError names the ID and what is wrong)."""
    if spec.room not in ROOMS:
        raise ValueError(f"{spec.id}: unknown room {spec.room!r}")
    if not spec.doc:
        raise ValueError(f"check {spec.id} needs a docstring: it is the check's user documentation")
    if not FIX_PARAGRAPH.search(spec.doc):
        raise ValueError(f"{spec.id}: its documentation needs a paragraph starting with 'Fix'")
    unknown = [key for key in spec.settings if key not in PROFILE_SCHEMA]
    if unknown:
        raise ValueError(f"{spec.id}: settings {', '.join(unknown)} are not profile schema keys")


def register(spec: Spec) -> Spec:
    """Add a spec of a room that is code (node, prof, collective). IDs are never reused or renumbered."""
    if find(spec.id) is not None:
        raise ValueError(f"check id {spec.id} registered twice")
    guard(spec)
    REGISTRY[spec.id] = spec
    return spec


F = TypeVar("F", bound=Callable[..., Any])


def check(check_id: str, stage: str, title: str, room: str, level: int = 1, requires: Sequence[str] = (),
          needs_npu: bool = False, settings: Sequence[str] = ()) -> Callable[[F], F]:
    """The decorator every room registers its checks with: the function's docstring is the documentation."""
    def register_func(func: F) -> F:
        register(Spec(check_id, stage, title, func, level, tuple(requires), needs_npu, room, tuple(settings)))
        return func
    return register_func


def find(check_id: str, extra: Iterable[Spec] = ()) -> Optional[Spec]:
    """The spec of ``check_id`` (any case), among the registered ones and ``extra`` (data rules)."""
    wanted = check_id.lower()
    for spec in [*REGISTRY.values(), *extra]:
        if spec.id.lower() == wanted:
            return spec
    return None


def specs(room: Optional[str] = None, by_id: bool = False) -> List[Spec]:
    """The registered specs (of ``room``), in registration order, or in ID order with ``by_id``.

    A room whose checks register from several modules (prof: checks, host_checks, compute_checks,
    schedule_checks) registers in whatever order those modules were first imported; its reports and listings
    ask ``by_id`` so that PROF022 never follows PROF030 because a test imported one module first.
    """
    chosen = [spec for spec in REGISTRY.values() if room is None or spec.room == room]
    return sorted(chosen, key=lambda spec: spec.id) if by_id else chosen


def crash_detail(exc: BaseException) -> str:
    """What a check that raised reports as its ERROR finding (one wording for every room)."""
    import os
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return f"check crashed: {exc.__class__.__name__}: {exc}{where}"
