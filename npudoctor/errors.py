"""The one base of every error a user can cause or cure: a bad option, an unreadable input, a missing tool.

Its message is one line for the user; the command line prints it as ``npudoctor: error: MESSAGE`` and exits
with code 2, in one place (``LazyGroup.invoke``). A library caller catches :class:`InputError` alone. A check
that breaks is not one of these: it becomes an ERROR finding (``checks.registry.run_check``).
"""


class InputError(Exception):
    """One line for the user, exit code 2."""
