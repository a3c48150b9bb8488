"""No secret leaves the node: planted secrets of every kind, in every place a bundle takes text from."""

from __future__ import annotations

import json
import os
import stat
import tarfile
import time
from typing import Optional

import pytest

from npudoctor import api
from npudoctor.probes.bundle import build_bundle, write_bundle
from npudoctor.probes.runner import RecordingRunner
from npudoctor.probes.sources import Command
from npudoctor.untrusted.redact import REDACTED, is_secret_name, redact_text

# label -> (text as it appears in the wild, the secret part that must never be stored). Values are made up
# for this test in the formats the services issue.
BY_VALUE = {
    "github-token": ("token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 used", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    "github-pat": ("git clone https://github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123@github.com/x",
                   "abcdefghijklmnopqrstuvwxyz0123"),
    "gitlab-token": ("glpat-xY9zAbCdEfGhIjKlMnOp in ci", "xY9zAbCdEfGhIjKlMnOp"),
    "huggingface-token": ("login with hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567 ok", "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"),
    "slack-token": ("hook xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    "openai-style-key": ("client(sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34)", "Ab12Cd34Ef56Gh78Ij90Kl12Mn34"),
    "aws-access-key-id": ("key id AKIAIOSFODNN7EXAMPLE,", "IOSFODNN7EXAMPLE"),
    "jwt": ("jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U x",
            "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    "pem-private-key": ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEApemsecretline\n"
                        "-----END RSA PRIVATE KEY-----\n", "MIIEowIBAAKCAQEApemsecretline"),
    "openssh-private-key-cut": ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAsshsecret",
                                "b3BlbnNzaC1rZXktdjEAsshsecret"),
    "pgp-private-key": ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBFpgpsecretline\n=ab12\n"
                        "-----END PGP PRIVATE KEY BLOCK-----\n", "lQOYBFpgpsecretline"),
    "authorization-basic": ("> Authorization: Basic dXNlcjpzM2NyZXRwYXNz\r\n", "dXNlcjpzM2NyZXRwYXNz"),
    "bearer": ("curl -H 'Authorization: Bearer abcdefghijklmnop123' https://x", "abcdefghijklmnop123"),
    "bearer-alone": ("sent bearer zyxwvutsrq987654 upstream", "zyxwvutsrq987654"),
    "url-empty-user": ("REDIS=redis://:redispw123@cache:6379/0", "redispw123"),
    "url-at-in-password": ("proxy http://proxyuser:p@ssw0rd@proxy.local:3128 set", "ssw0rd"),
    "json-key": ('{"password": "jsonpw123", "user": "x"}', "jsonpw123"),
    "dict-key": ("config {'hf_token': 'dictsecret456', 'lr': 0.1}", "dictsecret456"),
    "flag": ("python train.py --hf_token flagsecret789 --lr 0.1", "flagsecret789"),
    "flag-equals": ("torchrun x.py --api-key=flagsecret790", "flagsecret790"),
}
# Variables whose name says secret, whatever their value looks like (set_env.sh output, `env -0`).
BY_NAME = {"MYSQL_PWD": "mysqlpw1", "DB_PASS": "dbpass2", "CI_JOB_JWT": "cijwt3", "GITHUB_PAT": "ghpat4",
           "DB_PASSWORD": "twowords spacedsecret", "HF_TOKEN": "hftok5", "AWS_SECRET_ACCESS_KEY": "awssecret6"}


def secrets():
    """Every secret, and every word of a secret with spaces (no part of it may remain)."""
    values = [secret for _text, secret in BY_VALUE.values()] + list(BY_NAME.values())
    return values + [word for value in values for word in value.split() if " " in value]


@pytest.mark.parametrize("label", sorted(BY_VALUE))
def test_each_value_pattern_is_redacted_and_counted(label):
    text, secret = BY_VALUE[label]
    found: dict = {}
    out = redact_text(text, found)
    assert secret not in out and REDACTED in out and found


def test_private_key_and_bearer_redaction_keep_what_surrounds_them():
    # Mutation guards: removing the private-key or bearer rule must fail here.
    text = "before\n" + BY_VALUE["pem-private-key"][0] + "after " + BY_VALUE["bearer"][0]
    out = redact_text(text)
    assert out.startswith("before\n-----BEGIN RSA PRIVATE KEY-----<redacted>-----END RSA PRIVATE KEY-----\nafter ")
    assert "Authorization: Bearer <redacted>" in out and "abcdefghijklmnop123" not in out
    assert redact_text("Bearer abcdefghijklmnop123") == "Bearer <redacted>"


def test_names_and_ordinary_text():
    for name in BY_NAME:
        assert is_secret_name(name), name
    for name in ("PATH", "PWD", "TOKENIZERS_PARALLELISM", "HCCL_CONNECT_TIMEOUT", "RegisterPass", "tiling_key"):
        assert not is_secret_name(name), name
    plog = "[INFO] GE(370,python3):2023 [buffer_fusion_pass_registry.cc:42]370 RegisterPass:type=0, name=X\n"
    assert redact_text(plog) == plog


def test_nul_separated_environment_is_redacted_per_variable():
    env0 = "A=1\0" + "\0".join(f"{k}={v}" for k, v in BY_NAME.items()) + "\0B=2\0"
    out = redact_text(env0)
    assert out.startswith("A=1\0MYSQL_PWD=<redacted>\0") and out.endswith("\0B=2\0")
    assert not any(s in out for s in secrets())


def test_assignments_on_their_own_line_and_inside_a_line():
    lines = "".join(f"{k}={v}\n" for k, v in BY_NAME.items()) + "export DB_PASS='quoted secret'\n"
    out = redact_text(lines)
    assert out.splitlines()[0] == "MYSQL_PWD=<redacted>" and "export DB_PASS=<redacted>" in out
    assert not any(s in out for s in [*secrets(), "quoted", "secret'"])
    assert redact_text("run MYSQL_PWD=inline1 && next; x DB_PASS: inline2, y") == \
        "run MYSQL_PWD=<redacted> && next; x DB_PASS: <redacted>, y"


def test_redaction_is_linear_on_hostile_and_large_text():
    hostile = ["eyJ" * 300_000, "x://u:" + "@" * 1_000_000, "'token':" * 200_000, "token\n" * 200_000,
               "-----BEGIN RSA PRIVATE KEY-----\n" * 30_000, "A=" * 500_000, "--password " * 200_000]
    for text in hostile:
        started = time.perf_counter()
        redact_text(text)
        assert time.perf_counter() - started < 2.0, text[:20]


def everything_in(bundle) -> bytes:
    with tarfile.open(bundle) as tar:
        return b"".join(tar.extractfile(m).read() for m in tar if m.isfile())


def assert_clean(blob: bytes) -> None:
    for secret in secrets():
        assert secret.encode() not in blob, secret


def test_planted_secrets_never_reach_the_bundle(node, tmp_path):
    from tests.nodes import healthy_910b_node

    healthy_910b_node(node)  # an Ascend node: the HCCL stage reads /etc/hccn.conf only where NPUs are
    every_text = "\n".join(text for text, _secret in BY_VALUE.values())
    # Recorded variables carry the value patterns; the name-secret ones are not recorded at all.
    node.setenv(**BY_NAME, **{f"ASCEND_PLANTED_{i}": text for i, (text, _s) in enumerate(BY_VALUE.values())})
    node.file("/etc/hccn.conf", "address_0=29.1.170.143\nnetmask_0=255.255.0.0\n" + every_text + "\n")
    node.file("/root/ascend/log/debug/plog/plog-1_20250101000000000.log",
              "".join(f"[ERROR] APP(1,python3):2025-01-01-00:00:00.000.000 [x.cc:1] {line}\n"
                      for line in every_text.splitlines()))
    bundle = tmp_path / "node.tar.gz"
    api.collect(str(bundle), root=str(node.root), environ=node.env,
                options={"logs_dirs": ("/root/ascend/log",)})
    blob = everything_in(bundle)
    assert b"29.1.170.143" in blob and b"plog" in blob  # the files were recorded
    assert_clean(blob)
    with tarfile.open(bundle) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
    env = next(r for r in manifest["records"] if r["kind"] == "env")
    assert set(BY_NAME) <= set(env["names_not_recorded"]) and not set(BY_NAME) & set(env["variables"])
    labels = {label for found in manifest["redactions"].values() for label in found}
    assert {"github-token", "private-key-block", "authorization", "url-password", "password", "--hf_token"} <= labels
    assert oct(stat.S_IMODE(os.stat(bundle).st_mode)) == "0o600"


def test_set_env_output_and_command_output_are_redacted(node, tmp_path):
    set_env = node.file("/usr/local/Ascend/ascend-toolkit/set_env.sh",
                        "".join(f"export {k}='{v}'\n" for k, v in BY_NAME.items())
                        + "export LD_LIBRARY_PATH=/opt/lib64\nexport UNREAD_SETTING=plainvalue\n")
    node.command("tool", stdout="\n".join(text for text, _s in BY_VALUE.values()))
    recorder = RecordingRunner(node.runner())
    # The libraries probe's own command: a child bash sourcing set_env.sh and printing `env -0`.
    result = recorder.run(Command(("bash", "-c", 'source "$1" >/dev/null 2>&1; env -0', "npudoctor", str(set_env)),
                                  env=(("PATH", os.environ["PATH"]),)))
    assert "MYSQL_PWD=mysqlpw1\0" in result.stdout
    recorder.run(Command(("tool",)))
    folder = tmp_path / "folder-bundle"
    write_bundle(str(folder), build_bundle(recorder.records, {}))
    blob = b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())
    assert_clean(blob)
    assert b"MYSQL_PWD=<redacted>\0" in blob
    # Like the environment record: only what checks read keeps its value.
    assert b"LD_LIBRARY_PATH=/opt/lib64\0" in blob and b"UNREAD_SETTING=<not recorded>\0" in blob
    assert b"plainvalue" not in blob
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE((folder / "raw").stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()} == {0o600}


@pytest.mark.parametrize("text, kept, gone", [
    ("/etc/passwd: Permission denied while reading the node", "Permission denied", None),
    ("C:\\etc\\passwd: no such file", "no such file", None),
    ("host node1-hf_abcdefghijklmnopqrstuvwxyz123456 up", "node1-", "hf_abcdefghijklmnopqrstuvwxyz123456"),
    ("module_ghp_abcdefghijklmnopqrstuvwxyz0123456789 x", "module_", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("run-sk-abcdefghijklmnopqrstuvwx1234", "run-", "sk-abcdefghijklmnopqrstuvwx1234"),
])
def test_a_path_ending_in_passwd_keeps_the_next_word_and_a_token_after_a_dash_goes(
        text: str, kept: str, gone: Optional[str]) -> None:
    """Issue 33: ``/etc/passwd: <redacted> ...`` hid the message; ``node1-hf_...`` kept its token."""
    out = redact_text(text)
    assert kept in out
    if gone is not None:
        assert gone not in out and REDACTED in out
    else:
        assert REDACTED not in out
