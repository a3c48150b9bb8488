"""``npudoctor explain``: a check's documentation or an error code's entry, reflowed to the terminal's width.

Docstrings are written with reST-style ``code`` spans; here they are shown as code (bold, without the
backticks), paragraphs are rewrapped to the width, and lists and indented blocks keep their lines.
"""

from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from rich.console import Console
from rich.text import Text

from npudoctor.report.console import wrap

CODE_SPAN = re.compile(r"``(.+?)``|(?<![`\w])`([^`\n]+?)`(?![`\w])", re.S)
NBSP = "\u00a0"  # textwrap never breaks here: a code span stays on one line
LIST_ITEM = re.compile(r"^\s*(?:[-*]|\d+[.)])\s+")


def _unmark(text: str, spans: List[str], width: int) -> str:
    """``text`` without the backticks; each span's content is kept on one line (NBSP for its spaces) unless
    it is longer than a line."""

    def keep(match: re.Match[str]) -> str:
        code = " ".join((match.group(1) or match.group(2)).split())
        spans.append(code)
        return code.replace(" ", NBSP) if len(code) < width - 8 else code

    return CODE_SPAN.sub(keep, text)


def reflow(text: str, width: int) -> List[Text]:
    """Paragraphs rewrapped to ``width``; list items wrap under themselves; indented blocks stay as written."""
    spans: List[str] = []
    lines: List[str] = []
    for paragraph in re.split(r"\n\s*\n", text.strip("\n")):
        raw = paragraph.splitlines()
        if all(line.startswith("    ") for line in raw):  # a literal block: commands, tables
            lines += [_unmark(line, spans, width) for line in raw]
        elif any(LIST_ITEM.match(line) for line in raw):
            items: List[str] = []
            for line in raw:
                if LIST_ITEM.match(line) or not items:
                    items.append(line.strip())
                else:
                    items[-1] += " " + line.strip()
            for item in items:
                bullet = LIST_ITEM.match(item)
                hang = " " * (len(bullet.group()) if bullet else 0)
                lines += wrap(_unmark(item, spans, width), width, "", hang, words_may_break=False)
        else:
            lines += wrap(_unmark(" ".join(line.strip() for line in raw), spans, width), width,
                          words_may_break=False)
        lines.append("")
    out = []
    for line in lines[:-1]:
        rendered = Text(line.replace(NBSP, " "))
        rendered.highlight_words(sorted(set(spans), key=len, reverse=True), style="bold cyan")
        out.append(rendered)
    return out


def _head(title: str, note: str, width: int) -> List[Text]:
    """``title`` in bold, then ``note`` on the same line when it fits, else on the next."""
    if len(title) + 2 + len(note) <= width:
        return [Text.assemble((title, "bold"), f"  {note}")]
    return [Text(line, style="bold") for line in wrap(title, width, rest="  ")] + [Text(f"  {note}")]


def needs(spec: Any) -> str:
    """What a run must be given for ``spec`` to be reported, for people ("--level 2", "--prof DIR")."""
    if spec.room == "node":
        return f"--level {spec.level}" if spec.level > 1 else ""
    return spec.needs


def check_text(spec: Any, width: int, settings: Optional[Mapping[str, Any]] = None,
               profile_name: str = "") -> List[Text]:
    """A spec's documentation, then the value in force of each setting it reads (profile ``profile_name``)."""
    where = f"stage {spec.stage}, level {spec.level}" if spec.room == "node" else f"{spec.room}: {needs(spec)}"
    head = _head(f"{spec.id}: {spec.title}", f"({where})", width)
    body = [*head, Text(""), *reflow(spec.doc, width)]
    if settings:
        body += [Text(""), Text(f"Settings in force (profile {profile_name}):", style="bold")]
        for key, value in settings.items():
            body += [Text(line) for line in wrap(f"{key} = {_setting(value)}", width, "  ", "      ")]
    return body


def _setting(value: Any) -> str:
    if value is None:
        return "null (not judged)"
    return str(value).lower() if isinstance(value, bool) else str(value)


ROOM_HEADINGS = {
    "node": "Node checks (npudoctor check)",
    "prof": "Profiling checks (npudoctor prof analyze DIR, npudoctor check --prof DIR)",
    "collective": "Collective checks (npudoctor collective, npudoctor onboard)",
    "logs": "Log rules (npudoctor logs scan PATH; in check, LOG001 with --logs DIR)",
}


def list_text(specs: Sequence[Any], width: int) -> List[str]:
    """``list-checks``: the IDs grouped by room, one line each (ID, stage, title, and the level or option an
    ID needs beyond its room's command), wrapped to ``width``."""
    lines: List[str] = []
    for room, heading in ROOM_HEADINGS.items():
        group = [spec for spec in specs if spec.room == room]
        if not group:
            continue
        id_width = max(8, *(len(spec.id) + 1 for spec in group))
        stage_width = 0 if room == "logs" else 11
        lines += [*([""] if lines else []), f"{heading}:"]
        for spec in group:
            need = needs(spec) if room == "node" else ""
            label = f"{spec.id:<{id_width}}{spec.stage:<{stage_width}}" if stage_width else f"{spec.id:<{id_width}}"
            lines += wrap(f"{spec.title}{f' ({need})' if need else ''}", width, label, " " * len(label))
    return lines


def code_text(info: Any, width: int) -> List[Text]:
    """An error code's entry: title, what kind of code it is and whose, meaning, cause, fix, where it is
    defined. The same for every spelling of the code and for `explain` and `logs explain`."""
    kind = {"warn": "warning code", "info": "not an error code"}.get(info.severity, "error code")
    whose = kind if info.severity == "info" else f"{info.family or 'CANN'} {kind}"
    known = "" if info.exact else "; not listed itself, explained by its family"
    body = [*_head(f"{info.code}: {info.title or 'error code'}", f"({whose}{known})", width), Text("")]
    advice = "" if info.written or not info.exact else " (for its family)"
    for label, value in (("Meaning", info.meaning), ("Cause", info.cause), (f"Fix{advice}", info.fix)):
        lines = [line.strip() for line in value.splitlines() if line.strip()]
        if len(lines) > 1:  # steps written one a line stay one a line
            body += [Text(f"{label}:"), *reflow("\n".join(f"- {line}" for line in lines), width)]
        elif lines:
            body += reflow(f"{label}: {lines[0]}", width)
    if info.source:
        body += reflow(f"Defined in: {info.source}", width)
    return body


def render(topics: List[Any], console: Console, profile: Any = None) -> None:
    """Each topic (a rulebook Spec or a CodeInfo), separated by a blank line; a spec with the value in force of
    each of its settings in ``profile``."""

    def settings_of(spec: Any) -> Tuple[Optional[Mapping[str, Any]], str]:
        if profile is None or not spec.settings:
            return None, ""
        from npudoctor.knowledge import setting

        return {key: setting(profile, key) for key in spec.settings}, profile.name

    for index, topic in enumerate(topics):
        if index:
            console.print("")
        lines: Optional[List[Text]] = (check_text(topic, console.width, *settings_of(topic)) if hasattr(topic, "room")
                                       else code_text(topic, console.width))
        for line in lines or []:
            console.print(line)
