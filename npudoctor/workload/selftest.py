"""The workload verdicts as one JSON document (``npudoctor.trainresult/1``), and the child that
``npudoctor check --level 3`` runs: ``python -m npudoctor.workload.selftest [--steps N] [--settings JSON]``.

The child prints ``NPUDOCTOR-STAGE <name>`` before each stage (so a hang or a crash names where it was) and
``NPUDOCTOR-RESULT <json>`` at the end. It needs torch (and psutil for RSS), not npudoctor's other
dependencies, so it also runs under a training interpreter that only has npudoctor on its path.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

from npudoctor.knowledge import setting
from npudoctor.model.profile import NodeProfile
from npudoctor.workload import leak

SCHEMA = "npudoctor.trainresult/1"


def result_document(device: Any = None, train: Any = None, ops: Optional[List[Any]] = None, compare: Any = None,
                    torch_version: Optional[str] = None, error: Optional[str] = None,
                    torch_missing: Optional[str] = None, stage: str = "",
                    ops_audit: Optional[Dict[str, Any]] = None, ops_audit_error: Optional[str] = None
                    ) -> Dict[str, Any]:
    """The document the TRN checks read (``npudoctor/checks/workload.py``); every part may be missing."""
    return {
        "schema": SCHEMA,
        "torch": torch_version,
        "torch_missing": torch_missing,
        "device": device.name if device is not None else None,
        "device_reason": device.reason if device is not None else None,
        "train": train.to_dict() if train is not None else None,
        "ops": [op.__dict__ for op in ops] if ops is not None else None,
        "compare_cpu": compare.__dict__ if compare is not None else None,
        "error": error,
        "stage": stage,
        # The reference step's operators judged against the installed torch_npu's own list (TRN006).
        "ops_audit": ops_audit,
        "ops_audit_error": ops_audit_error,
    }


def _audit_operators() -> tuple:
    """(summary, None) of the reference step's operator audit, or (None, why not): only where torch_npu is
    installed (its own list says what falls back); the audit runs on the CPU, whatever the device."""
    try:
        from npudoctor.ops.oplist import OpListError
        from npudoctor.workload.opaudit import audit_summary
    except ImportError as exc:  # an npudoctor without the ops room
        return None, f"operator audit unavailable ({exc})"
    try:
        return audit_summary(), None
    except OpListError as exc:
        return None, str(exc)
    except Exception as exc:  # the audit must never cost the training verdicts
        return None, f"operator audit failed: {type(exc).__name__}: {exc}"[:300]


def _stage(name: str) -> None:
    print(f"NPUDOCTOR-STAGE {name}", flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npudoctor.workload.selftest")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--steps", type=int, help="default: the profile's train.steps")
    parser.add_argument("--batch", type=int, help="default: the profile's train.batch")
    parser.add_argument("--settings", default="{}", help="JSON: train.* profile keys")
    args = parser.parse_args(argv)
    # What the profile leaves out is the shipped profiles/default.yaml's, as everywhere (no default here).
    profile = NodeProfile("selftest", {"train": json.loads(args.settings)})

    from npudoctor.workload import device as devices
    from npudoctor.workload import numerics, train

    stage = "import torch"
    try:
        _stage(stage)
        try:
            torch = devices.import_torch()
        except devices.TorchMissing as exc:
            print("NPUDOCTOR-RESULT " + json.dumps(result_document(torch_missing=str(exc), stage=stage)))
            return 0
        stage = "select device"
        _stage(stage)
        device = devices.select_device(args.device)
        stage = "train"
        _stage(stage)
        options = train.TrainOptions(
            device=args.device, model="tiny", batch=args.batch or int(setting(profile, "train.batch")),
            steps=args.steps or int(setting(profile, "train.steps")),
            loss_drop_min=float(setting(profile, "train.loss_drop_min")),
            leak_settings=leak.LeakSettings.from_mapping(profile.get("train.leak")))
        result = train.run(options, device)
        stage = "operators"
        _stage(stage)
        ops = numerics.compare_ops(device, float(setting(profile, "train.ops_tolerance")))
        stage = "compare with the cpu"
        _stage(stage)
        compare = numerics.compare_step(device, train.CONFIGS["tiny"],
                                        loss_tolerance=float(setting(profile, "train.compare_cpu.loss_rtol")),
                                        grad_tolerance=float(setting(profile, "train.compare_cpu.grad_norm_rtol")))
        stage = "operator audit"
        _stage(stage)
        ops_audit, ops_audit_error = _audit_operators()
        document = result_document(device, result, ops, compare, torch_version=torch.__version__, stage="done",
                                   ops_audit=ops_audit, ops_audit_error=ops_audit_error)
    except devices.DeviceUnavailable as exc:
        document = result_document(error=str(exc), stage=stage)
    except Exception as exc:  # the verdict is "the device cannot train": report what broke, never a traceback only
        import traceback

        traceback.print_exc()
        document = result_document(error=f"{type(exc).__name__}: {exc}"[:1000], stage=stage)
    print("NPUDOCTOR-RESULT " + json.dumps(document, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
