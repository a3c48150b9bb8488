"""Seeded mutation of real samples for the readers' fuzz tests (tests/test_fuzz_readers.py).

Every case is reproducible from ``NPUDOCTOR_FUZZ_SEED`` and its index; ``NPUDOCTOR_FUZZ_TRIALS`` scales the
number of cases (1.0 = the default few thousand per reader; 10 for a long hunt).
"""

from __future__ import annotations

import math
import os
import random
import re
from typing import Any, List

SEED = int(os.environ.get("NPUDOCTOR_FUZZ_SEED", "1234"))
SCALE = float(os.environ.get("NPUDOCTOR_FUZZ_TRIALS", "1"))

# What readers trip over: numbers no reading can be, separators, quotes, brackets, control and wide characters.
HOSTILE = ["inf", "nan", "-inf", "Infinity", "NaN", "1e400", "1e309", "-1e309", "9" * 40, "9" * 5000, "0.",
           "-0", ".5", "1_000", "١٢", "１２", "4294967295", "-1", "", " ", "NA", "N/A", "-", "--", "|", "||", "/",
           " / ", "+", "+---+", "=", ",", ",,", ";", '"', '""', "'", "\\", "\n", "\r\n", "\t", "[", "]", "{", "}",
           ":", "null", "true", "[1]", '{"a": 1}', "\x00", "\x1b[2J", "\x1b]52;c;SGVsbG8=\x07", "\ufeff",
           "\u202e", "é", "水", "\ufffd", "x" * 3000]
_TOKEN = re.compile(r"[^\s|,:\"{}\[\]]+")


def cases(name: str, count: int) -> List[random.Random]:
    """``count`` (scaled) generators, one per case, seeded from the reader's name and the case index."""
    total = max(1, int(count * SCALE))
    return [random.Random(f"{SEED}:{name}:{index}") for index in range(total)]


def mutate_text(rng: random.Random, text: str) -> str:
    """``text`` changed in one to four places: tokens replaced, hostile text inserted, spans deleted, lines
    repeated, swapped or cut, characters replaced."""
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if not text:
            text = rng.choice(HOSTILE)
            continue
        at = rng.randrange(len(text))
        if choice < 0.35:
            tokens = list(_TOKEN.finditer(text))
            if tokens:
                token = rng.choice(tokens)
                text = text[:token.start()] + rng.choice(HOSTILE) + text[token.end():]
        elif choice < 0.55:
            text = text[:at] + rng.choice(HOSTILE) + text[at:]
        elif choice < 0.65:
            text = text[:at] + text[at + rng.randint(1, 40):]
        elif choice < 0.8:
            lines = text.split("\n")
            index = rng.randrange(len(lines))
            if rng.random() < 0.5:
                lines.insert(index, lines[rng.randrange(len(lines))])
            else:
                other = rng.randrange(len(lines))
                lines[index], lines[other] = lines[other], lines[index]
            text = "\n".join(lines)
        elif choice < 0.9:
            text = text[:at]
        else:
            code = rng.choice([rng.randrange(32, 127), rng.randrange(0, 32), rng.randrange(128, 0x3000)])
            text = text[:at] + chr(code) + text[at + 1:]
    return text


def hostile_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value of a random type that a reader may not expect where it finds it."""
    pick = rng.randrange(12)
    if pick == 0:
        return int("9" * rng.choice([19, 40, 400, 4000]))
    if pick == 1:
        return rng.choice([math.inf, -math.inf, math.nan, 1e308, -0.0, 1.5])
    if pick == 2:
        return rng.choice(HOSTILE)
    if pick == 3:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 3))] if depth < 3 else []
    if pick == 4:
        return {rng.choice(["id", "status", "a", "", "fail"]): hostile_value(rng, depth + 1)} if depth < 3 else {}
    if pick == 5:
        return rng.choice([True, False, None])
    if pick == 6:
        return -rng.randrange(1 << 70)
    if pick == 7:
        value: Any = 1
        for _ in range(rng.choice([10, 60, 70])):
            value = [value]
        return value
    if pick == 8:
        return "x" * rng.choice([300, 5000])
    return rng.randrange(-5, 1 << 20)


def mutate_json(rng: random.Random, document: Any) -> Any:
    """A copy of ``document`` with one to three values replaced by :func:`hostile_value` or keys removed."""
    import copy

    document = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        parent, key = _random_slot(rng, document)
        if parent is None:
            return hostile_value(rng)
        if isinstance(parent, dict) and rng.random() < 0.2:
            parent.pop(key, None)
        else:
            parent[key] = hostile_value(rng)
    return document


def _random_slot(rng: random.Random, document: Any) -> Any:
    slots = []
    stack = [document]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            slots.append((node, key))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return rng.choice(slots) if slots else (None, None)
