"""Reading profiling CSV tables: only the needed columns, in chunks, so a several-GB kernel_details stays small.

pyarrow's streaming CSV reader is used where it is installed (multi-threaded, columns chosen before parsing);
otherwise pandas' C parser with ``usecols`` and ``chunksize``. Either way the caller gets pandas DataFrames
with canonical column names (see :mod:`npudoctor.prof.columns`), one chunk at a time.
"""

from __future__ import annotations

import csv
import io
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
    """The size of ``path`` if it is a regular file (symlinks followed); anything else is refused."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise TableError(f"{path}: {exc.strerror or exc}") from None
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


class ReadNotes:
    """What a read had to forgive: rows with the wrong number of cells are skipped and counted."""

    def __init__(self) -> None:
        self.bad_rows = 0
        self.first_bad_line: Optional[int] = None
        self.bad_cells = 0  # numbers out of range (inf, nan, beyond MAX_CELL_VALUE), read as empty

    def skip(self, row: Any) -> str:
        self.bad_rows += 1
        if self.first_bad_line is None:
            self.first_bad_line = getattr(row, "number", None)
        return "skip"

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
    """Chunks of the ``wanted`` canonical columns ``path`` has: pyarrow RecordBatches where pyarrow is
    installed (a pandas DataFrame for the rest of a file whose numbers need the lenient reader), else pandas
    DataFrames. Columns carry canonical names; ``numeric`` ones are floats, the others strings."""
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
            for chunk in _arrow_batches(path, list(columns.values()), numeric_cells, notes):
                chunk = _empty_out_of_range(chunk, numeric_cells, notes)
                if hasattr(chunk, "rename_columns"):
                    yield chunk.rename_columns([rename[c] for c in chunk.schema.names])
                else:
                    yield chunk.rename(columns=rename)
            return
    for frame in _pandas_frames(path, list(columns.values()), numeric_cells, chunk_rows):
        yield _empty_out_of_range(frame, numeric_cells, notes).rename(columns=rename)


def _empty_out_of_range(chunk: Any, numeric_cells: Any, notes: ReadNotes) -> Any:
    """``chunk`` (a RecordBatch or a DataFrame) with numbers out of range (inf, nan, beyond
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
            bad = pc.fill_null(pc.or_(pc.is_nan(column), pc.greater(pc.abs(column), MAX_CELL_VALUE)), False)
            count = pc.sum(bad).as_py() or 0
            if count:
                arrays[index] = pc.if_else(bad, pa.scalar(None, column.type), column)
                notes.bad_cells += count
                changed = True
        return pa.RecordBatch.from_arrays(arrays, names=chunk.schema.names) if changed else chunk
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
        notes.bad_rows = 0
        yield from _pandas_frames(path, cells, numeric_cells, CHUNK_ROWS)
        return
    except OSError as exc:
        raise TableError(f"{path}: {_one_line(exc)}") from None
    done_rows = 0
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowInvalid as exc:
            if not _lenient_reader_can(exc):
                raise TableError(f"{path}: {_one_line(exc)}") from None
            # A cell that is not a number where numbers belong, or one larger than a block (a 2 MiB shape
            # list): the rest of the file the slow, lenient way.
            yield from _pandas_frames(path, cells, numeric_cells, CHUNK_ROWS, skip_rows=done_rows)
            return
        done_rows += batch.num_rows
        yield batch


def _lenient_reader_can(exc: Exception) -> bool:
    """Arrow refused a block that pandas' parser reads: a cell that is no number, or one over a block."""
    message = str(exc).lower()
    return "conversion error" in message or "straddl" in message


def _pandas_frames(path: str, cells: List[str], numeric_cells: Any, chunk_rows: int,
                   skip_rows: int = 0) -> Iterator[pd.DataFrame]:
    """pandas' C parser, every cell read as text and converted here (stray spaces, tabs and N/A allowed).

    Unlike Arrow (which skips them), pandas pads a row with too few cells with empty cells.
    """
    import pandas as pd

    try:
        chunks = pd.read_csv(path, usecols=cells, dtype=str, keep_default_na=False, chunksize=chunk_rows,
                             skiprows=range(1, skip_rows + 1) if skip_rows else None,
                             encoding="utf-8", encoding_errors="replace", on_bad_lines="skip")
        for chunk in chunks:
            for cell in cells:
                column = chunk[cell].str.strip()
                if cell in numeric_cells:
                    chunk[cell] = pd.to_numeric(column, errors="coerce").astype(float)
                else:
                    chunk[cell] = column.where(~column.isin(NULLS))
            yield chunk
    except (ValueError, pd.errors.ParserError, OSError) as exc:
        raise TableError(f"{path}: {_one_line(exc)}") from None


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
