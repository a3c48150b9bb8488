"""Stage ``site``: the node against the values a site profile pins (``inventory:``), e.g. one written by
``npudoctor profile derive`` from a known-good node. Every difference is a finding of its own."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from npudoctor.checks.registry import CheckContext, Outcome, check, fail, passed, skip, warn
from npudoctor.probes.inventory import CHIP_FIELDS, SOFTWARE_FIELDS, SYSTEM_FIELDS, flatten


def _same(expected: Any, actual: Any) -> bool:
    """Pinned and seen values agree; numbers compare as numbers, the rest as text (YAML reads 8.0 as a float
    where the node says "8.0"), lists as sorted lists."""
    if isinstance(expected, (list, tuple)) or isinstance(actual, (list, tuple)):
        return _as_texts(expected) == _as_texts(actual)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)) and not isinstance(expected, bool):
        return float(expected) == float(actual)
    return str(expected).strip() == str(actual).strip()


def _as_texts(value: Any) -> List[str]:
    return sorted(str(item) for item in (value if isinstance(value, (list, tuple)) else [value]))


def compare_pins(ctx: CheckContext, fields: Sequence[str], prefix: str, what: str) -> Iterable[Outcome]:
    pins: Mapping[str, Any] = flatten(ctx.profile.get("inventory", {}) or {})
    pinned: List[Tuple[str, Any]] = [(f"{prefix}{name}", pins[f"{prefix}{name}"]) for name in fields
                                     if f"{prefix}{name}" in pins and pins[f"{prefix}{name}"] is not None]
    if not pinned:
        yield skip(f"profile {ctx.profile.name} pins no {what} (see `npudoctor profile derive`)", subject="profile")
        return
    seen = flatten(ctx.facts("inventory"))
    severity = warn if str(ctx.profile.get("fleet.pin_mismatch", "fail")).lower() == "warn" else fail
    matched: Dict[str, Any] = {}
    for key, expected in pinned:
        actual = seen.get(key)
        if actual is None:
            yield skip(f"the profile pins {key} = {expected!r}, but this node's value could not be read "
                       "(see the stage that reads it)", subject=f"inventory:{key}", evidence={"expected": expected})
        elif _same(expected, actual):
            matched[key] = actual
        else:
            yield severity(f"inventory:{key}", f"{key} is {actual!r}, the profile {ctx.profile.name} pins "
                           f"{expected!r}", evidence={"expected": expected, "actual": actual},
                           fix=_fix(key, expected))
    if matched:
        yield passed("profile", f"{len(matched)} pinned value(s) as expected: "
                     + ", ".join(f"{k}={_short(v)}" for k, v in matched.items()), evidence=matched)


def _short(value: Any) -> str:
    return f"[{len(value)} values]" if isinstance(value, (list, tuple)) else str(value)


def _fix(key: str, expected: Any) -> str:
    if key in ("torch", "torch_npu"):
        return f"pip install '{key}=={expected}'   # in the training environment (--python)"
    if key in ("driver", "firmware", "cann_toolkit", "nnae"):
        return (f"install {key} {expected} as on the reference node (Ascend run packages), or update the "
                "site profile if this node is the new reference")
    if key.startswith("chips."):
        return ("compare `npu-smi info` and `lspci -d 19e5: -vv` with the reference node; reseat or replace "
                "the card, or update the site profile if the difference is intended")
    return "bring the node in line with the reference node, or update the site profile if this is intended"


@check("SITE001", stage="site", title="Chips as the site profile pins them")
def pinned_chips(ctx: CheckContext) -> Iterable[Outcome]:
    """The chips match the site profile's ``inventory.chips``: model, count, HBM per chip, bus ids, PCIe link
    width and speed.

    A node that is one card short, a card in another slot, or a link trained at x8 instead of x16 still
    "works" and drags the whole job down; a site profile derived from a known-good node
    (``npudoctor profile derive``) pins what a good node of this site looks like. Each difference is a
    finding (FAIL, or WARN with ``fleet.pin_mismatch: warn``). Without pinned values: SKIP.
    """
    yield from compare_pins(ctx, CHIP_FIELDS, "chips.", "chips")


@check("SITE002", stage="site", title="Software versions as the site profile pins them")
def pinned_versions(ctx: CheckContext) -> Iterable[Outcome]:
    """Driver, firmware, CANN toolkit and nnae, Python, torch and torch_npu match the site profile's
    ``inventory`` versions.

    Version drift between nodes of one job is a classic cause of HCCL hangs and of results that differ by
    node; the compatibility checks (VER*) say whether a combination can work, this one says whether it is
    the combination the site validated. Each difference is a finding with the version to install.
    """
    yield from compare_pins(ctx, SOFTWARE_FIELDS, "", "versions")


@check("SITE003", stage="site", title="OS and kernel as the site profile pins them")
def pinned_system(ctx: CheckContext) -> Iterable[Outcome]:
    """The OS release, kernel and architecture match the site profile's ``inventory.os/kernel/arch``.

    The Ascend driver is built against specific kernels; a node that booted another kernel may load the
    driver only partly.
    """
    yield from compare_pins(ctx, SYSTEM_FIELDS, "", "OS or kernel")
