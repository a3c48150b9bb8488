"""Log rules as data: ``checks/log_rules.yaml`` plus site files given with ``--rules FILE``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Pattern, Sequence, Tuple

from npudoctor import knowledge
from npudoctor.errors import InputError
from npudoctor.logs.model import BUILTIN_KINDS, SEVERITIES
from npudoctor.model.rulebook import Spec, guard


class RulesError(InputError):
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
    max_chars: int = 0  # a site rule sees at most this much of a line (0: the scanner's own cap)
    # what the subject names, kept as evidence under that name too ("op_type", "op"): every finding that
    # names an operator carries `op` (its node name) and/or `op_type` for readers of the findings
    subject_is: str = ""


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


# The keys of a rule and the types they take (hints: one string or a list of them).
RULE_KEYS: Mapping[str, Tuple[type, ...]] = {
    "id": (str,), "kind": (str,), "severity": (str,), "hints": (str, list), "pattern": (str,),
    "title": (str,), "subject": (str,), "fix": (str,), "any_level": (bool,), "format": (str,),
    "subject_is": (str,)}
REQUIRED_KEYS = ("id", "kind", "pattern", "hints")
# A site rules file is a few KB; more is a mistake or an attack (``--rules /dev/zero``).
MAX_RULES_FILE_BYTES = 1024 * 1024
# Site rules see at most this much of a line: a pattern that backtracks polynomially stays bounded.
SITE_RULE_MAX_CHARS = 4096
# A repeat that may run longer than this counts as a long gap (``.*``, ``\S+``, ``.{0,500}``).
LONG_REPEAT = 100


def _did_you_mean(key: str, known: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"


def _rule(raw: Any, where: str, site: bool = False) -> Rule:
    if not isinstance(raw, Mapping):
        raise RulesError(f"{where}: a rule must be a mapping, got {type(raw).__name__}")
    name = raw.get("id", "?")
    for key, value in raw.items():
        if key not in RULE_KEYS:
            raise RulesError(f"{where}: rule {name!r}: unknown key {key!r}{_did_you_mean(str(key), list(RULE_KEYS))}")
        if not isinstance(value, RULE_KEYS[key]) or (bool not in RULE_KEYS[key] and isinstance(value, bool)):
            expected = " or a list of strings" if key == "hints" else ""
            kind = "true or false" if RULE_KEYS[key] == (bool,) else f"a string{expected}"
            raise RulesError(f"{where}: rule {name!r}: {key} must be {kind}, got {type(value).__name__}")
    missing = [k for k in REQUIRED_KEYS if not raw.get(k)]
    if missing:
        raise RulesError(f"{where}: rule {name!r} lacks {', '.join(missing)}")
    severity = str(raw.get("severity", "error"))
    if severity not in SEVERITIES:
        raise RulesError(f"{where}: rule {raw['id']!r}: severity must be one of {', '.join(SEVERITIES)}")
    hints = raw["hints"]
    if isinstance(hints, str):
        hints = [hints]
    if not all(isinstance(h, str) and h and h.isascii() for h in hints):
        raise RulesError(f"{where}: rule {raw['id']!r}: hints must be non-empty ASCII strings")
    try:
        pattern = re.compile(raw["pattern"])
    except (re.error, RecursionError, OverflowError) as exc:
        raise RulesError(f"{where}: rule {raw['id']!r}: bad pattern ({exc})") from None
    if site:
        risk = backtracking_risk(raw["pattern"])
        if risk:
            raise RulesError(f"{where}: rule {raw['id']!r}: pattern refused: {risk}")
    return Rule(id=raw["id"], kind=raw["kind"], severity=severity, hints=tuple(hints),
                pattern=pattern, title=str(raw.get("title", "")), subject=str(raw.get("subject", "")),
                fix=str(raw.get("fix", "")), any_level=bool(raw.get("any_level", False)),
                format=str(raw.get("format", "")), max_chars=SITE_RULE_MAX_CHARS if site else 0,
                subject_is=str(raw.get("subject_is", "")))


def _sre_parse(pattern: str) -> Any:
    try:
        from re import _parser as parser  # type: ignore[attr-defined]  # Python 3.11+
    except ImportError:  # pragma: no cover - Python < 3.11
        import sre_parse as parser
    return parser.parse(pattern)


def backtracking_risk(pattern: str) -> str:
    """Why ``pattern`` can backtrack badly on a long line ("" when it cannot, as far as we can tell).

    Refused: a long repeat inside another repeat (``(a+)+$``, ``(\\w+\\s?)*x``: exponential), and two or
    more long gaps that can match the same text (``a.*b.*c``: polynomial in the line length). A gap that
    stops at a delimiter it excludes (``[^;]*;``, ``[^\\]]+\\]``) or ends the pattern is not a gap.
    """
    try:
        tree = _sre_parse(pattern)
    except Exception:  # compiled already; a parse failure here only means we cannot tell
        return ""
    gaps = 0

    def walk(items: Any, inside_repeat: bool) -> str:
        nonlocal gaps
        items = list(items)
        for index, (op, arg) in enumerate(items):
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                _low, high, body = arg
                long = high > LONG_REPEAT
                follower = items[index + 1] if index + 1 < len(items) else None
                delimited = _delimited(list(body), follower)
                if inside_repeat and long and not delimited:
                    return "a repeat inside a repeat (such as (a+)+) backtracks exponentially"
                if long and not delimited and follower is not None and _broad(list(body)):
                    gaps += 1
                    if gaps >= 2:
                        return ("two or more long gaps (.*, \\S+, [^x]*) backtrack polynomially; "
                                "bound them (.{0,80}) or end each at a delimiter it excludes ([^;]*;)")
                problem = walk(body, inside_repeat or high > 1)
                if problem:
                    return problem
            elif name == "SUBPATTERN":
                problem = walk(arg[-1], inside_repeat)
                if problem:
                    return problem
            elif name == "BRANCH":
                for branch in arg[1]:
                    problem = walk(branch, inside_repeat)
                    if problem:
                        return problem
            elif name in ("ASSERT", "ASSERT_NOT"):
                problem = walk(arg[1], inside_repeat)
                if problem:
                    return problem
        return ""

    return walk(tree, False)


def _broad(body: List[Any]) -> bool:
    """A repeated item that can match most characters (``.``, ``\\S``, ``\\w``, ``[^x]``)."""
    if len(body) != 1:
        return True
    op, arg = body[0]
    name = str(op)
    if name == "LITERAL":
        return False
    if name == "IN":
        return any(str(o) == "NEGATE" or (str(o) == "CATEGORY" and "_NOT_" in str(a)) for o, a in arg)
    return name in ("ANY", "NOT_LITERAL")


def _delimited(body: List[Any], follower: Any) -> bool:
    """``[^;]*`` followed by ``;``: the repeat cannot give back what the next item needs."""
    if follower is None or len(body) != 1 or str(follower[0]) != "LITERAL":
        return False
    op, arg = body[0]
    if str(op) == "NOT_LITERAL":
        return bool(arg == follower[1])
    if str(op) == "IN" and arg and str(arg[0][0]) == "NEGATE":
        return any(str(o) == "LITERAL" and a == follower[1] for o, a in arg[1:])
    return False


def parse_rules(data: Any, where: str, site: bool = False) -> List[Rule]:
    """Rules from the YAML document ``data`` (``{"rules": [...]}``); ``where`` names it in errors. ``site``
    rules are held to more: patterns known to backtrack badly are refused, lines are capped."""
    if not isinstance(data, Mapping) or not isinstance(data.get("rules"), list):
        raise RulesError(f"{where}: expected a mapping with a 'rules' list")
    for key in data:
        if key != "rules":
            raise RulesError(f"{where}: unknown key {key!r}{_did_you_mean(str(key), ['rules'])}")
    return [_rule(raw, f"{where} rule #{i + 1}", site) for i, raw in enumerate(data["rules"])]


def read_rules_file(path: str) -> Any:
    """The YAML document of a site rules file, read safely (a regular file of at most 1 MiB; aliases
    that expand beyond a small budget are refused)."""
    from npudoctor.probes.safe_open import UnsafeFile, read_file

    try:
        text = read_file(path, MAX_RULES_FILE_BYTES, whole=True).data.decode("utf-8")
    except UnsafeFile as exc:
        if exc.reason == "not-found":
            raise RulesError(f"{path}: no such file") from None
        limit = MAX_RULES_FILE_BYTES // 1024
        raise RulesError(f"{exc}; a rules file must be a regular file of at most {limit} KiB") from None
    except UnicodeDecodeError:
        raise RulesError(f"{path}: not UTF-8 text") from None
    try:
        return knowledge.load_yaml_text(text, str(path))
    except (knowledge.KnowledgeError, ValueError) as exc:
        raise RulesError(str(exc)) from None


def load_rules(extra_files: Iterable[str] = ()) -> RuleSet:
    """The shipped rules, extended (or overridden by id) by site rule files."""
    try:
        shipped = parse_rules(knowledge.load("log_rules"), "log_rules.yaml")
    except knowledge.KnowledgeError as exc:
        raise RulesError(str(exc)) from None
    merged: Dict[str, Rule] = {r.id: r for r in shipped}
    for path in extra_files:
        site = parse_rules(read_rules_file(str(path)), str(path), site=True)
        merged.update({r.id: r for r in site})
    return RuleSet(tuple(merged.values()))


def with_rules(rules: RuleSet, extra: Sequence[Rule]) -> RuleSet:
    """``rules`` and ``extra`` (an extra rule with an existing id replaces it)."""
    if not extra:
        return rules
    merged: Dict[str, Rule] = {r.id: r for r in rules.rules}
    merged.update({r.id: r for r in extra})
    return RuleSet(tuple(merged.values()))


def known_kinds(rules: RuleSet) -> List[str]:
    """Every finding kind a scan with ``rules`` can report (for ``--fail-on KIND``)."""
    return sorted({r.kind for r in rules.rules} | set(BUILTIN_KINDS))


def default_rules() -> RuleSet:
    return load_rules(())


LOG_RULE_STAGE = "log-rules"


def rule_specs(rules: RuleSet) -> List[Spec]:
    """The rulebook's entries for ``rules`` (room "logs"): each rule's ID, title and a documentation made of
    what it finds, the literals that put a line in front of it, and its fix."""
    specs = []
    for rule in rules.rules:
        hints = ", ".join(f"``{hint}``" for hint in rule.hints)
        article = "An" if rule.severity[:1] in "aeiou" else "A"
        text = (f"{article} {rule.severity} finding of kind ``{rule.kind}`` on log lines holding {hints} and "
                "matching the rule's pattern. `npudoctor logs scan` reports it; in `npudoctor check`, LOG001 does "
                f"(with --logs DIR).\n\nFix: {rule.fix or 'none given by the rule'}")
        spec = Spec(rule.id, LOG_RULE_STAGE, rule.title or rule.kind, room="logs", text=text)
        guard(spec)
        specs.append(spec)
    return specs
