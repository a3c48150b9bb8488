"""Run npudoctor in a child and measure what hostile input costs it: wall time and peak RSS.

A hang is killed at ``kill_after_s`` (the test then fails on time, not by hanging the suite).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Mapping, NamedTuple, Optional, Sequence

# Loose bounds from the issue: hostile input costs under 200 MiB and under 5 s here.
MAX_RSS_MIB = 200
MAX_SECONDS = 5.0


class Bounded(NamedTuple):
    rc: int
    stdout: str
    stderr: str
    seconds: float
    peak_mib: float

    def assert_cheap(self) -> None:
        assert self.seconds < MAX_SECONDS, f"took {self.seconds:.1f} s"
        assert self.peak_mib < MAX_RSS_MIB, f"peak RSS {self.peak_mib:.0f} MiB"

    def assert_one_line_error(self, *fragments: str) -> None:
        """Exit 2 with exactly one `npudoctor: error:` line and no traceback."""
        assert self.rc == 2, (self.rc, self.stderr[-2000:])
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("npudoctor: error: "), self.stderr[-2000:]
        for fragment in fragments:
            assert fragment in lines[0], lines[0]


def run_npudoctor(args: Sequence[str], kill_after_s: float = 20.0, cwd: Optional[str] = None,
                  env: Optional[Mapping[str, str]] = None) -> Bounded:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "npudoctor", *args], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, cwd=cwd, env=dict(env) if env is not None else None)
        timer = threading.Timer(kill_after_s, proc.kill)
        timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Bounded(proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                       seconds, usage.ru_maxrss / 1024)
