"""``npudoctor ops audit``'s engine: choose the operator list, run the program under the audit, judge.

The program runs in a child interpreter (``python -m npudoctor.ops.child``: the target interpreter, with
npudoctor's directory appended to ``PYTHONPATH`` so its own torch wins) in its own process group, bounded in time:
at the timeout it gets SIGTERM (it writes what it recorded), then SIGKILL. The recording comes back through a
file in a private temporary folder, read bounded and validated field by field (:mod:`npudoctor.ops.recording`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from npudoctor.errors import InputError
from npudoctor.ops import oplist, recording
from npudoctor.ops.judge import AuditResult, judge
from npudoctor.parsers import jsondoc
from npudoctor.probes.proctree import PARENT_VARIABLE, ProcessTree, Terminated, private_folder, stop_on_sigterm

MAX_RECORDING_BYTES = 64 * 1024 * 1024
GRACE_S = 5.0
# Start-up allowed before the audit runs (interpreter + torch import; minutes on a loaded machine or a cold disk).
START_TIMEOUT_S = 300.0
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class OpsError(InputError):
    """The audit cannot run or its input cannot be read (one line)."""


def choose_list(torch_npu: Optional[str], runner: Any = None, python_facts: Any = None) -> oplist.OpList:
    """``--torch-npu PATH|VERSION``; else the torch_npu installed beside the target interpreter (through the
    runner); else the newest shipped list."""
    try:
        if torch_npu:
            if os.path.exists(torch_npu) or os.sep in torch_npu or torch_npu.endswith(".whl"):
                return oplist.read_path(torch_npu)
            return oplist.read_shipped(torch_npu)
        installed = _installed_torch_npu(python_facts)
        if installed is not None and runner is not None:
            location, release = installed
            return oplist.read_installed(runner, location, release)
        releases = oplist.shipped_releases()
        if not releases:
            raise OpsError("no torch_npu operator list: none installed, none shipped; give --torch-npu PATH")
        return oplist.read_shipped(releases[-1])
    except oplist.OpListError as exc:
        raise OpsError(str(exc)) from None


def _installed_torch_npu(python_facts: Any) -> Optional[tuple]:
    if python_facts is None or getattr(python_facts, "error", None):
        return None
    package = python_facts.package("torch_npu")
    if package is None or not getattr(package, "location", ""):
        return None
    return package.location, getattr(package, "version", None)


def list_notes(op_list: oplist.OpList, torch_version: Optional[str]) -> List[str]:
    """What the reader should know about the list: which torch it was built for against the torch here."""
    notes: List[str] = []
    if op_list.kind == "shipped" and op_list.release:
        # The wheel's full name (platform tags) is in the JSON; a person needs the release and the digest.
        notes.append(f"operator list: shipped, read from the torch_npu {op_list.release} wheel"
                     + (f" (sha256 {op_list.sha256[:12]}...)" if op_list.sha256 else ""))
    built_for = _built_for(op_list.release)
    here = (torch_version or "").split("+", 1)[0]
    if built_for and here and not here.startswith(built_for.rsplit(".", 1)[0] + "."):
        notes.append(f"the program ran with torch {here}; torch_npu {op_list.release} is built for torch "
                     f"{built_for}: an overload renamed between them reads as a fallback")
    return notes


def _built_for(release: Optional[str]) -> Optional[str]:
    if not release:
        return None
    from npudoctor import knowledge

    try:
        matrix = knowledge.load("compat_matrix")
    except knowledge.KnowledgeError:
        return None
    for row in (matrix or {}).get("releases") or []:
        if isinstance(row, dict) and oplist.normalize_release(str(row.get("torch_npu"))) == release:
            return str(row.get("torch"))
    return release.split(".post", 1)[0].split("rc", 1)[0]  # torch_npu X.Y.Z is built for torch X.Y.Z


def _child_env(environ: Optional[Dict[str, str]]) -> Dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    existing = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (existing, _PACKAGE_PARENT) if p)
    env[PARENT_VARIABLE] = str(os.getpid())  # the child dies with this process (proctree.guard_parent)
    return env


def _read_recording(path: str) -> Optional[Dict[str, Any]]:
    """The recording, validated field by field (:mod:`npudoctor.ops.recording`; the program could rewrite it);
    None when there is none. A recording that is no JSON object is one line (OpsError)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_RECORDING_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_RECORDING_BYTES:
        raise OpsError(f"the audit's recording is larger than {MAX_RECORDING_BYTES} bytes; refused")
    try:
        document = jsondoc.loads(data, "the audit's recording")
    except jsondoc.JsonDocumentError as exc:
        raise OpsError(f"{exc} (the audited program may have rewritten it); nothing judged") from None
    if not isinstance(document, dict):
        raise OpsError(f"the audit's recording is a JSON {jsondoc.type_name(document)}, not an object (the "
                       "audited program may have rewritten it); nothing judged")
    checked, dropped = recording.validate(document)
    note = recording.damage_note(dropped)
    if note:
        checked["damage"] = note
    return checked


def _wait(process: subprocess.Popen, recording_path: str, timeout_s: float) -> Optional[int]:
    """The exit code, or None when the script ran past ``timeout_s`` (counted from its first snapshot, i.e.
    once the audit runs) or the child never started the audit within :data:`START_TIMEOUT_S`."""
    started = time.monotonic()
    deadline = started + START_TIMEOUT_S
    audit_running = False
    while True:
        if not audit_running and os.path.exists(recording_path):
            audit_running = True
            deadline = time.monotonic() + timeout_s
        try:
            return process.wait(timeout=max(0.01, min(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                return None


def run_script(script: str, args: Sequence[str], python: Optional[str] = None, timeout_s: float = 600.0,
               environ: Optional[Dict[str, str]] = None, stdout_to_stderr: bool = False,
               grace_s: float = GRACE_S, module: str = "npudoctor.ops.child") -> Dict[str, Any]:
    """Run ``script args`` under the audit; the recording with its ``run`` block (how it ended). ``module``:
    the child entry (``npudoctor.workload.opaudit`` runs the reference CLIP step, ``script`` then empty).

    Nothing is left behind however this ends (:mod:`npudoctor.probes.proctree`): the program's whole tree is
    stopped and the private folder removed after a normal exit, a timeout, Ctrl-C or SIGTERM (raised again as
    :class:`~npudoctor.probes.proctree.Terminated` once cleaned up); after a SIGKILL of npudoctor the child
    gets SIGTERM from the kernel and cleans up itself, and the next run removes a folder left over.
    """
    if module == "npudoctor.ops.child" and not os.path.isfile(script):
        raise OpsError(f"{script}: no such script")
    started = time.monotonic()
    timed_out = interrupted = False
    with stop_on_sigterm():
        folder = private_folder("ops")
        try:
            recording_path = os.path.join(folder, "recording.json")
            target = [script] if script else []
            argv = [python or sys.executable, "-m", module, recording_path, *target, *args]
            tree = ProcessTree()
            try:
                try:
                    process = subprocess.Popen(argv, env=_child_env(environ), start_new_session=True,
                                               stdout=2 if stdout_to_stderr else None, stdin=subprocess.DEVNULL)
                except OSError as exc:
                    raise OpsError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
                tree.watch(process.pid)
                code = _wait(process, recording_path, timeout_s)
                if code is None:
                    timed_out = True
                    code = 124
            except Terminated:
                raise
            except KeyboardInterrupt:
                interrupted = True
                code = 130
            finally:
                # The script and whatever it started (a fork, a server, a setsid daemon) go with it, also after
                # a normal exit: SIGTERM, then SIGKILL after grace_s.
                tree.stop(grace_s=grace_s)
            found = _read_recording(recording_path)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    seconds = round(time.monotonic() - started, 3)
    if found is None:
        found = {"ops": {}, "calls": 0, "torch": None}
        run: Dict[str, Any] = {"ended": "no-recording", "error": (
            f"{argv[0]} cannot import torch; the audit runs the script with torch there (pip install "
            "'npudoctor[train]' in that environment)" if code == 3 else
            f"{argv[0]} exited {code} before the audit started (its own error is above)")}
    else:
        run = dict(found.get("run") or {})
    run.pop("started", None)
    run.update({"exit_code": code, "seconds": seconds, "timed_out": timed_out, "interrupted": interrupted,
                "script": script or module, "args": list(args), "python": argv[0]})
    if timed_out:
        run["ended"] = "timed-out"
        run["error"] = f"stopped after the {timeout_s:g} s timeout; what ran until then is judged"
    found["run"] = run
    return found


def failed(run: Dict[str, Any]) -> bool:
    """The program failed on its own (raised, or exited non-zero): what it ran is no audit of the model."""
    if run.get("timed_out") or run.get("interrupted"):
        return False
    return run.get("ended") == "raised" or (run.get("ended") == "exited" and run.get("exit_code") != 0) or (
        run.get("ended") == "returned" and run.get("exit_code") not in (0, None))


def run_line(run: Dict[str, Any]) -> str:
    """How the program ended, one line: ``train.py exited 0 after 2.3 s`` / ``... raised ValueError: ...``."""
    name = os.path.basename(str(run.get("script") or "the program"))
    seconds = run.get("seconds")
    after = f" after {seconds:.1f} s" if isinstance(seconds, (int, float)) else ""
    ended = run.get("ended")
    if ended == "raised":
        return f"{name} raised {run.get('error')}{after}"
    if ended in ("timed-out", "no-recording"):
        return f"{name}: {run.get('error')}"
    if run.get("interrupted"):
        return f"{name} interrupted{after}; what ran until then is judged"
    line = f"{name} exited {run.get('exit_code')}{after}"
    if ended == "running":
        line += " without finishing the audit (os._exit or a crash); judged what the last snapshot holds"
    timing = run.get("timing")
    if isinstance(timing, dict) and timing.get("plain_step_s") and timing.get("audited_step_s"):
        line += (f"; one step {timing['plain_step_s']:.2f} s plain, {timing['audited_step_s']:.2f} s audited "
                 f"({timing['audited_step_s'] / timing['plain_step_s']:.1f}x)")
    if run.get("forks"):
        line += f"; it forked {run['forks']} time(s): the children's operators are not recorded"
    return line


def audit_script(script: str, args: Sequence[str], op_list: oplist.OpList, python: Optional[str] = None,
                 timeout_s: float = 600.0, environ: Optional[Dict[str, str]] = None,
                 stdout_to_stderr: bool = False) -> AuditResult:
    """Run ``script`` under the audit and judge what it dispatched against ``op_list``."""
    found = run_script(script, args, python, timeout_s, environ, stdout_to_stderr)
    return judge(found, op_list, run=found.get("run"), notes=_notes(found, op_list))


def _notes(found: Dict[str, Any], op_list: oplist.OpList) -> List[str]:
    return list_notes(op_list, found.get("torch")) + ([found["damage"]] if found.get("damage") else [])


def audit_reference(model: str, steps: int, op_list: oplist.OpList, python: Optional[str] = None,
                    timeout_s: float = 600.0, environ: Optional[Dict[str, str]] = None,
                    stdout_to_stderr: bool = True) -> AuditResult:
    """The reference CLIP training step (``train-step --model MODEL``) audited like a script."""
    found = run_script("", ["--model", model, "--steps", str(steps)], python, timeout_s, environ,
                       stdout_to_stderr, module="npudoctor.workload.opaudit")
    run = dict(found.get("run") or {})
    run["script"] = f"{model} CLIP step"
    if isinstance(found.get("timing"), dict):
        run["timing"] = found["timing"]
    return judge(found, op_list, run=run, notes=_notes(found, op_list))
