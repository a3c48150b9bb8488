"""PyTorch operator sequences a torch_npu fused API replaces (PROF031), matched on the host timeline.

The rules are data (``checks/prof_affinity_apis.yaml``). Each sequence is matched against the outermost
``aten::`` operators of one host thread in time order: the calls the model's Python code made (an
``aten::linear`` is matched, not the ``aten::mm`` it calls). Every operator name a rule mentions becomes one
character of a private alphabet and every other name one filler character, so a rule is a regular expression
of bounded character classes over one string per thread: linear in the timeline, no backtracking blow-up.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

ATEN = "aten::"
OPTIMIZER_STEP = "Optimizer.step#"
STEP_SYNTAX = re.compile(r"^([a-z0-9_]+(?:\|[a-z0-9_]+)*)(\?|\{(\d),(\d)\})?$")
FILLER = "."


class RuleError(ValueError):
    """A rule of the data file that is not in the step syntax."""


@dataclass(frozen=True)
class Rule:
    api: str
    torch_npu: str
    cann: str
    steps: Tuple[Tuple[Tuple[str, ...], int, int], ...]   # (names, fewest, most) per step

    @property
    def text(self) -> str:
        return "-".join("|".join(names) + ("" if (low, high) == (1, 1) else "?" if (low, high) == (0, 1)
                                           else f"{{{low},{high}}}") for names, low, high in self.steps)


def parse_step(step: Any) -> Tuple[Tuple[str, ...], int, int]:
    matched = STEP_SYNTAX.match(str(step))
    if matched is None:
        raise RuleError(f"step {str(step)[:60]!r} is not name[|name...][?|{{m,n}}]")
    names = tuple(matched.group(1).split("|"))
    if matched.group(2) is None:
        return names, 1, 1
    if matched.group(2) == "?":
        return names, 0, 1
    low, high = int(matched.group(3)), int(matched.group(4))
    if low > high:
        raise RuleError(f"step {step!r}: {low} > {high}")
    return names, low, high


def rules_of(data: Mapping[str, Any]) -> Tuple[List[Rule], Dict[str, str]]:
    """The sequence rules and the optimizer map of the data file (RuleError on a malformed entry)."""
    rules: List[Rule] = []
    for entry in data.get("apis") or []:
        for sequence in entry.get("sequences") or []:
            steps = tuple(parse_step(step) for step in sequence)
            if not any(low > 0 for _, low, _ in steps):
                raise RuleError(f"{entry.get('api')}: a sequence needs one required step")
            rules.append(Rule(str(entry.get("api")), str(entry.get("torch_npu") or ""), str(entry.get("cann") or ""),
                              steps))
    optimizers = {str(k): str(v) for k, v in (data.get("optimizers") or {}).items()}
    return rules, optimizers


@functools.lru_cache(maxsize=1)
def shipped() -> Tuple[List[Rule], Dict[str, str]]:
    from npudoctor.knowledge import load

    return rules_of(load("prof_affinity_apis"))


def outermost_calls(timeline: Any) -> Dict[int, List[int]]:
    """Per host thread, the indices of the operator calls not nested in another call of that thread, in
    time order."""
    by_thread: Dict[int, List[int]] = {}
    for index, thread in enumerate(timeline.torch_thread):
        by_thread.setdefault(thread, []).append(index)
    starts, ends = timeline.torch_start, timeline.torch_end
    out: Dict[int, List[int]] = {}
    for thread, indices in by_thread.items():
        indices.sort(key=lambda i: (starts[i], -ends[i]))
        kept: List[int] = []
        outer_end = float("-inf")
        for i in indices:
            if starts[i] >= outer_end:
                kept.append(i)
                outer_end = ends[i]
        out[thread] = kept
    return out


def _pattern(rule: Rule, alphabet: Mapping[str, str]) -> re.Pattern[str]:
    parts = []
    for names, low, high in rule.steps:
        chars = "".join(sorted({alphabet[name] for name in names}))
        quantifier = "" if (low, high) == (1, 1) else f"{{{low},{high}}}"
        parts.append(f"[{chars}]{quantifier}")
    return re.compile("".join(parts))


def find(timeline: Any, rules: Sequence[Rule], optimizers: Mapping[str, str]) -> Dict[str, Dict[str, Any]]:
    """Per fused API: how often its sequences occur (calls), the host time of the matched operators, the
    rule text, the versions it needs and the first call-stack frames where it was found."""
    names = {i: n for n, i in timeline.torch_names.items()}
    frames = {i: f for f, i in timeline.torch_frames.items()}
    mentioned = sorted({name for rule in rules for step in rule.steps for name in step[0]})
    alphabet = {name: chr(0xE000 + index) for index, name in enumerate(mentioned)}
    char_of = {i: alphabet.get(n[len(ATEN):], FILLER) if n.startswith(ATEN) else FILLER for i, n in names.items()}
    found: Dict[str, Dict[str, Any]] = {}

    def record(api: str, rule_text: str, calls: Sequence[int], needs: Dict[str, str]) -> None:
        entry = found.setdefault(api, {"api": api, "calls": 0, "host_us": 0.0, "sequences": [], "where": [],
                                       **needs})
        entry["calls"] += 1
        entry["host_us"] += sum(timeline.torch_end[i] - timeline.torch_start[i] for i in calls)
        if rule_text not in entry["sequences"]:
            entry["sequences"].append(rule_text)
        frame = frames.get(timeline.torch_frame[calls[0]])
        if frame and frame not in entry["where"] and len(entry["where"]) < 5:
            entry["where"].append(frame)

    patterns = [(rule, _pattern(rule, alphabet)) for rule in rules]
    for calls in outermost_calls(timeline).values():
        text = "".join(char_of.get(timeline.torch_op[i], FILLER) for i in calls)
        for rule, pattern in patterns:
            for matched in pattern.finditer(text):
                if matched.end() > matched.start():
                    record(rule.api, rule.text, calls[matched.start():matched.end()],
                           {"torch_npu": rule.torch_npu, "cann": rule.cann})
        for i in calls:
            name = names.get(timeline.torch_op[i], "")
            if name.startswith(OPTIMIZER_STEP):
                kind = name[len(OPTIMIZER_STEP):].split(".", 1)[0]
                fused: Optional[str] = optimizers.get(kind)
                if fused:
                    record(fused, f"{name[:80]} (torch.optim.{kind})", [i], {"torch_npu": "", "cann": ""})
    for entry in found.values():
        entry["host_us"] = round(entry["host_us"], 3)
    return found
