"""What a probe may ask of the system, and what comes back. Plain data; no I/O here.

Every request is a frozen, hashable value with a stable ``key`` so that a recorded bundle can be replayed
on another machine: the replay runner answers a request by its key. Records are NamedTuples, not frozen
dataclasses: each of those costs about half a millisecond of start-up, which every command pays.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple, Optional, Tuple


class Command(NamedTuple):
    """Run ``argv`` (argv[0] looked up on PATH plus ``extra_dirs``) with a timeout, ``LANG=C``."""

    argv: Tuple[str, ...]
    timeout_s: float = 10.0
    extra_dirs: Tuple[str, ...] = ()
    # Extra variables for the child (e.g. an environment computed from set_env.sh).
    env: Optional[Tuple[Tuple[str, str], ...]] = None
    # A `python -c SCRIPT ARGS...` that only reads (package metadata): when argv[0] is npudoctor's own
    # interpreter in npudoctor's own environment, the script may run in this process, saving a start-up.
    in_process_ok: bool = False

    @property
    def key(self) -> str:
        suffix = ""
        if self.env is not None:
            import hashlib  # lazily: start-up time of `npudoctor libs` counts against ldd

            digest = hashlib.sha1(repr(sorted(self.env)).encode()).hexdigest()[:10]
            suffix = " #env=" + digest
        return "cmd:" + " ".join(self.argv) + suffix


# The keys of the other requests, shared by the recording and the replaying runner (bundle format).
def file_key(path: str, tail: bool = False) -> str:
    return "file:" + path + ("#tail" if tail else "")


def dir_key(path: str) -> str:
    return "dir:" + path


def stat_key(path: str) -> str:
    return "stat:" + path


def which_key(name: str, extra_dirs: Iterable[str] = ()) -> str:
    return "which:" + name + ("|" + ":".join(extra_dirs) if extra_dirs else "")


class CommandResult(NamedTuple):
    argv: Tuple[str, ...]
    rc: Optional[int]
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    # None when it ran; "not-found", "timeout", "permission" or "os-error: ..." when it did not;
    # "output-limit" when it printed more than the runner keeps and was killed.
    error: Optional[str] = None
    resolved_path: Optional[str] = None

    @property
    def ran(self) -> bool:
        return self.error is None

    @property
    def output(self) -> str:
        """stdout and stderr together, as a person would have seen them in a terminal."""
        if self.stdout and self.stderr:
            return self.stdout + ("" if self.stdout.endswith("\n") else "\n") + self.stderr
        return self.stdout or self.stderr


class PathInfo(NamedTuple):
    """What ``stat``/``readlink``/``os.access`` say about one path (system path, before ``--root``)."""

    path: str
    exists: bool
    kind: str = ""  # "file", "dir", "char", "block", "link-broken", "other"
    mode: int = 0
    readable: bool = False
    writable: bool = False
    link_target: Optional[str] = None  # for symlinks: what readlink returns
    error: Optional[str] = None


class FileContent(NamedTuple):
    path: str
    text: Optional[str]  # None when missing or unreadable
    error: Optional[str] = None  # "not-found", "permission", "binary", "too-large", "os-error: ..."
    truncated: bool = False


class DirListing(NamedTuple):
    path: str
    entries: Tuple[str, ...] = ()
    error: Optional[str] = None  # "not-found", "permission", ...
