"""Poll a sampler in a background thread; callers read the newest answer without ever waiting for one.

``npu-smi info`` takes seconds on an 8-card node and can hang; the caller (the dashboard's 1 Hz tick) asks
:meth:`Poller.state` and learns the newest snapshot, how old it is, and whether a poll is running late.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from npudoctor.live.devices import Sampler, Snapshot


@dataclass(frozen=True)
class PollState:
    snapshot: Optional[Snapshot]
    age_s: Optional[float]  # seconds since the newest snapshot arrived; None before the first
    in_flight_s: Optional[float]  # how long the running poll has taken so far; None when none runs
    stale: bool  # the newest data is older than the poll interval allows (a slow or hung tool)
    polls: int
    failure: Optional[str] = None  # the sampler itself raised (a bug, not a tool failure)


def is_stale(age_s: Optional[float], interval_s: float, grace_s: float = 2.0) -> bool:
    """Data is stale when no new answer came for two intervals plus a grace (one slow poll is normal).

    >>> is_stale(1.5, 1.0), is_stale(4.5, 1.0), is_stale(None, 1.0)
    (False, True, False)
    """
    return age_s is not None and age_s > 2 * interval_s + grace_s


class Poller:
    """Calls ``sampler.sample()`` every ``interval_s`` in one daemon thread (never two polls at once)."""

    def __init__(self, sampler: Sampler, interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.sampler = sampler
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._snapshot: Optional[Snapshot] = None
        self._arrived: Optional[float] = None
        self._started: Optional[float] = None
        self._polls = 0
        self._failure: Optional[str] = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="npudoctor-poller", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def poll_now(self) -> None:
        """Ask for a poll without waiting for the interval (it still waits for a running one)."""
        self._wake.set()

    def poll_once(self) -> None:
        """One poll in the caller's thread (tests, scripts)."""
        with self._lock:
            self._started = self.clock()
        try:
            snapshot = self.sampler.sample()
            failure = None
        except Exception as exc:  # a sampler bug must not kill the thread: show it, keep polling
            snapshot, failure = None, f"{exc.__class__.__name__}: {exc}"
        with self._lock:
            self._started = None
            self._polls += 1
            self._failure = failure
            if snapshot is not None:
                self._snapshot, self._arrived = snapshot, self.clock()

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = self.clock()
            self.poll_once()
            wait = max(0.0, self.interval_s - (self.clock() - began))
            self._wake.wait(wait)
            self._wake.clear()

    def state(self) -> PollState:
        now = self.clock()
        with self._lock:
            age = None if self._arrived is None else now - self._arrived
            in_flight = None if self._started is None else now - self._started
            stale = is_stale(age, self.interval_s) or (
                self._snapshot is None and in_flight is not None and in_flight > 2 * self.interval_s + 2.0)
            return PollState(self._snapshot, age, in_flight, stale, self._polls, self._failure)
