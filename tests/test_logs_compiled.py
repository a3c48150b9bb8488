"""The log scanner's compiled plog pass (``npudoctor/logs/_plogscan.c``) against the pure-Python pass it
speeds up: the same ``logs scan`` document on every sample (../shared/samples/logs and tests/data), on every
shipped rule's real lines in a plog, and on plogs mixed and mangled at random from the samples' lines."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any, Iterator, List, Sequence

import pytest
import yaml

from npudoctor.elf.compiled import PURE_PYTHON_VARIABLE
from npudoctor.logs.engine import scan_paths
from npudoctor.logs.rules import default_rules
from npudoctor.logs.scanner import Scanner, compiled_plog_pass
from npudoctor.report.logs_json import to_dict

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "npudoctor" / "logs" / "_plogscan.c"
SAMPLE_FOLDERS = (REPO.parent / "shared" / "samples" / "logs", REPO / "tests" / "data")
CASES = REPO / "tests" / "data" / "cases" / "logs"
# .ci/run sets this: there a missing compiled module is a broken build, not a reason to skip.
REQUIRE_VARIABLE = "NPUDOCTOR_REQUIRE_COMPILED"


@pytest.fixture(autouse=True)
def compiled():
    if compiled_plog_pass() is None:
        if os.environ.get(REQUIRE_VARIABLE):
            pytest.fail(f"{REQUIRE_VARIABLE} is set but npudoctor.logs._plogscan is not built")
        pytest.skip("the compiled plog pass is not built (no C compiler at install)")


def test_compiled_plog_pass_is_built_from_this_source():
    from npudoctor.logs import _plogscan

    assert hashlib.sha256(SOURCE.read_bytes()).hexdigest() == _plogscan.SOURCE_SHA256, (
        "npudoctor/logs/_plogscan.c changed since the module was built: run `pip install -e .` again")


def _documents(monkeypatch: pytest.MonkeyPatch, scan: Any) -> List[List[str]]:
    """The JSON documents of ``scan()`` (a list of ScanResults) by the compiled pass, then pure Python."""
    documents = []
    for pure in (False, True):
        if pure:
            monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
        else:
            monkeypatch.delenv(PURE_PYTHON_VARIABLE, raising=False)
        assert (compiled_plog_pass() is None) == pure
        # as JSON text: the order of keys (levels, modules, codes of equal counts) is part of the output
        documents.append([json.dumps(to_dict(result)) for result in scan()])
    return documents


def _sample_files() -> List[Path]:
    return sorted(p for folder in SAMPLE_FOLDERS if folder.is_dir()
                  for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_every_sample_gives_the_same_document(monkeypatch):
    files = _sample_files()
    assert len(files) > 100
    rules = default_rules()  # parsed once
    compiled_docs, pure_docs = _documents(monkeypatch, lambda: [scan_paths([str(p)], rules=rules) for p in files])
    for path, compiled_doc, pure_doc in zip(files, compiled_docs, pure_docs):
        assert compiled_doc == pure_doc, path
    # and each folder as one scan (findings merged across files)
    folders = [str(f) for f in SAMPLE_FOLDERS if f.is_dir()]
    compiled_docs, pure_docs = _documents(monkeypatch, lambda: [scan_paths([f], rules=rules) for f in folders])
    assert compiled_docs == pure_docs
    assert sum(len(json.loads(doc)["findings"]) for doc in compiled_docs) > 100


def _info_lines() -> List[bytes]:
    path = REPO / "tests" / "data" / "samples" / "logs"
    lines = [line for p in sorted(path.glob("plog_*")) for line in
             p.read_bytes().partition(b"\n# ---\n")[2].splitlines() if line.startswith(b"[INFO] ")]
    assert lines
    return lines


def test_every_shipped_rule_is_found_alike_in_a_plog(monkeypatch):
    """Each shipped rule's real lines (its case file), alone and among INFO records (a plog chunk: the
    compiled pass reads it), give the same findings by both passes; the rules come as data."""
    info = _info_lines()
    rules = {rule.id for rule in default_rules().rules}  # the shipped rules, as data
    texts = []
    for case_file in sorted(CASES.glob("*.yml")):
        case = yaml.safe_load(case_file.read_text(encoding="utf-8"))
        for entry in [*case["match"], *case["no_match"]]:
            texts.append(entry["text"].encode("utf-8"))
    assert len(texts) >= len(rules)

    shipped = default_rules()

    def scan() -> List[Any]:
        results = []
        for index, text in enumerate(texts):
            for data in (text + b"\n", b"\n".join([*info[index % len(info):][:20], text, *info[:5]]) + b"\n"):
                scanner = Scanner(shipped)
                scanner.scan_bytes("case.log", data)
                results.append(scanner.result())
        return results

    compiled_docs, pure_docs = _documents(monkeypatch, scan)
    assert compiled_docs == pure_docs
    fired = {f["rule"] for doc in compiled_docs for f in json.loads(doc)["findings"] if f.get("rule")}
    assert fired == rules  # every rule has real lines that fire it


def _mangled_plog(rng: random.Random, pool: Sequence[bytes]) -> Iterator[bytes]:
    """Lines of real records, some mangled as real logs are: a new pid and timestamp, a record glued after
    another (a lost newline), CRLF, a cut line, GBK bytes, a long line, a blank, a numeric level."""
    for _ in range(rng.randrange(200, 1500)):
        line = rng.choice(pool)
        roll = rng.random()
        if roll < 0.15:
            line = line.replace(b"(", b"(%d" % rng.randrange(10), 1)
        elif roll < 0.2:
            line = line + rng.choice(pool)
        elif roll < 0.25:
            line = line + b"\r"
        elif roll < 0.3:
            line = line[:rng.randrange(len(line) + 1)]
        elif roll < 0.32:
            line = line + " 设备异常".encode("gbk")
        elif roll < 0.33:
            line = line + b"x" * rng.randrange(16000, 40000) + rng.choice(pool)
        elif roll < 0.34:
            line = b""
        elif roll < 0.36:
            line = line.replace(b"[ERROR]", b"[3]", 1).replace(b"[INFO]", b"[ERRO]", 1)
        elif roll < 0.38:  # level words the grammar may not take
            line = line.replace(b"[INFO]", rng.choice((b"[FOO]", b"[CRITICAL]", b"[info]", b"[123]")), 1)
        yield line


# The searches plog_pass can take for the literals (argument ``search``): the fastest this machine has (Teddy
# on x86-64 with AVX2), the 16-byte vector filter (aarch64's), Wu-Manber (other compilers, short literals).
SEARCHES = {"fastest": 0, "16-byte vectors": 1, "Wu-Manber": 2}


def _force_search(monkeypatch: pytest.MonkeyPatch, search: int) -> None:
    from npudoctor.logs import scanner as scanner_module

    real = scanner_module.compiled_plog_pass

    def forced() -> Any:
        plog_pass = real()
        if plog_pass is None:
            return None
        return lambda *args: plog_pass(*args, search)

    monkeypatch.setattr(scanner_module, "compiled_plog_pass", forced)


@pytest.mark.parametrize("search", SEARCHES.values(), ids=SEARCHES.keys())
def test_mangled_plogs_give_the_same_document(monkeypatch, search: int):
    _force_search(monkeypatch, search)
    pool = [line for p in _sample_files() if p.name.startswith(("plog", "device", "slog"))
            for line in p.read_bytes().splitlines() if line.startswith(b"[")]
    assert len(pool) > 500
    inputs = []
    for seed in range(12):
        rng = random.Random(seed)
        data = b"\n".join(_mangled_plog(rng, pool)) + (b"\n" if seed % 3 else b"")
        inputs.append(data)

    def scan() -> List[Any]:
        results = []
        for data in inputs:
            scanner = Scanner()
            # chunks of varied sizes: lines cut across chunks, long lines in pieces
            scanner.scan_stream("plog-1.log", (data[at:at + 70000] for at in range(0, len(data), 70000)))
            results.append(scanner.result())
        return results

    compiled_docs, pure_docs = _documents(monkeypatch, scan)
    for compiled_doc, pure_doc in zip(compiled_docs, pure_docs):
        assert compiled_doc == pure_doc
    assert all(json.loads(doc)["summary"]["records"] > 100 for doc in compiled_docs)


@pytest.mark.parametrize("chunk", [4096, 100_000])
def test_error_dense_plog_gives_the_same_document(monkeypatch, chunk: int):
    from tests.test_logs_engine import _dense_plog

    data = _dense_plog()

    def scan() -> List[Any]:
        scanner = Scanner()
        scanner.scan_stream("plog-1.log", (data[at:at + chunk] for at in range(0, len(data), chunk)))
        return [scanner.result()]

    compiled_docs, pure_docs = _documents(monkeypatch, scan)
    assert compiled_docs == pure_docs


def test_plog_pass_counts_records_and_groups_lines_by_shape():
    plog_pass = compiled_plog_pass()
    assert plog_pass is not None
    data = (b"[INFO] GE(1,python):2025-01-01-00:00:00.000.000 [a.cc:1] ok\n"
            b"[ERROR] RUNTIME(7,python):2025-01-01-00:00:01.000.001 [b.cc:9] failed\n"
            b"[ERROR] RUNTIME(8,python3):2025-01-01 00:00:02 [b.cc:9] failed\n"
            b"[ERROR] RUNTIME(9,python):2025-01-01-00:00:03.000.001 [b.cc:9] other\n"
            b"plain text [fault_manager] here\n")
    headers, records, newlines, groups = plog_pass(data, 0, len(data), (b"[ERROR]", b"[fault_manager]"), 10)
    assert headers == {b"ERROR] RUNTIME": 3, b"INFO] GE": 1}  # the first line's header is counted last
    assert (records, newlines) == (4, 5)
    assert [(first, last, times) for first, last, times, _, _ in groups] == [(12, 13, 2), (14, 14, 1), (15, 15, 1)]
    first_start, first_stop = groups[0][3:]
    assert data[first_start:first_stop].endswith(b"[b.cc:9] failed")
    with pytest.raises(ValueError):
        plog_pass(data, 0, len(data) + 1, (b"x",), 0)
    with pytest.raises(TypeError):
        plog_pass(data, 0, len(data), (b"",), 0)


@pytest.mark.parametrize("search", SEARCHES.values(), ids=SEARCHES.keys())
@pytest.mark.parametrize("extra", [(), tuple(b"[%02d]" % n for n in range(12)), (b"ok",), (b"k",),
                                   tuple(b"[%02d]" % n for n in range(30))],
                         ids=["shipped", "buckets shared", "Wu-Manber", "one-byte literal", "too many starts"])
def test_plog_pass_finds_the_lines_holding_a_literal_whichever_search_it_takes(extra, search: int):
    """Literals of three bytes or more go through Teddy or the vector filter (more than 8 starts share
    Teddy's buckets); a shorter one, or more distinct starts than the filter holds, through Wu-Manber (or
    byte by byte): the lines found are the same."""
    plog_pass = compiled_plog_pass()
    assert plog_pass is not None
    lines = [line for p in _sample_files() if p.name.startswith("plog")
             for line in p.read_bytes().splitlines()][:3000]
    data = b"\n".join(lines) + b"\n"
    literals = Scanner().plog_markers + extra
    _, _, newlines, groups = plog_pass(data, 0, len(data), literals, 0, 0, 0, search)
    holding = [number for number, line in enumerate(lines, 1) if any(lit in line for lit in literals)]
    assert newlines == len(lines) and len(holding) > 50
    assert sum(times for _, _, times, _, _ in groups) == len(holding)
    firsts = {first for first, _, _, _, _ in groups}
    assert firsts <= set(holding) and min(firsts) == holding[0]
    assert max(last for _, last, _, _, _ in groups) == holding[-1]


def test_line_groups_left_for_later_stay_bounded(monkeypatch):
    """The compiled pass merges its line groups once per input; many distinct long messages are merged as
    they come (their texts never hold more than a chunk's worth), with the findings of merging at once."""
    from npudoctor.logs import scanner as scanner_module

    lines = [b"[ERROR] GE(%d,python):2025-01-01-00:00:00.000.000 [a.cc:1] failed %d " % (n, n) + b"x" * 3000
             for n in range(400)]
    data = b"\n".join(lines) + b"\n"
    seen = []
    real = Scanner._merge_pending

    def spy(self):
        seen.append(self._pending_chars)
        real(self)

    monkeypatch.setattr(Scanner, "_merge_pending", spy)
    monkeypatch.setattr(scanner_module, "CHUNK_BYTES", 100_000)

    def scan() -> List[Any]:
        scanner = Scanner()
        scanner.scan_stream("plog-1.log", (data[at:at + 65536] for at in range(0, len(data), 65536)))
        return [scanner.result()]

    compiled_docs, pure_docs = _documents(monkeypatch, scan)
    assert compiled_docs == pure_docs
    assert json.loads(compiled_docs[0])["findings"][0]["count"] == 400
    assert max(seen) <= 100_000 + 65536 + 4000 and seen.count(0) < len(seen)  # a chunk beyond the bound


def test_the_compiled_pass_groups_no_coarser_than_the_record_grammar(monkeypatch):
    """_plogscan.c takes any level word (Python keeps the ones RECORD_FIRST_LINE takes) and leaves out of a
    line's shape only what RECORD_VARYING matches in full (so its groups are never coarser than the Python
    shapes, whatever grammar the Python side grows)."""
    from npudoctor.logs import scanner as scanner_module

    # MindSpore's forms (`(pid:tid,`, short fractions) are left out of the shape only as RECORD_VARYING says
    plog_pass = compiled_plog_pass()
    assert plog_pass is not None
    data = (b"[ERROR] ME(1:2,p):2025-01-01-00:00:00.5.12 failed\n"
            b"[ERROR] ME(3:4,p):2025-01-01-00:00:01.7.99 failed\n")
    assert [len(plog_pass(data, 0, len(data), (b"[ERROR]",), 0, forms)[3]) for forms in range(4)] == [2, 2, 2, 1]
    taken = ((scanner_module.RECORD_VARYING.fullmatch("(1:2,p):2025-01-01-00:00:00") is not None)
             + 2 * (scanner_module.RECORD_VARYING.fullmatch("(1,p):2025-01-01-00:00:00.5.12") is not None))
    assert taken == scanner_module.VARYING_FORMS

    varying = ["(1,python):2025-01-01-00:00:00.000.000", "(-1,null):1970-01-01-00:03:44.763.803",
               "(123, python):2024-07-04 13:26:26", "(9,a b):2024-07-04-13:26:26"]
    for part in varying:
        assert scanner_module.RECORD_VARYING.fullmatch(part), part
    levels = ["ERROR", "FOO", "CRITICAL", "EXCEPTION", "Error", "3", "123", "ERRORERRORERRORERROR"]
    data = b"".join(b"[%s] GE(%s [a.cc:1] failed ErrCode=507011\n" % (level.encode(), part.encode()[1:])
                    for level in levels for part in varying) * 3

    def scan() -> List[Any]:
        scanner = Scanner()
        scanner.scan_bytes("plog-1.log", data)
        return [scanner.result()]

    compiled_docs, pure_docs = _documents(monkeypatch, scan)
    assert compiled_docs == pure_docs
    levels = json.loads(compiled_docs[0])["summary"]["levels"]
    assert levels.get("ERROR") == 3 * len(varying) and "FOO" not in levels
