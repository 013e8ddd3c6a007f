"""Small file helpers shared by the run-directory writers: atomic text files and CSV logs."""

from __future__ import annotations

import csv
import os
from pathlib import Path


def write_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write text to path through a temporary file and a rename: readers see all or nothing."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def append_csv(path: str | os.PathLike, row: dict) -> None:
    """Append one row to a CSV log, writing the header (row's keys) when the file is new."""
    path = Path(path)
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)
