"""Stage ``site``: the node against the values a site profile pins (``inventory:``), e.g. one written by
``npudoctor profile derive`` from a known-good node. Every difference is a finding of its own."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from npudoctor.checks.registry import CheckContext, Outcome, check, fail, passed, setting, skip, warn
from npudoctor.model.inventory import PINNABLE
from npudoctor.model.profile import flatten


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


def compare_pins(ctx: CheckContext, fields: Sequence[str]) -> Iterable[Outcome]:
    pins: Mapping[str, Any] = flatten(setting(ctx, "inventory") or {})
    pinned: List[Tuple[str, Any]] = [(name, pins[name]) for name in fields if pins.get(name) is not None]
    if not pinned:
        yield skip(f"profile {ctx.profile.name} pins no inventory values (see `npudoctor profile derive`)",
                   subject="profile")
        return
    seen = flatten(ctx.facts("inventory"))
    severity = warn if str(setting(ctx, "fleet.pin_mismatch")).lower() == "warn" else fail
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
        shown = ", ".join(f"{k}={_short(v)}" for k, v in list(matched.items())[:4])
        more = ", ..." if len(matched) > 4 else ""
        yield passed("profile", f"{len(matched)} pinned value(s) as expected ({shown}{more})", evidence=matched)


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


@check("SITE001", stage="site", title="Node as the site profile pins it", settings=("fleet.pin_mismatch", "inventory"))
def pinned_inventory(ctx: CheckContext) -> Iterable[Outcome]:
    """The node matches the values its site profile pins under ``inventory:``: chip model, family, count, HBM
    per chip, bus ids, PCIe link width and speed; driver, firmware, CANN toolkit and nnae, Python, torch,
    torch_npu; OS release, kernel and architecture.

    A node that is one card short, has a card in another slot or a link trained at x8 still "works" and drags
    the whole job down; version drift between the nodes of one job is a classic cause of HCCL hangs and of
    results that differ by node. The compatibility checks (VER*) say whether a combination can work; this
    one says whether it is what the site validated. ``npudoctor profile derive BUNDLE -o site.yaml`` writes
    such a profile from a known-good node; each difference is a finding of its own (FAIL, or WARN with
    ``fleet.pin_mismatch: warn``), with the value to install. Delete a pin from the profile to stop checking
    it. Without pinned values: SKIP.

    Fix: install the value the finding names, or delete the pin from the profile.
    """
    yield from compare_pins(ctx, PINNABLE)
