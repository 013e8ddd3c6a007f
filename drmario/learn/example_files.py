"""Files of training examples: JSON Lines with a sidecar, written atomically, read in chunks.

An example file is JSON Lines (``*.jsonl``, or gzip ``*.jsonl.gz``), one example per line (the
array of `examples`), with a sidecar ``*.meta.json`` (see `write_examples`) holding how they were
made and a ``games`` table (seed, level, first line index, count) so loaders can split by game. Both
are written atomically (`drmario.files`). `read_examples` and `decode_file` either raise at the first
bad line (``on_error="raise"``, an `examples.ExampleError` naming file and line) or skip bad lines
and count them in their `ReadReport` (``on_error="skip"``); nothing is dropped silently.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import os
import subprocess
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal

import numpy as np

from drmario.engine.game import GameRecord
from drmario.files import atomic_file, write_atomic
from drmario.learn.example_decoding import Decoded, decode_rows
from drmario.learn.examples import Example, ExampleError, check_examples, decoded_examples, json_error

ERRORS_KEPT = 10  # how many error messages a ReadReport keeps
FORMAT = "drmario-examples"
FORMAT_VERSION = 1
WRITE_CHUNK = 2048  # examples validated and written at a time
OnError = Literal["raise", "skip"]


@dataclass
class ReadReport:
    """What reading one example file did. ``errors`` keeps the first `ERRORS_KEPT` problems as
    ``file:line: what`` messages; ``error_lines`` their 1-based line numbers."""

    path: str
    on_error: str
    lines: int = 0  # non-blank lines read (examples and bad lines)
    examples: int = 0  # examples kept
    skipped: int = 0  # bad lines skipped (on_error="skip")
    missing: int = 0  # examples the sidecar lists that the file no longer holds (cut short)
    blank: int = 0  # blank lines (not data; ignored)
    errors: list[str] = field(default_factory=list)
    error_lines: list[int] = field(default_factory=list)
    games: int | None = None  # set by the dataset loader
    games_from: str = ""  # "sidecar" or "duration countdown" (dataset loader)
    cached: bool = False  # decoded from the .cache.npz (dataset loader)
    warnings: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        """Every example left out: bad lines skipped and examples missing from a cut file."""
        return self.skipped + self.missing

    def add_error(self, where: str, line: int, detail: str) -> None:
        self.skipped += 1
        if len(self.errors) < ERRORS_KEPT:
            self.errors.append(f"{where}: {detail}")
            self.error_lines.append(line)

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> ReadReport:
        return cls(**d)

    def __str__(self) -> str:
        parts = [f"{self.path}: {self.examples:,} examples from {self.lines:,} lines"]
        if self.games is not None:
            parts.append(f"{self.games:,} games (from {self.games_from})")
        parts.append(f"on_error={self.on_error!r}: {self.skipped:,} bad lines skipped")
        if self.missing:
            parts.append(f"{self.missing:,} examples missing (the file is cut short of its sidecar's count)")
        if self.cached:
            parts.append("decoded from cache")
        text = ", ".join(parts)
        for line in self.errors:
            text += f"\n  {line}"
        if self.skipped > len(self.errors):
            text += f"\n  ... and {self.skipped - len(self.errors):,} more"
        for w in self.warnings:
            text += f"\n  warning: {w}"
        return text


def sidecar_path(path: str | os.PathLike) -> Path:
    """The sidecar of an example file: ``x.jsonl`` or ``x.jsonl.gz`` -> ``x.meta.json``."""
    path = Path(path)
    for suffix in (".jsonl.gz", ".jsonl"):
        if path.name.endswith(suffix):
            return path.with_name(path.name[: -len(suffix)] + ".meta.json")
    raise ValueError(f"{path}: example files are named *.jsonl or *.jsonl.gz")


def read_sidecar(path: str | os.PathLike) -> dict | None:
    """The sidecar of example file path as a dict, or None if there is none."""
    side = sidecar_path(path)
    if not side.exists():
        return None
    try:
        data = json.loads(side.read_text())
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"{side}: cannot read the sidecar: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{side}: the sidecar must be a JSON object, not {type(data).__name__}")
    return data


@functools.lru_cache(maxsize=1)
def code_version() -> dict:
    """``{"code_version", "git_commit", "git_dirty"}`` of this package (git fields None when the
    package is not in a git checkout)."""
    from drmario import __version__

    info: dict = {"code_version": __version__, "git_commit": None, "git_dirty": None}
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return info
    try:
        git = ["git", "-C", str(root)]
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if commit.returncode == 0:
            info["git_commit"] = commit.stdout.strip()
            status = subprocess.run(
                [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
            )
            info["git_dirty"] = bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def infer_games(duration: np.ndarray, lines: np.ndarray | None = None) -> np.ndarray:
    """Game index (int64[n], from 0) of each example from the duration countdown: a game starts
    where duration is not the previous example's duration minus the line gap (1 for consecutive
    lines). Examples of one game written in order count down to 1, so this finds the boundaries
    of whole games; it cannot split two games whose durations happen to continue each other
    (impossible when each game ends at duration 1 and the next starts at >= 1). Games written with
    gaps (playout cap randomisation skips decisions) come apart here: such files need their sidecar."""
    duration = np.asarray(duration, np.int64)
    lines = np.arange(len(duration)) if lines is None else np.asarray(lines, np.int64)
    starts = np.ones(len(duration), bool)
    starts[1:] = duration[1:] != duration[:-1] - (lines[1:] - lines[:-1])
    return np.cumsum(starts) - 1


# ------------------------------------------------------------------------------------------------
# Writing


def write_examples(
    path: str | os.PathLike,
    examples: Iterable[Example],
    meta: dict,
    *,
    games: Sequence[dict] | None = None,
    validate: bool = True,
) -> Path:
    """Write examples as JSON Lines (gzip if path ends in ``.gz``) and the sidecar, atomically.

    meta: JSON-serialisable description of how the examples were made (seed, levels, search
    settings, ...); ``code_version``, ``git_commit``, ``git_dirty`` and ``created`` (UTC) are added
    unless given. games: one dict per game in file order with ``seed``, ``level`` and ``count``
    (and any other JSON fields, e.g. ``outcome``); ``first`` (0-based line index) is filled in. If
    games is None they are inferred from the duration countdown (`infer_games`), with seed and
    level null. Each example is validated first (``validate``). Returns the path written.

    Both files are written to temporary files in the same folder, then renamed over the targets
    (sidecar first), so a reader never sees a half-written file.
    """
    path = Path(path)
    meta = {**code_version(), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **meta}
    json.dumps(meta, allow_nan=False)  # fail early on a meta that is not JSON (TypeError, ValueError)
    with atomic_file(path, "wb") as data:  # renamed over path last, when the block ends
        duration = _write_lines(data, path, examples, validate)
        table = _games_table(games, duration, path)
        write_atomic(sidecar_path(path), _sidecar_text(path, len(duration), meta, table))
    return path


def _write_lines(out: IO[bytes], path: Path, examples: Iterable[Example], validate: bool) -> np.ndarray:
    """Write the examples' lines to out (gzip-compressed if path ends in ``.gz``), validating each
    chunk first; returns their durations (int64[n], for the games table)."""
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) if path.name.endswith(".gz") else None
    sink: IO[bytes] | gzip.GzipFile = gz or out
    durations: list[np.ndarray] = []
    count = 0
    it = iter(examples)
    while chunk := list(itertools.islice(it, WRITE_CHUNK)):
        if validate:
            check_examples(chunk, functools.partial(_nth_example, path, count))
        sink.write("".join(ex.to_line() + "\n" for ex in chunk).encode())
        durations.append(np.array([ex.duration for ex in chunk], np.int64))
        count += len(chunk)
    if gz is not None:
        gz.close()
    return np.concatenate(durations) if durations else np.zeros(0, np.int64)


def _nth_example(path: Path, base: int, i: int) -> str:
    return f"{path}: example {base + i}"


def _sidecar_text(path: Path, count: int, meta: dict, table: list[dict]) -> str:
    """The sidecar's JSON: indented, with one line per game of the games table."""
    sidecar = {"format": FORMAT, "format_version": FORMAT_VERSION, "file": path.name, "examples": count, "meta": meta}
    head = json.dumps(sidecar, indent=1)
    games_text = ",\n".join("  " + json.dumps(g, allow_nan=False) for g in table)
    return head[:-2] + ',\n "games": [\n' + games_text + ("\n" if table else "") + " ]\n}\n"


def _games_table(games: Sequence[dict] | None, duration: np.ndarray, path: Path) -> list[dict]:
    if games is None:
        index = infer_games(duration)
        counts = np.bincount(index) if len(index) else np.zeros(0, np.int64)
        games = [{"seed": None, "level": None, "count": int(c)} for c in counts]
    table: list[dict] = []
    first = 0
    for g in games:
        entry = dict(g)
        if not isinstance(entry.get("count"), (int, np.integer)) or entry["count"] < 0:
            raise ValueError(f"{path}: games entry {len(table)} needs a count >= 0, got {entry.get('count')!r}")
        if entry.setdefault("first", first) != first:
            raise ValueError(f"{path}: games entry {len(table)} says first={entry['first']}, expected {first}")
        seed, level, n = entry.pop("seed", None), entry.pop("level", None), entry.pop("count")
        entry = {"seed": seed, "level": level, "first": first, "count": n, **entry}
        table.append({k: (int(v) if isinstance(v, np.integer) else v) for k, v in entry.items()})
        first += int(n)
    if first != len(duration):
        raise ValueError(f"{path}: the games table counts {first} examples, but {len(duration)} were given")
    return table


def write_games(
    path: str | os.PathLike, games: Iterable[tuple[GameRecord, Sequence[Example]]], meta: dict, **kwargs: Any
) -> Path:
    """Write the examples of whole games (pairs of a record and its examples, e.g. from
    `game_examples`) with a games table taken from the records (seed, level, pill mode, outcome)."""
    table: list[dict] = []

    def flatten() -> Iterable[Example]:
        for record, examples in games:
            table.append(
                {
                    "seed": record.seed,
                    "level": record.level,
                    "pill_mode": record.pill_mode,
                    "outcome": record.outcome,
                    "count": len(examples),
                }
            )
            yield from examples

    # table fills while the examples stream out; write_examples reads it after the last one
    return write_examples(path, flatten(), meta, games=table, **kwargs)


# ------------------------------------------------------------------------------------------------
# Reading


def decode_file(
    path: str | os.PathLike,
    on_error: OnError = "raise",
    *,
    chunk_lines: int = 4096,
    progress: Callable[[int], None] | None = None,
) -> tuple[Decoded, ReadReport]:
    """Read and validate one example file in chunks (compact arrays, no Example objects).

    ``Decoded.index`` holds each example's position among the file's non-blank lines (0-based: the
    line index of the sidecar's games table). on_error="raise" raises `ExampleError` at the first
    bad line; "skip" leaves bad lines out and counts them in the report. A gzip stream that ends
    early or is damaged is an error at the first line that could not be read (in "skip" mode the
    lines before it are kept), and one that fails its check after every line was read an error at
    its last line (in "skip" mode a warning). progress, if given, is called with the number of
    (compressed) bytes read after each chunk.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    name = os.fspath(path)
    report = ReadReport(path=name, on_error=on_error)
    listed = _listed_examples(path)
    parts: list[Decoded] = []
    damaged = ""
    raw, stream = _open_binary(path)
    with raw, stream:
        base, done = 0, 0  # base: physical lines before this chunk; done: bytes reported
        for lines, failure in _line_chunks(stream, chunk_lines):
            decoded, errors = _decode_chunk(lines, base, report)
            if failure is not None:
                if listed is None:  # no sidecar to count the loss by: one bad line where reading stopped
                    errors[base + len(lines)] = f"cannot read line {base + len(lines) + 1} or later: {failure}"
                    report.warnings.append(f"{name}: the data after line {base + len(lines)} could not be read")
                elif report.lines >= listed:  # every line read, then the stream failed its check (its CRC)
                    damaged = f"every line was read, but the gzip stream failed its check ({failure})"
                else:  # the loss is counted by the sidecar (`ReadReport.missing`)
                    report.warnings.append(f"{name}: the data after line {base + len(lines)} could not be read")
            _file_errors(errors, report, on_error)
            if damaged and on_error == "raise":
                raise ExampleError(f"{name}:{base + len(lines)}", damaged, name, base + len(lines))
            if damaged:
                report.warnings.append(f"{name}: {damaged}")
            parts.append(decoded)
            base += len(lines)
            if progress is not None:
                position = raw.tell()
                progress(position - done)
                done = position
    decoded = Decoded.concat(parts)
    report.examples = len(decoded)
    if listed is not None and report.lines < listed:
        report.missing = listed - report.lines
        if on_error == "raise":
            detail = f"the file ends after {report.lines} of the {listed} examples its sidecar lists (cut short?)"
            raise ExampleError(f"{name}:{base + 1}", detail, name, base + 1)
    elif listed is not None and report.lines > listed:
        detail = f"the file holds {report.lines} examples, its sidecar lists {listed} (a sidecar of another write?)"
        if on_error == "raise":
            raise ExampleError(f"{name}:{listed + 1}", detail, name, listed + 1)
        report.warnings.append(f"{name}: {detail}")
    return decoded, report


def _listed_examples(path: str | os.PathLike) -> int | None:
    """How many examples the file's sidecar says it holds (None: no readable sidecar)."""
    try:
        side = read_sidecar(path)
    except ValueError:
        return None
    count = side.get("examples") if side else None
    return count if isinstance(count, int) else None


def _line_chunks(stream: Iterable[bytes], chunk_lines: int) -> Iterator[tuple[list[bytes], Exception | None]]:
    """The stream's lines in chunks of chunk_lines (the last one shorter), each with None, or, for
    the last, the error that stopped a truncated or corrupt gzip stream."""
    while True:
        lines: list[bytes] = []
        try:
            for line in stream:
                lines.append(line)
                if len(lines) == chunk_lines:
                    break
        except (OSError, EOFError, zlib.error) as e:  # a cut gzip stream, a bad header or CRC, bad deflate data
            yield lines, e
            return
        if not lines:
            return
        yield lines, None


def _decode_chunk(lines: list[bytes], base: int, report: ReadReport) -> tuple[Decoded, dict[int, str]]:
    """Decode a chunk of a file's lines (base: the lines before it), counting lines and blanks in
    report. Returns the good examples and {0-based line index: what is wrong} for the bad lines."""
    rows: list[Any] = []
    row_lines: list[int] = []
    row_ordinals: list[int] = []
    errors: dict[int, str] = {}
    for j, line in enumerate(lines):
        if line.isspace():
            report.blank += 1
            continue
        report.lines += 1
        try:
            rows.append(json.loads(line))
        except (ValueError, RecursionError) as e:  # also bad UTF-8, and arrays nested past Python's recursion limit
            errors[base + j] = json_error(e, line)
        else:
            row_lines.append(base + j)
            row_ordinals.append(report.lines - 1)
    decoded, row_errors = decode_rows(rows)
    decoded.index = np.array(row_ordinals, np.int64)[decoded.index]
    errors.update({row_lines[i]: msg for i, msg in row_errors.items()})
    return decoded, errors


def _file_errors(errors: dict[int, str], report: ReadReport, on_error: OnError) -> None:
    """Raise the first of a chunk's errors (on_error="raise") or count them all in report."""
    if not errors:
        return
    first = min(errors)
    if on_error == "raise":
        raise ExampleError(f"{report.path}:{first + 1}", errors[first], report.path, first + 1)
    for line_index in sorted(errors):
        report.add_error(f"{report.path}:{line_index + 1}", line_index + 1, errors[line_index])


def _open_binary(path: str | os.PathLike) -> tuple[BinaryIO, BinaryIO | gzip.GzipFile]:
    """(the raw file, the stream of its lines: the file itself or its gunzipped content)."""
    raw = open(path, "rb")  # noqa: SIM115 (closed by the caller)
    stream = gzip.GzipFile(fileobj=raw, mode="rb") if os.fspath(path).endswith(".gz") else raw
    return raw, stream


def read_examples(path: str | os.PathLike, on_error: OnError = "raise") -> tuple[list[Example], ReadReport]:
    """Read an example file (JSON Lines, gzip by the ``.gz`` suffix) into Example objects.

    Returns (examples, report). on_error="raise" stops at the first bad line with an `ExampleError`
    naming file and line; "skip" leaves bad lines out, and the report counts them and keeps the
    first few messages. (For training, `dataset.load_examples` reads into compact arrays instead.)
    """
    decoded, report = decode_file(path, on_error)
    return decoded_examples(decoded), report
