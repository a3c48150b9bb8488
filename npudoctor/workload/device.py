"""Which device to train on, and one interface to its memory allocator (npu, cuda and cpu alike).

torch and torch_npu are imported inside functions only. ``torch_npu`` is probed in a child interpreter
before this process imports it: on a node without (or with a broken) CANN, ``import torch_npu`` (and, through
torch's device-backend autoload, even ``import torch``) fails or aborts, and that must not take the caller down.

The NPU and CUDA paths are one code path: ``torch.npu`` (after ``import torch_npu``) mirrors ``torch.cuda``
(``memory_stats``, ``get_device_properties``, ``synchronize``, ``empty_cache``), so :class:`Device` asks
``getattr(torch, kind)``; only the CPU differs (no allocator statistics, RSS only).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from npudoctor.errors import InputError

TRAIN_EXTRA_HINT = "pip install 'npudoctor[train]'   # CPU torch is enough; add torch_npu for NPUs"
NPU_PROBE_TIMEOUT_S = 120.0  # the first torch_npu import on a node initialises CANN (tens of seconds)

NPU_PROBE_SCRIPT = r"""
import torch, torch_npu
print("NPUDOCTOR-NPU", int(torch.npu.is_available()), torch.npu.device_count(), flush=True)
"""


class TorchMissing(InputError):
    """torch is not installed for this interpreter (message: what to install)."""


class DeviceUnavailable(InputError):
    """The requested device cannot be used here (message: why)."""


def import_torch() -> Any:
    """``import torch`` without letting a broken torch_npu autoload abort it; TorchMissing names the extra."""
    if "torch" not in sys.modules:
        if importlib.util.find_spec("torch") is None:
            raise TorchMissing(f"torch is not installed for {sys.executable}: {TRAIN_EXTRA_HINT}")
        # torch >= 2.5 imports every installed device backend (torch_npu) inside `import torch`; a torch_npu
        # without CANN then breaks `import torch` itself. We import torch_npu ourselves, after probing it.
        os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    try:
        import torch
    except ImportError as exc:
        raise TorchMissing(f"import torch failed ({exc}): {TRAIN_EXTRA_HINT}") from None
    return torch


def probe_npu(timeout_s: float = NPU_PROBE_TIMEOUT_S) -> Tuple[bool, str]:
    """Can this interpreter use an NPU? Asked in a child so a broken CANN cannot crash us. (ok, why)."""
    if "torch_npu" in sys.modules:
        torch = sys.modules["torch"]
        return (bool(torch.npu.is_available()), "torch_npu already imported")
    if importlib.util.find_spec("torch_npu") is None:
        return False, "torch_npu is not installed"
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    try:
        done = subprocess.run([sys.executable, "-c", NPU_PROBE_SCRIPT], capture_output=True, text=True,
                              timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        return False, f"import torch_npu did not finish within {timeout_s:.0f} s"
    except OSError as exc:
        return False, f"cannot start {sys.executable}: {exc}"
    for line in done.stdout.splitlines():
        if line.startswith("NPUDOCTOR-NPU "):
            _, available, count = line.split()
            if available == "1" and int(count) > 0:
                return True, f"torch_npu sees {count} NPU(s)"
            return False, "torch_npu is installed but sees no NPU"
    last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return False, f"import torch_npu fails: {last[:200]} (run `npudoctor check --level 2`)"


@dataclass
class Device:
    """A training device: ``kind`` is npu, cuda or cpu; ``reason`` says why it was chosen."""

    kind: str
    index: int
    reason: str

    @property
    def name(self) -> str:
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"

    def torch_device(self) -> Any:
        return import_torch().device(self.name)

    def _module(self) -> Any:
        """``torch.npu`` or ``torch.cuda`` (same interface), None on the CPU."""
        return None if self.kind == "cpu" else getattr(import_torch(), self.kind)

    def synchronize(self) -> None:
        module = self._module()
        if module is not None:
            module.synchronize(self.index)

    def empty_cache(self) -> None:
        module = self._module()
        if module is not None:
            module.empty_cache()

    def total_memory_bytes(self) -> Optional[int]:
        module = self._module()
        if module is None:
            return None
        return int(module.get_device_properties(self.index).total_memory)

    def memory_stats(self) -> Dict[str, Optional[int]]:
        """The allocator's counters in memlog/1 names (all ``None`` on the CPU)."""
        module = self._module()
        if module is None:
            return dict.fromkeys(ALLOCATOR_KEYS)
        stats = module.memory_stats(self.index)
        return {name: _int_or_none(stats.get(key)) for name, key in ALLOCATOR_KEYS.items()}

#: memlog/1 key -> key in ``torch.{cuda,npu}.memory_stats()``
ALLOCATOR_KEYS = {
    "allocated_bytes": "allocated_bytes.all.current",
    "allocated_peak_bytes": "allocated_bytes.all.peak",
    "reserved_bytes": "reserved_bytes.all.current",
    "reserved_peak_bytes": "reserved_bytes.all.peak",
    "active_bytes": "active_bytes.all.current",
    "active_peak_bytes": "active_bytes.all.peak",
    "alloc_retries": "num_alloc_retries",
    "ooms": "num_ooms",
}


def _int_or_none(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) else None


def select_device(wanted: str = "auto", index: int = 0) -> Device:
    """``auto``: npu (torch_npu works), then cuda, then cpu, with the reason; else the named device or
    DeviceUnavailable saying why not."""
    torch = import_torch()
    if wanted in ("auto", "npu"):
        ok, why = probe_npu()
        if ok:
            import torch_npu  # noqa: F401  (registers torch.npu)

            return Device("npu", index, why)
        if wanted == "npu":
            raise DeviceUnavailable(f"--device npu: {why}")
        npu_why = why
    if wanted in ("auto", "cuda"):
        if torch.cuda.is_available():
            return Device("cuda", index, f"CUDA sees {torch.cuda.device_count()} GPU(s)"
                          + (f"; npu: {npu_why}" if wanted == "auto" else ""))
        if wanted == "cuda":
            raise DeviceUnavailable("--device cuda: torch.cuda.is_available() is False "
                                    f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'})")
        return Device("cpu", 0, f"no accelerator: npu: {npu_why}; cuda: not available")
    return Device("cpu", 0, "requested")
