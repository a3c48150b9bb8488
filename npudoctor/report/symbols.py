"""How statuses look to people, in one place (``terminal.status_symbols`` picks the set a stream can print)."""

from npudoctor.model.finding import Status

SYMBOL = {Status.PASS: "✓", Status.WARN: "!", Status.FAIL: "✗", Status.SKIP: "-", Status.ERROR: "E"}
# For streams that cannot encode the symbols above (LANG=C, PYTHONIOENCODING=ascii on old nodes).
ASCII_SYMBOL = {Status.PASS: "+", Status.WARN: "!", Status.FAIL: "x", Status.SKIP: "-", Status.ERROR: "E"}
STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim",
         Status.ERROR: "magenta"}
