"""The only code that touches the system: run commands, read files, list folders, stat paths.

Three runners answer the same requests:

* :class:`LiveRunner` asks this machine; file paths are read under ``root`` (``--root DIR``), commands come
  from PATH as usual, every command has a timeout and runs with ``LANG=C``.
* :class:`RecordingRunner` wraps another runner and keeps every answer for a bundle (``npudoctor collect``).
* :class:`ReplayRunner` answers from a recorded bundle (``npudoctor check --from node.tar.gz``).
"""

from __future__ import annotations

import os
import stat
import time
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from npudoctor.parsers.text import decode_text
from npudoctor.probes import sources
from npudoctor.probes.safe_open import UnsafeFile, read_file
from npudoctor.probes.sources import Command, CommandResult, DirListing, FileContent, PathInfo

if TYPE_CHECKING:
    import subprocess

__all__ = ["MAX_FILE_BYTES", "LiveRunner", "RecordingRunner", "Runner"]

# Files larger than this are cut: probes read small text files (sysfs, version.info, JSON configs).
MAX_FILE_BYTES = 4 * 1024 * 1024
# What a command may print before it is cut.
MAX_OUTPUT_BYTES = 8 * 1024 * 1024
# PathInfo.kind of what stat() found (a link is followed; "other" for a FIFO or a socket).
_PATH_KINDS = ((stat.S_ISCHR, "char"), (stat.S_ISBLK, "block"), (stat.S_ISDIR, "dir"), (stat.S_ISREG, "file"))


class Runner:
    """What probes may ask. Subclasses answer live, from a bundle, or record."""

    description = "runner"

    def run(self, command: Command) -> CommandResult:
        raise NotImplementedError

    def close(self) -> None:
        """Stop commands started ahead (prefetched) whose answer nobody asked for."""

    def prefetch(self, command: Command) -> None:
        """Start ``command`` now so that a later :meth:`run` of it only collects the answer (slow tools such
        as npu-smi then run side by side). Runners that answer instantly ignore it."""

    def read_text(self, path: str, max_bytes: int = MAX_FILE_BYTES, tail: bool = False) -> FileContent:
        """The text of ``path``: its first ``max_bytes`` bytes, or with ``tail`` its last ones (from the first
        whole line), for logs whose news is at the end. ``truncated`` says when bytes were left out."""
        raise NotImplementedError

    def list_dir(self, path: str) -> DirListing:
        raise NotImplementedError

    def path_info(self, path: str) -> PathInfo:
        raise NotImplementedError

    def environ(self) -> Dict[str, str]:
        raise NotImplementedError

    def which(self, name: str, extra_dirs: Iterable[str] = ()) -> Optional[str]:
        raise NotImplementedError

    def host(self) -> Dict[str, Any]:
        """Facts about the machine for the report header (hostname, kernel, arch)."""
        raise NotImplementedError

    def net_interfaces(self) -> Dict[str, List[str]]:
        """Network interface name -> its addresses (IPv4 and IPv6), like ``ip -o addr``."""
        raise NotImplementedError

    def local_path(self, path: str) -> Optional[str]:
        """Where the system file ``path`` can be read directly on this machine (binary analysis of ELF
        files, ld.so.cache), or None when it cannot (a replayed bundle holds no binaries)."""
        return None


class LiveRunner(Runner):
    def __init__(self, root: str = "/", environ: Optional[Mapping[str, str]] = None) -> None:
        self.root = os.path.abspath(root)
        self._environ = dict(os.environ if environ is None else environ)
        self.description = "live" if self.root == "/" else f"root:{self.root}"
        self._started: Dict[str, Tuple[Any, List[CommandResult]]] = {}
        self._children: Dict[int, subprocess.Popen[bytes]] = {}

    # -- paths -------------------------------------------------------------------------------------------
    def system_path(self, path: str) -> str:
        """Where the system path ``path`` lies on this machine (under ``--root``)."""
        if self.root == "/":
            return path
        return os.path.join(self.root, path.lstrip("/"))

    def read_text(self, path: str, max_bytes: int = MAX_FILE_BYTES, tail: bool = False) -> FileContent:
        # One safe opener (FIFOs, devices and sockets refused before opening; never blocks; capped).
        try:
            data, truncated, _size = read_file(self.system_path(path), max_bytes, tail=tail)
        except UnsafeFile as exc:
            return FileContent(path, None, exc.reason)
        if tail and truncated:
            data = data[data.find(b"\n") + 1:]  # from the first whole line
        if b"\x00" in data[:8192] and not path.startswith(("/sys/", "/proc/")):
            return FileContent(path, None, "binary")
        return FileContent(path, decode_text(data), None, truncated)

    def list_dir(self, path: str) -> DirListing:
        real = self.system_path(path)
        try:
            return DirListing(path, tuple(sorted(os.listdir(real))))
        except FileNotFoundError:
            return DirListing(path, (), "not-found")
        except PermissionError:
            return DirListing(path, (), "permission")
        except NotADirectoryError:
            return DirListing(path, (), "not-a-directory")
        except OSError as exc:
            return DirListing(path, (), f"os-error: {exc.strerror or exc}")

    def path_info(self, path: str) -> PathInfo:
        real = self.system_path(path)
        link_target = None
        try:
            if os.path.islink(real):
                link_target = os.readlink(real)
            st = os.stat(real)
        except FileNotFoundError:
            kind = "link-broken" if link_target is not None else ""
            return PathInfo(path, False, kind=kind, link_target=link_target)
        except OSError as exc:
            return PathInfo(path, False, link_target=link_target, error=f"os-error: {exc.strerror or exc}")
        mode = st.st_mode
        return PathInfo(
            path,
            True,
            kind=next((kind for is_kind, kind in _PATH_KINDS if is_kind(mode)), "other"),
            mode=stat.S_IMODE(mode),
            readable=os.access(real, os.R_OK),
            writable=os.access(real, os.W_OK),
            link_target=link_target,
        )

    # -- environment and commands ------------------------------------------------------------------------
    def environ(self) -> Dict[str, str]:
        return dict(self._environ)

    def which(self, name: str, extra_dirs: Iterable[str] = ()) -> Optional[str]:
        if os.sep in name:
            return name if os.access(name, os.X_OK) else None
        # shutil.which's POSIX rule, without importing shutil (start-up of `npudoctor libs` counts against ldd).
        for folder in [*self._environ.get("PATH", "").split(os.pathsep), *extra_dirs]:
            candidate = os.path.join(folder or os.curdir, name)
            if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
                return candidate
        return None

    def prefetch(self, command: Command) -> None:
        import threading

        if command.key in self._started or self._runs_in_process(command):
            return  # in-process scripts touch sys.path: never from a second thread
        answer: List[CommandResult] = []
        worker = threading.Thread(target=lambda: answer.append(self._execute(command)), daemon=True)
        self._started[command.key] = (worker, answer)
        worker.start()

    def run(self, command: Command) -> CommandResult:
        started = self._started.pop(command.key, None)
        if started is not None:
            worker, answer = started
            worker.join()
            if answer:
                return answer[0]
        return self._execute(command)

    def _execute(self, command: Command) -> CommandResult:
        argv = command.argv
        resolved = self.which(argv[0], command.extra_dirs)
        if resolved is None:
            return CommandResult(argv, None, error="not-found")
        if self._runs_in_process(command, resolved):
            return _run_script_in_process(command, resolved)
        env = dict(self._environ)
        if command.env is not None:
            env = dict(command.env)
        env["LANG"] = env["LC_ALL"] = "C"
        # Imported here: `npudoctor libs` often runs no command at all, and its start-up counts against ldd.
        import subprocess

        started = time.monotonic()
        try:
            # start_new_session: a timeout kills the whole process group, not only the shell around it.
            proc = subprocess.Popen(
                [resolved, *argv[1:]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except PermissionError:
            return CommandResult(argv, None, error="permission", resolved_path=resolved)
        except OSError as exc:
            return CommandResult(argv, None, error=f"os-error: {exc.strerror or exc}", resolved_path=resolved)
        self._children[proc.pid] = proc
        try:
            out, err, rc, stopped = _collect(proc, command.timeout_s)
        finally:
            self._children.pop(proc.pid, None)
        return CommandResult(
            argv, rc, decode_text(out), decode_text(err), time.monotonic() - started, error=stopped,
            resolved_path=resolved,
        )

    def close(self) -> None:
        for proc in list(self._children.values()):
            _kill_tree(proc, set())
        for worker, _answer in self._started.values():
            worker.join()
        self._started.clear()

    def _runs_in_process(self, command: Command, resolved: Optional[str] = None) -> bool:
        if not command.in_process_ok or command.env is not None:
            return False
        resolved = resolved or self.which(command.argv[0], command.extra_dirs)
        return resolved is not None and self._is_own_interpreter(resolved)

    def _is_own_interpreter(self, resolved: str) -> bool:
        """``resolved`` is this very interpreter (same file, same bin folder: a venv's python is a link to the
        base one but has other packages) and the environment is this process's own."""
        import sys

        try:
            same_file = os.path.samefile(resolved, sys.executable)
        except OSError:
            return False
        same_bin = os.path.dirname(os.path.abspath(resolved)) == os.path.dirname(os.path.abspath(sys.executable))
        return same_file and same_bin and self._environ == dict(os.environ)

    def host(self) -> Dict[str, Any]:
        uname = os.uname()
        return {"hostname": uname.nodename, "kernel": uname.release, "arch": uname.machine, "root": self.root}

    def net_interfaces(self) -> Dict[str, List[str]]:
        import psutil

        return {
            name: [a.address.split("%", 1)[0] for a in addresses if a.family.name in ("AF_INET", "AF_INET6")]
            for name, addresses in psutil.net_if_addrs().items()
        }

    def local_path(self, path: str) -> Optional[str]:
        return self.system_path(path)


def _run_script_in_process(command: Command, resolved: str) -> CommandResult:
    """Run ``python -c SCRIPT ARGS`` in this interpreter, as the child would see it (argv, sys.path[0] = '')."""
    import contextlib
    import io
    import sys
    import traceback

    script, args = command.argv[2], command.argv[3:]
    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_path = sys.argv, sys.path
    sys.argv, sys.path = ["-c", *args], ["", *sys.path[1:]]
    started = time.monotonic()
    rc = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(script, "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except Exception:
        rc = 1
        err.write(traceback.format_exc())
    finally:
        sys.argv, sys.path = saved_argv, saved_path
    return CommandResult(command.argv, rc, out.getvalue(), err.getvalue(), time.monotonic() - started,
                         resolved_path=resolved)


# After the child exits, how long a process it left behind may keep our pipes open before it is killed.
_EXIT_GRACE_S = 1.0
# After SIGKILL, how long to wait for the child to go: one stuck in the driver (uninterruptible sleep) never
# does, and must not hang `check`.
_KILL_WAIT_S = 2.0


def _collect(proc: subprocess.Popen[bytes], timeout_s: float) -> Tuple[bytes, bytes, Optional[int], Optional[str]]:
    """Stream the child's stdout and stderr, each kept up to ``MAX_OUTPUT_BYTES``, within ``timeout_s``.

    Returns (stdout, stderr, exit code or None, error): error is None when it finished, "timeout" or
    "output-limit" when it was killed (its process group, its descendants and whatever holds its pipes).
    Memory and time stay bounded whatever the child does: an endless printer is cut at the cap, a child that
    leaves a ``setsid`` grandchild holding the pipe or ignores SIGKILL (uninterruptible sleep) costs at most
    ``timeout_s`` plus a few seconds.
    """
    import contextlib
    import selectors
    import subprocess

    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    pipes = {fd: os.fstat(fd).st_ino for fd in kept}
    selector = selectors.DefaultSelector()
    for fd in kept:
        selector.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    exited_at: Optional[float] = None
    stopped: Optional[str] = None
    open_fds = set(kept)
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            stopped = "timeout"
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at >= _EXIT_GRACE_S:
            break  # the child is gone; something it left behind holds the pipe
        # Wake up now and then to notice the child's exit while a descendant keeps the pipe open.
        for key, _events in selector.select(min(deadline - now, 0.25)):
            fd = int(key.fd)
            chunk = os.read(fd, 65536)
            if not chunk:
                selector.unregister(fd)
                open_fds.discard(fd)
                continue
            room = MAX_OUTPUT_BYTES - len(kept[fd])
            kept[fd] += chunk[:room]
            if len(chunk) > room:
                stopped = "output-limit"
        if stopped:
            break
    selector.close()
    if open_fds or stopped:
        _kill_tree(proc, set(pipes.values()))
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    rc: Optional[int] = None
    try:
        rc = proc.wait(timeout=max(deadline - time.monotonic(), 0) if not stopped else _KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        if not stopped:  # closed its output but kept running past the timeout
            stopped = "timeout"
            _kill_tree(proc, set())
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_KILL_WAIT_S)
    if stopped:
        rc = None
    return bytes(kept[out_fd]), bytes(kept[err_fd]), rc, stopped


def _kill_tree(proc: subprocess.Popen[bytes], pipe_inodes: Set[int]) -> None:
    """SIGKILL the child's process group, its descendants (a ``setsid`` child leaves the group) and any process
    still holding one of its pipes (a grandchild whose parent already exited)."""
    import contextlib
    import signal

    from npudoctor.probes.proctree import descendants, pipe_holders

    victims = descendants([proc.pid]) | pipe_holders(pipe_inodes)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in victims | {proc.pid}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class RecordingRunner(Runner):
    """Answers through ``inner`` and keeps every request and answer, in order, for a bundle."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.description = inner.description
        self.records: List[Tuple[str, Dict[str, Any]]] = []
        self._seen: Dict[str, Any] = {}

    def _keep(self, key: str, kind: str, value: Any) -> Any:
        if key not in self._seen:
            self._seen[key] = value
            self.records.append((key, {"kind": kind, "value": value}))
        return value

    def run(self, command: Command) -> CommandResult:
        return self._keep(command.key, "command", self.inner.run(command))

    def prefetch(self, command: Command) -> None:
        self.inner.prefetch(command)

    def close(self) -> None:
        self.inner.close()

    def read_text(self, path: str, max_bytes: int = MAX_FILE_BYTES, tail: bool = False) -> FileContent:
        return self._keep(sources.file_key(path, tail), "file", self.inner.read_text(path, max_bytes, tail))

    def list_dir(self, path: str) -> DirListing:
        return self._keep(sources.dir_key(path), "dir", self.inner.list_dir(path))

    def path_info(self, path: str) -> PathInfo:
        return self._keep(sources.stat_key(path), "stat", self.inner.path_info(path))

    def environ(self) -> Dict[str, str]:
        return self._keep("env", "env", self.inner.environ())

    def which(self, name: str, extra_dirs: Iterable[str] = ()) -> Optional[str]:
        return self._keep(sources.which_key(name, extra_dirs), "which", self.inner.which(name, extra_dirs))

    def host(self) -> Dict[str, Any]:
        return self._keep("host", "host", self.inner.host())

    def net_interfaces(self) -> Dict[str, List[str]]:
        return self._keep("net", "net", self.inner.net_interfaces())

    def local_path(self, path: str) -> Optional[str]:
        # Binaries are not copied into bundles; analysis results are what gets recorded.
        return self.inner.local_path(path)
