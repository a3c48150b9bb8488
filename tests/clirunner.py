"""The click test runner the CLI tests share."""

from __future__ import annotations

from click.testing import CliRunner


def cli_runner() -> CliRunner:
    """A CliRunner whose result keeps stdout and stderr apart, on every click the project supports."""
    try:  # click < 8.2 mixes stderr into stdout unless told not to; 8.2 keeps them apart and dropped the flag
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()
