"""Real samples captured on Ascend systems, copied from ../shared/samples with their source header.

Each file starts with ``# source:`` / ``# what:`` / ``# note:`` lines and a ``# ---`` line; the verbatim text
follows. :func:`sample_text` returns only the verbatim text. Samples written by us for cases no real capture
covers live in ``tests/data/constructed/`` and say so in their header.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

from npudoctor.parsers.text import strip_header

DATA = Path(__file__).resolve().parent / "data"
SAMPLES = DATA / "samples"
CONSTRUCTED = DATA / "constructed"
# The full shared collection beside the checkout, when present. Tests never need it: the samples they walk
# are copied (with their headers) into tests/data/samples; see real_samples().
SHARED_SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "samples"


def real_samples(pattern: str) -> List[Path]:
    """Every real sample in tests/data/samples (any folder) whose file name matches ``pattern``, one per
    name, sorted by name: what the walk-every-sample tests read, shared collection beside or not."""
    by_name: Dict[str, Path] = {}
    for path in sorted(SAMPLES.rglob(pattern)):
        if path.is_file() and path.name != "INDEX.md":
            by_name.setdefault(path.name, path)
    return [by_name[name] for name in sorted(by_name)]


def sample_path(name: str) -> Path:
    """A sample by file name, from tests/data/samples (or tests/data/constructed)."""
    for folder in (SAMPLES, SAMPLES / "system", SAMPLES / "logs", CONSTRUCTED):
        candidate = folder / name
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"sample {name} is not in tests/data; copy it from ../shared/samples with its header")


def sample_text(name: str) -> str:
    return strip_header(sample_path(name).read_text(encoding="utf-8"))


def smi(key: str) -> str:
    """The verbatim text of the one npu-smi sample in tests/data whose file name contains ``key``."""
    (path,) = [p for folder in (SAMPLES, SAMPLES / "system", CONSTRUCTED) for p in folder.glob(f"npu-smi*{key}*")]
    return sample_text(path.name)


def sample_bytes(path: Path) -> bytes:
    """The verbatim body of a sample file, as bytes (some samples are not valid UTF-8)."""
    data = path.read_bytes()
    _, separator, body = data.partition(b"\n# ---\n")
    return body if separator else data


def sample_data(name: str) -> bytes:
    """The verbatim body of a sample by file name, as bytes (some samples are not valid UTF-8)."""
    return sample_bytes(sample_path(name))
