"""The one stopper (`probes.proctree.ProcessTree`): every process of the tree gets each signal once.

A process in the root's group is reached by the group's kill; signalling it again by its pid would give it a
second delivery (a handler that counts signals, or is not re-entrant, or ends a final write sees it). SIGTERM
cannot be counted exactly (a standard signal sent twice before it is taken is pending once), so the tree here
is stopped with a real-time signal, which the kernel queues once per send: the count is exact. The tree is
built and stopped in a child, so the test process never becomes a subreaper.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Each process blocks the two signals (the launcher blocked them before it started the root: the mask is
# inherited) and takes them one at a time: one "x" per SIGRTMIN, and SIGRTMIN+1 (sent after the stop's
# signals, taken after every SIGRTMIN queued before it, the lower number first) ends it.
COUNTING_CHILD = r"""
import os, signal, subprocess, sys, time
d, role = sys.argv[1], sys.argv[2]
rt = signal.SIGRTMIN

def wait_for(path):
    while not os.path.exists(path):  # the event: a child is ready
        time.sleep(0.02)

if role == "root":
    kids = [subprocess.Popen([sys.executable, __file__, d, "member"]),  # in the root's group
            subprocess.Popen([sys.executable, __file__, d, "session"], start_new_session=True)]
    for name in ("member", "session"):
        wait_for(f"{d}/ready.{name}")
with open(f"{d}/ready.tmp.{role}", "w") as handle:
    handle.write(str(os.getpid()))
os.rename(f"{d}/ready.tmp.{role}", f"{d}/ready.{role}")
while signal.sigwaitinfo({rt, rt + 1}).si_signo == rt:
    with open(f"{d}/count.{role}", "a") as handle:
        handle.write("x")
"""

LAUNCHER = r"""
import os, signal, subprocess, sys, time
from npudoctor.probes.proctree import ProcessTree
child, d = sys.argv[1], sys.argv[2]
rt = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, {rt, rt + 1})
tree = ProcessTree()
root = subprocess.Popen([sys.executable, child, d, "root"], start_new_session=True)
tree.watch(root.pid)
while not os.path.exists(d + "/ready.root"):
    assert root.poll() is None, root.returncode
    time.sleep(0.02)
signal_tree = tree._signal

def then_end_each(pids, sig):
    signal_tree(pids, sig)
    for pid in pids:
        os.kill(pid, rt + 1)

tree._signal = then_end_each
tree.stop((rt,), grace_s=120)
root.wait()
print(" ".join(open(f"{d}/count.{name}").read() for name in ("root", "member", "session")))
"""


@pytest.mark.skipif(not hasattr(__import__("signal"), "sigwaitinfo") or not os.path.isdir("/proc/self"),
                    reason="real-time signals and /proc")
def test_each_process_of_the_tree_gets_the_signal_once(tmp_path):
    child = tmp_path / "counting.py"
    child.write_text(COUNTING_CHILD)
    result = subprocess.run([sys.executable, "-c", LAUNCHER, str(child), str(tmp_path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-1500:]
    # the root and its group's member by the group's kill, the one in a session of its own by its pid
    assert result.stdout.split() == ["x", "x", "x"], result.stdout
