"""checks/compat_matrix.yaml must hold every row of the official matrix: verified by reading the sample's
Markdown tables, not by eye. And the version grammar must read every version the matrix and samples use."""

from __future__ import annotations

import re

import pytest

from npudoctor import knowledge
from npudoctor.checks.versions import matrix
from npudoctor.parsers.keyvalue import parse_key_values
from npudoctor.parsers.markdown import read_tables
from npudoctor.parsers.versions import Version, parse_version
from tests.samples import real_samples, sample_text

MATRIX_SAMPLE = "torch_npu_pytorch_cann_compatibility-matrix_COMPATIBILITY.en.md.txt"


def _tables():
    tables = read_tables(sample_text(MATRIX_SAMPLE))
    by_header = {}
    for table in tables:
        by_header.setdefault(table.header[0], []).append(table)
    return by_header


def _release_row(cells):
    """A mapping-table row as the YAML stores it.

    "1.11.0.rc2 (beta)" -> version and note; "CANN 8.0.0" -> "8.0.0".
    """
    torch_npu, branch, torch, cann = cells
    note = ""
    match = re.match(r"^(\S+)\s*\((.*)\)$", torch_npu)
    if match:
        torch_npu, note = match.groups()
    row = {"torch_npu": torch_npu, "branch": branch, "torch": torch, "cann": re.sub(r"^CANN\s+", "", cann)}
    if note:
        row["note"] = note
    return row


def test_yaml_holds_every_torch_npu_release_row_in_order():
    mapping = _tables()["TorchNPU installation package version"]
    assert len(mapping) == 2  # the active table and the historical (EOL) one
    active, historical = mapping
    expected = [{**_release_row(r)} for r in active.rows] + [
        {**_release_row(r), "eol": True} for r in historical.rows
    ]
    shipped = [
        {k: (str(v) if k != "eol" else v) for k, v in row.items()}
        for row in knowledge.load("compat_matrix")["releases"]
    ]
    assert len(expected) == 62
    assert shipped == expected


def test_yaml_holds_the_python_table():
    (table,) = _tables()["PyTorch Version"]
    data = knowledge.load("compat_matrix")
    expected, minimum = {}, {}
    for torch_cell, python_cell in table.rows:
        torch = torch_cell.replace("PyTorch", "").strip()
        expected[torch] = re.findall(r"Python\s*(\d+\.\d+)", python_cell)
        for low in re.findall(r"\(>=([\d.]+)\)", python_cell):
            minimum[torch] = low
    assert data["python"] == expected and len(expected) == 14
    assert data["python_minimum"] == minimum == {"1.11.0": "3.7.5"}


def test_yaml_holds_recommendation_and_hardware():
    tables = _tables()
    data = knowledge.load("compat_matrix")
    recommended = dict(tables["Component"][0].rows)
    assert data["recommended"]["torch_npu"] == recommended["TorchNPU"].split(" (")[0]
    assert data["recommended"]["torch"] == recommended["PyTorch"]
    assert data["recommended"]["cann"] == recommended["CANN"]
    assert data["recommended"]["python"] == [v.strip() for v in recommended["Python"].split("/")]
    assert data["hardware"] == [" ".join(cells[0].split()) for cells in tables["Product range"][0].rows]


def test_every_matrix_version_parses_and_branches_name_the_torch_release():
    for release in matrix().releases:
        if release.branch.startswith("v"):
            assert Version.parse(release.branch[1:].split("-")[0]) == release.torch, release.branch
    # numbering jumps from 7.3.0 to 26.0.0 in the branch names; the package versions stay torch-based
    releases = {r.branch.split("-")[1] for r in matrix().releases if r.branch.startswith("v")}
    assert releases >= {"7.3.0", "26.0.0", "26.1.0"}


def test_matrix_queries():
    m = matrix()
    assert m.find(Version.parse("2.8.0")).cann.text == "8.3.RC1"
    assert [r.torch_npu.text for r in m.for_torch(Version.parse("2.7.1"))] == [
        "2.7.1.post8",
        "2.7.1.post4",
        "2.7.1.post2",
        "2.7.1",
    ]
    # the pairs built for one CANN, maintained first, never the known-bad torch_npu 2.8.0
    assert [r.torch_npu.text for r in m.pairs_for_cann(Version.parse("8.3.RC1"))] == [
        "2.7.1", "2.6.0.post3", "2.1.0.post17"]
    # Python 3.9: torch 2.9.0 (3.10 and newer) drops out
    assert [r.torch_npu.text for r in m.pairs_for_cann(Version.parse("9.0.0"), "3.9")] == ["2.8.0.post4", "2.7.1.post4"]
    # PyTorch 2.13.0 has a Python row but no torch_npu yet
    assert not [r for r in m.pairs_supporting("3.10") if r.torch == Version.parse("2.13.0")]


@pytest.mark.parametrize(
    "older,newer",
    [
        ("8.0.RC1", "8.0.RC2"),
        ("8.0.RC3", "8.0.0"),
        ("8.0.0", "8.1.T6"),
        ("8.1.T6", "8.1.RC1"),
        ("7.0.T10", "7.0.0"),
        ("8.3.RC1", "8.5.0"),
        ("8.5.0", "9.0.0"),
        ("2.1.0.rc1", "2.1.0"),
        ("2.1.0", "2.1.0.post4"),
        ("2.1.0.post4", "2.1.0.post10"),
        ("1.11.0.rc2", "1.11.0"),
        ("2.5.1rc1", "2.5.1"),
        ("23.0.rc3", "23.0.0"),
        ("23.0.0", "23.0.7"),
        ("24.1.rc1", "24.1.0"),
        ("25.0.rc1", "25.0.rc1.1"),
        ("7.1.0.11.220", "7.1.99"),
        ("8.0.RC2.alpha003", "8.0.RC2"),
        ("6.3.RC3", "6.3.RC3.1"),
    ],
)
def test_version_order(older, newer):
    assert Version.parse(older) < Version.parse(newer)
    assert not Version.parse(newer) < Version.parse(older)


def test_local_suffix_and_trailing_zeros_do_not_change_equality():
    assert Version.parse("2.1.0+cpu") == Version.parse("2.1.0") == Version.parse("2.1")
    assert len({Version.parse("2.1.0+cpu"), Version.parse("2.1")}) == 1
    assert parse_version("N/A") is None and parse_version("") is None and parse_version("2.1.0-beta!") is None


def test_every_real_version_file_parses():
    files = [
        p for p in real_samples("*.info*")
        if re.match(r"(driver_|firmware_)version\.info|ascend_.*install\.info", p.name)
    ]
    assert len(files) >= 8
    for path in files:
        text = path.read_text(encoding="utf-8").split("# ---\n", 1)[1]
        values = parse_key_values(text).values
        key = "Version" if path.name.startswith(("driver", "firmware")) else "version"
        assert parse_version(values[key]) is not None, path.name
