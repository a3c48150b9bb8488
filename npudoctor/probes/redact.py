"""Secrets never leave the node: redaction applied to everything a bundle stores.

>>> redact_env({"HF_TOKEN": "hf_abc", "PATH": "/usr/bin", "DB_PASSWORD": "x"})
{'HF_TOKEN': '<redacted>', 'PATH': '/usr/bin', 'DB_PASSWORD': '<redacted>'}
>>> redact_text("export OPENAI_API_KEY=sk-123 && curl https://bob:hunter2@example.org/x")
'export OPENAI_API_KEY=<redacted> && curl https://bob:<redacted>@example.org/x'
"""

from __future__ import annotations

import re
from typing import Dict, Mapping

REDACTED = "<redacted>"

# A variable whose name says it holds a secret.
SECRET_NAME = re.compile(
    r"(TOKEN|PASSWORD|PASSWD|PASSPHRASE|SECRET|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|COOKIE|SESSION_?ID"
    r"|_KEY$|^KEY$)",
    re.IGNORECASE,
)
_ASSIGNMENT = re.compile(
    r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)(?P<sep>\s*[=:]\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&|]+)"
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]+):(?P<password>[^/\s@]+)@")
_BEARER = re.compile(r"(?i)(authorization:\s*bearer\s+|bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL
)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact_env(variables: Mapping[str, str]) -> Dict[str, str]:
    return {
        name: (REDACTED if is_secret_name(name) and value else redact_text(value)) for name, value in variables.items()
    }


def redact_text(text: str) -> str:
    if not text:
        return text
    text = _PRIVATE_KEY_BLOCK.sub("-----BEGIN PRIVATE KEY-----" + REDACTED + "-----END PRIVATE KEY-----", text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)

    def assignment(match: re.Match) -> str:
        if is_secret_name(match["name"]):
            return f"{match['name']}{match['sep']}{REDACTED}"
        return match.group(0)

    return _ASSIGNMENT.sub(assignment, text)
