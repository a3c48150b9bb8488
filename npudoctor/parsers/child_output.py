"""The first error a child process printed (a rank under torchrun, the level-2 import probe, the level-3
training step), so that a finding quotes the child's own words instead of the launcher's last line
(torchrun ends with a row of ``=`` and "ChildFailedError").

>>> first_error_line('''[rank1]: Traceback (most recent call last):
... [rank1]:   File "x.py", line 3, in <module>
... [rank1]: RuntimeError: Numpy is not available
... [rank0]: Traceback (most recent call last):
... [rank0]: RuntimeError: Numpy is not available
... ======
... torch.distributed.elastic.multiprocessing.errors.ChildFailedError:''')
'RuntimeError: Numpy is not available'
>>> first_error_line("npudoctor collective: rank 1: DistBackendError: HCCL error 7\\n=====\\n")
'DistBackendError: HCCL error 7'
>>> first_error_line("all fine\\n") is None
True
"""

from __future__ import annotations

import re
from typing import List, Optional

# torchrun's per-rank prefix ("[rank3]: ") and the one our own ranks print ("npudoctor collective: rank 3: ")
_RANK_PREFIX = re.compile(r"^(?:\[(?:default)?rank\d+\]:\s?|npudoctor collective: rank \S+: )")
# "ValueError: ...", "torch.distributed.DistBackendError: ...", "ModuleNotFoundError: No module named 'numpy'"
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b:?.*$")
_LAUNCHER = ("torch.distributed.elastic", "ChildFailedError", "torch.distributed.run", "torchrun")
_MAX = 300


def _lines(output: str) -> List[str]:
    return [_RANK_PREFIX.sub("", line.rstrip()) for line in output.splitlines()]


def first_error_line(output: str) -> Optional[str]:
    """The exception line of the first traceback in ``output`` (the root cause, before "During handling"),
    else the first line that reads as an exception or an ``ERROR``; None when none does. Lines of torchrun
    itself (ChildFailedError, elastic) are never chosen: they say a child failed, not why."""
    lines = _lines(output)
    for index, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            for follow in lines[index + 1:]:
                if follow and not follow[0].isspace() and _EXCEPTION_LINE.match(follow):
                    if not any(word in follow for word in _LAUNCHER):
                        return follow.strip()[:_MAX]
                    break
    for line in lines:
        text = line.strip()
        if any(word in text for word in _LAUNCHER):
            continue
        if _EXCEPTION_LINE.match(text) or text.startswith(("ERROR:", "error:", "Error:")):
            return text[:_MAX]
    return None
