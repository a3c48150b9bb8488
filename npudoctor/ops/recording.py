"""The audit's recording read back: untrusted input, validated field by field (like memlog records).

The audited program runs in the child that writes the recording, so it can rewrite the file: a count of NaN or of
4,000 digits, ``ops`` as a list, ``run`` as a string. Each field is kept only when it has its type and a sane
value; what is not is left out and counted, and the audit says so in one note instead of failing on it.

>>> document, dropped = validate({"torch": "2.1.0", "calls": float("nan"), "ops": [], "run": "x"})
>>> document["calls"], document["ops"], document["run"], dropped
(0, {}, {}, 3)
>>> validate({"ops": {"aten::add.Tensor": {"count": 10 ** 30, "sites": {"a.py:1": 2, "b.py:2": "x"}}}})[0]["ops"]
{'aten::add.Tensor': {'count': 0, 'inner': 0, 'backward': 0, 'dtypes': {}, 'sites': {'a.py:1': 2}, 'parts': {}}}
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

# Counts above this are no count a program made (2^53: the largest a JSON reader keeps exact).
MAX_COUNT = 1 << 53
MAX_NAME = 1024
MAX_TEXT = 2000
RUN_ENDINGS = ("running", "returned", "exited", "stopped", "raised")


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_COUNT


class _Validator:
    def __init__(self) -> None:
        self.dropped = 0

    def count(self, value: Any) -> int:
        """A non-negative integer below :data:`MAX_COUNT` (``None``/absent is 0 and no problem)."""
        if value is None:
            return 0
        if _is_count(value):
            return value
        self.dropped += 1
        return 0

    def seconds(self, value: Any) -> Optional[float]:
        if value is None:
            return None
        if type(value) in (int, float) and math.isfinite(value) and 0 <= value < 1e9:
            return float(value)
        self.dropped += 1
        return None

    def text(self, value: Any, limit: int = MAX_TEXT) -> Optional[str]:
        if value is None:
            return None
        if isinstance(value, str) and len(value) <= limit:
            return value
        self.dropped += 1
        return None

    def mapping(self, value: Any) -> Dict[Any, Any]:
        """A JSON object, else ``{}`` (counted as left out unless absent)."""
        if isinstance(value, dict):
            return value
        if value is not None:
            self.dropped += 1
        return {}

    def table(self, value: Any) -> Dict[str, int]:
        """``{name: count}``: entries with a bad name or count are left out."""
        kept: Dict[str, int] = {}
        for key, times in self.mapping(value).items():
            if isinstance(key, str) and len(key) <= MAX_NAME and _is_count(times):
                kept[key] = times
            else:
                self.dropped += 1
        return kept

    def names(self, value: Any) -> Optional[List[str]]:
        if value is None:
            return None
        if isinstance(value, list) and all(isinstance(item, str) and len(item) <= MAX_NAME for item in value):
            return list(value)
        self.dropped += 1
        return None

    def operator(self, record: Any) -> Optional[Dict[str, Any]]:
        if not isinstance(record, dict):
            self.dropped += 1
            return None
        checked: Dict[str, Any] = {name: self.count(record.get(name)) for name in ("count", "inner", "backward")}
        kernels = self.names(record.get("kernels"))
        if kernels is not None:
            checked["kernels"] = kernels
        for name in ("dtypes", "sites", "parts"):
            checked[name] = self.table(record.get(name))
        return checked

    def run(self, value: Any) -> Dict[str, Any]:
        value = self.mapping(value)
        if not value:
            return {}
        run: Dict[str, Any] = {}
        ended = value.get("ended")
        if ended in RUN_ENDINGS:
            run["ended"] = ended
        elif ended is not None:
            self.dropped += 1
        code = value.get("exit_code")
        if type(code) is int and -(1 << 31) <= code < (1 << 31):
            run["exit_code"] = code
        elif code is not None:
            self.dropped += 1
        error = self.text(value.get("error"))
        if error is not None:
            run["error"] = error
        run["forks"] = self.count(value.get("forks"))
        started = self.seconds(value.get("started"))
        if started is not None:
            run["started"] = started
        return run


def validate(document: Dict[str, Any]) -> Tuple[Dict[str, Any], int]:
    """The recording with only valid fields, and how many fields or entries were left out."""
    check = _Validator()
    ops: Dict[str, Any] = {}
    raw_ops = document.get("ops")
    if isinstance(raw_ops, dict):
        for name, record in raw_ops.items():
            checked = check.operator(record) if isinstance(name, str) and len(name) <= MAX_NAME else None
            if checked is not None:
                ops[name] = checked
            elif not isinstance(name, str) or len(name) > MAX_NAME:
                check.dropped += 1
    elif raw_ops is not None:
        check.dropped += 1
    recording: Dict[str, Any] = {"torch": check.text(document.get("torch"), 200), "calls": check.count(
        document.get("calls")), "ops": ops, "run": check.run(document.get("run"))}
    timing = document.get("timing")
    if isinstance(timing, dict):
        plain, audited = check.seconds(timing.get("plain_step_s")), check.seconds(timing.get("audited_step_s"))
        if plain and audited:
            recording["timing"] = {"plain_step_s": plain, "audited_step_s": audited}
    elif timing is not None:
        check.dropped += 1
    return recording, check.dropped


def damage_note(dropped: int) -> Optional[str]:
    """The one note a damaged recording earns (None when nothing was left out)."""
    if not dropped:
        return None
    return (f"the recording held {dropped} value{'s' if dropped != 1 else ''} of the wrong type or out of range "
            "(the program may have rewritten it): left out of the judgement")
