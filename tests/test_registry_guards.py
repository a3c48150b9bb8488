"""The registry's promises for any check, including broken ones: a crash, a probe that breaks, a check
that says nothing each become an ERROR finding of that check, and the other checks still run."""

from __future__ import annotations

from typing import Iterable

from npudoctor.checks.registry import CheckContext, CheckSpec, Outcome, passed, run_check
from npudoctor.model.finding import Status
from npudoctor.model.profile import NodeProfile


def _spec(func) -> CheckSpec:
    return CheckSpec("TST001", "pcie", "a test check", func)


def _context(node) -> CheckContext:
    return CheckContext(node.runner(), NodeProfile("default", {}))


def test_check_that_yields_nothing_is_an_error(node):
    def silent(ctx: CheckContext) -> Iterable[Outcome]:
        return iter(())

    [finding] = run_check(_spec(silent), _context(node))
    assert (finding.id, finding.status, finding.detail) == ("TST001", Status.ERROR, "check returned no outcome")


def test_probe_that_breaks_is_an_error_naming_the_facts(node, monkeypatch):
    ctx = _context(node)

    def broken_gather(name, context):
        raise OSError("the bus went away")

    monkeypatch.setattr(ctx, "_gather", broken_gather)

    def reads_pci(context: CheckContext) -> Iterable[Outcome]:
        context.facts("pci")
        yield passed("never")

    [finding] = run_check(_spec(reads_pci), ctx)
    assert finding.status is Status.ERROR
    assert finding.detail == "could not gather pci facts: OSError: the bus went away"
    # The broken probe is not asked again: the next check reading it gets the same ERROR at once.
    [again] = run_check(_spec(reads_pci), ctx)
    assert again.detail == finding.detail


def test_crashing_check_is_an_error_with_where(node):
    def crashes(ctx: CheckContext) -> Iterable[Outcome]:
        yield passed("first")
        raise KeyError("chips")

    [finding] = run_check(_spec(crashes), _context(node))
    assert finding.status is Status.ERROR
    assert finding.detail.startswith("check crashed: KeyError: 'chips' (")
