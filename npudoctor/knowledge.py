"""Knowledge as data: the YAML files under the top-level ``checks/`` and ``profiles/`` folders.

They ship inside the wheel as ``npudoctor/_data/{checks,profiles}``; in a source checkout (editable
install, tests) they are read from the repository itself. Parsed files are cached per process.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, List, Optional

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
