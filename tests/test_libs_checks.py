"""Libraries-stage checks on fake nodes holding real gcc-built ELF files: a torch_npu ``_C`` extension and
libtorch_npu.so, torch's ``_C`` and libtorch_python.so, and CANN installs with and without
``aclrtGetRecentContext``. The real CANN 8.0.0 set_env.sh content is sourced in a child bash."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Dict, Optional

import pytest

from npudoctor import api
from npudoctor.model.finding import Status
from npudoctor.probes.runner import LiveRunner
from tests.elfcases import ACL_NEW, ACL_OLD, gcc_lib
from tests.nodes import PYTHON_FACTS_ARGS, python_report
from tests.samples import sample_text

SITE = "/opt/py/lib/python3.11/site-packages"
EXT = "cpython-311-x86_64-linux-gnu.so"
VALUE_ERROR = "_ZN5torch10ValueErrorC1EPKcz"  # torch::ValueError::ValueError(char const*, ...)
NPU_LIB = (
    "int aclInit(const char *);\nint aclrtGetRecentContext(void **);\nint HcclCommInitAll(int);\n"
    f'int torch_value_error(const char *, ...) __asm__("{VALUE_ERROR}");\n'
    'int npu_init(void) { void *c; aclInit(0); HcclCommInitAll(1); torch_value_error("x");'
    " return aclrtGetRecentContext(&c); }\n"
)


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Dict[str, Path]:
    """Every ELF file the fake nodes use, compiled once."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    base = tmp_path_factory.mktemp("libsnode")
    out: Dict[str, Path] = {}
    out["acl_new"] = gcc_lib(base / "new/libascendcl.so", ACL_NEW)
    out["acl_old"] = gcc_lib(base / "old/libascendcl.so", ACL_OLD)
    out["hccl"] = gcc_lib(base / "new/libhccl.so", "int HcclCommInitAll(int n) { return 0; }\n")
    out["tp_new"] = gcc_lib(
        base / "torch_new/libtorch_python.so",
        f'int value_error(const char *m, ...) __asm__("{VALUE_ERROR}");\n'
        "int value_error(const char *m, ...) { return 0; }\n",
        soname="libtorch_python.so",
    )
    out["tp_old"] = gcc_lib(
        base / "torch_old/libtorch_python.so", "int other(void) { return 0; }\n", soname="libtorch_python.so"
    )
    out["torch_c"] = gcc_lib(
        base / "torch_c/_C.so",
        "int torch_c(void) { return 0; }\n",
        f"-L{base / 'torch_new'}",
        "-Wl,--no-as-needed",
        "-ltorch_python",
        "-Wl,-rpath,$ORIGIN/lib",
    )
    out["libtorch_npu"] = gcc_lib(
        base / "npu/libtorch_npu.so",
        NPU_LIB,
        f"-L{base / 'new'}",
        f"-L{base / 'torch_new'}",
        "-lascendcl",
        "-lhccl",
        "-ltorch_python",
        "-Wl,--disable-new-dtags",
        "-Wl,-rpath,$ORIGIN/lib/:$ORIGIN/",
        soname="libtorch_npu.so",
    )
    out["npu_c"] = gcc_lib(
        base / "npu_c/_C.so",
        "int npu_init(void);\nint init_module(void) { return npu_init(); }\n",
        f"-L{base / 'npu'}",
        "-ltorch_npu",
        "-Wl,--disable-new-dtags",
        "-Wl,-rpath,$ORIGIN/lib",
    )
    return out


def packages_json(torch: Optional[str] = "2.1.0", torch_npu: Optional[str] = "2.1.0.post8") -> str:
    versions = {name: v for name, v in (("torch", torch), ("torch_npu", torch_npu)) if v}
    so_files = {"torch": [f"torch/_C.{EXT}", "torch/lib/libtorch_python.so"],
                "torch_npu": [f"torch_npu/_C.{EXT}", "torch_npu/lib/libtorch_npu.so"]}
    return python_report("3.11.7", executable="", location=SITE, so_files=so_files, **versions)


def make_node(
    node,
    built,
    *,
    cann=("8.0.0",),
    torch="2.1.0",
    torch_npu="2.1.0.post8",
    torch_build="new",
    import_stdout="",
    import_stderr="",
    import_rc=0,
):
    """A node with torch (+ torch_npu) in SITE and CANN installs under /usr/local/Ascend/ascend-toolkit."""
    if torch:
        shutil.copy(built["torch_c"], node.mkdir(f"{SITE}/torch") / f"_C.{EXT}")
        shutil.copy(built[f"tp_{torch_build}"], node.mkdir(f"{SITE}/torch/lib") / "libtorch_python.so")
    if torch_npu:
        shutil.copy(built["npu_c"], node.mkdir(f"{SITE}/torch_npu") / f"_C.{EXT}")
        shutil.copy(built["libtorch_npu"], node.mkdir(f"{SITE}/torch_npu/lib") / "libtorch_npu.so")
    for version in cann:
        lib64 = node.mkdir(f"/usr/local/Ascend/ascend-toolkit/{version}/lib64")
        shutil.copy(built["acl_new" if version >= "8" else "acl_old"], lib64 / "libascendcl.so")
        shutil.copy(built["hccl"], lib64 / "libhccl.so")
        node.file(
            f"/usr/local/Ascend/ascend-toolkit/{version}/x86_64-linux/ascend_toolkit_install.info",
            f"package_name=Ascend-cann-toolkit\nversion={version}\narch=x86_64\nos=linux\n",
        )
    if cann:
        node.symlink("/usr/local/Ascend/ascend-toolkit/latest", max(cann))
        # The real set_env.sh of CANN 8.0.0 (the `cat` prompt line of the capture dropped).
        script = "\n".join(
            line
            for line in sample_text("cann_ascend-toolkit_set_env.sh_content_8.0.0_rst-notes.txt").splitlines()
            if not line.startswith("yyy@")
        )
        node.file("/usr/local/Ascend/ascend-toolkit/set_env.sh", script)
    node.command(
        "python3",
        stdout=import_stdout,
        stderr=import_stderr,
        rc=import_rc,
        by_args={PYTHON_FACTS_ARGS: packages_json(torch, torch_npu)},
    )
    return node


def sourced(node, extra_first: str = ""):
    home = "/usr/local/Ascend/ascend-toolkit/latest"
    path = f"{home}/lib64"
    if extra_first:
        path = f"{extra_first}:{path}"
    node.setenv(
        LD_LIBRARY_PATH=path, ASCEND_TOOLKIT_HOME=home, ASCEND_HOME_PATH=home, ASCEND_OPP_PATH=f"{home}/opp"
    )


def findings(node, level=1, runner=None):
    report = api.run_checks(runner or node.runner(), only=("LIB",), level=level)
    return {f.id: f for f in report.findings}


def test_all_resolves_when_set_env_sourced(node, built):
    sourced(make_node(node, built))
    result = findings(node)
    assert {k: f.status for k, f in result.items()} == {
        "LIB001": Status.PASS,
        "LIB002": Status.PASS,
        "LIB003": Status.PASS,
        "LIB004": Status.PASS,
    }


def test_set_env_not_sourced_is_diagnosed_and_fix_checked(node, built):
    make_node(node, built)
    result = findings(node)
    assert result["LIB001"].status == Status.FAIL
    assert result["LIB001"].fix == "source /usr/local/Ascend/ascend-toolkit/set_env.sh"
    lib002 = result["LIB002"]
    assert lib002.status == Status.FAIL
    assert lib002.evidence["diagnosis"] == "set-env-not-sourced"
    assert sorted(lib002.evidence["missing_libraries"]) == ["libascendcl.so", "libhccl.so"]
    assert (
        "checked: after `source /usr/local/Ascend/ascend-toolkit/set_env.sh` "
        "every library and symbol resolves" in lib002.detail
    )
    assert lib002.fix == "source /usr/local/Ascend/ascend-toolkit/set_env.sh"
    # The symbols of the missing libraries are LIB002's business, not a second failure.
    assert result["LIB003"].status == Status.SKIP


def test_older_cann_earlier_on_ld_library_path(node, built):
    make_node(node, built, cann=("7.0.0", "8.0.0"))
    sourced(node, extra_first="/usr/local/Ascend/ascend-toolkit/7.0.0/lib64")
    result = findings(node)
    lib003 = result["LIB003"]
    assert lib003.status == Status.FAIL
    assert lib003.evidence["diagnosis"] == "older-cann-first"
    assert "older CANN earlier on LD_LIBRARY_PATH than CANN 8.0.0" in lib003.detail
    assert "CANN 7.0.0 (/usr/local/Ascend/ascend-toolkit/7.0.0)" in lib003.detail
    assert "aclrtGetRecentContext" in lib003.detail
    assert lib003.fix.startswith("remove /usr/local/Ascend/ascend-toolkit/7.0.0/lib64 from LD_LIBRARY_PATH")
    [sym] = lib003.evidence["missing_symbols"]
    assert sym["found_in"] == "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so"
    shadows = {f.subject: f for f in api.run_checks(node.runner(), only=("LIB004",)).findings}
    assert set(shadows) == {"lib:libascendcl.so", "lib:libhccl.so"}
    lib004 = shadows["lib:libascendcl.so"]
    assert lib004.status == Status.WARN
    assert lib004.evidence["winner"] == "/usr/local/Ascend/ascend-toolkit/7.0.0/lib64/libascendcl.so"
    assert lib004.evidence["others"] == ["/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so"]


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs c++filt (binutils)")
def test_torch_and_torch_npu_builds_do_not_match(node, built):
    make_node(node, built, torch="2.2.0", torch_npu="2.1.0", torch_build="old")
    sourced(node)
    lib003 = findings(node)["LIB003"]
    assert lib003.status == Status.FAIL
    assert lib003.evidence["diagnosis"] == "torch-mismatch"
    assert "torch and torch_npu builds do not match (torch 2.2.0, torch_npu 2.1.0)" in lib003.detail
    assert lib003.fix.startswith('pip install "torch_npu==2.2.0.*"')
    [sym] = lib003.evidence["missing_symbols"]
    assert sym["symbol"] == VALUE_ERROR
    assert sym["demangled"] == "torch::ValueError::ValueError(char const*, ...)"
    assert sym["should_come_from"] == "libtorch_python.so"


def test_cann_not_installed(node, built):
    make_node(node, built, cann=())
    result = findings(node)
    assert result["LIB001"].status == Status.FAIL and "CANN not installed" in result["LIB001"].detail
    assert result["LIB002"].evidence["diagnosis"] == "cann-not-installed"


def test_no_torch_npu_skips(node, built):
    make_node(node, built, cann=(), torch_npu=None)
    result = findings(node)
    assert all(f.status == Status.SKIP for f in result.values())
    assert result["LIB002"].detail == "torch_npu is not installed"


class NoBinaries(LiveRunner):
    """What a replayed bundle offers: text and commands, no binaries."""

    def local_path(self, path):
        return None


def test_binary_checks_skip_without_the_live_node(node, built):
    sourced(make_node(node, built))
    runner = NoBinaries(str(node.root), environ=dict(node.env))
    result = findings(node, runner=runner)
    assert result["LIB001"].status == Status.PASS
    for check_id in ("LIB002", "LIB003", "LIB004"):
        assert result[check_id].status == Status.SKIP
        assert result[check_id].detail == "binary analysis needs the live node"


IMPORT_CASES = [
    (
        "torch_npu_ext_undefined-symbol_AclrtPeekAtLastError_dlinfer-183.txt",
        "import torch_npu",
        "extension-mismatch",
        "ascend_extension.so: undefined symbol: _ZN7c10_npu3acl20AclrtPeekAtLastErrorE17aclrtLastErrLevel",
        [],
    ),
    (
        "torch_npu_507011_AclrtSynchronizeStreamWithTimeout_E39999_AICPU_MoeDistributeDispatchV2_vllm-ascend-4256.txt",
        "device op",
        None,
        "CANN error 507011, ERR00100, E39999",
        ["507011", "ERR00100", "E39999"],
    ),
    (
        "torch_npu_import_libhccl.so_ImportError_constructed.txt",
        "import torch_npu",
        "set-env-not-sourced",
        "libhccl.so: cannot open shared object file",
        [],
    ),
    (
        "torch_npu_import_torch_npu._C_ModuleNotFound_torch_npu-faq.txt",
        "import torch_npu",
        None,
        "No module named 'torch_npu._C'",
        [],
    ),
    (
        "torch_npu_init_AclSetCompileopt_500001_ERR00100_torch_npu-doc.txt",
        "device op",
        None,
        "CANN error 500001, ERR00100",
        ["500001", "ERR00100"],
    ),
    (
        "torch_npu_EH9999_init-env-failed_500001_Aborted_Ascend-pytorch-7.txt",
        "device op",
        None,
        "CANN error EH9999, 500001",
        ["EH9999", "500001"],
    ),
    (
        "torch_npu_to-int-device_Torch-not-compiled-with-CUDA_Ascend-pytorch-16.txt",
        "device op",
        None,
        "a bare device index",
        [],
    ),
    (
        "torch_npu_ext_undefined-symbol_NpuRunMode_mmcv-3299.txt",
        "import torch_npu",
        "extension-mismatch",
        "undefined symbol: _ZN7c10_npu10NpuRunMode9cur_mode_E",
        [],
    ),
]


@pytest.mark.parametrize("sample,stage,diagnosis,text,codes", IMPORT_CASES)
def test_level2_maps_real_error_texts(node, built, sample, stage, diagnosis, text, codes):
    stages = "".join(
        f"NPUDOCTOR-STAGE {s}\n"
        for s in ("import torch", "import torch_npu", "device op")[
            : ("import torch", "import torch_npu", "device op").index(stage) + 1
        ]
    )
    make_node(node, built, import_stdout=stages, import_stderr=sample_text(sample), import_rc=3)
    lib005 = findings(node, level=2)["LIB005"]
    assert lib005.status == Status.FAIL
    assert lib005.detail.startswith(f"{stage} failed")
    assert text in lib005.detail
    assert lib005.evidence["error_codes"] == codes
    assert lib005.evidence.get("diagnosis") == diagnosis
    assert lib005.fix
    # Each code is explained from the same knowledge base the log doctor uses.
    meanings = lib005.evidence.get("error_code_meaning", [])
    assert [line.split(":")[0].split(" ")[0] for line in meanings] == codes


def test_level2_passes_when_the_op_runs(node, built):
    sourced(
        make_node(
            node,
            built,
            import_stdout="NPUDOCTOR-STAGE import torch\nNPUDOCTOR-STAGE import torch_npu\n"
            "NPUDOCTOR-STAGE device op\nNPUDOCTOR-STAGE ok [2.0, 2.0]\n",
        )
    )
    assert findings(node, level=2)["LIB005"].status == Status.PASS
    assert "LIB005" not in findings(node, level=1)


def test_level2_timeout_fails_with_the_stage(node, built):
    make_node(node, built)
    # The import stage hangs after its first line; every other call gets make_node's python3 answers.
    answers = (node.bin / "python3").rename(node.bin / "python3-answers")
    node.script(
        "python3",
        "case \"$2\" in *NPUDOCTOR-STAGE*) echo 'NPUDOCTOR-STAGE import torch'; sleep 5;; esac\n"
        f'exec {answers} "$@"\n',
    )
    node.file("/profile.yaml", "libraries:\n  import_timeout_s: 0.5\n")
    report = api.run_checks(
        node.runner(), api.load_profile(str(node.path("/profile.yaml"))), only=("LIB005",), level=2
    )
    [finding] = report.findings
    assert (
        finding.status == Status.FAIL and "import torch did not finish within the timeout" in finding.detail
    )


def test_installs_found_by_install_info_and_new_layout(node):
    """/etc/Ascend/ascend_cann_install.info Install_Path, the cann-<ver> layout, nnae, and the version
    read from the real *_install.info files."""
    from npudoctor.probes.libraries import find_cann_installs

    node.file("/etc/Ascend/ascend_cann_install.info", "Install_Path=/opt/Ascend\n")
    node.file(
        "/opt/Ascend/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info",
        sample_text("ascend_toolkit_install.info_8.5.0_aarch64_cann-path_mindcluster-doc.txt"),
    )
    node.file("/opt/Ascend/cann-8.5.0/set_env.sh", "export ASCEND_HOME_PATH=/opt/Ascend/cann-8.5.0\n")
    node.file(
        "/usr/local/Ascend/nnae/8.0.RC3/x86_64-linux/ascend_nnae_install.info",
        sample_text("ascend_nnae_install.info_8.0.RC3_mindcluster-fixture.txt"),
    )
    node.symlink("/usr/local/Ascend/nnae/latest", "8.0.RC3")
    node.file("/usr/local/Ascend/nnae/set_env.sh", "export ASCEND_HOME_PATH=/usr/local/Ascend/nnae/latest\n")
    installs = {i.path: i for i in find_cann_installs(node.runner(), {})}
    assert installs["/opt/Ascend/cann-8.5.0"].version == "8.5.0"
    assert installs["/opt/Ascend/cann-8.5.0"].set_env == "/opt/Ascend/cann-8.5.0/set_env.sh"
    assert installs["/opt/Ascend/cann-8.5.0"].found_by == "ascend_cann_install.info"
    assert installs["/usr/local/Ascend/nnae/latest"].version == "8.0.RC3"
    assert installs["/usr/local/Ascend/nnae/latest"].set_env == "/usr/local/Ascend/nnae/set_env.sh"


def test_stale_ascend_home_path_is_not_sourced(node, built):
    make_node(node, built)
    node.setenv(ASCEND_HOME_PATH="/usr/local/Ascend/ascend-toolkit/7.0.0", LD_LIBRARY_PATH="")
    lib001 = findings(node)["LIB001"]
    assert lib001.status == Status.FAIL
    assert "ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/7.0.0 points at no install" in lib001.detail
    assert lib001.fix == "source /usr/local/Ascend/ascend-toolkit/set_env.sh"


def test_installed_packages_reads_real_metadata_without_importing(node, monkeypatch):
    """The metadata script on this machine's interpreter: torch found from its dist-info, not imported."""
    from importlib.util import find_spec

    from npudoctor.checks.registry import CheckContext
    from npudoctor.model.profile import NodeProfile
    from npudoctor.probes.libraries import installed_packages

    if find_spec("torch") is None:
        pytest.skip("torch is not installed")
    import builtins
    import os
    import shlex
    import sys

    # The python3 on the fake node PATH. A wrapper, not a symlink: a symlink to a venv's python starts the base
    # interpreter (pyvenv.cfg is looked up beside the link), which may not have torch.
    node.script("python3", f'exec {shlex.quote(sys.executable)} "$@"\n')
    node.setenv(PATH=f"{node.bin}:{os.path.dirname(sys.executable)}")

    imported = []  # whatever an earlier test imported, this reading must import no torch itself
    real_import = builtins.__import__

    def watching(name, *args, **kwargs):
        if name.split(".")[0] == "torch":
            imported.append(name)
        return real_import(name, *args, **kwargs)

    torch_loaded_before = "torch" in sys.modules
    monkeypatch.setattr(builtins, "__import__", watching)
    found = installed_packages(CheckContext(node.runner(), NodeProfile("default", {})))
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert found.error is None
    assert found.torch is not None and found.torch.version.startswith("2.")
    assert found.torch.find(r"^torch/_C[.\w-]*\.so$") is not None
    assert found.executable == os.path.realpath(sys.executable)
    assert imported == []
    assert torch_loaded_before or "torch" not in sys.modules


def test_install_with_only_version_cfg_has_its_public_cann_version(node):
    """The real CANN 8.0.0 version.cfg reads `[7.6.0.1.220:8.0.0]`: the install is CANN 8.0.0, as VER002 says."""
    from npudoctor.probes.libraries import find_cann_installs

    node.file("/usr/local/Ascend/ascend-toolkit/8.0.0/version.cfg",
              sample_text("cann_version.cfg_toolkit_8.0.0_rst-notes.txt"))
    node.symlink("/usr/local/Ascend/ascend-toolkit/latest", "8.0.0")
    versions = {i.path: i.version for i in find_cann_installs(node.runner(), {})}
    assert versions["/usr/local/Ascend/ascend-toolkit/latest"] == "8.0.0"


def test_level2_bundle_replays_the_import_trial_on_its_own(node, built, tmp_path):
    """The import trial runs with the node's whole environment (keyed by a digest of it); the bundle keeps only
    the variables checks read, redacted, and the replay is given no --level: it still finds the answer."""
    sourced(make_node(node, built, import_stdout="NPUDOCTOR-STAGE import torch\nNPUDOCTOR-STAGE import torch_npu\n"
                                                 "NPUDOCTOR-STAGE device op\nNPUDOCTOR-STAGE ok [2.0, 2.0]\n"))
    node.setenv(HF_TOKEN="hf_secret_value", UNREAD_VARIABLE="x")
    bundle = tmp_path / "node.tar.gz"
    collected = api.collect(str(bundle), root=str(node.root), environ=node.env, level=2)
    replayed = api.run_checks(api.make_runner(bundle=str(bundle)), only=("LIB005",))
    assert replayed.tool["level"] == 2
    assert [(f.id, f.status) for f in replayed.findings] == [
        (f.id, f.status) for f in collected.findings if f.id == "LIB005"] == [("LIB005", Status.PASS)]


def test_exactly_one_missing_library_deep_in_the_chain_fails_lib002(node, built):
    """libhccl.so alone missing, needed by libtorch_npu.so (itself needed by torch_npu's _C): LIB002 FAIL
    naming it; one missing library is as fatal to `import torch_npu` as ten."""
    sourced(make_node(node, built))
    node.path("/usr/local/Ascend/ascend-toolkit/8.0.0/lib64/libhccl.so").unlink()
    lib002 = findings(node)["LIB002"]
    assert lib002.status == Status.FAIL
    assert lib002.evidence["missing"] == [{"name": "libhccl.so", "needed_by": f"{SITE}/torch_npu/lib/libtorch_npu.so"}]
