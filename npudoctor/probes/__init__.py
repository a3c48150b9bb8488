"""Probes: the only code that touches the system, always through a :class:`~npudoctor.probes.runner.Runner`.

Each area module registers fact providers with :func:`provides`. A provider asks the runner for raw text
(commands, files, listings) and hands it to a pure parser; it returns frozen facts. Its docstring names the
shell commands it is equivalent to.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, Iterable, List

from npudoctor.probes.sources import Command

# Area modules that register providers; imported on first use so that start-up stays fast.
AREAS = ("npudoctor.probes.pci", "npudoctor.probes.npu_smi", "npudoctor.probes.versions",
         "npudoctor.probes.libraries", "npudoctor.probes.hccl", "npudoctor.probes.workload",
         "npudoctor.probes.inventory")

FACTS: Dict[str, Callable[[Any], Any]] = {}
# Per stage, functions naming the slow commands its probes will run for sure (npu-smi takes seconds on a real
# node); they are started side by side before the checks run.
PREFETCH: Dict[str, List[Callable[[Any], Command]]] = {}
_loaded = False


def provides(name: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    def register(func: Callable[[Any], Any]) -> Callable[[Any], Any]:
        if name in FACTS:
            raise ValueError(f"facts {name!r} provided twice")
        FACTS[name] = func
        return func

    return register


def prefetches(stage: str) -> Callable[[Callable[[Any], Command]], Callable[[Any], Command]]:
    def register(func: Callable[[Any], Command]) -> Callable[[Any], Command]:
        PREFETCH.setdefault(stage, []).append(func)
        return func

    return register


def prefetch(stages: Iterable[str], ctx: Any) -> None:
    """Start the slow commands of these stages now; the probes collect their answers when they ask."""
    _load_areas()
    for stage in stages:
        for command_of in PREFETCH.get(stage, ()):
            ctx.runner.prefetch(command_of(ctx))


def _load_areas() -> None:
    global _loaded
    if not _loaded:
        for module in AREAS:
            importlib.import_module(module)
        _loaded = True


def gather(name: str, ctx: Any) -> Any:
    """Gather the facts ``name`` for a check context (``ctx.runner``, ``ctx.profile``, ``ctx.options``)."""
    _load_areas()
    try:
        provider = FACTS[name]
    except KeyError:
        raise KeyError(f"no probe provides facts {name!r}") from None
    return provider(ctx)
