"""Secrets never leave the node: redaction applied to everything a bundle stores and every report shows.

Two rules, applied to every text a bundle stores (command output, files, plogs, the environment):

* **by name**: the value of a variable, JSON/dict key or command-line flag whose name says it holds a secret
  (``HF_TOKEN=``, ``MYSQL_PWD=``, ``"password": "..."``, ``--hf_token X``), whatever the separator around it
  (``env -0`` output is NUL-separated: each variable is redacted on its own);
* **by value**: strings that are secrets whatever they are called: GitHub/GitLab/Hugging Face/Slack/OpenAI
  style tokens, AWS access key ids, JWTs, PEM and PGP private key blocks, ``Authorization:`` credentials,
  bearer tokens and passwords in URLs.

Every pattern is linear in the text (no nested quantifiers; starts anchored by a literal or a word boundary)
and skipped entirely when its cheap literal marker is absent, so MBs of plog cost little.

>>> redact_env({"HF_TOKEN": "hf_abc", "PATH": "/usr/bin", "DB_PASSWORD": "x"})
{'HF_TOKEN': '<redacted>', 'PATH': '/usr/bin', 'DB_PASSWORD': '<redacted>'}
>>> redact_text("curl https://bob:hunter2@example.org/x -H 'Authorization: Basic Ym9iOmh1bnRlcjI='")
"curl https://bob:<redacted>@example.org/x -H 'Authorization: Basic <redacted>'"
>>> redact_text("export DB_PASS=two words")  # a line of its own: the rest of the line is the value
'export DB_PASS=<redacted>'
>>> redact_text("A=1\\0MYSQL_PWD=two words\\0B=2")
'A=1\\x00MYSQL_PWD=<redacted>\\x00B=2'
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, Dict, List, Mapping, MutableMapping, Optional, Pattern, Tuple

REDACTED = "<redacted>"

# Words (of a name split at _ - . and camelCase) that say a value is a secret. Whole words only:
# TOKENIZERS_PARALLELISM, BYPASS or --tokenizer_path are no secrets.
_SECRET_WORDS = frozenset((
    "token", "password", "passwords", "passwd", "passphrase", "secret", "secrets", "jwt", "credential",
    "credentials", "cookie", "cookies", "apikey", "privatekey", "accesskey", "secretkey",
))
# ... unless the name ends in a word that makes it about the secret, not the secret (EOS_TOKEN_ID, TOKEN_FILE).
_ABOUT_WORDS = frozenset(("id", "ids", "type", "types", "count", "num", "len", "length", "size", "file", "path",
                          "dir", "name", "limit", "max", "min", "index", "idx", "enabled", "required"))
# Short words that are secrets only as the last word of an UPPER_SNAKE or lower_snake name: DB_PASS,
# MYSQL_PWD, GITHUB_PAT, --pass, but not RegisterPass (a function name in a plog) or tiling_key.
_LAST_WORDS = frozenset(("pass", "pwd", "pw", "pat", "auth", "otp"))
_SECRET_PAIRS = frozenset((("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"),
                           ("client", "secret"), ("signing", "key"), ("encryption", "key"), ("ssh", "key")))
# Names made of secret words that hold no secret.
_NOT_SECRET = frozenset(("PWD", "OLDPWD", "SSH_AUTH_SOCK", "PASSWORD_STORE_DIR", "EOS_TOKEN", "BOS_TOKEN",
                         "PAD_TOKEN", "UNK_TOKEN", "SEP_TOKEN", "CLS_TOKEN", "MASK_TOKEN"))
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """``HF_TOKEN``, ``MYSQL_PWD``, ``DB_PASS``, ``CI_JOB_JWT``, ``GITHUB_PAT``, ``apiKey``, ``hf-token``...

    >>> [is_secret_name(n) for n in ("HF_TOKEN", "CI_JOB_JWT_V2", "hfToken", "DB_PASS", "OPENAI_API_KEY")]
    [True, True, True, True, True]
    >>> [is_secret_name(n) for n in ("TOKENIZERS_PARALLELISM", "PWD", "RegisterPass", "tilingKey", "eos_token_id")]
    [False, False, False, False, False]
    """
    if name.upper() in _NOT_SECRET:
        return False
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words:
        return False
    if words[-1] not in _ABOUT_WORDS and any(w in _SECRET_WORDS for w in words):
        return True
    if any(pair in _SECRET_PAIRS for pair in zip(words, words[1:])):
        return True
    snake = name == name.upper() or name == name.lower()
    return snake and (words[-1] in _LAST_WORDS or (words[-1] == "key" and name == name.upper()))


class _lazy:  # lower-case: it stands where re.compile stood
    """A pattern compiled on first use: every command now imports this module (findings are redacted), and
    the rules below cost several milliseconds to compile; most runs meet no marker and never compile them."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: Optional[Pattern[str]] = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


# (label, literal markers (any present -> run), pattern, replacement) for secrets found by their value.
_Rule = Tuple[str, Tuple[str, ...], Any, Callable[["re.Match[str]"], str]]


def _keep(group: int) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group(group) + REDACTED


def _word_start(m: re.Match[str]) -> str:
    """The whole match, unless it is the end of a longer word (checked here, not by a leading \\b, so that the
    pattern starts with a literal and the regex engine scans for it fast). A token right after ``-`` or ``_``
    (``node1-hf_...``, ``module_ghp_...``) is a token all the same: only a letter or digit before it keeps it."""
    before = m.string[m.start() - 1:m.start()]
    return m.group(0) if before and before.isalnum() else REDACTED


_TOKEN_TAIL = r"[A-Za-z0-9_-]"
_VALUE_RULES: List[_Rule] = [
    ("github-token", ("gh",), _lazy(r"gh[pousr]_[A-Za-z0-9]{30,255}"), _word_start),
    ("github-token", ("github_pat_",), _lazy(r"github_pat_[A-Za-z0-9_]{30,255}"), _word_start),
    ("gitlab-token", ("gl",), _lazy(r"gl(?:pat|dt|cbt|ptt|rt|oas|ft|imt|agent|soat)-[A-Za-z0-9_-]{20,255}"),
     _word_start),
    ("huggingface-token", ("hf_",), _lazy(r"hf_[A-Za-z0-9]{30,255}"), _word_start),
    ("huggingface-token", ("api_org_",), _lazy(r"api_org_[A-Za-z0-9]{30,255}"), _word_start),
    ("slack-token", ("xox", "xapp-"), _lazy(r"x(?:ox[abposrce]|app)-[A-Za-z0-9-]{10,255}"), _word_start),
    ("openai-style-key", ("sk-",), _lazy(r"sk-[A-Za-z0-9_-]{20,255}"), _word_start),
    ("aws-access-key-id", ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
     _lazy(r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)[A-Z0-9]{16}(?![A-Za-z0-9])"), _word_start),
    # (the lookbehind: only the first eyJ of a run starts a match, so a run of them is scanned once)
    ("jwt", ("eyJ",),
     _lazy(r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,4096}\.[A-Za-z0-9_-]{5,8192}\.[A-Za-z0-9_-]{0,4096}"),
     _word_start),
    # Authorization: Basic dXNlcjpwYXNz / Bearer x / token x / Digest username="", ...: all of it, to the
    # end of the line or the closing quote (the scheme word stays).
    ("authorization", ("uthorization", "UTHORIZATION"),
     _lazy(r"(?i)(\b(?:proxy-)?authorization\b[\"']?[ \t]*[:=][ \t]*[\"']?"
                r"(?:(?:basic|bearer|token|digest|negotiate|ntlm|aws4-hmac-sha256)[ \t]+)?)[^\r\n\"'\x00]+"),
     _keep(1)),
    ("bearer-token", ("earer", "EARER"), _lazy(r"(?i)(\bbearer[ \t]+)[A-Za-z0-9._~+/=-]{8,}"), _keep(1)),
    # scheme://user:password@host, the user possibly empty (redis://:pw@host), an @ possibly inside the
    # password (http://u:p@ss@proxy): the password runs to the last @ before the host.
    ("url-password", ("://",),
     _lazy(r"(?<=[A-Za-z0-9])(://[^/\s:@\"'<>]{0,256}:)[^/\s\"'<>\x00]{0,1024}@"),
     lambda m: m.group(1) + REDACTED + "@"),
]

_PRIVATE_BLOCK = _lazy(r"-----BEGIN ((?:[A-Z0-9]+ ){0,4})PRIVATE KEY( BLOCK)?-----")

# Secrets by name. Values: a quoted string (escapes allowed) or an unquoted run.
_QUOTED = r"\"(?:[^\"\\\r\n\x00]|\\.){0,8192}\"|'(?:[^'\\\r\n\x00]|\\.){0,8192}'"
# NAME=value on a line of its own (env, set_env output, .env files): the rest of the line is the value.
_LINE_ASSIGNMENT = _lazy(
    r"^([ \t]*(?:export[ \t]+|declare -x[ \t]+)?)([A-Za-z_][A-Za-z0-9_.-]{0,255})=(?!=)"
    r"(" + _QUOTED + r"|[^\r\n\x00]*)", re.M)
# Every secret name holds one of these (lower-cased); only lines holding one are searched for names, which
# keeps the per-match work off the thousands of `key=value` pairs in a plog.
_NAME_MARKERS = ("tok", "pass", "pw", "secret", "jwt", "cred", "cookie", "key", "pat", "auth", "otp")
# NAME=value, NAME: value inside a line (plog text, a shell command line).
_ASSIGNMENT = _lazy(
    r"(?<![A-Za-z0-9_.-])([A-Za-z_][A-Za-z0-9_.-]{0,255})([ \t]*[=:][ \t]*)(?![:/])"
    r"(" + _QUOTED + r"|[^\s,;&|\x00\"'}\])]+)")
# "password": "x", 'hf_token': 'x' (JSON, Python dict reprs, YAML flow).
_KEYED = _lazy(
    r"([\"'])([A-Za-z0-9_.-]{1,256})\1([ \t]*[:=][ \t]*)(" + _QUOTED + r"|[^\s,}\]\x00]+)")
# --hf_token X, --hf-token=X, -password X
_FLAG = _lazy(r"(?<![A-Za-z0-9_-])(--?[A-Za-z][A-Za-z0-9_-]{0,127})([ \t]+|=)(" + _QUOTED + r"|[^\s\"'\x00]+)")


Found = MutableMapping[str, int]


def _count(found: Optional[Found], label: str) -> None:
    if found is not None:
        found[label] = found.get(label, 0) + 1


def _redact_private_blocks(text: str, found: Optional[Found]) -> str:
    """PEM and PGP private key blocks, BEGIN to END; a block without its END line (the text was cut) is
    redacted to the end. str.find, not a lazy regex: no rescanning per BEGIN."""
    out: List[str] = []
    position = 0
    while True:
        begin = _PRIVATE_BLOCK.search(text, position)
        if begin is None:
            break
        end_marker = f"-----END {begin.group(1)}PRIVATE KEY{begin.group(2) or ''}-----"
        end = text.find(end_marker, begin.end())
        out.append(text[position:begin.start()])
        out.append(begin.group(0) + REDACTED + end_marker)
        _count(found, "private-key-block")
        if end < 0:
            position = len(text)
            break
        position = end + len(end_marker)
    if not out:
        return text
    out.append(text[position:])
    return "".join(out)


def _by_name_in(text: str, found: Optional[Found]) -> str:
    def line(m: re.Match[str]) -> str:
        if not is_secret_name(m.group(2)) or m.group(3) in ("", REDACTED):
            return m.group(0)
        _count(found, m.group(2))
        return f"{m.group(1)}{m.group(2)}={REDACTED}"

    def inline(m: re.Match[str]) -> str:
        if not is_secret_name(m.group(1)) or m.group(3) == REDACTED:
            return m.group(0)
        if m.group(2).strip() == ":" and m.string[m.start() - 1:m.start()] in ("/", "\\"):
            return m.group(0)  # "/etc/passwd: Permission denied": a file's name before a message, no secret
        _count(found, m.group(1))
        return f"{m.group(1)}{m.group(2)}{REDACTED}"

    def keyed(m: re.Match[str]) -> str:
        if not is_secret_name(m.group(2)) or REDACTED in m.group(4):
            return m.group(0)
        _count(found, m.group(2))
        quote = m.group(4)[0] if m.group(4)[:1] in ("'", '"') else ""
        return f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{quote}{REDACTED}{quote}"

    def flag(m: re.Match[str]) -> str:
        if not is_secret_name(m.group(1).lstrip("-")) or m.group(3) == REDACTED:
            return m.group(0)
        _count(found, m.group(1))
        return f"{m.group(1)}{m.group(2)}{REDACTED}"

    if "=" in text:
        text = _LINE_ASSIGNMENT.sub(line, text)
    if "=" in text or ":" in text:
        text = _ASSIGNMENT.sub(inline, text)
        if '"' in text or "'" in text:
            text = _KEYED.sub(keyed, text)
    if "-" in text:
        text = _FLAG.sub(flag, text)
    return text


def _by_name(text: str, found: Optional[Found]) -> str:
    """Secrets by name, searched only in the lines holding a marker word."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a lower-case form of another length: offsets differ, search it all
        return _by_name_in(text, found)
    spans: List[Tuple[int, int]] = []
    for marker in _NAME_MARKERS:
        position = lowered.find(marker)
        while position >= 0:
            start = text.rfind("\n", 0, position) + 1
            end = text.find("\n", position)
            end = len(text) if end < 0 else end
            spans.append((start, end))
            position = lowered.find(marker, end)
    if not spans:
        return text
    spans.sort()
    out: List[str] = []
    done = 0
    for start, end in spans:
        if end <= done:
            continue
        start = max(start, done)
        out.append(text[done:start])
        out.append(_by_name_in(text[start:end], found))
        done = end
    out.append(text[done:])
    return "".join(out)


def redact_text(text: str, found: Optional[Found] = None) -> str:
    """``text`` with every secret replaced by ``<redacted>``; ``found`` (when given) counts what was
    redacted, by variable name or pattern label, never by value."""
    if not text:
        return text
    if "\x00" in text:  # env -0, /proc/*/environ: one variable per NUL-terminated item
        return "\x00".join(_redact_item(item, found) for item in text.split("\x00"))
    return _redact(text, found)


def _redact_item(item: str, found: Optional[Found]) -> str:
    name, sep, value = item.partition("=")
    if sep and value and _is_variable_name(name) and is_secret_name(name):
        _count(found, name)
        return f"{name}={REDACTED}"
    return _redact(item, found)


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,255}\Z")


def _is_variable_name(name: str) -> bool:
    return bool(_VARIABLE_NAME.match(name))


# Every marker above in two searches: a short text (a finding's detail, a process name) holding none has
# nothing to redact, decided at once instead of one search per rule. The value markers keep their case (as
# the rules test them: "gh" is not "GH"), the name markers are searched in the lower-cased text. Long texts
# (MBs of plog in a bundle) go the per-rule way, which finds them with str.find.
_VALUE_MARKER = re.compile("|".join(sorted({re.escape(marker) for rule in _VALUE_RULES for marker in rule[1]}
                                           | {"PRIVATE KEY"}, key=len, reverse=True)))
_NAME_MARKER = re.compile("|".join(sorted(map(re.escape, _NAME_MARKERS), key=len, reverse=True)))
_SHORT_TEXT = 4096


def _redact(text: str, found: Optional[Found]) -> str:
    if len(text) <= _SHORT_TEXT and not _VALUE_MARKER.search(text) and not _NAME_MARKER.search(text.lower()):
        return text
    if "PRIVATE KEY" in text:
        text = _redact_private_blocks(text, found)
    for label, markers, pattern, replace in _VALUE_RULES:
        if any(marker in text for marker in markers):
            def counted(m: re.Match[str], label: str = label, replace: Callable[..., str] = replace) -> str:
                _count(found, label)
                return replace(m)

            text = pattern.sub(counted, text)
    return _by_name(text, found)


def redact_env(variables: Mapping[str, str], found: Optional[Found] = None) -> Dict[str, str]:
    """Each variable on its own: a secret name hides the whole value; other values lose secret patterns."""
    redacted: Dict[str, str] = {}
    for name, value in variables.items():
        if is_secret_name(name) and value:
            _count(found, name)
            redacted[name] = REDACTED
        else:
            redacted[name] = redact_text(value, found)
    return redacted
