# Types of the compiled resolver built from _resolver.c (see npudoctor.elf.compiled).
from typing import List, Optional, Tuple

from npudoctor.elf.reader import ResolverLayout

SOURCE_SHA256: str

def unresolved(
    layouts: List[ResolverLayout], referrers: List[int]
) -> Tuple[List[Tuple[int, bytes, Optional[str], Optional[str]]], List[Tuple[int, int]]]: ...

def largest_word(data: object, offset: int, count: int) -> int: ...
def demangle(names: List[str]) -> Optional[List[Optional[str]]]: ...
