"""The real torch-npu wheel from the package index: its libtorch_npu.so needs libhccl.so, libascendcl.so,
libge_runner.so... Our verdict must agree with ``ldd -r`` on it, with and without torch's own libraries on
LD_LIBRARY_PATH. The wheel is downloaded once by tests/wheels.py, never installed; the tests skip cleanly when it
cannot be downloaded."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from npudoctor.cli import main
from tests.elfcases import analyse_like_ldd, ours, run_ldd
from tests.wheels import WHEEL_VERSION, torch_lib_dir, torch_npu_wheel_dir

CANN_LIBS = {
    "libhccl.so",
    "libascendcl.so",
    "libacl_op_compiler.so",
    "libge_runner.so",
    "libgraph.so",
    "libacl_tdt_channel.so",
}


@pytest.fixture(scope="module")
def wheel() -> Path:
    if sys.platform != "linux" or os.uname().machine != "x86_64" or shutil.which("ldd") is None:
        pytest.skip("needs x86-64 Linux with ldd")
    return torch_npu_wheel_dir()


def test_libtorch_npu_alone_agrees_with_ldd(wheel):
    lib = wheel / "lib" / "libtorch_npu.so"
    analysis = analyse_like_ldd(lib, "")
    assert ours(analysis) == run_ldd(lib, "")
    missing = {n.name for n in analysis.missing_libraries}
    assert CANN_LIBS - {"libacl_tdt_channel.so"} <= missing
    assert {"libtorch_python.so", "libtorch.so", "libc10.so"} <= missing
    # libtensorpipe.so and libnpu_profiler.so come from the wheel itself through RPATH $ORIGIN/.
    found = {n.name: n for n in analysis.needed if n.path}
    assert found["libtensorpipe.so"].via == "RPATH of libtorch_npu.so"
    assert found["libtensorpipe.so"].entry == "$ORIGIN/"  # of RPATH $ORIGIN/lib/:$ORIGIN/:...


def test_libtorch_npu_with_cpu_torch_agrees_with_ldd(wheel):
    torch_lib = torch_lib_dir()
    lib = wheel / "lib" / "libtorch_npu.so"
    analysis = analyse_like_ldd(lib, str(torch_lib))
    assert ours(analysis) == run_ldd(lib, str(torch_lib))
    assert {n.name for n in analysis.missing_libraries} == CANN_LIBS
    assert any(m.name.startswith("aclrt") for m in analysis.missing_symbols)


def test_extension_c_agrees_with_ldd(wheel):
    ext = next(wheel.glob("_C*.so"))
    assert ours(analyse_like_ldd(ext, "")) == run_ldd(ext, "")


def test_libs_command_on_the_wheel(wheel):
    lib = wheel / "lib" / "libtorch_npu.so"
    result = CliRunner().invoke(main, ["libs", str(lib), "--format", "json", "--ld-library-path", ""])
    assert result.exit_code == 1, result.output
    import json

    data = json.loads(result.output)
    assert data["schema"] == "npudoctor.libs/1" and data["clean"] is False
    names = {m["name"] for m in data["missing_libraries"]}
    assert "libhccl.so" in names and "libascendcl.so" in names
    symbols = {s["name"]: s for s in data["missing_symbols"]}
    acl = next(s for name, s in symbols.items() if name.startswith("aclrt"))
    assert acl["provider"] == "libascendcl.so"


def test_checks_on_the_real_wheel_beside_cpu_torch(wheel, node):
    """The realistic mismatch: CPU torch 2.13 installed beside torch_npu 2.14, and no CANN."""

    from npudoctor import api
    from npudoctor.model.finding import Status
    from tests.nodes import PYTHON_FACTS_ARGS, python_report

    torch_dir = torch_lib_dir().parent
    site = "/opt/py/lib/python3.11/site-packages"
    node.symlink(f"{site}/torch", str(torch_dir))
    node.symlink(f"{site}/torch_npu", str(wheel))
    # The node's system libraries and ld.so.cache are this machine's.
    for system_dir in ("/lib", "/lib64", "/usr/lib", "/etc/ld.so.cache"):
        if os.path.exists(system_dir):
            node.symlink(system_dir, system_dir)
    node.symlink("/usr/bin/python3.11", os.path.realpath(sys.executable))
    so = [f"torch_npu/{p.relative_to(wheel)}" for p in wheel.rglob("*.so")]
    so_files = {"torch": [f"torch/{p.name}" for p in torch_dir.glob("_C*.so")], "torch_npu": so}
    report = python_report("3.11.7", executable="/usr/bin/python3.11", location=site, so_files=so_files,
                           torch="2.13.0+cpu", torch_npu=WHEEL_VERSION)
    node.command("python3", by_args={PYTHON_FACTS_ARGS: report})
    result = {f.id: f for f in api.run_checks(node.runner(), only=("LIB",)).findings}
    assert result["LIB001"].status == Status.FAIL and "CANN not installed" in result["LIB001"].detail
    lib002 = result["LIB002"]
    assert lib002.status == Status.FAIL and lib002.evidence["diagnosis"] == "cann-not-installed"
    assert set(lib002.evidence["missing_libraries"]) == CANN_LIBS
    lib003 = result["LIB003"]
    assert lib003.status == Status.FAIL and lib003.evidence["diagnosis"] == "torch-mismatch"
    assert "torch and torch_npu builds do not match (torch 2.13.0+cpu, torch_npu 2.14.0)" in lib003.detail
    assert lib003.fix.startswith('pip install "torch_npu==2.13.0.*"')
    shown = {s["should_come_from"] for s in lib003.evidence["missing_symbols"]}
    assert shown <= {"libtorch_cpu.so", "libc10.so", "libtorch_python.so"}
    # Python's own symbols come from the preloaded interpreter: none is reported missing.
    assert not any(s["symbol"].startswith("Py") for s in lib003.evidence["missing_symbols"])
