"""Record the operators a model dispatches (torch side of the audit; torch is imported only in here, lazily).

A ``TorchDispatchMode`` sees every operator that reaches the dispatcher's Python key: after autograd (so the
backward's operators are seen too, as the autograd engine runs them) and after ``CompositeImplicitAutograd``
decompositions (``aten::linear`` arrives as ``aten::t`` + ``aten::addmm``, as it does on the NPU). For each call it
records the overload's name as torch prints it, the input dtypes, the first caller outside torch (the user's
line) and which dispatch keys have a kernel for it (the dispatcher's own knowledge, never a name guess).

An operator with a ``CompositeExplicitAutograd(NonFunctional)`` kernel is run *through that kernel*, as the NPU
would run it when torch_npu has no kernel of its own: ``redispatch`` to the ``PrivateUse1`` key (torch_npu's key,
empty in a CPU build, so the dispatcher computes the composite kernel for it), with the recorder re-entered, so
the operators the composite calls (``aten::add.Tensor`` -> ``aten::add.out``) are recorded as its parts. The
result is the composite's, equal to the CPU kernel's by torch's contract.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

RECORDING_SCHEMA = "npudoctor.opsrecording/1"
# Dispatch keys asked about each operator (the judge reads them; ``CPU`` only for the record).
KERNEL_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd",
               "CPU", "Meta")
_COMPOSITE_KEYS = KERNEL_KEYS[:2]
MAX_SIGNATURES = 12   # dtype signatures and call sites kept per operator (the rest are counted as "other")
_OWN_DIR = os.path.dirname(os.path.abspath(__file__))


def _skip_prefixes() -> Tuple[str, ...]:
    """Frames that are not the program's: torch's, the audit's own, runpy's."""
    import torch

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    return (torch_dir, os.path.join(_OWN_DIR, "recorder.py"), os.path.join(_OWN_DIR, "child.py"), "<frozen",
            os.path.join(os.path.dirname(os.__file__), "runpy"))


def _bump(table: Dict[str, int], key: str, by: int = 1) -> None:
    if key in table or len(table) < MAX_SIGNATURES:
        table[key] = table.get(key, 0) + by
    else:
        table["other"] = table.get("other", 0) + by


class _Record:
    """One operator's counts (plain containers: the recording is JSON)."""

    __slots__ = ("backward", "count", "dtypes", "inner", "kernels", "parts", "sites")

    def __init__(self, kernels: List[str]) -> None:
        self.count = 0        # calls made by the program itself (not inside a composite kernel)
        self.inner = 0        # calls made by a composite kernel this recorder ran
        self.backward = 0     # calls made while the autograd engine ran a backward node
        self.kernels = kernels
        self.dtypes: Dict[str, int] = {}
        self.sites: Dict[str, int] = {}
        self.parts: Dict[str, int] = {}   # operators its composite kernel called, with how often

    def to_dict(self) -> Dict[str, Any]:
        return {"count": self.count, "inner": self.inner, "backward": self.backward, "kernels": self.kernels,
                "dtypes": dict(self.dtypes), "sites": dict(self.sites), "parts": dict(self.parts)}


def _dtype_signature(args: Any, kwargs: Dict[str, Any]) -> str:
    import torch

    names: List[str] = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            names.append(str(value.dtype).replace("torch.", ""))
        elif isinstance(value, (list, tuple)):
            names.extend(str(v.dtype).replace("torch.", "") for v in value if isinstance(v, torch.Tensor))
    return ",".join(names) if names else "-"


def _tensor_arguments(func: Any, args: Tuple[Any, ...]) -> List[Any]:
    """Python numbers given for ``Tensor`` parameters (``x.add_(1)``) as tensors: the boxed redispatch takes
    no implicit conversion."""
    import torch

    fixed = list(args)
    for index, (value, argument) in enumerate(zip(fixed, func._schema.arguments)):
        if isinstance(value, (bool, int, float, complex)) and str(argument.type) == "Tensor":
            fixed[index] = torch.tensor(value)
    return fixed


def make_mode(recorder: Recorder) -> Any:
    """A ``TorchDispatchMode`` feeding ``recorder`` (the class is made here: torch loads only when auditing)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    npu_keys = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)
    current_node = getattr(torch._C, "_current_autograd_node", lambda: None)
    skip = _skip_prefixes()

    def call_site() -> str:
        frame: Any = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(skip):
            frame = frame.f_back
        if frame is None:
            return "-"
        return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"

    class AuditMode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Tuple[Any, ...] = (),
                               kwargs: Optional[Dict[str, Any]] = None) -> Any:
            kwargs = kwargs or {}
            schema = func._schema
            name = schema.name + ("." + schema.overload_name if schema.overload_name else "")
            stack = recorder.stack
            with recorder.lock:
                record = recorder.ops.get(name)
                if record is None:
                    record = recorder.ops[name] = _Record([k for k in KERNEL_KEYS if has_kernel(name, k)])
                if stack:
                    record.inner += 1
                    parent = recorder.ops[stack[-1]]
                    parent.parts[name] = parent.parts.get(name, 0) + 1
                else:
                    record.count += 1
                    _bump(record.sites, call_site())
                    if current_node() is not None:
                        record.backward += 1
                _bump(record.dtypes, _dtype_signature(args, kwargs))
                recorder.calls += 1
            if name not in stack and any(k in record.kernels for k in _COMPOSITE_KEYS):
                stack.append(name)
                try:
                    with self:
                        return func.redispatch(npu_keys, *_tensor_arguments(func, args), **kwargs)
                except (RuntimeError, TypeError):
                    # The composite refused the boxed call before running (an argument it cannot take
                    # boxed): run the operator as the program asked; its parts stay unrecorded this time.
                    pass
                finally:
                    stack.pop()
            return func(*args, **kwargs)

    return AuditMode()


_WARMED: List[bool] = []


def warm_up() -> None:
    """Dispatch one operator under a throwaway audit: the first ``__torch_dispatch__`` loads parts of torch
    (dynamo's wrappers) for seconds; the program's first operator must not pay that (nor a timeout count it)."""
    if _WARMED:
        return
    import torch

    mode = make_mode(Recorder())
    with mode:
        torch.zeros(1).add(1)
    _WARMED.append(True)


class Recorder:
    """What the audit saw, as plain data (``to_dict`` is the recording the judge reads)."""

    def __init__(self) -> None:
        self.ops: Dict[str, _Record] = {}
        self.stack: List[str] = []
        self.calls = 0
        self.lock = threading.Lock()

    def to_dict(self) -> Dict[str, Any]:
        import torch

        with self.lock:
            ops = {name: record.to_dict() for name, record in self.ops.items()}
            calls = self.calls
        return {"schema": RECORDING_SCHEMA, "torch": str(torch.__version__), "calls": calls, "ops": ops}


class OpAudit:
    """Record every operator a block of code dispatches, on the CPU, to judge it against a torch_npu release::

        from npudoctor.ops import OpAudit

        with OpAudit() as audit:
            loss = model(batch).sum()
            loss.backward()
        result = audit.result(torch_npu="2.1.0.post10")   # or op_list=read_path("torch_npu-...whl")
        for op in result.fallbacks:
            print(op.name, op.count, op.sites)

    Only the thread that entered it is recorded (dispatch modes are thread-local), and not DataLoader worker
    processes. Audits do not nest.
    """

    def __init__(self) -> None:
        self.recorder = Recorder()
        self._mode: Any = None

    def __enter__(self) -> OpAudit:
        warm_up()
        self._mode = make_mode(self.recorder)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        mode, self._mode = self._mode, None
        if mode is not None:
            mode.__exit__(*exc)

    @property
    def recording(self) -> Dict[str, Any]:
        return self.recorder.to_dict()

    def result(self, op_list: Any = None, torch_npu: Optional[str] = None) -> Any:
        """The judged audit (:class:`npudoctor.ops.judge.AuditResult`) against ``op_list``, or the shipped list
        of release ``torch_npu``, or the newest shipped list."""
        from npudoctor.ops import judge, oplist

        if op_list is None:
            op_list = oplist.read_shipped(torch_npu or oplist.shipped_releases()[-1])
        return judge.judge(self.recording, op_list)
