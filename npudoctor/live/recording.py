"""Recordings the dashboard plays: a bundle's ``npu-smi info`` samples, and the shipped demo node."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

from npudoctor.errors import InputError
from npudoctor.live.devices import Timeline
from npudoctor.probes.sources import CommandResult

DEMO_BUNDLE = Path(__file__).resolve().parent / "data" / "demo-8x910b3.tar.gz"


class RecordingError(InputError):
    """The recording cannot be played (one line for the user)."""


def timeline_from_bundle(path: str) -> Timeline:
    """The ``npu-smi info`` samples of a bundle (``collect --samples N``), in time order; a bundle without
    samples plays its one ``npu-smi info`` answer as a still picture."""
    from npudoctor.probes.bundle import BundleError, ReplayRunner
    from npudoctor.probes.timeline import NPU_SMI_INFO, SAMPLE_PREFIX

    try:
        runner = ReplayRunner(path)
    except BundleError as exc:
        raise RecordingError(str(exc)) from None
    samples: List[Tuple[float, CommandResult]] = []
    for record in runner.manifest.get("records", []):
        key = record.get("key", "") if isinstance(record, dict) else ""
        if not key.startswith(SAMPLE_PREFIX):
            continue
        answer = runner.answer(key)
        t_s = record.get("t_s")
        if answer is not None and isinstance(t_s, (int, float)):
            samples.append((float(t_s), answer))
    if not samples:
        single = runner.answer(NPU_SMI_INFO.key)
        if single is None or single.error is not None:
            why = f" (npu-smi did not run on that node: {single.error})" if single is not None else ""
            raise RecordingError(f"{path}: the bundle holds no `npu-smi info` answer to play{why}; record "
                                 "one on the node with `npudoctor collect --samples N -o BUNDLE`")
        samples.append((0.0, single))
    name = Path(path).name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        name = name[:-len(suffix)] if name.endswith(suffix) else name
    return Timeline(samples, name=name)


def demo_timeline() -> Timeline:
    """The shipped demo: a busy 8 x 910B3 node, assembled from real npu-smi captures (see its manifest)."""
    return timeline_from_bundle(str(DEMO_BUNDLE))
