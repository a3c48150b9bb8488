"""What one dashboard session watches, decided from its options (the CLI stays thin; tests build it too)."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from typing import Any, Callable, FrozenSet, Optional

from npudoctor.errors import InputError
from npudoctor.knowledge import setting
from npudoctor.live.devices import NodeSampler, ReplaySampler, Sampler


class SessionError(InputError):
    """Bad options or unreadable input: one line for the user (exit code 2)."""


@dataclass
class DashboardConfig:
    """What the dashboard watches. ``check(job_pids)`` runs the node check and returns a Report (called in a
    thread); ``job_pids`` are the followed job's processes (SMI004 passes the chips they hold)."""

    sampler: Sampler
    interval_s: float = 1.0
    follow: Optional[str] = None
    logs_dir: Optional[str] = None
    check: Optional[Callable[[FrozenSet[int]], Any]] = None
    clock: Callable[[], float] = time.time  # wall clock for times shown to people
    poll_clock: Callable[[], float] = time.monotonic  # how old the device data is
    start_polling: bool = True  # tests drive the poller by hand
    title: str = "npudoctor dashboard"
    note: str = ""  # shown under the device table (e.g. what the demo recording is)


def _check_follow(path: str) -> None:
    """A followed log may not exist yet (the job starts later); if it exists it must be a regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise SessionError(f"--follow {path}: no such directory") from None
        return
    except OSError as exc:
        raise SessionError(f"--follow {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise SessionError(f"--follow {path}: not a regular file")


def make_config(replay: Optional[str] = None, demo: bool = False, follow: Optional[str] = None,
                logs_dir: Optional[str] = None, interval_s: float = 1.0, speed: float = 1.0,
                profile: Optional[str] = None, run_check: bool = True) -> DashboardConfig:
    """The session for ``npudoctor dashboard`` options. Raises :class:`SessionError` on bad input."""
    from npudoctor import api
    from npudoctor.checks.npu_smi import JOB_PIDS_OPTION
    from npudoctor.live.recording import DEMO_BUNDLE, RecordingError, demo_timeline, timeline_from_bundle

    if replay and demo:
        raise SessionError("--replay and --demo cannot be used together")
    if follow:
        _check_follow(follow)
    if logs_dir is not None and not os.path.isdir(logs_dir):
        raise SessionError(f"--logs {logs_dir}: not a directory")
    try:
        node_profile = api.load_profile(profile)
    except api.UsageError as exc:
        raise SessionError(str(exc)) from None
    bundle: Optional[str] = None
    sampler: Sampler
    if replay or demo:
        bundle = str(DEMO_BUNDLE) if demo else replay
        try:
            timeline = demo_timeline() if demo else timeline_from_bundle(str(replay))
        except RecordingError as exc:
            raise SessionError(str(exc)) from None
        sampler = ReplaySampler(timeline, speed=speed)  # this machine's CPU is not the recorded node's
    else:
        timeout_s = float(setting(node_profile, "commands.npu_smi_timeout_s"))
        sampler = NodeSampler(api.make_runner(), timeout_s=timeout_s)
    options = {"logs_dirs": (logs_dir,) if logs_dir else ()}
    # The demo recording holds npu-smi answers only: its check is the npu-smi stage (the rest would read
    # "not recorded").
    only = ("npu-smi",) if demo else ()

    def check(job_pids: FrozenSet[int] = frozenset()) -> Any:
        return api.run_checks(api.make_runner(bundle=bundle), node_profile, only=only,
                              options={**options, JOB_PIDS_OPTION: job_pids})

    title = "npudoctor DEMO" if demo else "npudoctor"
    return DashboardConfig(sampler=sampler, interval_s=interval_s, follow=follow, logs_dir=logs_dir,
                           check=check if run_check else None, title=title,
                           note="demo: a recording assembled from real npu-smi captures, readings varied over "
                                "a minute" if demo else "")
