"""Files that readers never see half-written, and the metrics CSV logs of the run directories.

- `atomic_file` / `write_atomic`: a file is written under a temporary name in its own folder
  (``.<name>.<pid>.<random>.tmp``: no two writers, threads or processes, ever share one), flushed and
  fsynced, then renamed over the target with ``os.replace``; on any error the temporary file is
  removed and the target is left as it was. The file gets the permissions of a new file (0666 less
  the umask).
- `MetricsCSV`: a CSV log with fixed columns whose first is the step: rows are appended (the header
  first when the file is new or empty), and a resumed run drops the rows logged after its
  checkpoint (`MetricsCSV.truncate`). `append_csv` is the one-row form whose columns are the row's.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, overload

PathLike = str | os.PathLike


def temp_path(path: PathLike) -> Path:
    """A temporary name next to path that no other writer uses: ``.<name>.<pid>.<random hex>.tmp``."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")


@overload
def atomic_file(path: PathLike, mode: Literal["wb"] = "wb") -> contextlib.AbstractContextManager[IO[bytes]]: ...
@overload
def atomic_file(path: PathLike, mode: Literal["w"]) -> contextlib.AbstractContextManager[IO[str]]: ...
def atomic_file(path: PathLike, mode: Literal["w", "wb"] = "wb") -> contextlib.AbstractContextManager[IO[Any]]:
    """A context manager: ``with atomic_file(path, "wb") as f: ...`` writes f under a temporary name
    (`temp_path`) and, when the block ends without an error, flushes, fsyncs and renames it over
    path. If the block (or the rename) raises, the temporary file is removed and path is untouched.
    mode: "wb" (bytes) or "w" (text, UTF-8, no newline translation)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file: mode must be 'w' or 'wb', got {mode!r}")
    return _atomic_file(Path(path), mode)


@contextlib.contextmanager
def _atomic_file(path: Path, mode: str) -> Iterator[IO[Any]]:
    while True:
        tmp = temp_path(path)
        try:  # O_EXCL: never write into a file someone else made; mode 0o666 lets the umask apply
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:  # pragma: no cover (48 random bits and the pid)
            continue
    try:
        with open(fd, "wb") if mode == "wb" else open(fd, "w", encoding="utf-8", newline="") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: PathLike, data: str | bytes) -> Path:
    """Write data (text as UTF-8, or bytes) to path atomically (`atomic_file`); returns path."""
    if isinstance(data, str):
        with atomic_file(path, "w") as f:
            f.write(data)
    else:
        with atomic_file(path, "wb") as fb:
            fb.write(data)
    return Path(path)


def format_value(value: Any, digits: int | None = 7) -> str:
    """A CSV cell: a float with `digits` significant digits (``nan``, ``inf`` as such; digits None:
    Python's shortest exact form), anything else as str."""
    return f"{value:.{digits}g}" if isinstance(value, float) and digits is not None else str(value)


class MetricsCSV:
    """A metrics CSV with fixed columns; the first column is the step that `truncate` goes by.

    Floats are written with `digits` significant digits (`format_value`; None: exactly), other
    values with str;
    cells are quoted only where CSV needs it (a comma, a quote, a newline). Lines end with ``\\n``.
    """

    def __init__(self, path: PathLike, columns: Sequence[str], *, digits: int | None = 7) -> None:
        if not columns:
            raise ValueError("MetricsCSV needs at least one column")
        self.path, self.columns, self.digits = Path(path), tuple(columns), digits

    def format(self, value: Any) -> str:
        """value as it is written (e.g. to report the logged value, rounded the same way)."""
        return format_value(value, self.digits)

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row (KeyError if a column is missing; other keys are ignored), after the
        header if the file is new or empty."""
        cells = [self.format(row[c]) for c in self.columns]
        new = not self.path.exists() or self.path.stat().st_size == 0
        with open(self.path, "a", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            if new:
                writer.writerow(self.columns)
            writer.writerow(cells)

    def rows(self) -> list[dict[str, str]]:
        """The rows written so far, as {column: text} ([] if there is no file)."""
        if not self.path.exists():
            return []
        with open(self.path, encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))

    def truncate(self, step: int) -> None:
        """Drop the rows whose step is after `step` (logged by a run that died before its next
        checkpoint, and logged again when it resumes from that checkpoint). Atomic; no-op when
        nothing is dropped or there is no file."""
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", newline="") as f:
            records = [r for r in csv.reader(f) if r]
        keep = records[:1] + [r for r in records[1:] if int(r[0]) <= step]
        if len(keep) != len(records):
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows(keep)
            write_atomic(self.path, out.getvalue())


def append_csv(path: PathLike, row: Mapping[str, Any]) -> None:
    """Append one row to a CSV log whose columns are the row's keys (the header when the file is
    new); values written exactly (str), e.g. a Unix time keeps its digits."""
    MetricsCSV(path, list(row), digits=None).append(row)
