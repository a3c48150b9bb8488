"""Pure readers of Ascend ``key=value`` version files.

``/usr/local/Ascend/driver/version.info``, ``firmware/version.info``, ``ascend_toolkit_install.info``,
``ascend_nnae_install.info`` and ``ascend-toolkit/latest/version.cfg`` are all one ``key=value`` per line,
no spaces around ``=``. Values may hold bracketed lists: ``[V100R001C13,V100R001C19],[V100R001C30]`` (ranges
and single items) or ``[7.6.0.1.220:8.0.0]`` (inner version : public version) in version.cfg.

>>> info = parse_key_values('''package_name=Ascend-cann-nnae
... version=8.0.RC3
... innerversion=V100R001C19SPC001B137
... compatible_version=[V100R001C13,V100R001C19],[V100R001C30]
... arch=x86_64''')
>>> info.values["version"], info.values["arch"]
('8.0.RC3', 'x86_64')
>>> parse_bracket_list(info.values["compatible_version"])
[('V100R001C13', 'V100R001C19'), ('V100R001C30',)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

# Keys are identifiers; a shell prompt or a command line copied with the file never matches.
_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)=(.*?)\s*$")
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")


@dataclass(frozen=True)
class KeyValues:
    """The ``key=value`` pairs of one file, and the lines that were neither pairs, comments nor blank."""

    values: Dict[str, str] = field(default_factory=dict)
    other_lines: int = 0

    @property
    def empty(self) -> bool:
        return not self.values


def parse_key_values(text: str) -> KeyValues:
    """Read ``key=value`` lines; ``#`` comments and blank lines are skipped; a later key wins.

    >>> kv = parse_key_values("# version: 1.0\\ntoolkit_running_version=[7.6.0.1.220:8.0.0]\\n")
    >>> kv.values, kv.other_lines
    ({'toolkit_running_version': '[7.6.0.1.220:8.0.0]'}, 0)
    >>> parse_key_values("\\x7fELF\\x02\\x01 garbage").empty
    True
    """
    values: Dict[str, str] = {}
    other = 0
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(line)
        if match:
            values[match.group(1)] = match.group(2).strip().strip('"')
        else:
            other += 1
    return KeyValues(values, other)


def parse_bracket_list(value: str) -> List[Tuple[str, ...]]:
    """``[a,b],[c]`` to ``[("a", "b"), ("c",)]``; ``[x:y]`` (version.cfg) to ``[("x", "y")]``.

    >>> parse_bracket_list("[7.0.0,7.1.99]")
    [('7.0.0', '7.1.99')]
    >>> parse_bracket_list("[23.0.rc3,23.0.rc3.],[23.0.0,23.0.0.]")
    [('23.0.rc3', '23.0.rc3.'), ('23.0.0', '23.0.0.')]
    >>> parse_bracket_list("[7.6.0.1.220:8.0.0]")
    [('7.6.0.1.220', '8.0.0')]
    >>> parse_bracket_list("8.0.0")
    []
    """
    items = []
    for inner in _BRACKETS.findall(value or ""):
        separator = ":" if ":" in inner and "," not in inner else ","
        parts = tuple(part.strip() for part in inner.split(separator) if part.strip())
        if parts:
            items.append(parts)
    return items


def cann_version_from_cfg(values: Mapping[str, str], kind: str = "toolkit") -> Optional[str]:
    """The CANN version in ``version.cfg``: the public one after the colon, not the internal build before it.

    >>> cann_version_from_cfg({"toolkit_installed_version": "[7.6.0.1.220:8.0.0]"})
    '8.0.0'
    >>> cann_version_from_cfg({"runtime_running_version": "[7.6.0.1.220:8.0.0]"}, "nnae") is None
    True
    """
    for key in (f"{kind}_installed_version", f"{kind}_running_version", "runtime_installed_version"):
        items = parse_bracket_list(values.get(key, ""))
        if items and len(items[0]) == 2:
            return items[0][1]
    return None
