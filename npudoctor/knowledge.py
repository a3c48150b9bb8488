"""Knowledge as data: the YAML files under the top-level ``checks/`` and ``profiles/`` folders.

They ship inside the wheel as ``npudoctor/_data/{checks,profiles}``; in a source checkout (editable
install, tests) they are read from the repository itself. Parsed files are cached per process.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from npudoctor.errors import InputError

_PACKAGE_DIR = Path(__file__).resolve().parent


# The shipped data folders: in the wheel under ``npudoctor/_data/<name>``, in a checkout at the top level, where
# the product card names the knowledge folder ``checks/`` (inside the package, "checks" names check code only).
_SOURCE_FOLDER = {"knowledge": "checks", "profiles": "profiles"}


def data_dir(kind: str) -> Path:
    """The folder holding shipped ``kind`` data ("knowledge" or "profiles")."""
    shipped = _PACKAGE_DIR / "_data" / kind
    if shipped.is_dir():
        return shipped
    source = _PACKAGE_DIR.parent / _SOURCE_FOLDER[kind]
    if source.is_dir():
        return source
    raise FileNotFoundError(f"npudoctor data folder {kind!r} is missing from this installation")


class KnowledgeError(InputError):
    """A knowledge or profile file is missing or malformed (one-line reason)."""


# A profile or rule file is a few KB; the shipped compatibility matrix 8 KB. Larger is a mistake or an attack.
MAX_YAML_BYTES = 4 * 1024 * 1024
# Nesting deeper than this is no profile; libyaml's composer recurses in C and crashes near 100,000 levels.
MAX_YAML_DEPTH = 64
# Nodes after aliases are expanded: a 1 KB "billion laughs" file expands to 10**9 and eats all memory
# in whatever walks it later (str(), a schema check).
MAX_YAML_NODES = 200_000


def _yaml_error(source: str, exc: Exception) -> KnowledgeError:
    mark = getattr(exc, "problem_mark", None)
    where = f" line {mark.line + 1}" if mark is not None else ""
    return KnowledgeError(f"{source}:{where} not valid YAML ({getattr(exc, 'problem', None) or exc})")


def _refuse_bombs(yaml: Any, text: str, loader: Any, source: str) -> None:
    """Walk the parser's events (libyaml's parser is iterative: no recursion, no expansion) and refuse
    deep nesting and alias bombs before anything is built. Linear in the text, stops at the first excess."""
    sizes: Dict[str, int] = {}  # anchor -> expanded node count of the node it names
    stack: List[List[Any]] = [[None, 0]]  # per open collection: its anchor and its expanded node count
    aliases = 0
    for event in yaml.parse(text, Loader=loader):
        kind = type(event)
        if kind is yaml.ScalarEvent:
            stack[-1][1] += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif kind is yaml.AliasEvent:
            aliases += 1
            stack[-1][1] += sizes.get(event.anchor, 1)
        elif kind in (yaml.SequenceStartEvent, yaml.MappingStartEvent):
            if len(stack) > MAX_YAML_DEPTH:
                raise KnowledgeError(f"{source}: nested deeper than {MAX_YAML_DEPTH} levels; refused")
            stack.append([event.anchor, 1])
        elif kind in (yaml.SequenceEndEvent, yaml.MappingEndEvent):
            anchor, count = stack.pop()
            if anchor:
                sizes[anchor] = count
            stack[-1][1] += count
        else:
            continue
        if aliases and stack[-1][1] > MAX_YAML_NODES:
            raise KnowledgeError(
                f"{source}: YAML aliases expand to more than {MAX_YAML_NODES} nodes (an alias bomb?); refused")


def load_yaml_text(text: str, source: str) -> Any:
    """Parse YAML someone else may have written: safe types only, alias bombs and deep nesting refused.

    The one YAML loader of npudoctor (profiles, log rules, knowledge files). Raises :class:`KnowledgeError`
    with one line naming ``source``.
    """
    import yaml

    # libyaml's loader when PyYAML was built with it: the compatibility matrix parses ~10x faster.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _refuse_bombs(yaml, text, loader, source)  # ~0.6 ms for the 8 KB compatibility matrix
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise _yaml_error(source, exc) from None
    except RecursionError:
        raise KnowledgeError(f"{source}: nested too deeply; refused") from None
    except (ValueError, OverflowError) as exc:  # a scalar the YAML types cannot hold, built by PyYAML's constructor
        raise KnowledgeError(f"{source}: {_value_problem(exc)}; refused") from None


def _value_problem(exc: Exception) -> str:
    """One line for a scalar PyYAML's constructor could not build: an integer over Python's digit limit
    (``int()`` refuses 4,300 digits and more), a date that is none (``2024-13-45``)."""
    message = str(exc)
    if "digits" in message:
        return "an integer with more digits than Python reads (4,300)"
    first = message.strip().splitlines()[0][:120] if message.strip() else type(exc).__name__
    return f"a value that cannot be read ({first})"


def load_yaml_file(path: Path) -> Any:
    """A YAML file read through the safe opener: a regular file of at most :data:`MAX_YAML_BYTES`
    (``--profile /dev/zero`` or a FIFO is refused at once), then :func:`load_yaml_text`."""
    from npudoctor.probes.safe_open import UnsafeFile, read_file

    try:
        data = read_file(str(path), MAX_YAML_BYTES, whole=True).data
        text = data.decode("utf-8")
    except UnsafeFile as exc:
        raise KnowledgeError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise KnowledgeError(f"{path}: cannot read ({exc})") from None
    return load_yaml_text(text, str(path))



@functools.cache
def load(name: str) -> Any:
    """Load the shipped knowledge file ``checks/<name>.yaml``."""
    return load_yaml_file(data_dir("knowledge") / f"{name}.yaml")


@functools.cache
def shipped_defaults() -> Dict[str, Any]:
    """Every key of the shipped default profile, dotted, with its value: the one home of each default (the
    schema says what a key may hold, ``profiles/default.yaml`` what it holds unless a profile says otherwise)."""
    from npudoctor.model.profile import flatten

    return flatten(load_yaml_file(data_dir("profiles") / "default.yaml") or {})


def setting(profile: Any, key: str) -> Any:
    """The value in force of profile key ``key``: the profile's, or (a profile built in code without it) the
    shipped default profile's. Code writes no default of its own: each has one home, ``profiles/default.yaml``."""
    missing = object()
    value = profile.get(key, missing)
    return shipped_defaults().get(key) if value is missing else value


def profile_names() -> List[str]:
    return sorted(p.stem for p in data_dir("profiles").glob("*.yaml"))


def profile_path(name_or_path: str, relative_to: Optional[str] = None) -> Optional[Path]:
    """A shipped profile by name, or a path to a site profile (a relative ``extends`` path is looked up
    beside the profile that names it first)."""
    if os.sep in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        if relative_to and not os.path.isabs(name_or_path):
            beside = Path(relative_to) / name_or_path
            if os.path.lexists(beside):
                return beside
        return Path(name_or_path)
    candidate = data_dir("profiles") / f"{name_or_path}.yaml"
    return candidate if candidate.exists() else None
