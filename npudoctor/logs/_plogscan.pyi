# Types of the compiled plog pass built from _plogscan.c (see npudoctor.logs.scanner.compiled_plog_pass).
from typing import Dict, List, Tuple

SOURCE_SHA256: str

def plog_pass(
    data: bytes, begin: int, end: int, literals: Tuple[bytes, ...], line_base: int, forms: int = 0,
    dense_order: int = 0, search: int = 0
) -> Tuple[Dict[bytes, int], int, int, List[Tuple[int, int, int, int, int]]]: ...
