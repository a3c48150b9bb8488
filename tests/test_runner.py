"""The live runner: the only code that touches the system. Timeouts, missing commands, --root reads."""

from __future__ import annotations

import time

from npudoctor.probes.runner import LiveRunner
from npudoctor.probes.sources import Command


def test_command_output_and_exit_code(node):
    node.command("npu-smi", stdout="hello\n", stderr="warn\n", rc=3)
    result = node.runner().run(Command(("npu-smi", "info")))
    assert (result.rc, result.stdout, result.stderr, result.error) == (3, "hello\n", "warn\n", None)
    assert result.resolved_path == str(node.bin / "npu-smi")


def test_missing_command_is_not_found_not_an_exception(node):
    result = node.runner().run(Command(("hccn_tool", "-i", "0", "-link", "-g")))
    assert result.error == "not-found" and result.rc is None


def test_extra_dirs_find_tools_outside_path(node, tmp_path):
    sbin = tmp_path / "sbin"
    node.script("npu-smi", "echo found\n", folder=sbin)
    result = node.runner().run(Command(("npu-smi",), extra_dirs=(str(sbin),)))
    assert result.stdout == "found\n"


def test_hanging_command_costs_only_its_timeout(node):
    node.command("npu-smi", stdout="never\n", sleep_s=30)
    started = time.monotonic()
    result = node.runner().run(Command(("npu-smi", "info"), timeout_s=0.5))
    assert result.error == "timeout"
    assert time.monotonic() - started < 5


def test_commands_run_with_c_locale(node):
    node.script("show-lang", "echo $LANG/$LC_ALL\n")
    node.setenv(LANG="zh_CN.UTF-8")
    assert node.runner().run(Command(("show-lang",))).stdout == "C/C\n"


def test_files_are_read_under_root(node):
    node.file("/usr/local/Ascend/driver/version.info", "Version=23.0.7\n")
    runner = node.runner()
    assert runner.read_text("/usr/local/Ascend/driver/version.info").text == "Version=23.0.7\n"
    assert runner.read_text("/etc/absent").error == "not-found"
    assert runner.list_dir("/usr/local/Ascend").entries == ("driver",)


def test_gbk_file_is_decoded_not_fatal(node):
    node.file("/etc/msg.txt", "设备初始化失败".encode("gbk"))
    assert node.runner().read_text("/etc/msg.txt").text == "设备初始化失败"


def test_binary_and_oversize_files(node):
    node.file("/etc/blob", b"\x7fELF\x00\x00\x01")
    node.file("/etc/big", b"x" * 5000)
    runner = node.runner()
    assert runner.read_text("/etc/blob").error == "binary"
    big = runner.read_text("/etc/big", max_bytes=1000)
    assert big.truncated and len(big.text or "") == 1000


def test_symlink_target_and_broken_link(node):
    node.mkdir("/sys/bus/pci/drivers/devdrv_device_driver")
    node.symlink("/sys/bus/pci/devices/0000:c1:00.0/driver", "../../drivers/devdrv_device_driver")
    node.symlink("/dev/davinci0", "/nonexistent")
    runner = node.runner()
    info = runner.path_info("/sys/bus/pci/devices/0000:c1:00.0/driver")
    assert info.exists and info.link_target.endswith("devdrv_device_driver")
    broken = runner.path_info("/dev/davinci0")
    assert not broken.exists and broken.kind == "link-broken"


def test_live_runner_on_this_machine_answers():
    runner = LiveRunner()
    assert runner.host()["arch"]
    assert "lo" in runner.net_interfaces()


def test_tail_read_keeps_the_end_from_a_whole_line(node):
    node.file("/var/log/plog-1.log", "".join(f"[INFO] line {i}\n" for i in range(1000)) + "[ERROR] the end\n")
    content = node.runner().read_text("/var/log/plog-1.log", max_bytes=100, tail=True)
    assert content.truncated
    assert content.text.endswith("[ERROR] the end\n")
    assert content.text.startswith("[INFO] line ")  # no cut-off first line
    whole = node.runner().read_text("/var/log/plog-1.log", tail=True)
    assert not whole.truncated and whole.text.startswith("[INFO] line 0\n")


def test_prefetched_commands_run_side_by_side(node):
    node.command("slow-a", stdout="a\n", sleep_s=1)
    node.command("slow-b", stdout="b\n", sleep_s=1)
    runner = node.runner()
    started = time.monotonic()
    runner.prefetch(Command(("slow-a",)))
    runner.prefetch(Command(("slow-b",)))
    assert runner.run(Command(("slow-a",))).stdout == "a\n"
    assert runner.run(Command(("slow-b",))).stdout == "b\n"
    assert time.monotonic() - started < 1.8  # not 2 s one after the other


def test_close_stops_prefetched_commands_nobody_collected(node, tmp_path):
    marker = tmp_path / "finished"
    node.script("npu-smi", f"sleep 3\ntouch {marker}\n")
    runner = node.runner()
    runner.prefetch(Command(("npu-smi", "info"), timeout_s=10))
    time.sleep(0.3)
    started = time.monotonic()
    runner.close()
    assert time.monotonic() - started < 2
    time.sleep(3.2)
    assert not marker.exists()


def test_metadata_script_in_process_answers_like_the_child():
    """npudoctor's own interpreter runs the package-metadata script in-process; the answer is the child's."""
    import json
    import os
    import sys

    from npudoctor.probes.versions import PYTHON_PACKAGES, PYTHON_SCRIPT

    runner = LiveRunner(environ=dict(os.environ))
    in_process = runner.run(Command((sys.executable, "-c", PYTHON_SCRIPT, *PYTHON_PACKAGES), in_process_ok=True))
    child = runner.run(Command((sys.executable, "-c", PYTHON_SCRIPT, *PYTHON_PACKAGES)))
    assert in_process.rc == child.rc == 0
    assert json.loads(in_process.stdout) == json.loads(child.stdout)
    assert sys.argv[0] != "-c"  # restored


def test_another_environment_always_gets_a_child(node):
    import sys

    node.setenv(PYTHONPATH="/opt/site")  # not this process's environment: in-process would be wrong
    runner = node.runner()
    assert not runner._runs_in_process(Command((sys.executable, "-c", "pass"), in_process_ok=True))


# -- children are bounded: memory, time, no orphans ---------------------------------------------------------

_ENDLESS_CHILD = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # on a regression: MemoryError, not a swapping box
from npudoctor.probes.runner import MAX_OUTPUT_BYTES, LiveRunner
from npudoctor.probes.sources import Command
started = time.monotonic()
result = LiveRunner(environ={"PATH": sys.argv[1]}).run(Command(("npu-smi", "info"), timeout_s=20))
# VmHWM, not ru_maxrss: that one carries the test process's high-water mark across the vfork+exec.
peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(result.error, len(result.stdout) <= MAX_OUTPUT_BYTES, round(time.monotonic() - started, 1), peak_kib // 1024)
"""


def test_endless_output_is_cut_at_the_cap_and_the_child_killed(node):
    """An npu-smi printing without end: cut at the output cap and killed at once, not buffered until the
    timeout (it reached 9.7 GB in 21 s), in bounded memory."""
    import subprocess
    import sys

    node.script("npu-smi", "exec yes 'NPU 0 | 910B3 | OK | 93.6 0 / 0 3396 / 65536'\n")
    proc = subprocess.run([sys.executable, "-c", _ENDLESS_CHILD, f"{node.bin}:/usr/bin:/bin"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    error, capped, seconds, peak_mib = proc.stdout.split()
    assert (error, capped) == ("output-limit", "True")
    assert float(seconds) < 10  # killed at the cap, not at the 20 s timeout
    assert int(peak_mib) < 200


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _wait_gone(pid: int, within_s: float = 3.0) -> bool:
    end = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return not _alive(pid)


def test_setsid_grandchild_holding_the_pipe_does_not_hang_a_timeout(node, tmp_path):
    """A hung npu-smi that started a `setsid` child holding its stdout: killed at the timeout, the wait after
    the kill is bounded, and the grandchild (outside the process group) is killed too."""
    pid_file = tmp_path / "grandchild.pid"
    node.script("npu-smi", f"setsid sleep 25 &\necho $! > {pid_file}\nsleep 25\n")
    started = time.monotonic()
    result = node.runner().run(Command(("npu-smi", "info"), timeout_s=0.5))
    assert result.error == "timeout" and result.rc is None
    assert time.monotonic() - started < 5
    assert _wait_gone(int(pid_file.read_text()))


def test_child_that_exits_leaving_a_pipe_holder_behind_gives_its_answer(node, tmp_path, monkeypatch):
    """npu-smi printed its table and exited, but a `setsid` child it started keeps the pipe open: the answer
    comes shortly after the exit (not at the timeout, not never), and the leftover is killed."""
    pid_file = tmp_path / "grandchild.pid"
    node.script("npu-smi", f"setsid sleep 25 &\necho $! > {pid_file}\necho table\nexit 0\n")
    monkeypatch.setattr("npudoctor.probes.runner._EXIT_GRACE_S", 0.3)
    started = time.monotonic()
    result = node.runner().run(Command(("npu-smi", "info"), timeout_s=15))
    assert (result.error, result.rc, result.stdout) == (None, 0, "table\n")
    assert time.monotonic() - started < 5
    assert _wait_gone(int(pid_file.read_text()))


def test_child_that_survives_sigkill_costs_a_bounded_wait(node, monkeypatch, tmp_path):
    """A child stuck in the driver (uninterruptible sleep) does not die on SIGKILL: `check` goes on after a
    bounded wait with a timeout error. (Simulated: the kill is made to have no effect.)"""
    import os
    import signal

    pid_file = tmp_path / "child.pid"
    node.script("npu-smi", f"echo $$ > {pid_file}\nexec sleep 20\n")
    runner = node.runner()
    real_kill = os.kill
    monkeypatch.setattr("npudoctor.probes.runner._KILL_WAIT_S", 0.3)  # the bound, shortened for the test
    monkeypatch.setattr(os, "kill", lambda pid, sig: None)
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: None)
    started = time.monotonic()
    result = runner.run(Command(("npu-smi", "info"), timeout_s=0.5))
    elapsed = time.monotonic() - started
    monkeypatch.undo()
    real_kill(int(pid_file.read_text()), signal.SIGKILL)
    assert result.error == "timeout" and result.rc is None
    assert elapsed < 5


def test_runaway_npu_smi_is_an_error_finding(node):
    """The check reads the killed runaway as ERROR (the tool misbehaved), not as a FAIL of the node."""
    from npudoctor import api
    from npudoctor.model.finding import Status

    node.script("npu-smi", "exec yes '| 0     910B3      | OK     | 93.6        40         0    / 0 |'\n")
    started = time.monotonic()
    [finding] = api.run_checks(node.runner(), only=("SMI001",)).findings
    assert finding.status is Status.ERROR and "killed" in finding.detail
    assert time.monotonic() - started < 10


def test_child_that_closes_its_output_and_hangs_is_timed_out(node, monkeypatch, tmp_path):
    """A child that closes stdout and stderr, then hangs (and, simulated, survives SIGKILL): its end of the
    pipes says nothing more, so the wait for its exit is what must be bounded."""
    import os
    import signal

    pid_file = tmp_path / "child.pid"
    node.script("npu-smi", f"echo $$ > {pid_file}\nexec >&- 2>&-\nexec sleep 20\n")
    runner = node.runner()
    real_kill = os.kill
    monkeypatch.setattr("npudoctor.probes.runner._KILL_WAIT_S", 0.3)
    monkeypatch.setattr(os, "kill", lambda pid, sig: None)
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: None)
    started = time.monotonic()
    result = runner.run(Command(("npu-smi", "info"), timeout_s=0.5))
    elapsed = time.monotonic() - started
    monkeypatch.undo()
    real_kill(int(pid_file.read_text()), signal.SIGKILL)
    assert result.error == "timeout" and result.rc is None
    assert elapsed < 3
