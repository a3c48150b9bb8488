"""``npudoctor prof run``: run a command under the CANN profiler ``msprof``, bounded in time.

The one place the profiling doctor starts processes. The profiled command runs in its own process group with
the terminal's stdout/stderr (its output passes through untouched); it is stopped after a timeout, and Ctrl-C
stops the whole group (SIGINT first so msprof can flush, then SIGTERM, then SIGKILL) while what was written is
still analysed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import stat
import subprocess
import time
from typing import Dict, List, NamedTuple, Optional, Sequence

from npudoctor.probes.ascend_layout import ASCEND, HOME_VARIABLES
from npudoctor.probes.proctree import ProcessTree, Terminated, stop_on_sigterm

# Guides on the web call the profiler "npu-prof"; no CANN package ships such a command, but a site may have a
# wrapper by that name (taking msprof's options): it is preferred when present.
SITE_WRAPPER = "npu-prof"
PROFILER_SUBPATHS = ("tools/profiler/bin/msprof", "bin/msprof")
GRACE_S = 10.0

MISSING = ("msprof not found (on PATH, in $ASCEND_HOME_PATH/tools/profiler/bin or "
           f"{ASCEND}/ascend-toolkit/latest/tools/profiler/bin): it ships with the CANN toolkit package "
           "(Ascend-cann-toolkit_<version>_linux-<arch>.run; source its set_env.sh)")
TORCH_SNIPPET = """\
without msprof, profile from the training script with torch_npu's profiler:
    import torch_npu
    from torch_npu import profiler
    config = profiler._ExperimentalConfig(
        aic_metrics=profiler.AiCMetrics.PipeUtilization,
        profiler_level=profiler.ProfilerLevel.Level1)
    with profiler.profile(
            activities=[profiler.ProfilerActivity.CPU,
                        profiler.ProfilerActivity.NPU],
            schedule=profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
            on_trace_ready=profiler.tensorboard_trace_handler("./prof_out"),
            profile_memory=True, experimental_config=config) as prof:
        for step, batch in enumerate(loader):
            train_step(batch)
            prof.step()
then: npudoctor prof analyze ./prof_out"""


class RunOutcome(NamedTuple):
    exit_code: int          # the profiler's (and so the command's) exit code; 130 after Ctrl-C; 124 timed out
    interrupted: bool
    timed_out: bool
    new_dirs: List[str]     # PROF_* folders this run wrote
    export_problems: List[str]


def find_msprof(environ: Optional[Dict[str, str]] = None, ascend_base: str = ASCEND) -> Optional[str]:
    """The profiler to run: a site ``npu-prof`` wrapper, ``msprof`` on PATH, or msprof in the CANN install."""
    env = dict(os.environ if environ is None else environ)
    path = env.get("PATH", os.defpath)
    for name in (SITE_WRAPPER, "msprof"):
        found = shutil.which(name, path=path)
        if found:
            return found
    homes = [env[v] for v in HOME_VARIABLES if env.get(v)]
    homes += [f"{ascend_base}/ascend-toolkit/latest", f"{ascend_base}/cann"]
    for home in homes:
        for sub in PROFILER_SUBPATHS:
            candidate = os.path.join(home, sub)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None


def msprof_command(msprof: str, output: str, command: Sequence[str], aic_metrics: Optional[str]) -> List[str]:
    args = [msprof, f"--output={output}"]
    if aic_metrics:
        args.append(f"--aic-metrics={aic_metrics}")
    # --application="<cmd args>" is understood by every msprof release (the bare trailing form is newer).
    args.append(f"--application={shlex.join(list(command))}")
    return args


def _prof_entries(output: str) -> List[str]:
    try:
        return sorted(n for n in os.listdir(output) if n.startswith("PROF_"))
    except OSError:
        return []


def _is_folder(path: str) -> bool:
    """A real folder (not a link, FIFO or file: a ``PROF_x`` FIFO would block, a file is no collection)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _stop(tree: ProcessTree, grace_s: float) -> None:
    """SIGINT to the whole tree (msprof stops collecting and flushes), then SIGTERM, then SIGKILL."""
    tree.stop((signal.SIGINT, signal.SIGTERM), grace_s)


def run_profiled(msprof: str, output: str, command: Sequence[str], aic_metrics: Optional[str] = None,
                 timeout_s: float = 86400.0, export_timeout_s: float = 1800.0,
                 grace_s: float = GRACE_S, stdout_to_stderr: bool = False) -> RunOutcome:
    """Run ``command`` under ``msprof`` writing into ``output``; export what the run left unexported.

    ``stdout_to_stderr``: the command's stdout goes to our stderr (so a JSON/JUnit report on stdout stays clean).
    """
    os.makedirs(output, exist_ok=True)
    before = set(_prof_entries(output))
    args = msprof_command(msprof, output, command, aic_metrics)
    tree = ProcessTree()
    with stop_on_sigterm():
        process = subprocess.Popen(args, start_new_session=True, stdout=2 if stdout_to_stderr else None)
        tree.watch(process.pid)
        interrupted = timed_out = False
        deadline = time.monotonic() + timeout_s
        try:  # Ctrl-C anywhere in the loop (also during a refresh) is an interruption, not a traceback
            while True:
                try:
                    code = process.wait(timeout=max(0.05, min(1.0, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    pass
                tree.refresh()  # keeps sight of a detaching child where no subreaper is possible
                if time.monotonic() >= deadline:
                    timed_out = True
                    code = 124
                    break
        except Terminated:  # SIGTERM/SIGHUP: the tree is stopped below, then npudoctor ends (128 + the signal)
            raise
        except KeyboardInterrupt:
            interrupted = True
            code = 130
        finally:
            # What the command left running (a background child, a setsid daemon, one that ignores SIGTERM) is
            # stopped too, on a timeout, Ctrl-C or a normal exit alike.
            _stop(tree, grace_s)
            process.wait()
    problems = []
    new_dirs = []
    for name in _prof_entries(output):
        path = os.path.join(output, name)
        if name in before:
            continue
        if not _is_folder(path):
            problems.append(f"{path}: not a folder (a file, FIFO or link named PROF_*), not read")
            continue
        new_dirs.append(path)
        if not _is_folder(os.path.join(path, "mindstudio_profiler_output")) and not any(
                _is_folder(os.path.join(path, d, "summary")) for d in _listdir(path)):
            problems.extend(export(msprof, path, export_timeout_s))
    return RunOutcome(code, interrupted, timed_out, new_dirs, problems)


def _listdir(path: str) -> List[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def export(msprof: str, prof_dir: str, timeout_s: float) -> List[str]:
    """``msprof --export=on --output=PROF_DIR`` (bounded); the problems, if any, as lines."""
    tree = ProcessTree()
    process = subprocess.Popen([msprof, "--export=on", f"--output={prof_dir}"], start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tree.watch(process.pid)
    try:
        _, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(tree, GRACE_S)
        return [f"{prof_dir}: msprof --export did not finish within {timeout_s:g} s"]
    except KeyboardInterrupt:
        _stop(tree, GRACE_S)
        return [f"{prof_dir}: msprof --export interrupted"]
    finally:
        tree.stop(grace_s=GRACE_S)  # nothing the export started outlives it
        process.wait()
    if process.returncode != 0:
        last = (err or b"").decode("utf-8", errors="replace").strip().splitlines()[-1:] or ["no message"]
        return [f"{prof_dir}: msprof --export exited {process.returncode}: {last[0][:200]}"]
    return []
