"""How `npudoctor libs` reads on a terminal: it fits the width (80 columns when piped), wrapping and never
cutting; missing libraries and their fix come first, then the summary by provider, then the undefined
symbols grouped by object and provider (demangled; the mangled name with -v), the verdict last; NO_COLOR and
an ASCII-only stdout are honoured. A torch_npu-like venv built with gcc under --root, so that the paths, and
where lines wrap, are the same on every machine.

Regenerate the golden files after an intended change with
`NPUDOCTOR_REGEN_GOLDEN=1 python -m pytest tests/test_libs_layout.py` and review the diff like code.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from tests.elfcases import gcc_lib as build
from tests.elfcases import needs_gcc
from tests.test_libs_cli import run

# The golden files name the ELF kind (ELF64 x86-64), which also decides where the first line wraps.
pytestmark = [needs_gcc, pytest.mark.skipif(platform.machine() != "x86_64", reason="golden files are x86-64")]

GOLDEN = Path(__file__).parent / "data" / "golden"
SITE = "/opt/venv/lib/python3.11/site-packages"
EXT = "cpython-311-x86_64-linux-gnu.so"
TORCH_NPU = f"{SITE}/torch_npu/lib/libtorch_npu.so"
# Two copies of one driver library on LD_LIBRARY_PATH: the first wins, the other is shadowed.
DRIVER = "/usr/local/Ascend/driver/lib64"
LD_LIBRARY_PATH = f"{DRIVER}/driver:{DRIVER}/common"
# Real symbols of torch_npu 2.14.0 that CPU torch 2.13.0's libraries do not export (long demangled names).
TORCH_CPU_SYMBOLS = [
    "_ZN2at6native25linalg_vector_norm_sparseERKNS_6TensorERKN3c106ScalarENS4_16OptionalArrayRefIlEEbSt8optional"
    "INS4_10ScalarTypeEE",
    "_ZN5torch8autograd24fire_node_creation_hooksERKN3c1013intrusive_ptrINS0_4NodeENS1_6detail34intrusive_target_"
    "default_null_typeIS3_EEEE",
]
C10_SYMBOLS = ["_ZN3c1013GeneratorImpl12philox_stateEmRN2at6TensorES3_S3_", "_ZN3c1010TensorImpl17release_resourcesEv"]
ACL_SYMBOLS = ["aclInit", "aclFinalize", "aclrtSetDevice", "aclrtCreateStream", "aclrtMalloc", "aclrtFree",
               "aclrtMemcpy", "aclrtSynchronizeStream"]


def _calls(names, prefix: str) -> str:
    """C that references each of ``names`` (mangled C++ names through asm labels)."""
    declared = "".join(f'void {prefix}{i}(void) __asm__("{name}");\n' for i, name in enumerate(names))
    return declared + f"void use_{prefix}(void) {{ " + " ".join(f"{prefix}{i}();" for i in range(len(names))) + " }\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Dict[str, Path]:
    """torch (CPU, another build: lacks four symbols torch_npu needs), torch_npu needing CANN libraries that
    are not installed, a driver library in two folders; no interpreter beside the venv (Py* symbols are left
    to it). Without libc (the fake root has none): -nostdlib."""
    base = tmp_path_factory.mktemp("layout")

    def gcc_lib(out: Path, source: str, *flags: str, soname=None) -> Path:
        return build(out, source, "-nostdlib", *flags, soname=soname)

    torch_lib = base / "torch/lib"
    out = {
        "c10": gcc_lib(torch_lib / "libc10.so", "int c10_other(void) { return 0; }\n", soname="libc10.so"),
        "torch_cpu": gcc_lib(torch_lib / "libtorch_cpu.so", "int cpu_other(void) { return 0; }\n",
                             f"-L{torch_lib}", "-Wl,--no-as-needed", "-lc10", soname="libtorch_cpu.so"),
    }
    out["torch_python"] = gcc_lib(
        torch_lib / "libtorch_python.so", "int PyErr_Occurred(void);\nint tp(void) { return PyErr_Occurred(); }\n",
        f"-L{torch_lib}", "-Wl,--no-as-needed", "-ltorch_cpu", "-lc10", "-Wl,-rpath,$ORIGIN",
        soname="libtorch_python.so")
    out["torch_c"] = gcc_lib(base / f"torch/_C.{EXT}", "int torch_c(void) { return 0; }\n", f"-L{torch_lib}",
                             "-Wl,--no-as-needed", "-ltorch_python", "-Wl,-rpath,$ORIGIN/lib")
    # What torch_npu was linked against: the matching torch build, CANN, the driver.
    linked = base / "linked"
    gcc_lib(linked / "libtorch_cpu.so", "".join(
        f'void t{i}(void) __asm__("{name}");\nvoid t{i}(void) {{}}\n' for i, name in enumerate(TORCH_CPU_SYMBOLS)),
        soname="libtorch_cpu.so")
    gcc_lib(linked / "libc10.so", "".join(
        f'void c{i}(void) __asm__("{name}");\nvoid c{i}(void) {{}}\n' for i, name in enumerate(C10_SYMBOLS)),
        soname="libc10.so")
    gcc_lib(linked / "libascendcl.so", "".join(f"void {name}(void) {{}}\n" for name in ACL_SYMBOLS))
    gcc_lib(linked / "libhccl.so", "void HcclCommInitRootInfo(void) {}\n")
    out["c_sec"] = gcc_lib(linked / "libc_sec.so", "int memcpy_s(void) { return 0; }\n")
    out["c_sec_old"] = gcc_lib(base / "old/libc_sec.so", "int memcpy_s(void) { return 1; }\n")
    out["torch_npu"] = gcc_lib(
        base / "torch_npu/lib/libtorch_npu.so",
        _calls(TORCH_CPU_SYMBOLS, "t") + _calls(C10_SYMBOLS, "c")
        + "".join(f"void {name}(void);\n" for name in ACL_SYMBOLS)
        + "void HcclCommInitRootInfo(void);\nint PyErr_Occurred(void);\nint memcpy_s(void);\n"
        + "int npu(void) { use_t(); use_c(); " + " ".join(f"{name}();" for name in ACL_SYMBOLS)
        + " HcclCommInitRootInfo(); memcpy_s(); return PyErr_Occurred(); }\n",
        f"-L{linked}", "-Wl,--no-as-needed", "-ltorch_cpu", "-lc10", "-lascendcl", "-lhccl", "-lc_sec",
        "-Wl,-rpath,$ORIGIN", soname="libtorch_npu.so")
    return out


@pytest.fixture
def venv(node, built):
    node.file(f"{SITE}/torch/_C.{EXT}", built["torch_c"].read_bytes())
    for name in ("libtorch_python.so", "libtorch_cpu.so", "libc10.so"):
        node.file(f"{SITE}/torch/lib/{name}", built[name[3:-3]].read_bytes())
    node.file(TORCH_NPU, built["torch_npu"].read_bytes())
    node.file(f"{DRIVER}/driver/libc_sec.so", built["c_sec"].read_bytes())
    node.file(f"{DRIVER}/common/libc_sec.so", built["c_sec_old"].read_bytes())
    return node


@pytest.fixture(autouse=True)
def no_colour_from_outside(monkeypatch):
    for variable in ("NO_COLOR", "FORCE_COLOR", "COLUMNS"):
        monkeypatch.delenv(variable, raising=False)


def _libs(node, *args: str, columns: int = 80):
    return run(TORCH_NPU, "--root", str(node.root), "--ld-library-path", LD_LIBRARY_PATH, *args, columns=columns)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("NPUDOCTOR_REGEN_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("columns,verbose,color", [(80, False, False), (120, False, False), (80, True, False),
                                                   (80, False, True)])
def test_golden(venv, columns, verbose, color):
    args = (["-v"] if verbose else []) + (["--color", "always"] if color else [])
    result = _libs(venv, *args, columns=columns)
    assert result.exit_code == 1, result.output
    _golden(f"libs_torch_npu.{columns}{'.verbose' if verbose else ''}{'.color' if color else ''}.txt", result.output)


@pytest.mark.parametrize("columns", [60, 80, 120])
@pytest.mark.parametrize("verbose", [False, True])
def test_no_line_is_wider_than_the_terminal(venv, columns, verbose):
    result = _libs(venv, *(["-v"] if verbose else []), columns=columns)
    too_wide = [line for line in result.output.splitlines() if len(line) > columns]
    assert too_wide == []


def test_wrapping_never_cuts_what_is_said(venv):
    """Every symbol's name, every path and the fix are all there, whatever the width (whitespace aside)."""
    narrow = re.sub(r"\s", "", _libs(venv, "-v", columns=60).output)
    document = json.loads(_libs(venv, "--format", "json").output)
    said = [s["demangled"] or s["name"] for s in document["missing_symbols"]]
    said += [s["name"] for s in document["missing_symbols"]]  # -v: the mangled names too
    said += [n["path"] for n in document["needed"] if n["path"]] + [document["cann_fix"], document["context"]["said"]]
    said += [shadow["winner"] for shadow in document["shadowed"]] + document["shadowed"][0]["others"]
    assert [text for text in said if re.sub(r"\s", "", text) not in narrow] == []


def test_decisive_information_comes_first_and_the_verdict_last(venv):
    lines = _libs(venv, columns=1000).output.splitlines()
    starts = [next(i for i, line in enumerate(lines) if line.startswith(head))
              for head in ("NOT FOUND", "      fix:", "13 undefined symbols, by the library", "SHADOWED",
                           "UNDEFINED in libtorch_npu.so; should come from libc10.so (2):",
                           "UNDEFINED in libtorch_npu.so; should come from libtorch_cpu.so (2):",
                           "UNDEFINED in libtorch_npu.so; should come from libascendcl.so (8):")]
    assert starts == sorted(starts)
    # without -v, a group lists its first five symbols and counts the rest; the verdict is last
    acl = lines.index("UNDEFINED in libtorch_npu.so; should come from libascendcl.so (8):")
    assert lines[acl + 6] == "  ... 3 more (-v lists all)"
    assert lines[-1] == "2 libraries not found, 13 undefined symbols"


def test_json_keeps_its_schema_and_the_mangled_names(venv):
    document = json.loads(_libs(venv, "--format", "json").output)
    assert document["schema"] == "npudoctor.libs/1"
    [symbol] = [s for s in document["missing_symbols"] if s["name"] == C10_SYMBOLS[1]]
    assert symbol == {"name": C10_SYMBOLS[1], "object": TORCH_NPU, "version": None,
                      "demangled": "c10::TensorImpl::release_resources()", "provider": "libc10.so",
                      "provided_by": None}


def test_no_color_wins_over_force_color(venv, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in _libs(venv).output
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in _libs(venv).output


def test_an_ascii_only_stdout_gets_replacements_not_a_traceback(venv, tmp_path):
    """PYTHONIOENCODING=ascii (LANG=C on old nodes) and a path that is not ASCII."""
    odd = "/opt/Ascend-主机/libtorch_npu.so"
    venv.file(odd, venv.path(TORCH_NPU).read_bytes())
    env = dict(os.environ, PYTHONIOENCODING="ascii", COLUMNS="80")
    proc = subprocess.run([sys.executable, "-m", "npudoctor", "libs", odd, "--root", str(venv.root),
                           "--ld-library-path", LD_LIBRARY_PATH], capture_output=True, text=True, env=env,
                          encoding="ascii", errors="strict", timeout=60)
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout.startswith("/opt/Ascend-??/libtorch_npu.so: ELF64 x86-64")
    assert re.fullmatch(r"\d+ librar(y|ies) not found, \d+ undefined symbols?", proc.stdout.splitlines()[-1])
