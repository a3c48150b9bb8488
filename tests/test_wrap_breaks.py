"""The shared wrap helper (report/terminal.py): a word longer than the line (a path, LD_LIBRARY_PATH, a C++
name) breaks after a separator when asked, so that a path stays readable and can be pasted back together."""

from __future__ import annotations

from npudoctor.report.terminal import WORD_BREAKS, wrap

LONG_PATH = "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/lib/libgomp.so.1"


def test_a_long_path_breaks_after_a_slash_and_nothing_is_lost():
    lines = wrap(f"SHADOWED   libgomp.so.1: {LONG_PATH} wins", 40, rest="           ", breaks=WORD_BREAKS)
    assert lines == ["SHADOWED   libgomp.so.1: /root/.pyenv/",
                     "           versions/3.11.7/lib/",
                     "           python3.11/site-packages/",
                     "           torch/lib/libgomp.so.1 wins"]


def test_a_word_without_separators_breaks_at_the_last_column():
    mangled = "_ZN5torch8autograd24fire_node_creation_hooksERKN3c1013intrusive_ptrINS0_4NodeEEE"
    lines = wrap(mangled, 40, "  ", "  ", breaks=WORD_BREAKS)
    assert [len(line) for line in lines[:-1]] == [40] * (len(lines) - 1)
    assert "".join(line.strip() for line in lines) == mangled


def test_without_breaks_the_default_is_unchanged():
    assert wrap(LONG_PATH, 40) == [LONG_PATH[:40], LONG_PATH[40:]]
    assert wrap(f"fix: {LONG_PATH}", 40, words_may_break=False) == ["fix:", LONG_PATH]
