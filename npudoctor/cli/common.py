"""What every command module shares: the exit codes, the one-line usage error, list options.

Exit codes (the contract scripts rely on): 0 nothing failed; 1 a FAIL or ERROR finding (or a WARN under
``--fail-on warn``); 2 usage error, unreadable input, or the tool could not run.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import click

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def fail_usage(message: str) -> click.exceptions.Exit:
    """Print a one-line error and leave with exit code 2."""
    click.echo(f"npudoctor: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_USAGE)


def split_list(values: Sequence[str]) -> Tuple[str, ...]:
    """Accept both `--only A --only B` and `--only A,B`."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())
