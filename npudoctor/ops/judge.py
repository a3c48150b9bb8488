"""Judge a recording against a torch_npu operator list: native, fallback, decomposed or unknown (torch-free).

For each operator the program reached, in the order the dispatcher decides on the NPU:

- ``native``: torch_npu registers an NPU kernel for it (it is in the release's list);
- ``decomposed``: no NPU kernel, but torch has a composite kernel for it that runs on any device; the operators
  that kernel calls (its ``parts``, recorded by running it) are reached instead and judged in turn;
- ``fallback``: an ``aten::``/``npu::`` operator with neither: torch_npu's boxed fallback copies its inputs to the
  host and runs it on the CPU ("will fall back to run on the CPU");
- ``unknown``: another namespace (``torchvision::nms``, a site's custom op): torch_npu's list does not cover it;
  the package that defines it may register an NPU kernel of its own (torchvision_npu does for torchvision).

Counts on the NPU follow the decompositions: a part is reached as often as its decomposed parents call it.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from npudoctor.untrusted import clean_value

SCHEMA = "npudoctor.ops/1"
VERDICTS = ("fallback", "unknown", "decomposed", "native")
COMPOSITE_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
# Namespaces torch_npu's own fallback is the last word for (its list covers them).
COVERED_NAMESPACES = ("aten", "npu", "prims")


class JudgedOp(NamedTuple):
    name: str                          # as torch prints it: "aten::isin.Tensor_Tensor_out"
    verdict: str                       # one of VERDICTS
    calls: int                         # calls the NPU would make (decompositions followed); JSON "count"
    reason: str                        # one line for people
    into: Tuple[str, ...] = ()         # decomposed: the operators its composite kernel calls
    sites: Tuple[Tuple[str, int], ...] = ()   # call sites in the program, most frequent first
    dtypes: Tuple[Tuple[str, int], ...] = ()  # input dtype signatures, most frequent first
    backward: int = 0                  # calls made by the autograd engine (backward pass)
    via: Tuple[str, ...] = ()          # the decomposed operators it was reached through, if any

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "verdict": self.verdict, "count": self.calls, "reason": self.reason,
                "into": list(self.into), "via": list(self.via), "backward": self.backward,
                "sites": [{"site": s, "count": n} for s, n in self.sites],
                "dtypes": [{"dtypes": d, "count": n} for d, n in self.dtypes]}


class AuditResult(NamedTuple):
    ops: List[JudgedOp]                # fallbacks first, then unknown, decomposed, native; by count within
    op_list: Any                       # the oplist.OpList used
    torch: str                         # the torch the program ran with
    calls: int                         # operator calls recorded
    run: Dict[str, Any]                # how the program ran (exit code, timed out, error line, seconds, ...)
    notes: List[str]

    def by_verdict(self, verdict: str) -> List[JudgedOp]:
        return [op for op in self.ops if op.verdict == verdict]

    @property
    def fallbacks(self) -> List[JudgedOp]:
        return self.by_verdict("fallback")

    def counts(self) -> Dict[str, int]:
        return {verdict: len(self.by_verdict(verdict)) for verdict in VERDICTS}

    def verdict_line(self) -> str:
        """``3 operators of 212 fall back to the CPU on torch_npu 2.1.0.post10: aten::isin... (x480), ...``."""
        release = f"torch_npu {self.op_list.release}" if self.op_list.release else "this torch_npu"
        reached = len(self.ops)
        if not reached:
            return f"No operator was dispatched: nothing to judge against {release}"
        fallbacks = self.fallbacks
        unknown = self.by_verdict("unknown")
        if not fallbacks:
            line = (f"All {reached} operators run on the NPU with {release}" if reached > 1 else
                    f"The one operator reached runs on the NPU with {release}")
            if unknown:
                line = (f"No operator of {reached} falls back to the CPU on {release}; {len(unknown)} "
                        f"{'is' if len(unknown) == 1 else 'are'} not covered by its list: "
                        + _names(unknown))
            return line
        line = (f"{len(fallbacks)} operator{'s' if len(fallbacks) != 1 else ''} of {reached} "
                f"fall{'s' if len(fallbacks) == 1 else ''} back to the CPU on {release}: " + _names(fallbacks))
        return line

    def exit_code(self, fail_on: Optional[str]) -> int:
        return 1 if fail_on == "fallback" and self.fallbacks else 0

    def to_dict(self) -> Dict[str, Any]:
        # The script's arguments, paths and error line are the user's text: redacted and printable, as findings are
        return clean_value({"schema": SCHEMA, "op_list": self.op_list.to_dict(), "torch": self.torch,
                            "calls": self.calls, "run": dict(self.run),
                            "summary": {"operators": len(self.ops), **self.counts()},
                            "verdict": self.verdict_line(), "notes": list(self.notes),
                            "operators": [op.to_dict() for op in self.ops]})


def _names(ops: Sequence[JudgedOp], limit: int = 3) -> str:
    shown = ", ".join(f"{op.name} (x{op.calls})" for op in ops[:limit])
    return shown + (f" and {len(ops) - limit} more" if len(ops) > limit else "")


def _namespace(name: str) -> str:
    return name.split("::", 1)[0] if "::" in name else ""


_CONTROL = {code: "?" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def _printable(text: str) -> str:
    """A file name or dtype from the program, with control characters replaced (they reach a terminal)."""
    return text.translate(_CONTROL)[:300]


def _top(table: Dict[str, Any]) -> Tuple[Tuple[str, int], ...]:
    pairs = [(_printable(str(k)), int(v)) for k, v in table.items() if isinstance(v, int)]
    return tuple(sorted(pairs, key=lambda item: (-item[1], item[0])))


# Implementations a CompositeImplicitAutograd operator picks *for the CPU*; the audit sees the pick, not the
# composite (it decomposes before the dispatcher's Python key). On the NPU the same composite runs torch_npu's own
# kernel when the release registers one (torch_npu overrides these composites), else its generic decomposition;
# either way the CPU's pick is not reached. From torch's source: aten/src/ATen/native/transformers/attention.cpp
# (``_fused_sdp_choice`` on the CPU -> ``_scaled_dot_product_flash_attention_for_cpu``) and
# aten/src/ATen/native/RNN.cpp (``lstm`` on the CPU with oneDNN -> ``mkldnn_rnn_layer``).
DEVICE_CHOICES: Dict[str, Tuple[str, ...]] = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("aten::scaled_dot_product_attention",),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": ("aten::scaled_dot_product_attention",),
    "aten::mkldnn_rnn_layer": ("aten::lstm.input", "aten::lstm.data"),
    "aten::mkldnn_rnn_layer_backward": ("aten::lstm.input", "aten::lstm.data"),
}


def _own_verdict(name: str, record: Dict[str, Any], native: frozenset) -> Tuple[str, str]:
    if name in native:
        return "native", "torch_npu registers an NPU kernel"
    if name in DEVICE_CHOICES:
        composites = DEVICE_CHOICES[name]
        registered = [c for c in composites if c in native]
        if registered:
            return "native", (f"the CPU's pick inside {composites[0]}; torch_npu registers {registered[0]} "
                              "itself, so the NPU never reaches it")
        return "decomposed", (f"the CPU's pick inside {composites[0]}; on the NPU that composite runs its "
                              "generic decomposition instead")
    kernels = record.get("kernels")
    if not isinstance(kernels, list):
        return "unknown", "the recording does not say which kernels torch has for it"
    parts = [p for p in (record.get("parts") or {}) if p != name]
    if any(key in kernels for key in COMPOSITE_KEYS):
        if parts:
            return "decomposed", "no NPU kernel; torch's composite kernel runs it as " + ", ".join(parts)
        return "decomposed", "no NPU kernel; torch's composite kernel runs it (it dispatches no operator itself)"
    namespace = _namespace(name)
    if namespace in COVERED_NAMESPACES:
        return "fallback", "no NPU kernel and no composite kernel: torch_npu runs it on the CPU"
    return "unknown", (f"torch_npu's list covers aten:: and npu:: only; {namespace or 'its'}:: operators need an "
                       "NPU kernel from their own package, else they fall back to the CPU")


def judge(recording: Dict[str, Any], op_list: Any, run: Optional[Dict[str, Any]] = None,
          notes: Optional[List[str]] = None) -> AuditResult:
    """The verdict for every operator the NPU would reach. ``recording``: :class:`recorder.Recorder`'s dict."""
    ops: Dict[str, Dict[str, Any]] = {
        _printable(str(k)): v for k, v in (recording.get("ops") or {}).items() if isinstance(v, dict)}
    native = frozenset(op_list.operators)
    own = {name: _own_verdict(name, record, native) for name, record in ops.items()}
    # Parents: which decomposed operators call which part, and how often per call of the parent.
    parents: Dict[str, List[Tuple[str, float]]] = {}
    for name, record in ops.items():
        if own[name][0] != "decomposed":
            continue
        observed = max(1, int(record.get("count") or 0) + int(record.get("inner") or 0))
        for part, times in (record.get("parts") or {}).items():
            if part != name and part in ops and isinstance(times, int):
                parents.setdefault(part, []).append((name, times / observed))
    npu_count: Dict[str, float] = {}
    via: Dict[str, Set[str]] = {}

    def count_of(name: str, visiting: Set[str]) -> float:
        if name in npu_count:
            return npu_count[name]
        visiting.add(name)
        total = float(ops[name].get("count") or 0)
        for parent, per_call in parents.get(name, ()):
            if parent in visiting:
                continue
            from_parent = count_of(parent, visiting) * per_call
            if from_parent > 0:
                total += from_parent
                via.setdefault(name, set()).add(parent)
        visiting.discard(name)
        npu_count[name] = total
        return total

    def sites_of(name: str, seen: Set[str]) -> Dict[str, int]:
        """A part's call sites are its decomposed parents' (the program called those)."""
        own_sites = ops[name].get("sites") or {}
        if own_sites or name in seen:
            return dict(own_sites)
        seen.add(name)
        merged: Dict[str, int] = {}
        for parent in sorted(via.get(name, ())):
            for site, times in sites_of(parent, seen).items():
                merged[site] = merged.get(site, 0) + times
        return merged

    judged: List[JudgedOp] = []
    for name, record in ops.items():
        count = count_of(name, set())
        if count <= 0:
            continue  # reached only inside a composite the NPU does not run (its parent is native)
        verdict, reason = own[name]
        into = tuple(p for p in (record.get("parts") or {}) if p != name) if verdict == "decomposed" else ()
        judged.append(JudgedOp(name, verdict, max(1, round(count)), reason, into, _top(sites_of(name, set())),
                               _top(record.get("dtypes") or {}), int(record.get("backward") or 0),
                               tuple(sorted(via.get(name, ())))))
    order = {verdict: index for index, verdict in enumerate(VERDICTS)}
    judged.sort(key=lambda op: (order[op.verdict], -op.calls, op.name))
    all_notes = list(notes or [])
    return AuditResult(judged, op_list, str(recording.get("torch") or "?"), int(recording.get("calls") or 0),
                       dict(run or {}), all_notes)
