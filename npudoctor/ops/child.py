"""``python -m npudoctor.ops.child RECORDING SCRIPT [ARGS...]``: run SCRIPT under an :class:`OpAudit`.

Like ``python -m cProfile SCRIPT``: ``sys.argv`` is the script's, its folder comes first on ``sys.path`` and it
runs as ``__main__``. Whatever way it ends (returns, raises, ``sys.exit``, SIGTERM from the parent's timeout) the
recording is written to RECORDING with how it ended; a snapshot is also written every few seconds, so a script
that hangs in C code or calls ``os._exit`` still leaves what was recorded until then. A forked child never writes.

The child dies with npudoctor (:func:`npudoctor.probes.proctree.die_with_parent`: SIGTERM when npudoctor is gone,
even by SIGKILL); then nobody reads the recording, so the child stops what the script started and removes the
recording's folder itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, Dict, List, Optional

SNAPSHOT_EVERY_S = 2.0
_OWNER_PID = os.getpid()


def orphaned(parent: Optional[int]) -> bool:
    return parent is not None and os.getppid() != parent


def leave_nothing(tree: Any, recording_path: str) -> None:
    """npudoctor is gone: stop every process the script started (``tree``, made before it ran) and remove the
    recording's folder."""
    import shutil

    tree.stop(grace_s=2.0)
    shutil.rmtree(os.path.dirname(os.path.abspath(recording_path)), ignore_errors=True)


class _Stopped(BaseException):
    """Raised in the main thread by SIGTERM (the parent's timeout or Ctrl-C)."""


def write_recording(path: str, document: Dict[str, Any]) -> None:
    if os.getpid() != _OWNER_PID:
        return  # a forked child: the recording is the parent's
    partial = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    os.replace(partial, path)


def _user_frame(tb: Any, script: str) -> str:
    frames = traceback.extract_tb(tb)
    mine = [f for f in frames if os.path.abspath(f.filename) == script] or frames
    if not mine:
        return ""
    last = mine[-1]
    return f"{last.filename}:{last.lineno}"


def main(argv: List[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m npudoctor.ops.child RECORDING SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    recording_path, script = argv[0], os.path.abspath(argv[1])
    from npudoctor.probes.proctree import guard_parent

    parent = guard_parent()  # SIGTERM when npudoctor dies, even by SIGKILL
    tree = None
    if parent is not None:
        from npudoctor.probes.proctree import ProcessTree

        tree = ProcessTree()  # a subreaper: what the script detaches stays below, to be stopped if npudoctor dies
    try:
        import torch  # noqa: F401  (the audit records torch's dispatcher: without torch there is nothing to do)
    except ImportError:
        return 3  # the parent says it, in one line
    from npudoctor.ops.recorder import OpAudit

    state: Dict[str, Any] = {"ended": "running", "exit_code": None, "error": None, "forks": 0,
                             "started": time.time()}
    os.register_at_fork(before=lambda: state.__setitem__("forks", state["forks"] + 1))

    def snapshot() -> Dict[str, Any]:
        return {**audit.recording, "run": {**state, "seconds": round(time.time() - state["started"], 3)}}

    def on_term(signum: int, frame: Any) -> None:
        # Once: a second TERM (a user's kill, a launcher's) would cut the final write short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise _Stopped()

    signal.signal(signal.SIGTERM, on_term)
    audit = OpAudit()
    done = threading.Event()

    def snapshots() -> None:
        while not done.wait(SNAPSHOT_EVERY_S):
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                write_recording(recording_path, snapshot())

    sys.argv = [script, *argv[2:]]
    sys.path.insert(0, os.path.dirname(script))
    import runpy

    code = 0
    snapshotter = threading.Thread(target=snapshots, name="npudoctor-ops-snapshots", daemon=True)
    try:
        with audit:
            # The first snapshot says "the audit runs": the parent's timeout counts the script's time from here,
            # not the interpreter's and torch's start-up.
            write_recording(recording_path, snapshot())
            snapshotter.start()
            runpy.run_path(script, run_name="__main__")
        state["ended"] = "returned"
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        state["ended"] = "exited"
    except (_Stopped, KeyboardInterrupt):
        code = 124
        state["ended"] = "stopped"
    except BaseException as exc:  # the script's own error: recorded, reported in one line
        code = 1
        state["ended"] = "raised"
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        where = _user_frame(exc.__traceback__, script)
        state["error"] = f"{type(exc).__name__}: {message}" + (f" ({where})" if where else "")
        traceback.print_exc()
    finally:
        done.set()
        if snapshotter.is_alive():
            snapshotter.join(timeout=10)  # a snapshot being written must not land after the final recording
    state["exit_code"] = code
    if tree is not None and orphaned(parent):
        leave_nothing(tree, recording_path)
        return code
    write_recording(recording_path, snapshot())
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
