"""The torch_npu operator lists: read from the release itself (wheel, folder, installed through the runner, shipped),
regenerated from the real wheel, and refused in one line when the input is not one."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from npudoctor import knowledge
from npudoctor.ops import oplist
from npudoctor.probes.runner import LiveRunner
from tests.clirunner import cli_runner
from tests.op_lists import render_from_wheel
from tests.wheels import CACHE, WHEEL_VERSION, torch_npu_wheel_file

MEMBER = oplist.CODEGEN_MEMBER


def _wheel(path: Path, text: str, member: str = MEMBER) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, text)
    return path


# --- the shipped lists ---------------------------------------------------------------------------------------------

def test_the_shipped_list_of_the_test_wheel_is_what_the_wheel_regenerates() -> None:
    wheel = torch_npu_wheel_file()
    shipped = oplist.shipped_folder() / f"{WHEEL_VERSION}.yaml"
    assert render_from_wheel(str(wheel)) == shipped.read_text(encoding="utf-8")
    from_wheel, _ = oplist.read_wheel(str(wheel))
    from_data = oplist.read_shipped(WHEEL_VERSION)
    assert from_wheel.operators == from_data.operators
    assert from_data.sha256 == oplist.file_sha256(str(wheel))
    # What the issue counted in the 2.14.0 file: 1,080 supported aten overloads, plus custom/autograd/symint/quant.
    assert from_data.sections["supported"] == 1080
    assert set(from_data.sections) == {"supported", "symint", "quant", "autograd", "custom"}


def test_every_shipped_list_another_cached_wheel_regenerates_is_equal() -> None:
    """Lists whose wheel someone downloaded into the test cache (``pip download --no-deps torch-npu==X -d
    $NPUDOCTOR_TEST_CACHE``) are regenerated too; the 2.14.0 one always is (above)."""
    checked = 0
    for wheel in sorted(CACHE.glob("torch_npu-*.whl")):
        release = oplist.wheel_release(wheel.name)
        shipped = oplist.shipped_folder() / f"{release}.yaml"
        if shipped.is_file():
            assert render_from_wheel(str(wheel)) == shipped.read_text(encoding="utf-8"), wheel.name
            checked += 1
    if not checked:
        pytest.skip("no torch_npu wheel in the test cache")


def test_shipped_lists_cover_the_compatibility_matrix_releases_pip_has() -> None:
    matrix = {oplist.normalize_release(str(row["torch_npu"])) for row in knowledge.load("compat_matrix")["releases"]}
    shipped = set(oplist.shipped_releases())
    # Every shipped list is a matrix release, or the release the tests download.
    assert shipped - matrix <= {WHEEL_VERSION}
    # Every torch_npu >= 2.1 of the matrix is shipped except the one PyPI does not have (2.1.0.post4); 1.x, 2.0.x
    # ship no codegen list with the wheels pip can download.
    modern = {r for r in matrix if r.startswith("2.") and not r.startswith("2.0")}
    assert modern - shipped == {"2.1.0.post4"}
    for release in shipped:
        data = oplist.read_shipped(release)
        assert data.release == release and data.wheel and data.wheel.startswith(f"torch_npu-{release}-")
        assert data.sha256 and len(data.sha256) == 64
        assert data.sections["supported"] > 900, release


def test_releases_order_as_versions() -> None:
    releases = oplist.shipped_releases()
    assert releases.index("2.1.0rc1") < releases.index("2.1.0") < releases.index("2.1.0.post6")
    assert releases.index("2.1.0.post8") < releases.index("2.1.0.post10") < releases.index("2.2.0")
    assert releases[-1] == "2.14.0"


# --- a wheel, a folder, an installed torch_npu ---------------------------------------------------------------------

TEXT = ("backend: NPU\ncpp_namespace: at_npu::native\nsupported:\n  - add.Tensor\n  - func: clone\n"
        "  - func: __ilshift__.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)\n    impl_ns: op_api\n"
        "custom:\n  - func: npu_rotary_mul(Tensor self, Tensor r1, Tensor r2) -> Tensor\n")
NAMES = {"aten::add.Tensor", "aten::clone", "aten::__ilshift__.Scalar", "npu::npu_rotary_mul"}


def test_a_wheel_file(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "torch_npu-2.5.1-cp310-cp310-manylinux_2_17_x86_64.whl", TEXT)
    data = oplist.read_path(str(wheel))
    assert data.operators == NAMES and data.release == "2.5.1" and data.kind == "wheel"


def test_a_site_packages_folder_and_the_package_folder(tmp_path: Path) -> None:
    member = tmp_path / MEMBER
    member.parent.mkdir(parents=True)
    member.write_text(TEXT, encoding="utf-8")
    (tmp_path / "torch_npu-2.6.0.post3.dist-info").mkdir()
    for given in (tmp_path, tmp_path / "torch_npu"):
        data = oplist.read_path(str(given))
        assert data.operators == NAMES and data.release == "2.6.0.post3" and data.kind == "folder"


def test_an_installed_torch_npu_through_the_runner_under_root(tmp_path: Path) -> None:
    site = "/usr/local/lib/python3.10/site-packages"
    member = tmp_path / site.lstrip("/") / MEMBER
    member.parent.mkdir(parents=True)
    member.write_text(TEXT, encoding="utf-8")
    data = oplist.read_installed(LiveRunner(str(tmp_path)), site, "2.1.0.post10")
    assert data.operators == NAMES and data.kind == "installed" and data.release == "2.1.0.post10"
    with pytest.raises(oplist.OpListError, match="cannot read the installed torch_npu's operator list"):
        oplist.read_installed(LiveRunner(str(tmp_path)), "/nowhere", "2.1.0")


# --- bad input: one line, exit 2 -----------------------------------------------------------------------------------

def _fails(args: list, match: str) -> None:
    from npudoctor.cli import main

    result = cli_runner().invoke(main, ["ops", "audit", *args, "--", os.devnull])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npudoctor: error: "), result.stderr
    assert match in lines[0], lines[0]
    assert "Traceback" not in result.output + result.stderr


def test_a_file_that_is_not_a_wheel(tmp_path: Path) -> None:
    bad = tmp_path / "torch_npu-2.1.0-x.whl"
    bad.write_bytes(b"\x7fELF not a zip at all")
    _fails(["--torch-npu", str(bad)], "not a wheel (not a zip archive)")


def test_a_zip_without_the_list(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "other-1.0-py3-none-any.whl", "x", member="other/__init__.py")
    _fails(["--torch-npu", str(wheel)], f"not a torch_npu wheel (it has no {MEMBER})")


def test_a_member_that_would_decompress_past_the_cap_is_refused_unread(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "torch_npu-9.9.9-x.whl", "#" * (oplist.MAX_LIST_BYTES + 10))
    _fails(["--torch-npu", str(wheel)], "is no operator list; refused")


@pytest.mark.parametrize("text, match", [
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdef", "bcdefg")), "alias"),
    ("supported: " + "[" * 200 + "]" * 200 + "\n", "nested"),
    ("- just\n- a list\n", "not a mapping"),
    ("backend: NPU\n", "no 'supported' operators"),
    ("supported:\n  - {impl_ns: op_api}\n", "names no operator"),
    ("supported:\n  - 'rm -rf /; x'\n", "not an operator name"),
    ("supported: [a: b\n", "not valid YAML"),
])
def test_hostile_or_broken_yaml_is_one_line(tmp_path: Path, text: str, match: str) -> None:
    wheel = _wheel(tmp_path / "torch_npu-9.9.9-x.whl", text)
    _fails(["--torch-npu", str(wheel)], match)


def test_not_utf8_is_one_line(tmp_path: Path) -> None:
    wheel = tmp_path / "torch_npu-9.9.9-x.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(MEMBER, "supported:\n  - 加法\n".encode("gbk"))
    _fails(["--torch-npu", str(wheel)], "not UTF-8 text")


def test_a_fifo_a_missing_path_and_a_release_not_shipped(tmp_path: Path) -> None:
    fifo = tmp_path / "torch_npu-2.1.0-x.whl"
    os.mkfifo(fifo)
    _fails(["--torch-npu", str(fifo)], "not a regular file")
    _fails(["--torch-npu", str(tmp_path / "missing.whl")], "cannot read torch_npu wheel")
    _fails(["--torch-npu", "9.9.9"], "no operator list shipped for torch_npu 9.9.9")
    _fails(["--torch-npu", "2.1.0;rm -rf"], "neither a file, a folder nor a torch_npu release")
    # "passwd: not ..." reads as a secret name and its value to the redaction; the reason stays
    _fails(["--torch-npu", "../../../etc/passwd"], "a wheel (not a zip archive)")


def test_a_hostile_shipped_file_is_refused(tmp_path: Path) -> None:
    hostile = tmp_path / "2.1.0.yaml"
    hostile.write_text("schema: npudoctor.torch_npu_ops/1\noperators:\n  supported: [\"../../x\"]\nsource: {}\n")
    with pytest.raises(oplist.OpListError, match="not a list of operator names"):
        oplist.load_shipped_file(hostile)
    hostile.write_text("schema: other/1\n")
    with pytest.raises(oplist.OpListError, match=r"not an npudoctor\.torch_npu_ops/1 document"):
        oplist.load_shipped_file(hostile)


def test_collect_records_the_installed_list_and_a_bundle_replays_it(tmp_path: Path) -> None:
    """``collect`` puts the installed torch_npu's own list into the bundle; ``ops audit --from`` reads it there."""
    from npudoctor import api
    from npudoctor.ops import engine
    from tests.fakenode import FakeNode
    from tests.nodes import healthy_910b_node

    node = healthy_910b_node(FakeNode(tmp_path / "node"))
    site = "/opt/venv/lib/python3.10/site-packages"  # where the fake python3 says torch_npu 2.1.0.post10 is
    shipped = oplist.read_shipped("2.1.0.post10")
    node.file(f"{site}/{MEMBER}", "supported:\n" + "".join(
        f"  - {name.split('::', 1)[1]}\n" for name in sorted(shipped.operators) if name.startswith("aten::")))
    bundle = tmp_path / "node.tar.gz"
    api.collect(str(bundle), root=str(node.root), environ=node.env)
    runner = api.make_runner(bundle=str(bundle))
    chosen = engine.choose_list(None, runner, api.python_facts(runner))
    assert chosen.kind == "installed" and chosen.release == "2.1.0.post10" and chosen.source == site
    assert chosen.operators == {n for n in shipped.operators if n.startswith("aten::")}
