"""`npudoctor libs` on a file inside a Python package analyses it as the import would load it: a fake venv
(gcc-built libraries) with torch and torch_npu, under --root. torch_npu/lib needs torch's libraries loaded
first; symbols whose provider is loaded but lacks them (a version mismatch) come first; missing CANN
libraries come with the set_env.sh fix; a Python extension's Py* symbols are the interpreter's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest

from tests.elfcases import gcc_lib as build
from tests.elfcases import needs_gcc
from tests.nodes import install_toolkit
from tests.test_libs_cli import run

pytestmark = needs_gcc

VENV = "/opt/venv"
SITE = f"{VENV}/lib/python3.11/site-packages"
EXT = "cpython-311-x86_64-linux-gnu.so"
VALUE_ERROR = "_ZN5torch10ValueErrorC1EPKcz"  # torch::ValueError::ValueError(char const*, ...)
# c10::TensorImpl::release_resources(): in libc10.so of torch builds other than the one linked against.
TENSOR_IMPL = "_ZN3c1010TensorImpl17release_resourcesEv"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Dict[str, Path]:
    """The libraries, without libc (the fake root has none): -nostdlib."""
    base = tmp_path_factory.mktemp("venvlibs")
    out: Dict[str, Path] = {}

    def gcc_lib(out: Path, source: str, *flags: str, soname=None) -> Path:
        return build(out, source, "-nostdlib", *flags, soname=soname)

    # The interpreter: exports the C API (an ELF file is all the loader needs).
    out["python"] = gcc_lib(base / "python3.11", "int PyErr_Occurred(void) { return 0; }\n")
    out["c10"] = gcc_lib(base / "torch/lib/libc10.so", "int c10_other(void) { return 0; }\n", soname="libc10.so")
    out["torch_python"] = gcc_lib(
        base / "torch/lib/libtorch_python.so",
        f'int value_error(const char *m, ...) __asm__("{VALUE_ERROR}");\n'
        "int PyErr_Occurred(void);\n"
        "int value_error(const char *m, ...) { return PyErr_Occurred(); }\n",
        f"-L{base / 'torch/lib'}", "-Wl,--no-as-needed", "-lc10", "-Wl,-rpath,$ORIGIN", soname="libtorch_python.so")
    out["torch_c"] = gcc_lib(
        base / f"torch/_C.{EXT}", "int torch_c(void) { return 0; }\n", f"-L{base / 'torch/lib'}",
        "-Wl,--no-as-needed", "-ltorch_python", "-Wl,-rpath,$ORIGIN/lib")
    acl = gcc_lib(base / "cann/libascendcl.so", "int aclInit(const char *c) { return 0; }\n")
    c10_with = gcc_lib(base / "c10new/libc10.so", f'void release(void) __asm__("{TENSOR_IMPL}");\n'
                       "void release(void) {}\n", soname="libc10.so")
    out["torch_npu"] = gcc_lib(
        base / "torch_npu/lib/libtorch_npu.so",
        f'int value_error(const char *, ...) __asm__("{VALUE_ERROR}");\n'
        f'void release(void) __asm__("{TENSOR_IMPL}");\n'
        "int aclInit(const char *);\nint PyErr_Occurred(void);\n"
        'int npu(void) { release(); PyErr_Occurred(); aclInit(0); return value_error("x"); }\n',
        f"-L{base / 'torch/lib'}", f"-L{acl.parent}", f"-L{c10_with.parent}", "-ltorch_python", "-lascendcl",
        "-lc10", "-Wl,-rpath,$ORIGIN", soname="libtorch_npu.so")
    out["ext"] = gcc_lib(base / f"build/_ext.{EXT}",
                         "int PyErr_Occurred(void);\nint f(void) { return PyErr_Occurred(); }\n")
    return out


def _venv(node, built, python: bool = True):
    if python:
        node.file(f"{VENV}/bin/python3.11", built["python"].read_bytes())
    node.file(f"{SITE}/torch/_C.{EXT}", built["torch_c"].read_bytes())
    node.file(f"{SITE}/torch/lib/libtorch_python.so", built["torch_python"].read_bytes())
    node.file(f"{SITE}/torch/lib/libc10.so", built["c10"].read_bytes())
    node.file(f"{SITE}/torch_npu/lib/libtorch_npu.so", built["torch_npu"].read_bytes())
    return node


def _libs(node, path, *args):
    return run(path, "--root", str(node.root), "--ld-library-path", "", *args)


def test_torch_npu_library_is_analysed_after_torch_and_says_so(node, built):
    _venv(node, built)
    result = _libs(node, f"{SITE}/torch_npu/lib/libtorch_npu.so")
    lines = result.output.splitlines()
    assert lines[1] == (f"context: inside the torch_npu package: analysed as its import loads it, after the "
                        f"interpreter {VENV}/bin/python3.11, torch/_C.{EXT} (import torch) (--alone: the file by "
                        "itself)")
    listed = lines[next(i for i, line in enumerate(lines) if line.startswith("UNDEFINED")):]
    # torch's symbols resolve through torch/_C's libraries, the interpreter's through python: only the
    # mismatch with torch's libc10.so and the missing CANN library's symbol remain, the mismatch first,
    # each under its group (demangled; the mangled name with -v).
    assert listed[:4] == ["UNDEFINED in libtorch_npu.so; should come from libc10.so (1):",
                          "  c10::TensorImpl::release_resources()",
                          "UNDEFINED in libtorch_npu.so; should come from libascendcl.so (1):",
                          "  aclInit"]
    assert f"      {TENSOR_IMPL}" in _libs(node, f"{SITE}/torch_npu/lib/libtorch_npu.so", "-v").output.splitlines()
    assert "libc10.so  (loaded, but does not export them: a build for another version?)" in result.output
    assert result.exit_code == 1


def test_alone_analyses_the_file_by_itself(node, built):
    _venv(node, built)
    result = _libs(node, f"{SITE}/torch_npu/lib/libtorch_npu.so", "--alone")
    assert "context:" not in result.output
    assert "NOT FOUND  libtorch_python.so" in result.output


def test_missing_cann_library_comes_with_the_set_env_fix(node, built):
    _venv(node, built)
    without_cann = _libs(node, f"{SITE}/torch_npu/lib/libtorch_npu.so")
    assert "      fix: install the CANN toolkit (Ascend-cann-toolkit_<version>_linux-<arch>.run --install), then " \
           "source its set_env.sh" in without_cann.output.splitlines()
    install_toolkit(node, "8.0.0", "cann_version.cfg_toolkit_8.0.0_rst-notes.txt")
    with_cann = _libs(node, f"{SITE}/torch_npu/lib/libtorch_npu.so", "--format", "json")
    document = json.loads(with_cann.output)
    assert document["cann_fix"].startswith("source /usr/local/Ascend/ascend-toolkit/set_env.sh")
    assert document["context"]["package"] == "torch_npu"


def test_without_an_interpreter_py_symbols_are_left_to_it(node, built):
    _venv(node, built, python=False)
    result = _libs(node, f"{SITE}/torch_npu/lib/libtorch_npu.so")
    assert "no interpreter beside its site-packages: Py* symbols are left to it" in result.output
    assert "PyErr_Occurred" not in result.output
    # libtorch_npu.so's and libtorch_python.so's PyErr_Occurred
    assert "2 Py* symbols left to the Python interpreter" in result.output


def test_python_extension_outside_site_packages_leaves_py_symbols_to_the_interpreter(built):
    result = run(str(built["ext"]))
    assert result.exit_code == 0, result.output
    assert "UNDEFINED" not in result.output
    assert "1 Py* symbol left to the Python interpreter that imports this extension" in result.output
    alone = run(str(built["ext"]), "--alone")
    assert alone.exit_code == 1 and "  PyErr_Occurred" in alone.output.splitlines()
    assert "should come from the Python interpreter (1):" in alone.output
