"""The leak verdict on the recorded corpus (``tests/data/leak_corpus``: real training loops on CPU torch, each
recorded with a MemoryMonitor by ``python bench/leak_corpus.py``): no clean run called a leak, every leak
found with the cause its construction has, at check --level 3's and train-step's step counts (40, 50), at 200
steps and over the whole run, on two seeds (but the leak under a variable batch's noise, from 200 steps: see
``FOUND_FROM``); the bytes/step estimate against the bytes kept by construction."""

from __future__ import annotations

import pytest

from tests import leak_corpus as corpus

RUNS = corpus.runs()
COUNTS = (40, 50, 200, 300)


def test_the_corpus_holds_both_seeds_of_every_shape():
    names = {run["name"] for run in RUNS}
    assert len(RUNS) == 2 * len(names) and {run["seed"] for run in RUNS} == {0, 1}
    assert sum(1 for name in names if name.startswith("clean_")) >= 10
    assert sum(1 for name in names if name.startswith("leak_")) >= 12


@pytest.mark.parametrize("run", RUNS, ids=lambda run: f"{run['name']}-{run['seed']}")
def test_every_verdict_is_right_at_the_default_step_counts_and_at_200(run):
    records = corpus.records(run)
    assert records[-1]["step"] + 1 == 300 and records[0]["schema"] == "npudoctor.memlog/2"
    for count in COUNTS:
        verdict = corpus.at(records, count)
        assert corpus.right(run, verdict, count), (count, verdict.kind, verdict.cause, verdict.summary)
        if not run["leak"]:
            assert verdict.projected_oom_step is None


KEPT_TENSORS = ("leak_feature_bank", "leak_input_cache", "leak_kept_logits", "leak_kept_outputs", "leak_slow_16k",
                "leak_retain_graph", "leak_variable_64k")


@pytest.mark.parametrize("run", [r for r in RUNS if r["name"] in KEPT_TENSORS],
                         ids=lambda run: f"{run['name']}-{run['seed']}")
def test_the_estimate_is_the_bytes_kept_by_construction(run):
    """Tensors kept per step show in malloc's in-use bytes exactly (RSS grew 20-100x more for kept graphs)."""
    verdict = corpus.at(corpus.records(run), 300)
    assert verdict.series == "malloc_in_use_bytes"
    assert verdict.slope_bytes_per_step == pytest.approx(run["kept_bytes_per_step"], rel=0.05)


def test_a_dataset_cache_is_named_in_the_process_that_keeps_it():
    for run in RUNS:
        if run["name"].startswith("leak_dataset_cache"):
            verdict = corpus.at(corpus.records(run), 200)
            kept = run["kept_bytes_per_step"]
            assert kept <= verdict.slope_bytes_per_step <= 1.6 * kept  # samples, plus their tensor objects
            if run["name"].endswith("_workers"):
                assert verdict.kind == "workers" and verdict.series == "workers_rss_bytes"
                assert "Dataset" in verdict.advice[0]
            else:
                assert verdict.kind == "host" and verdict.series == "malloc_in_use_bytes"


def test_the_shipped_profile_judges_with_these_settings():
    """train-step, check --level 3 and leak analyze read train.leak from the profile: the corpus figures hold."""
    from npudoctor import api
    from npudoctor.workload import leak

    assert leak.LeakSettings.from_mapping(api.load_profile().get("train.leak")) == leak.LeakSettings()


def test_leak_analyze_names_the_workers_on_a_recorded_log(tmp_path):
    import gzip
    import json

    from npudoctor.cli import main
    from tests.clirunner import cli_runner

    run = next(r for r in RUNS if r["name"] == "leak_dataset_cache_workers")
    log = tmp_path / "mem.jsonl"
    with gzip.open(corpus.CORPUS / run["file"], "rb") as handle:
        log.write_bytes(handle.read())  # its '#' header lines are skipped like any foreign line
    text = cli_runner().invoke(main, ["leak", "analyze", str(log)])
    assert text.exit_code == 1 and "memory leak in the DataLoader workers" in " ".join(text.stdout.split())
    assert "workers RSS" in text.stdout
    data = json.loads(cli_runner().invoke(main, ["leak", "analyze", str(log), "--format", "json"]).stdout)
    assert data["kind"] == "workers" and data["cause"] == "workers" and data["schema"] == "npudoctor.leak/2"
    clean = next(r for r in RUNS if r["name"] == "clean_workers_variable")
    with gzip.open(corpus.CORPUS / clean["file"], "rb") as handle:
        (tmp_path / "clean.jsonl").write_bytes(handle.read())
    assert cli_runner().invoke(main, ["leak", "analyze", str(tmp_path / "clean.jsonl")]).exit_code == 0
