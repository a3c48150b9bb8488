"""Every process a long-running child starts, found and stopped: after npudoctor returns, nothing it started runs.

A process group is not enough: torchrun starts its workers with ``start_new_session=True``, a daemon calls
``setsid``, and a background child whose parent exited is re-parented away from the tree. So the tree is found
through ``/proc`` (each process's parent), and on Linux npudoctor becomes a *child subreaper*
(``PR_SET_CHILD_SUBREAPER``): an orphaned descendant is re-parented to npudoctor instead of init, so it stays
in the tree however it detaches. :meth:`ProcessTree.stop` signals every process of the tree once (through the
group where it is in a root's group), waits for them to be gone (``grace_s`` per signal), and ends with SIGKILL;
adopted orphans are reaped.

The same module holds the rest of "nothing left behind" for every command that starts a program:

* :func:`die_with_parent`: the child asks the kernel for a signal when npudoctor dies (``PR_SET_PDEATHSIG``), so a
  SIGKILL of npudoctor (nothing of it runs then) still ends what it started;
* :func:`stop_on_sigterm`: SIGTERM and SIGHUP (a CI runner's timeout, ``timeout(1)``, a closed terminal) become a
  :class:`Terminated` exception, a ``KeyboardInterrupt``, so the same ``finally`` blocks stop the tree and clean up;
* :func:`private_folder`: a temporary folder under one parent that each run cleans of the folders of runs whose
  process is gone (one killed by SIGKILL could not remove its own).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import tempfile
import time
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Set

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_POLL_S = 0.05
_subreaper: Optional[bool] = None


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); whether that worked."""
    global _subreaper
    if _subreaper is None:
        _subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
    return _subreaper


def _prctl(option: int, value: int) -> bool:
    if not os.path.isdir("/proc/self"):
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def die_with_parent(sig: int = signal.SIGTERM, parent: Optional[int] = None) -> bool:
    """Ask for ``sig`` when the parent process dies (Linux ``PR_SET_PDEATHSIG``); whether that holds. Called in
    the child, early: when the parent (``parent``, its pid as the parent knew it) is already gone, the signal
    is sent at once (the kernel would never send it)."""
    if not _prctl(PR_SET_PDEATHSIG, int(sig)):
        return False
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)
    return True


#: Set by npudoctor in the environment of a Python child it starts: npudoctor's pid (see :func:`guard_parent`).
PARENT_VARIABLE = "NPUDOCTOR_PARENT_PID"


def guard_parent(sig: int = signal.SIGTERM) -> Optional[int]:
    """In a Python child npudoctor started with :data:`PARENT_VARIABLE` set: ``sig`` when npudoctor dies;
    npudoctor's pid (None when not started so). The variable is removed (the program's environment is its own)."""
    parent = os.environ.pop(PARENT_VARIABLE, "")
    if not parent.isdigit():
        return None
    die_with_parent(sig, int(parent))
    return int(parent)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: stop as after Ctrl-C (``signum`` says which; the exit code is 128 + it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` in the main thread while the block runs (the handlers
    before it come back after). Elsewhere than the main thread, nothing changes."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        for each in (signal.SIGTERM, signal.SIGHUP):  # once: the cleanup must not be cut short by a second
            signal.signal(each, signal.SIG_IGN)
        raise Terminated(signum)

    before = {each: signal.signal(each, raise_terminated) for each in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for each, handler in before.items():
            signal.signal(each, handler)


def private_folder(prefix: str) -> str:
    """A new private folder ``<tmp>/npudoctor-<uid>/<prefix>-<pid>-XXXX``; the folders of earlier runs whose
    process is gone are removed first. The parent is this user's, mode 0700, not a link (else the folder is
    made directly in the temporary directory, and only this run's own cleanup removes it)."""
    parent = os.path.join(tempfile.gettempdir(), f"npudoctor-{os.getuid()}")
    try:
        os.mkdir(parent, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return tempfile.mkdtemp(prefix=f"{prefix}-")
    try:
        info = os.lstat(parent)
        usable = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
    except OSError:
        usable = False
    if not usable:
        return tempfile.mkdtemp(prefix=f"{prefix}-")
    _remove_orphaned(parent)
    return tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-", dir=parent)


def _remove_orphaned(parent: str) -> None:
    """Folders ``<name>-<pid>-XXXX`` under ``parent`` whose pid runs no more."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        parts = name.rsplit("-", 2)
        if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) == os.getpid():
            continue
        if _exists(int(parts[1])):
            continue
        shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _parents() -> Dict[int, int]:
    """pid -> parent pid of every process in /proc."""
    parents: Dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return parents
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
                parents[int(name)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def descendants(root_pids: Iterable[int], parents: Optional[Dict[int, int]] = None) -> Set[int]:
    """Every process below ``root_pids`` (not the roots themselves)."""
    parents = _parents() if parents is None else parents
    children: Dict[int, List[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: Set[int] = set()
    frontier = list(root_pids)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def pipe_holders(pipe_inodes: Set[int]) -> Set[int]:
    """Processes (not this one) with one of ``pipe_inodes`` open: a grandchild whose parent already exited."""
    wanted = {f"pipe:[{inode}]" for inode in pipe_inodes}
    holders: Set[int] = set()
    if not wanted:
        return holders
    own = os.getpid()
    for pid in _parents():
        if pid == own:
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    holders.add(pid)
                    break
        except OSError:
            continue
    return holders


def _group(pid: int) -> Optional[int]:
    """The process group of ``pid`` (None when it is gone)."""
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError, OSError):
        return None


def _alive(pid: int) -> bool:
    """Running (a zombie has finished: it only waits for its parent to read its status)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class ProcessTree:
    """The processes started from here on: call :meth:`watch` with the child, :meth:`refresh` now and then
    (where no subreaper is possible, this is what keeps sight of a process that detaches), and :meth:`stop`.
    """

    def __init__(self) -> None:
        self.subreaper = become_subreaper()
        self.own = os.getpid()
        self.before = descendants([self.own])  # not ours to stop: children started before this tree
        self.roots: List[int] = []
        self.seen: Set[int] = set()

    def watch(self, pid: int) -> None:
        self.roots.append(pid)
        self.seen.add(pid)

    def refresh(self) -> Set[int]:
        """The tree's processes still running, as /proc shows them now (also remembered)."""
        parents = _parents()
        members = (descendants(self.roots, parents) | descendants([self.own], parents)) - self.before
        members |= {pid for pid in self.roots if pid in parents}
        members.discard(self.own)
        self.seen |= members
        if self.subreaper:  # nothing can leave the tree: what /proc shows now is all of it
            return {pid for pid in members if _alive(pid)}
        return {pid for pid in self.seen if _alive(pid)}  # a detached process is known only from earlier walks

    def stop(self, signals: Sequence[int] = (signal.SIGTERM,), grace_s: float = 10.0) -> None:
        """Each of ``signals`` to the whole tree, waiting up to ``grace_s`` for it to be gone; then SIGKILL."""
        for sig in (*signals, signal.SIGKILL):
            running = self.refresh()
            if not running:
                break
            self._signal(running, sig)
            deadline = time.monotonic() + (grace_s if sig != signal.SIGKILL else max(grace_s, 5.0))
            while self.refresh() and time.monotonic() < deadline:
                self._reap()
                time.sleep(_POLL_S)
        self._reap()

    def _signal(self, pids: Set[int], sig: int) -> None:
        """``sig`` once to each process: the roots' groups first (a process forked between the walk and the kill
        is in one), then every process of ``pids`` that was not in a group just signalled. A second delivery is
        not harmless: a handler that counts signals, or is not re-entrant, or ends a final write, sees it."""
        groups_before = {pid: _group(pid) for pid in pids}
        signalled: Set[int] = set()
        for root in self.roots:
            try:
                os.killpg(root, sig)
            except (ProcessLookupError, PermissionError):
                continue
            signalled.add(root)
        for pid in pids:
            # In the group before the kill and still after it: the killpg reached it (one that left the group in
            # between, by setsid or setpgid, is signalled here).
            if groups_before[pid] in signalled and _group(pid) == groups_before[pid]:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def _reap(self) -> None:
        """Collect the exit status of adopted orphans (never of the roots: their Popen objects wait for them)."""
        for pid in self.seen - set(self.roots):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
