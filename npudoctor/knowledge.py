"""Knowledge as data: the YAML files under the top-level ``checks/`` and ``profiles/`` folders.

They ship inside the wheel as ``npudoctor/_data/{checks,profiles}``; in a source checkout (editable
install, tests) they are read from the repository itself. Parsed files are cached per process.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(kind: str) -> Path:
    """The folder holding shipped ``kind`` data ("checks" or "profiles")."""
    shipped = _PACKAGE_DIR / "_data" / kind
    if shipped.is_dir():
        return shipped
    source = _PACKAGE_DIR.parent / kind
    if source.is_dir():
        return source
    raise FileNotFoundError(f"npudoctor data folder {kind!r} is missing from this installation")


class KnowledgeError(Exception):
    """A knowledge or profile file is missing or malformed (one-line reason)."""


def load_yaml_file(path: Path) -> Any:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KnowledgeError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeError(f"{path}: cannot read ({exc})") from None
    # libyaml's loader when PyYAML was built with it: the compatibility matrix parses ~10x faster.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise KnowledgeError(f"{path}:{where} not valid YAML ({getattr(exc, 'problem', exc)})") from None


# Nodes after aliases are expanded: a 1 KB "billion laughs" file expands to 10**9 nodes.
MAX_YAML_NODES = 200_000


def load_yaml_text(text: str, source: str) -> Any:
    """Parse YAML someone else wrote (a site rules file): safe types only; a document whose aliases expand
    beyond :data:`MAX_YAML_NODES` nodes is refused with a KnowledgeError naming ``source``. The events are
    counted before anything is built (the parser does not expand aliases)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        if "&" in text:  # no anchor, no alias
            sizes: Dict[str, int] = {}
            stack: List[List[Any]] = [[None, 0]]  # per open collection: its anchor, its expanded size
            for event in yaml.parse(text, Loader=loader):
                if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
                    size = 1 if isinstance(event, yaml.ScalarEvent) else sizes.get(event.anchor or "", 1)
                    if isinstance(event, yaml.ScalarEvent) and event.anchor:
                        sizes[event.anchor] = 1
                    stack[-1][1] += size
                elif isinstance(event, yaml.CollectionStartEvent):
                    stack.append([event.anchor, 1])
                elif isinstance(event, yaml.CollectionEndEvent):
                    anchor, size = stack.pop()
                    if anchor:
                        sizes[anchor] = size
                    stack[-1][1] += size
                if stack[-1][1] > MAX_YAML_NODES:
                    raise KnowledgeError(f"{source}: YAML aliases expand to more than {MAX_YAML_NODES:,} "
                                         f"nodes (an alias bomb?); refused")
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise KnowledgeError(f"{source}:{where} not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    except RecursionError:
        raise KnowledgeError(f"{source}: nested too deeply; refused") from None


@functools.cache
def load(name: str) -> Any:
    """Load the shipped knowledge file ``checks/<name>.yaml``."""
    return load_yaml_file(data_dir("checks") / f"{name}.yaml")


def profile_names() -> List[str]:
    return sorted(p.stem for p in data_dir("profiles").glob("*.yaml"))


def profile_path(name_or_path: str) -> Optional[Path]:
    """A shipped profile by name, or a path to a site profile."""
    if os.sep in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return Path(name_or_path)
    candidate = data_dir("profiles") / f"{name_or_path}.yaml"
    return candidate if candidate.exists() else None
