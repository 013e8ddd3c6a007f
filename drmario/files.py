"""Files that readers never see half-written, and the metrics CSV logs of the run directories.

- `atomic_file` / `write_atomic`: a file is written under a temporary name in its own folder
  (``.<name>.<pid>.<random>.tmp``: no two writers, threads or processes, ever share one), flushed and
  fsynced, then renamed over the target with ``os.replace``; on any error the temporary file is
  removed and the target is left as it was. The file gets the permissions of a new file (0666 less
  the umask).
- `MetricsCSV`: a CSV log with fixed columns whose first is the step: rows are appended (the header
  first when the file is new or empty), and a resumed run drops the rows logged after its
  checkpoint (`MetricsCSV.truncate`). `append_csv` is the one-row form whose columns are the row's.
- `lock_run_dir`: a run directory has one owner (a pipeline, a trainer, a self-play run). The lock
  file ``.drmario.lock`` names the holder (pid, host, start time, command) and is held with
  ``flock``, which the operating system drops when the holder dies, however it dies: a lock file
  left by a dead process is stale, reported and taken over. The lock covers the directory's tree:
  a run directory inside one that another process holds (``train RUN/train0`` while a pipeline
  owns RUN), or one holding such a directory, is refused too, except for the holder's own
  descendants (the pipeline's kernels and trainer). `remove_stray_temp` removes the
  temporary files of writers that died mid-write.
- `die_with_parent`: a child process that must not outlive its parent (Linux ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, overload

try:
    import fcntl
except ImportError:  # pragma: no cover (not POSIX: the lock checks the holder's pid only)
    fcntl = None  # type: ignore[assignment]

PathLike = str | os.PathLike
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)
LOCK_NAME = ".drmario.lock"
TEMP_PATTERN = re.compile(r"^\..+\.\d+\.[0-9a-f]{12}\.tmp$")  # the names `temp_path` makes


class RunError(RuntimeError):
    """A run that cannot start or go on for a reason outside its settings (its directory is in use,
    a worker process died, ...); the command line reports it as ``drmario CMD: error: ...``."""


class RunDirectoryLocked(RunError):
    """Another live process owns the run directory; the message names it."""


def file_sha256(path: PathLike) -> str:
    """SHA-256 of a file's bytes (hex), read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


NETWORK_FILE = "network.json"  # beside work a network did: {"checkpoint": absolute path, "sha256": digest}


def record_network(out_dir: PathLike, network: PathLike) -> dict[str, str]:
    """Write out_dir/network.json: which network the work there played (absolute path and SHA-256),
    so that it says what it is of after the run's networks change. Returns the record."""
    record = {"checkpoint": str(Path(network).resolve()), "sha256": file_sha256(network)}
    write_atomic(Path(out_dir) / NETWORK_FILE, json.dumps(record, indent=1) + "\n")
    return record


def holds_weights(network: PathLike, record: Mapping[str, Any]) -> bool:
    """Whether the file at network holds the weights a record names by their sha256 (`record_network`'s,
    a gate's); False where there is no such file or the record names none."""
    return Path(network).is_file() and record.get("sha256") == file_sha256(network)


def played_network(out_dir: PathLike) -> dict[str, str] | None:
    """The record `record_network` wrote in out_dir, or None if there is none whole."""
    try:
        record = json.loads((Path(out_dir) / NETWORK_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


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
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """Make a rename in folder survive a power cut (POSIX: fsync the folder; where a file system
    cannot, the rename is still atomic, only not yet on disk)."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
        self._header_checked = False

    def format(self, value: Any) -> str:
        """value as it is written (e.g. to report the logged value, rounded the same way)."""
        return format_value(value, self.digits)

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row (KeyError if a column is missing; other keys are ignored), after the
        header if the file is new or empty."""
        cells = [self.format(row[c]) for c in self.columns]
        new = not self.path.exists() or self.path.stat().st_size == 0
        if not new and not self._header_checked:
            self._check_header()
        with open(self.path, "a", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            if new:
                writer.writerow(self.columns)
            elif not self._ends_a_line():  # a row cut short by a crash: not glued to this one
                f.write("\n")
            writer.writerow(cells)

    def _ends_a_line(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def _check_header(self) -> None:
        """Refuse to append rows under another header (a file from another version of the kit, or
        another kind of run), which would leave a table whose columns mean nothing."""
        with open(self.path, encoding="utf-8", newline="") as f:
            header = tuple(next(csv.reader(f), []))
        if header != self.columns:
            raise ValueError(
                f"{self.path}, line 1: its columns ({', '.join(header)}) are not the ones this run logs "
                f"({', '.join(self.columns)}); it was written by another version or kind of run: "
                "use another run directory, or move the file away"
            )
        self._header_checked = True

    def rows(self) -> list[dict[str, str]]:
        """The rows written so far, as {column: text} ([] if there is no file)."""
        if not self.path.exists():
            return []
        with open(self.path, encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))

    def truncate(self, step: int) -> None:
        """Drop the rows whose step is after `step` (logged by a run that died before its next
        checkpoint, and logged again when it resumes from that checkpoint), and any row cut short
        (its run died while writing it). Atomic; no-op when nothing is dropped or there is no file;
        ValueError naming the line of a row whose step is not an integer."""
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            lines = [(reader.line_num, r) for r in reader if r]  # (its last line's number, the row)
        if len(lines) < 2:
            return
        cut = not self._ends_a_line()  # the last row has no line end: cut short, though its cells may all be there
        header, rows = lines[0][1], lines[1 : len(lines) - cut]
        keep = [header]
        for n, r in rows:
            try:
                row_step = int(r[0])
            except ValueError:
                raise ValueError(f"{self.path}, line {n}: step {r[0]!r} is not an integer") from None
            if len(r) == len(header) and row_step <= step:
                keep.append(r)
        if len(keep) != len(lines):
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows(keep)
            write_atomic(self.path, out.getvalue())


def append_csv(path: PathLike, row: Mapping[str, Any]) -> None:
    """Append one row to a CSV log whose columns are the row's keys (the header when the file is
    new); values written exactly (str), e.g. a Unix time keeps its digits."""
    MetricsCSV(path, list(row), digits=None).append(row)


# ------------------------------------------------------------------------------------------------
# One owner per run directory


def _process_start(pid: int) -> int | None:
    """The start time of process pid in clock ticks since boot (Linux), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def process_alive(pid: int, start: int | None = None) -> bool:
    """Whether process pid exists on this host (and, given its start ticks, is the same process)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return start is None or _process_start(pid) in (None, start)


def describe_holder(info: Mapping[str, Any]) -> str:
    """'a pipeline (pid 123 on host h, since 2026-01-01T00:00:00+00:00: python -m drmario ...)'."""
    command = " ".join(info.get("command") or [])
    what = f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, since {info.get('started', '?')}"
    return f"{info.get('owner') or 'a process'} ({what}{': ' + command[:200] if command else ''})"


def _read_lock(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 1 << 16).decode("utf-8", "replace")
        info = json.loads(text) if text.strip() else {}
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


class RunLock:
    """An exclusive lock on a run directory, from `lock_run_dir`. ``release()`` (or leaving the
    ``with`` block) removes the lock file; if the process dies first, the operating system releases
    the lock and the file left behind is stale (the next owner reports and replaces it)."""

    def __init__(self, path: Path, fd: int, info: dict[str, Any]) -> None:
        self.path, self.info = path, info
        self._fd: int | None = fd
        self._pid = os.getpid()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None or os.getpid() != self._pid:  # a forked child does not own its parent's lock
            return
        try:  # only the file this lock holds: a successor may have made a new one already
            if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                self.path.unlink()
        except OSError:
            pass
        os.close(fd)  # drops the flock

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def _parent_pid(pid: int) -> int | None:
    """The parent of process pid (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _lineage(pid: int | None = None) -> set[int]:
    """pid (default: this process) and its ancestors, up to init."""
    pid = os.getpid() if pid is None else pid
    out: set[int] = set()
    while pid and pid not in out:
        out.add(pid)
        parent = _parent_pid(pid) if pid != os.getpid() else os.getppid()
        if parent is None:
            break
        pid = parent
    return out


def _ours(info: Mapping[str, Any]) -> bool:
    """Whether a lock's holder is this process or one of its ancestors (a pipeline that started the
    kernel that started this trainer), on this host."""
    try:
        pid = int(info.get("pid") or 0)
    except (TypeError, ValueError):
        return False
    return info.get("host") == socket.gethostname() and pid in _lineage()


def _nested_holder(run_dir: Path, depth: int = 2) -> tuple[Path, dict[str, Any]] | None:
    """A live holder of the lock of a directory that encloses run_dir, or that run_dir holds (up
    to depth levels down), other than this process and its ancestors; None if there is none."""

    def holder(folder: Path) -> dict[str, Any] | None:
        try:
            return lock_holder(folder)
        except OSError:  # a lock file this user cannot open is not a run this user made
            return None

    resolved = run_dir.resolve()
    for folder in resolved.parents:
        info = holder(folder)
        if info is not None and not _ours(info):
            return folder, info

    def below(folder: Path, left: int) -> tuple[Path, dict[str, Any]] | None:
        try:
            subs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            return None
        for sub in subs:
            info = holder(sub)
            if info is not None and not _ours(info):
                return sub, info
            if left > 1 and (found := below(sub, left - 1)) is not None:
                return found
        return None

    return below(resolved, depth)


def lock_run_dir(run_dir: PathLike, owner: str, *, log: Callable[[str], None] | None = None) -> RunLock:
    """Take run_dir (made if missing) for this process: owner says what runs there ("pipeline",
    "trainer", "self-play"). Raises `RunDirectoryLocked`, naming the holder, when a live process
    holds it, or holds a directory that encloses it or that it encloses (two levels down), unless
    that holder is this process or one of its ancestors (a pipeline's kernels and trainer work in
    its run). A lock file left by a process that is gone is reported through log (default:
    stderr) and replaced. Without ``flock`` (not POSIX), a holder that is alive on this host still
    refuses."""
    lock = _lock_one(Path(run_dir), owner, log)
    try:  # checked once this lock is held: of two runs that race, at least one sees the other
        nested = _nested_holder(Path(run_dir))
    except BaseException:
        lock.release()
        raise
    if nested is not None:
        lock.release()
        folder, holder = nested
        relation = "inside" if Path(run_dir).resolve().is_relative_to(folder) else "around"
        raise RunDirectoryLocked(
            f"{run_dir} is {relation} {folder}, which is in use by {describe_holder(holder)}: the lock of a "
            f"run directory covers its sub-directories, so this {owner} is refused; wait for that one to end, "
            f"stop it, or use a directory outside that run (lock file {folder / LOCK_NAME})"
        )
    return lock


def _lock_one(run_dir: Path, owner: str, log: Callable[[str], None] | None) -> RunLock:
    """Take run_dir's own lock (`lock_run_dir` without the checks of the tree around it)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    report = log or (lambda text: print(text, file=sys.stderr, flush=True))
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            _flock(fd)
        except BlockingIOError:
            holder = _read_lock(fd)
            os.close(fd)
            raise RunDirectoryLocked(
                f"{run_dir} is in use by {describe_holder(holder)}: a run directory has one owner at a "
                f"time, so this {owner} is refused; wait for that one to end, stop it, or use another "
                f"directory (lock file {path})"
            ) from None
        try:  # the holder we waited for may have removed the file (release): lock the new one
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    previous = _read_lock(fd)
    host = socket.gethostname()
    if previous.get("pid") is not None:
        if previous.get("host") == host and process_alive(int(previous["pid"]), previous.get("process_start")):
            if fcntl is None:
                os.close(fd)
                raise RunDirectoryLocked(f"{run_dir} is in use by {describe_holder(previous)} (lock file {path})")
            why = "it no longer holds the lock"
        else:
            why = "that process is gone" if previous.get("host") == host else "no process holds the lock"
        report(f"{run_dir}: taking over a stale lock of {describe_holder(previous)}: {why}")
    info = {
        "owner": owner,
        "pid": os.getpid(),
        "host": host,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "process_start": _process_start(os.getpid()),
        "command": [sys.executable, *sys.argv],
    }
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(info, indent=1) + "\n").encode())
    os.fsync(fd)
    return RunLock(path, fd, info)


def _flock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def lock_holder(run_dir: PathLike) -> dict[str, Any] | None:
    """Who holds run_dir's lock now (the lock file's fields), or None if nobody does."""
    path = Path(run_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    try:
        if fcntl is None:
            info = _read_lock(fd)
            alive = info.get("host") == socket.gethostname() and process_alive(int(info.get("pid", 0) or 0))
            return info if alive else None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_lock(fd) or {"owner": "a process"}
        return None
    finally:
        os.close(fd)  # (drops the shared lock, if taken)


def remove_stray_temp(folder: PathLike, *, recursive: bool = True) -> list[Path]:
    """Remove the temporary files (`temp_path` names) that writers which died mid-write left in
    folder, skipping subfolders that another live process holds (`lock_holder`). Call it only while
    holding folder's lock. Returns the files removed."""
    folder = Path(folder)
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            if recursive and lock_holder(entry) is None:
                removed += remove_stray_temp(entry)
        elif TEMP_PATTERN.match(entry.name) and entry.is_file():
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
                removed.append(entry)
    return removed


# ------------------------------------------------------------------------------------------------
# Child processes that die with their parent


def _prctl() -> Callable[..., int] | None:
    """Linux's prctl from the C library, or None (another system, or no such call)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover
        return None


def parent_death_signal(sig: int = KILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for `subprocess.Popen` that makes the child get sig when this process
    dies (also by kill -9), or None where that is not available (not Linux). The C call is looked
    up here, in the parent, so the child only calls it between fork and exec."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call: go now
            os.kill(os.getpid(), sig)

    return preexec


def die_with_parent(parent: int | None = None, sig: int = KILL) -> None:
    """In a child process (e.g. a multiprocessing worker's initializer): get sig when the parent
    dies (Linux); parent, the pid the child was started by, covers a parent that died already."""
    prctl = _prctl()
    if prctl is not None:
        prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)
