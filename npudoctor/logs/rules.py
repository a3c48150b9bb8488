"""Log rules as data: ``checks/log_rules.yaml`` plus site files given with ``--rules FILE``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Pattern, Sequence, Tuple

from npudoctor import knowledge
from npudoctor.model.finding import Status

SEVERITIES: Sequence[str] = ("error", "warn", "fallback", "info")
# How a finding's severity reads, in the statuses people already know from `npudoctor check`.
SEVERITY_STATUS: Mapping[str, Status] = {
    "error": Status.FAIL, "warn": Status.WARN, "fallback": Status.WARN, "info": Status.PASS}


class RulesError(Exception):
    """A rules file is missing or malformed (one-line reason)."""


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str
    severity: str
    hints: Tuple[str, ...]
    pattern: Pattern[str]
    title: str = ""
    subject: str = ""
    fix: str = ""
    any_level: bool = False
    format: str = ""  # the input format this rule's hits reveal ("atc", "torch_npu"), if any


@dataclass(frozen=True)
class RuleSet:
    rules: Tuple[Rule, ...]

    @property
    def any_level_hints(self) -> Tuple[bytes, ...]:
        """Literals that must be found even in INFO/DEBUG plog records (one bytes pass each)."""
        return tuple(dict.fromkeys(h.encode() for r in self.rules if r.any_level for h in r.hints))

    @property
    def all_hints(self) -> Tuple[bytes, ...]:
        return tuple(dict.fromkeys(h.encode() for r in self.rules for h in r.hints))


def _rule(raw: Any, where: str) -> Rule:
    if not isinstance(raw, Mapping):
        raise RulesError(f"{where}: a rule must be a mapping, got {type(raw).__name__}")
    missing = [k for k in ("id", "kind", "pattern", "hints") if not raw.get(k)]
    if missing:
        raise RulesError(f"{where}: rule {raw.get('id', '?')!r} lacks {', '.join(missing)}")
    severity = str(raw.get("severity", "error"))
    if severity not in SEVERITIES:
        raise RulesError(f"{where}: rule {raw['id']!r}: severity must be one of {', '.join(SEVERITIES)}")
    hints = raw["hints"]
    if isinstance(hints, str):
        hints = [hints]
    if not all(isinstance(h, str) and h and h.isascii() for h in hints):
        raise RulesError(f"{where}: rule {raw['id']!r}: hints must be non-empty ASCII strings")
    try:
        pattern = re.compile(str(raw["pattern"]))
    except re.error as exc:
        raise RulesError(f"{where}: rule {raw['id']!r}: bad pattern ({exc})") from None
    return Rule(id=str(raw["id"]), kind=str(raw["kind"]), severity=severity, hints=tuple(hints),
                pattern=pattern, title=str(raw.get("title", "")), subject=str(raw.get("subject", "")),
                fix=str(raw.get("fix", "")), any_level=bool(raw.get("any_level", False)),
                format=str(raw.get("format", "")))


def parse_rules(data: Any, where: str) -> List[Rule]:
    """Rules from the YAML document ``data`` (``{"rules": [...]}``); ``where`` names it in errors."""
    if not isinstance(data, Mapping) or not isinstance(data.get("rules"), list):
        raise RulesError(f"{where}: expected a mapping with a 'rules' list")
    return [_rule(raw, f"{where} rule #{i + 1}") for i, raw in enumerate(data["rules"])]


def load_rules(extra_files: Iterable[str] = ()) -> RuleSet:
    """The shipped rules, extended (or overridden by id) by site rule files."""
    try:
        shipped = parse_rules(knowledge.load("log_rules"), "log_rules.yaml")
        merged: Dict[str, Rule] = {r.id: r for r in shipped}
        for path in extra_files:
            site = parse_rules(knowledge.load_yaml_file(Path(path)), str(path))
            merged.update({r.id: r for r in site})
    except knowledge.KnowledgeError as exc:
        raise RulesError(str(exc)) from None
    return RuleSet(tuple(merged.values()))


def default_rules() -> RuleSet:
    return load_rules(())
