"""Reading profiling CSV tables: only the needed columns, in chunks, so a several-GB kernel_details stays small.

pyarrow's streaming CSV reader is used where it is installed (multi-threaded, columns chosen before parsing);
otherwise pandas' C parser with ``usecols`` and ``chunksize``. Either way the caller gets pandas DataFrames
with canonical column names (see :mod:`npudoctor.prof.columns`), one chunk at a time.
"""

from __future__ import annotations

import csv
import io
import math
import os
import stat
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

from npudoctor.errors import InputError
from npudoctor.prof.columns import ColumnMap, Resolved, resolve, scale_of

if TYPE_CHECKING:
    import pandas as pd

CHUNK_ROWS = 262_144
# The streaming reader reads ahead several blocks: 1 MiB blocks keep that to ~20 MiB at the same speed
# (measured on a 225 MiB kernel_details: 8-16 MiB blocks held 85-120 MiB).
BLOCK_BYTES = 1 << 20
ARROW_THREADS = True
USE_ARROW = True  # tests turn it off to hold the pandas-only path to the same answers
HEADER_MAX_BYTES = 1 << 20
NULLS = ["", "N/A", "NA", "n/a", "null", "None", "-"]
#: A number beyond this is no reading a profiler writes (times in ns since the epoch stay below it): such a cell
#: (``1e309`` reads as infinity, ``nan``) cannot be read; it is counted and read as empty.
MAX_CELL_VALUE = 2.0 ** 63


class TableError(InputError):
    """A table could not be read (one line: path and reason)."""


def check_regular_file(path: str) -> int:
    """The size of ``path`` if it is a regular file, not reached through a symbolic link; anything else is
    refused."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise TableError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise TableError(f"{path}: a symbolic link (not followed)")
    if not stat.S_ISREG(info.st_mode):
        raise TableError(f"{path}: not a regular file")
    return info.st_size


def read_header(path: str) -> List[str]:
    """The header row of a CSV file (a UTF-8 BOM dropped)."""
    check_regular_file(path)
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEADER_MAX_BYTES)
    except OSError as exc:
        raise TableError(f"{path}: {exc.strerror or exc}") from None
    if b"\0" in head:
        raise TableError(f"{path}: binary data, not a CSV table")
    line, newline, _ = head.partition(b"\n")
    if not newline and len(head) == HEADER_MAX_BYTES:
        raise TableError(f"{path}: no header line in the first {HEADER_MAX_BYTES} bytes")
    from npudoctor.parsers.text import decode_text

    text = decode_text(line).lstrip("\ufeff").rstrip("\r")
    if not text.strip():
        raise TableError(f"{path}: empty file (no header row)")
    try:
        return next(csv.reader(io.StringIO(text)))
    except csv.Error as exc:  # a stray carriage return or NUL-free oddity inside the header line
        raise TableError(f"{path}: header row is not CSV ({exc})") from None


def open_table(path: str, cmap: ColumnMap) -> Resolved:
    return resolve(read_header(path), cmap)


MAX_SHORT_ROWS = 100_000


class ReadNotes:
    """What a read had to forgive. A row with too few cells is read when every wanted cell is there and the
    numeric ones hold numbers (the missing cells are then trailing ones nobody asked for); otherwise it is
    skipped and counted, like a row with too many cells. pyarrow and pandas decide the same way."""

    def __init__(self) -> None:
        self.bad_rows = 0
        self.first_bad_line: Optional[int] = None
        self.short: List[str] = []   # raw text of short rows Arrow handed back, judged after the file
        self.bad_cells = 0  # numbers out of range (inf, nan, beyond MAX_CELL_VALUE), read as empty

    def skip(self, row: Any) -> str:
        actual, expected = getattr(row, "actual_columns", 0), getattr(row, "expected_columns", 0)
        if actual < expected and len(self.short) < MAX_SHORT_ROWS and isinstance(getattr(row, "text", None), str):
            self.short.append(row.text)
            return "skip"
        self.count_bad(getattr(row, "number", None))
        return "skip"

    def count_bad(self, line: Optional[int] = None, rows: int = 1) -> None:
        self.bad_rows += rows
        if self.first_bad_line is None and line is not None:
            self.first_bad_line = line

    def describe(self, path: str) -> Optional[str]:
        parts = []
        if self.bad_rows:
            where = f", first at line {self.first_bad_line}" if self.first_bad_line else ""
            parts.append(f"{self.bad_rows} row(s) with the wrong number of cells skipped{where}")
        if self.bad_cells:
            parts.append(f"{self.bad_cells} cell(s) with a number out of range read as empty")
        return f"{path}: {'; '.join(parts)}" if parts else None


def iter_chunks(path: str, resolved: Resolved, wanted: Sequence[str], numeric: Sequence[str],
                chunk_rows: int = CHUNK_ROWS, notes: Optional[ReadNotes] = None) -> Iterator[Any]:
    """Chunks of the ``wanted`` canonical columns ``path`` has: pyarrow Tables of at least ``chunk_rows`` rows
    (the last one fewer) where pyarrow is installed (a pandas DataFrame for the rest of a file whose numbers
    need the lenient reader), else pandas DataFrames. Columns carry canonical names; ``numeric`` ones are
    floats, the others strings."""
    columns = {name: resolved.found[name] for name in wanted if name in resolved.found}
    if not columns:
        return
    rename = {cell: name for name, cell in columns.items()}
    numeric_cells = {columns[n] for n in numeric if n in columns}
    notes = notes or ReadNotes()
    if USE_ARROW:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            pass
        else:
            yield from _arrow_tables(path, columns, rename, numeric_cells, chunk_rows, notes)
            return
    for frame in _pandas_frames(path, list(columns.values()), numeric_cells, chunk_rows, notes=notes):
        yield _empty_out_of_range(frame, numeric_cells, notes).rename(columns=rename)


def _arrow_tables(path: str, columns: Dict[str, str], rename: Dict[str, str], numeric_cells: Any,
                  chunk_rows: int, notes: ReadNotes) -> Iterator[Any]:
    """The streaming reader's small batches gathered into Tables of about ``chunk_rows`` rows before the
    out-of-range check and the renaming: both have a cost per call and column (per 1 MiB batch 0.05-0.13 s of a
    1M-row table), and the caller groups chunks of that size anyway."""
    import pyarrow as pa

    pending: List[Any] = []
    pending_rows = 0

    def gathered() -> Any:
        table = _empty_out_of_range(pa.Table.from_batches(pending), numeric_cells, notes)
        return table.rename_columns([rename[c] for c in table.schema.names])

    for chunk in _arrow_batches(path, list(columns.values()), numeric_cells, notes):
        if not hasattr(chunk, "num_rows"):  # the lenient reader's DataFrame: what came before goes first
            if pending:
                yield gathered()
                pending, pending_rows = [], 0
            yield _empty_out_of_range(chunk, numeric_cells, notes).rename(columns=rename)
            continue
        pending.append(chunk)
        pending_rows += chunk.num_rows
        if pending_rows >= chunk_rows:
            yield gathered()
            pending, pending_rows = [], 0
    if pending:
        yield gathered()


def _empty_out_of_range(chunk: Any, numeric_cells: Any, notes: ReadNotes) -> Any:
    """``chunk`` (an Arrow Table or a DataFrame) with numbers out of range (inf, nan, beyond
    :data:`MAX_CELL_VALUE`) made empty and counted in ``notes``: ``int()`` of one would raise, a sum of one
    would poison every total, and JSON has no spelling for them."""
    if hasattr(chunk, "num_rows"):
        import pyarrow as pa
        import pyarrow.compute as pc

        arrays = list(chunk.columns)
        changed = False
        for index, name in enumerate(chunk.schema.names):
            if name not in numeric_cells:
                continue
            column = arrays[index]
            total, extremes = pc.sum(column).as_py(), pc.min_max(column).as_py()
            if total is None or (math.isfinite(total) and extremes["min"] >= -MAX_CELL_VALUE
                                 and extremes["max"] <= MAX_CELL_VALUE):
                continue  # the common case, two aggregates: no NaN (the sum would be NaN), nothing out of range
            bad = pc.fill_null(pc.or_(pc.is_nan(column), pc.greater(pc.abs(column), MAX_CELL_VALUE)), False)
            count = pc.sum(bad).as_py() or 0
            if count:
                arrays[index] = pc.if_else(bad, pa.scalar(None, column.type), column)
                notes.bad_cells += count
                changed = True
        return pa.Table.from_arrays(arrays, names=chunk.schema.names) if changed else chunk
    for name in numeric_cells:
        if name in chunk.columns:
            bad = chunk[name].abs() > MAX_CELL_VALUE  # inf too; nan is already empty in this reader
            count = int(bad.sum())
            if count:
                chunk.loc[bad, name] = float("nan")
                notes.bad_cells += count
    return chunk


def iter_frames(path: str, cmap: ColumnMap, resolved: Resolved, wanted: Sequence[str],
                numeric: Sequence[str], chunk_rows: int = CHUNK_ROWS,
                notes: Optional[ReadNotes] = None) -> Iterator[pd.DataFrame]:
    """:func:`iter_chunks` as pandas DataFrames, unit spellings scaled and cell spellings mapped (``cmap``)."""
    for chunk in iter_chunks(path, resolved, wanted, numeric, chunk_rows, notes):
        frame = chunk.to_pandas() if hasattr(chunk, "to_pandas") else chunk
        for name in numeric:
            if name in frame.columns:
                factor = scale_of(cmap, resolved.found[name])
                if factor is not None:
                    frame[name] = frame[name] * factor
        for name, mapping in cmap.values.items():
            if name in frame.columns and mapping:
                frame[name] = frame[name].astype("object").replace(mapping)
        yield frame


def _arrow_batches(path: str, cells: List[str], numeric_cells: Any, notes: ReadNotes) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    types: Dict[str, Any] = {c: (pa.float64() if c in numeric_cells else pa.dictionary(pa.int32(), pa.string()))
                             for c in cells}
    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES, use_threads=ARROW_THREADS),
            convert_options=pacsv.ConvertOptions(include_columns=cells, column_types=types, null_values=NULLS,
                                                 strings_can_be_null=True, quoted_strings_can_be_null=True),
            parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=notes.skip),
        )
    except pa.ArrowInvalid as exc:
        if not _lenient_reader_can(exc):
            raise TableError(f"{path}: {_one_line(exc)}") from None
        # Not UTF-8 (a GBK operator name), not a number in the first block, or a cell larger than a block:
        # the lenient reader does it all.
        notes.bad_rows, notes.short = 0, []
        yield from _pandas_frames(path, cells, numeric_cells, CHUNK_ROWS, notes=notes)
        return
    except OSError as exc:
        raise TableError(f"{path}: {_one_line(exc)}") from None
    done_rows = 0
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            break
        except pa.ArrowInvalid as exc:
            if not _lenient_reader_can(exc):
                raise TableError(f"{path}: {_one_line(exc)}") from None
            # A cell that is not a number where numbers belong, or one larger than a block (a 2 MiB shape
            # list): the rest of the file the slow, lenient way.
            skipped = notes.bad_rows + len(notes.short)
            yield from _short_rows(path, cells, numeric_cells, notes)
            yield from _pandas_frames(path, cells, numeric_cells, CHUNK_ROWS, skip_rows=done_rows + skipped,
                                      notes=notes)
            return
        done_rows += batch.num_rows
        yield batch
    yield from _short_rows(path, cells, numeric_cells, notes)


def _valid_numbers(column: Any) -> Any:
    """True where a text cell is a number or one of the null spellings (a pandas Series of str)."""
    import pandas as pd

    stripped = column.str.strip()
    return stripped.isin(NULLS) | pd.to_numeric(stripped, errors="coerce").notna()


def _short_rows(path: str, cells: List[str], numeric_cells: Any, notes: ReadNotes) -> Iterator[pd.DataFrame]:
    """The short rows Arrow handed back, judged as :class:`ReadNotes` says, as one DataFrame."""
    if not notes.short:
        return
    import pandas as pd

    header = read_header(path)
    index = {cell: header.index(cell) for cell in cells if cell in header}
    records = []
    for text in notes.short:
        values = next(csv.reader(io.StringIO(text)), [])
        if all(i < len(values) for i in index.values()):
            records.append({cell: values[i] for cell, i in index.items()})
        else:
            notes.count_bad()
    notes.short = []
    if not records:
        return
    frame = pd.DataFrame.from_records(records, columns=list(index))
    frame = _judge_short(frame, list(index), numeric_cells, notes)
    if len(frame):
        yield _convert(frame, list(index), numeric_cells)


def _judge_short(frame: Any, cells: List[str], numeric_cells: Any, notes: ReadNotes) -> Any:
    import pandas as pd

    keep = frame[cells].notna().all(axis=1) if len(cells) else pd.Series(True, index=frame.index)
    for cell in cells:
        if cell in numeric_cells:
            keep &= _valid_numbers(frame[cell].fillna(""))
    if (~keep).any():
        notes.count_bad(rows=int((~keep).sum()))
    return frame[keep]


def _convert(chunk: Any, cells: List[str], numeric_cells: Any) -> Any:
    import pandas as pd

    for cell in cells:
        column = chunk[cell].str.strip()
        if cell in numeric_cells:
            chunk[cell] = pd.to_numeric(column, errors="coerce").astype(float)
        else:
            chunk[cell] = column.where(~column.isin(NULLS))
    return chunk


def _lenient_reader_can(exc: Exception) -> bool:
    """Arrow refused a block that pandas' parser reads: a cell that is no number, or one over a block."""
    message = str(exc).lower()
    return "conversion error" in message or "straddl" in message


def _pandas_frames(path: str, cells: List[str], numeric_cells: Any, chunk_rows: int,
                   skip_rows: int = 0, notes: Optional[ReadNotes] = None) -> Iterator[pd.DataFrame]:
    """pandas' C parser, every cell read as text and converted here (stray spaces, tabs and N/A allowed).

    pandas pads a row with too few cells (its padding reads as NaN, an empty cell as ""): the header's last
    column is read too, so such rows are found and judged as :class:`ReadNotes` says, as with Arrow.
    """
    import pandas as pd

    notes = notes or ReadNotes()
    header = read_header(path)
    index = {cell: header.index(cell) for cell in cells if cell in header}
    short = _short_positions(path, len(header), skip_rows, notes)
    try:
        chunks = pd.read_csv(path, usecols=cells, dtype=str, keep_default_na=False, chunksize=chunk_rows,
                             skiprows=range(1, skip_rows + 1) if skip_rows else None,
                             encoding="utf-8", encoding_errors="replace", on_bad_lines="skip")
        for chunk in chunks:
            here = [position for position in short if position in chunk.index] if short else []
            if here:
                rows = chunk.loc[here]
                width = len(header)
                present = pd.Series([width > short[p] and all(i < short[p] for i in index.values()) for p in here],
                                    index=rows.index)  # a long row is skipped, as Arrow does
                if (~present).any():
                    notes.count_bad(rows=int((~present).sum()))
                judged = _judge_short(rows[present], cells, numeric_cells, notes)
                chunk = pd.concat([chunk.drop(index=here), judged]).sort_index()
            yield _convert(chunk, cells, numeric_cells)
    except (ValueError, pd.errors.ParserError, OSError) as exc:
        raise TableError(f"{path}: {_one_line(exc)}") from None


def _short_positions(path: str, width: int, skip_rows: int, notes: ReadNotes) -> Dict[int, int]:
    """pandas pads a short row with the same "" an empty cell reads as, and (reading some columns) keeps a long
    one: one pass of the csv module finds both (row position -> cells), so pandas decides and counts as Arrow
    does. Only the lenient path pays for it."""
    short: Dict[int, int] = {}
    position = 0
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            reader = csv.reader(handle)
            next(reader, None)
            for number, row in enumerate(reader):
                if not row:
                    continue  # a blank line: skipped by both readers, not counted
                if number < skip_rows:
                    continue
                if len(row) != width and len(short) < MAX_SHORT_ROWS:
                    short[position] = len(row)  # no line number: Arrow gives none either (newlines_in_values)
                position += 1
    except (OSError, csv.Error):
        return short
    return short


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def read_small(path: str, cmap: ColumnMap, wanted: Sequence[str], numeric: Sequence[str],
               problems: Optional[List[str]] = None) -> Tuple[Resolved, pd.DataFrame]:
    """A whole (small) table as one DataFrame of the wanted canonical columns (``numeric`` ones float, also
    when the table has a header only); what the read had to forgive goes to ``problems``."""
    import pandas as pd

    resolved = open_table(path, cmap)
    notes = ReadNotes()
    frames = list(iter_frames(path, cmap, resolved, wanted, numeric, notes=notes))
    note = notes.describe(path)
    if note and problems is not None:
        problems.append(note)
    if not frames:
        return resolved, pd.DataFrame({n: pd.Series(dtype=float if n in numeric else object)
                                       for n in wanted if n in resolved.found})
    return resolved, pd.concat(frames, ignore_index=True)
