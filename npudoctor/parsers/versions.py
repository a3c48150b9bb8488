"""Comparable versions for every numbering the Ascend stack uses (pure; no ``packaging`` dependency).

One grammar covers them all: dot-separated parts, each a number (a release part) or a qualifier made of
letters and an optional number (``RC3``, ``T6``, ``rc1``, ``post12``, ``alpha002``); a number directly
followed by a qualifier (``2.5.1rc1``) is split in two. A ``+local`` suffix (``2.1.0+cpu``) is kept but
ignored when comparing, as pip does.

Ordering, per part: test builds (``T``) < alpha < beta < ``rc`` < a release number < ``post``. So CANN
``8.0.RC3`` < ``8.0.0`` < ``8.1.T6`` < ``8.1.RC1``, and torch_npu ``2.1.0`` < ``2.1.0.post12``. A missing
part counts as release number 0: ``2.1`` == ``2.1.0``.

>>> Version.parse("8.0.RC3") < Version.parse("8.0.0") < Version.parse("8.1.T6") < Version.parse("8.1.RC1")
True
>>> Version.parse("2.1.0.post10") < Version.parse("2.1.0.post12") < Version.parse("2.2.0")
True
>>> Version.parse("2.5.1rc1") < Version.parse("2.5.1") == Version.parse("2.5.1+cpu")
True
>>> V = Version.parse
>>> V("24.1.rc1") < V("24.1.0") < V("25.0.rc1") < V("25.0.rc1.1")
True
>>> Version.parse("2.1.0+cpu").release, Version.parse("2.1.0+cpu").local, Version.parse("8.0.RC3").major_minor
((2, 1, 0), 'cpu', (8, 0))
>>> parse_version("not a version") is None
True
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence, Tuple

# Rank of a part kind; a plain number is a release part.
_RELEASE = 40
_QUALIFIER_RANK = {
    "dev": 0,
    "t": 5,
    "a": 10,
    "alpha": 10,
    "b": 20,
    "beta": 20,
    "c": 30,
    "rc": 30,
    "pre": 30,
    "post": 50,
}
_UNKNOWN_QUALIFIER = 15  # some other pre-release word: after test builds, before release candidates
_PIECE = re.compile(r"(\d+)|([A-Za-z]+)(\d*)")
_VERSION_START = re.compile(r"^[vV]?\d")

Part = Tuple[int, int]  # (rank, number)


@functools.total_ordering
@dataclass(frozen=True)
class Version:
    text: str
    parts: Tuple[Part, ...]
    local: str = ""

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse ``text``; raises ValueError when it does not start with a number (``v2.1.0`` is allowed)."""
        raw = (text or "").strip()
        if not _VERSION_START.match(raw):
            raise ValueError(f"not a version: {text!r}")
        public, _, local = raw.lstrip("vV").partition("+")
        parts = []
        for piece in public.split("."):
            if not piece:
                continue
            position = 0
            for match in _PIECE.finditer(piece):
                if match.start() != position:
                    raise ValueError(f"not a version: {text!r}")
                position = match.end()
                if match.group(1) is not None:
                    parts.append((_RELEASE, int(match.group(1))))
                else:
                    word = match.group(2).lower()
                    rank = _QUALIFIER_RANK.get(word, _UNKNOWN_QUALIFIER)
                    parts.append((rank, int(match.group(3) or 0)))
            if position != len(piece):
                raise ValueError(f"not a version: {text!r}")
        return cls(raw, tuple(parts), local)

    def _padded(self, length: int) -> Tuple[Part, ...]:
        return self.parts + ((_RELEASE, 0),) * (length - len(self.parts))

    def _trimmed(self) -> Tuple[Part, ...]:
        parts = list(self.parts)
        while parts and parts[-1] == (_RELEASE, 0):
            parts.pop()
        return tuple(parts)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._trimmed() == other._trimmed()

    def __lt__(self, other: Version) -> bool:
        length = max(len(self.parts), len(other.parts))
        return self._padded(length) < other._padded(length)

    def __hash__(self) -> int:
        return hash(self._trimmed())

    def __str__(self) -> str:
        return self.text

    @property
    def release(self) -> Tuple[int, ...]:
        """The leading numeric parts: ``8.0.RC3`` -> (8, 0), ``2.1.0.post12`` -> (2, 1, 0)."""
        numbers = []
        for rank, number in self.parts:
            if rank != _RELEASE:
                break
            numbers.append(number)
        return tuple(numbers)

    @property
    def major_minor(self) -> Tuple[int, int]:
        release = (*self.release, 0, 0)
        return release[0], release[1]

    def truncated(self, count: int) -> Version:
        """The first ``count`` parts: ``8.0.RC3.alpha002`` -> ``8.0.RC3`` (the CANN release it belongs to)."""
        return Version(self.text, self.parts[:count], self.local)

    def same_release_as(self, other: Version) -> bool:
        """True when ``self`` is ``other`` or a build of it (``8.0.RC3.alpha002`` of ``8.0.RC3``).

        >>> Version.parse("8.0.RC3.alpha002").same_release_as(Version.parse("8.0.RC3"))
        True
        >>> Version.parse("8.0.0").same_release_as(Version.parse("8.0.RC3"))
        False
        """
        return self.truncated(len(other.parts)) == other


def parse_version(text: Optional[str]) -> Optional[Version]:
    """:meth:`Version.parse`, or None for text that is no version (missing, ``N/A``, garbage)."""
    if not text:
        return None
    try:
        return Version.parse(text)
    except ValueError:
        return None


def newest(versions: Iterable[Optional[Version]]) -> Optional[Version]:
    present = [v for v in versions if v is not None]
    return max(present) if present else None


def in_range(version: Version, low: str, high: str) -> bool:
    """``low <= version <= high`` (a firmware range from driver/version.info ``compatible_version_fw``).

    >>> firmware = Version.parse("7.1.0.11.220")
    >>> in_range(firmware, "7.0.0", "7.1.99"), in_range(firmware, "7.2.0", "7.5.99")
    (True, False)
    """
    low_v, high_v = parse_version(low), parse_version(high)
    if low_v is None or high_v is None:
        return False
    return low_v <= version <= high_v


# --- Huawei inner versions: V100R001C15SPC012B220 ------------------------------------------------------

_INNER = re.compile(r"^V(\d+)R(\d+)C(\d+)(?:SPC(\d+))?(?:B(\d+))?$", re.IGNORECASE)


@dataclass(frozen=True)
class InnerVersion:
    """Huawei's internal release code. The ``V..R..C..`` prefix names a release train that driver and CANN
    share; ``compatible_version`` lists in version files name trains, singly or as ``[low,high]`` ranges.

    >>> iv = InnerVersion.parse("V100R001C15SPC012B220")
    >>> iv.train, iv.train_code
    ((100, 1, 15), 'V100R001C15')
    """

    text: str
    train: Tuple[int, int, int]

    @classmethod
    def parse(cls, text: str) -> InnerVersion:
        match = _INNER.match((text or "").strip())
        if not match:
            raise ValueError(f"not an inner version: {text!r}")
        return cls(text.strip(), (int(match.group(1)), int(match.group(2)), int(match.group(3))))

    @property
    def train_code(self) -> str:
        v, r, c = self.train
        return f"V{v}R{r:03d}C{c:02d}"


def parse_inner_version(text: Optional[str]) -> Optional[InnerVersion]:
    try:
        return InnerVersion.parse(text or "")
    except ValueError:
        return None


def train_in_list(inner: InnerVersion, items: Sequence[Tuple[str, ...]]) -> bool:
    """Whether ``inner``'s train is listed in a ``compatible_version`` list (single trains or ranges).

    >>> from npudoctor.parsers.keyvalue import parse_bracket_list
    >>> listed = parse_bracket_list("[V100R001C13,V100R001C19],[V100R001C30]")
    >>> train_in_list(InnerVersion.parse("V100R001C15SPC012B220"), listed)
    True
    >>> train_in_list(InnerVersion.parse("V100R001C21B058"), listed)
    False
    """
    for item in items:
        bounds = [parse_inner_version(code) for code in item]
        if any(b is None for b in bounds):
            continue
        low = bounds[0].train  # type: ignore[union-attr]
        high = bounds[-1].train  # type: ignore[union-attr]
        if low <= inner.train <= high:
            return True
    return False
