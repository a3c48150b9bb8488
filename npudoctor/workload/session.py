"""One ``npudoctor train-step`` run, end to end: torch and the device, the training, the numerics, the verdicts.

The engine of the command (the CLI only checks its options and renders), usable from a script::

    document, report = session.run(session.StepRequest(TrainOptions(steps=30)), api.load_profile())

torch is imported here only when :func:`run` is called.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

from npudoctor.errors import InputError
from npudoctor.knowledge import setting
from npudoctor.model.finding import Report
from npudoctor.model.profile import NodeProfile
from npudoctor.workload import leak, train
from npudoctor.workload.train import TrainOptions


class StepRequest(NamedTuple):
    train: TrainOptions  # what to train; ``inject_leak`` as given ("1MiB", "graph"); thresholds come from the profile
    ops: bool = False  # also compare single operators with a float64 CPU reference
    compare_cpu: bool = False  # also compare one seeded step with the CPU


class StepUnusable(InputError):
    """The run cannot start or its inputs are unusable (no torch, no such device, bad weights): a usage error,
    one line."""


class _Silent:
    """A progress sink that shows nothing (for scripts)."""

    enabled = False

    def update(self, label: str, detail: str = "") -> None:
        pass


def step_progress(progress: Any, label: str) -> Optional[Callable[[int, int, Optional[float], float], None]]:
    """Training steps on a progress line: step, loss and step time (None when the progress shows nothing)."""
    if not progress.enabled:
        return None

    def show(step: int, steps: int, loss: Optional[float], step_s: float) -> None:
        loss_text = f"{loss:.3f}" if loss is not None else "nan"
        progress.update(label, detail=f"step {step + 1}/{steps}  loss {loss_text}  {step_s * 1000:.0f} ms/step")

    return show


def run(request: StepRequest, profile: NodeProfile, progress: Any = None,
        on_device: Optional[Callable[[Any], None]] = None) -> Tuple[Dict[str, Any], Report]:
    """Train, compare and judge; returns the result document (``npudoctor.trainresult/1``) and its report
    (TRN findings). ``on_device(device)`` is called once the device is chosen, before training (the CLI prints
    its header then). A run that fails on the device is a FAIL finding, not an exception; unusable inputs
    raise :class:`StepUnusable`."""
    from npudoctor.workload import device as devices

    given = request.train
    progress = progress if progress is not None else _Silent()
    try:
        leak_value = train.parse_leak(str(given.inject_leak)) if given.inject_leak else None
    except ValueError as exc:
        raise StepUnusable(f"--inject-leak {exc}") from None
    if given.weights:  # a file that is not tensors (or too many of them) is refused before torch loads
        from npudoctor.workload import clip

        try:
            clip.inspect_weights(given.weights)
        except clip.WeightsError as exc:
            raise StepUnusable(str(exc)) from None
    try:
        progress.update("importing torch")
        devices.import_torch()
        progress.update("choosing the device")
        device = devices.select_device(given.device)
    except (devices.TorchMissing, devices.DeviceUnavailable) as exc:
        raise StepUnusable(str(exc)) from None
    if on_device is not None:
        on_device(device)

    from npudoctor.workload import clip, numerics
    from npudoctor.workload.findings import train_report
    from npudoctor.workload.selftest import result_document

    options = replace(given, inject_leak=leak_value, loss_drop_min=float(setting(profile, "train.loss_drop_min")),
                      leak_settings=leak.LeakSettings.from_mapping(profile.get("train.leak")))
    failure: Optional[str] = None
    result = op_results = comparison = None
    try:
        label = f"training {given.model} CLIP on {device.name}"
        progress.update(label)
        result = train.run(options, device, progress=step_progress(progress, label))
        if result.interrupted:
            pass  # Ctrl-C: judge the steps recorded, compare nothing more
        elif request.ops:
            progress.update(f"comparing operators on {device.name} with float64 on the CPU")
            op_results = numerics.compare_ops(
                device, float(setting(profile, "train.ops_tolerance")))
        if request.compare_cpu and not result.interrupted:
            progress.update(f"comparing one step on {device.name} with the CPU")
            state = clip.load_state_dict_file(given.weights) if given.weights else None
            config = clip.config_from_state_dict(state) if state is not None else clip.CONFIGS[given.model]
            comparison = numerics.compare_step(
                device, config, batch=min(given.batch, 8), seed=given.seed, weights=state,
                loss_tolerance=float(setting(profile, "train.compare_cpu.loss_rtol")),
                grad_tolerance=float(setting(profile, "train.compare_cpu.grad_norm_rtol")))
    except clip.WeightsError as exc:
        raise StepUnusable(str(exc)) from None
    except OSError as exc:
        raise StepUnusable(f"{exc.filename or ''}: {exc.strerror or exc}") from None
    except Exception as exc:  # the device could not train (out of memory, a kernel error): a FAIL finding
        failure = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:1000]
    document = result_document(device, result, op_results, comparison,
                               torch_version=devices.import_torch().__version__,
                               stage="train" if failure else "done", error=failure)
    injected = str(given.inject_leak) if leak_value is not None else None
    return document, train_report(document, profile, injected=injected)
