"""The files of a self-play run, and their integrity.

A run directory holds ``selfplay.json`` (the settings) and, per shard of games, under ``examples/``:
``shard-NNNNNN.jsonl.gz`` (the examples) and its ``.meta.json`` sidecar (settings, code version,
and one entry per game: index, seed, level, outcome, first line, count); and under ``records/``:
``shard-NNNNNN.jsonl`` (the game records, for replay).

A finished shard is sealed (`seal`): its sidecar gets the sha256 of the examples file, of the
records file, and of the sidecar's own content, so a changed byte in any of the three (a game
index included) is found. On resume, a shard that does not match (cut short, changed) is not
trusted: its files are moved aside (``*.damaged``; ``*.damaged2`` and on when it is damaged again)
and its games are played again. A shard written before the sidecars were sealed must read whole and
its sidecar must list the games its records hold; a shard that lists a game an earlier shard lists
too is set aside as well, so no game is ever counted twice. `run_problem` says whether a run is
complete: every game of its settings in an intact shard.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from drmario.engine.game import GameRecord
from drmario.files import file_sha256, write_atomic
from drmario.learn.example_files import decode_file, read_sidecar, sidecar_path

SHARDS = "examples"
RECORDS = "records"
SIDECAR_KEY = "sidecar"  # the sha256 entry that covers the sidecar itself


def shard_path(run_dir: Path, first: int) -> Path:
    """The examples file of the shard whose first game is `first`."""
    return run_dir / SHARDS / f"shard-{first:06d}.jsonl.gz"


def shard_first(path: Path) -> int:
    """The first game of a shard's file (examples, records or sidecar), from its name: its digits,
    however many (six and more: a run of a million games or more has wider names)."""
    digits = path.name.split(".")[0].removeprefix("shard-")
    if not digits.isdigit():
        raise ValueError(f"{path}: not a shard file name (shard-NNNNNN...)")
    return int(digits)


def _shards(run_dir: Path) -> list[Path]:
    """run_dir's shard example files in game order (by number: names grow past six digits)."""
    return sorted((run_dir / SHARDS).glob("shard-*.jsonl.gz"), key=shard_first)


def records_path(shard: Path) -> Path:
    return shard.parent.parent / RECORDS / shard.name.replace(".jsonl.gz", ".jsonl")


def shard_files(shard: Path) -> dict[str, Path]:
    return {"examples": shard, "records": records_path(shard)}


def _content_digest(side: dict) -> str:
    """sha256 of a sidecar's content, its own digest left out (canonical JSON)."""
    content = dict(side)
    sums = dict(content.pop("sha256", None) or {})
    sums.pop(SIDECAR_KEY, None)
    if sums:
        content["sha256"] = sums
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def seal(shard: Path) -> None:
    """Add the sha256 of the shard's examples and records files, and of the sidecar's content, to
    its sidecar (written last: a shard cut before this is checked by reading it whole,
    `shard_problem`)."""
    side = read_sidecar(shard) or {}
    side["sha256"] = {kind: file_sha256(path) for kind, path in shard_files(shard).items()}
    side["sha256"][SIDECAR_KEY] = _content_digest(side)
    write_atomic(sidecar_path(shard), json.dumps(side, indent=1) + "\n")


def shard_problem(shard: str | Path) -> str | None:
    """What is wrong with a written shard, or None if it can be trusted: its files and its sidecar
    must match the sha256 in its sidecar; a shard without them (cut off before its sidecar was
    sealed) must read whole, with the example and game counts its sidecar says."""
    shard = Path(shard)
    try:
        side = read_sidecar(shard)
    except ValueError as e:
        return str(e)
    if side is None:
        return f"{sidecar_path(shard)} is missing"
    files = shard_files(shard)
    sums = side.get("sha256")
    if isinstance(sums, dict):
        if sums.get(SIDECAR_KEY) != _content_digest(side):
            return f"{sidecar_path(shard)} does not match its own sha256 (changed)"
        for kind, path in files.items():
            if not path.is_file():
                return f"{path} is missing"
            if file_sha256(path) != sums.get(kind):
                return f"{path} does not match the sha256 in {sidecar_path(shard).name} (cut short or changed)"
        return None
    try:
        _, report = decode_file(shard, "skip")
        games = len(files["records"].read_text().splitlines()) if files["records"].is_file() else None
    except (OSError, ValueError) as e:
        return f"{shard} cannot be read: {e}"
    if report.skipped or report.examples != side.get("examples"):
        expected = side.get("examples")
        return f"{shard} reads {report.examples} examples ({report.skipped} bad lines); its sidecar says {expected}"
    if report.warnings:  # e.g. a CRC failure after every line read: no digest vouches for an unsealed shard
        return f"{shard}: {report.warnings[0]}"
    if games != len(side.get("games", [])):
        return f"{files['records']} holds {games} game records, the sidecar lists {len(side.get('games', []))} games"
    listed, recorded = _listed_games(shard), _recorded_games(shard)
    if listed != recorded:  # no digest covers an unsealed sidecar: its games must be the records' games
        return (
            f"{sidecar_path(shard)} lists games {_span(listed)}, but {files['records']} holds games {_span(recorded)}"
        )
    return None


def _span(indices: Iterable[int]) -> str:
    """Game indices in a message: '4, 5, 6', or '0..23' for a long run of them."""
    items = sorted(indices)
    if len(items) > 4 and items == list(range(items[0], items[-1] + 1)):
        return f"{items[0]}..{items[-1]}"
    return ", ".join(map(str, items[:8])) + (f" and {len(items) - 8} more" if len(items) > 8 else "")


def _listed_games(shard: Path) -> list[int]:
    """The game indices a shard's sidecar lists ([] when it cannot be read)."""
    try:
        return [int(g["index"]) for g in (read_sidecar(shard) or {}).get("games", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def _recorded_games(shard: Path) -> list[int]:
    """The game indices in a shard's records file ([] when it cannot be read)."""
    try:
        lines = records_path(shard).read_text().splitlines()
        return [int(GameRecord.from_json(line).meta["index"]) for line in lines if line.strip()]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _run_games(run_dir: Path) -> int | None:
    """How many games the run's settings (selfplay.json) ask for, or None if it cannot be read."""
    try:
        games = json.loads((run_dir / "selfplay.json").read_text()).get("games")
    except (OSError, ValueError, AttributeError):
        return None
    return games if isinstance(games, int) and not isinstance(games, bool) else None


def _check_shards(run_dir: Path) -> tuple[dict[Path, set[int]], dict[Path, str]]:
    """Every shard of run_dir checked: ({intact shard: its games}, {damaged shard: what is wrong}).
    A shard that lists a game an earlier intact shard lists is damaged too (a changed index)."""
    intact: dict[Path, set[int]] = {}
    damaged: dict[Path, str] = {}
    owner: dict[int, Path] = {}
    for shard in _shards(run_dir):
        problem = shard_problem(shard)
        games = _listed_games(shard) if problem is None else []
        twice = [g for g in games if g in owner]
        if problem is None and (twice or len(set(games)) != len(games)):
            where = f"shard {owner[twice[0]].name}" if twice else "this sidecar"
            problem = f"{sidecar_path(shard)} lists game {twice[0] if twice else games} which {where} lists too"
        if problem is not None:
            damaged[shard] = problem
            continue
        intact[shard] = set(games)
        owner.update({g: shard for g in games})
    return intact, damaged


def set_aside_damaged(run_dir: str | Path, log: Callable[[str], None] = print) -> list[str]:
    """Check every shard in run_dir (`shard_problem`, and no game in two shards); move the files of
    a damaged one aside (``<name>.damaged``, then ``.damaged2``, ...), so that its games are played
    again (the games no intact shard lists), and say how many. Returns the names of the shards set aside."""
    run_dir = Path(run_dir)
    intact, damaged = _check_shards(run_dir)
    if not damaged:
        return []
    total = _run_games(run_dir)
    done = set().union(*intact.values())
    starts = [shard_first(p) for p in [*intact, *damaged]]
    for shard, problem in damaged.items():
        known = set(_recorded_games(shard)) | set(_listed_games(shard))
        if total is not None:
            if not known:  # nothing readable names them: the games from its first up to the next shard's
                first = shard_first(shard)
                later = [start for start in starts if start > first]
                known = set(range(first, min([*later, total])))
            known = {g for g in known if 0 <= g < total}
        games = sorted(known - done)
        aside = ".damaged"  # a shard damaged again keeps the earlier evidence: .damaged2, .damaged3, ...
        paths = [*shard_files(shard).values(), sidecar_path(shard)]
        while any(p.with_name(p.name + aside).exists() for p in paths):
            aside = f".damaged{int(aside[8:] or 1) + 1}"
        for path in paths:
            if path.exists():
                os.replace(path, path.with_name(path.name + aside))
        again = (
            f"its {len(games)} game(s) are played again (games {_span(games)}; "
            if games
            else "its games are played again ("
        )
        log(f"{shard.name} is damaged: {problem}; {again}old files: *{aside})")
    return [shard.name for shard in damaged]


def done_games(run_dir: str | Path) -> set[int]:
    """Indices of the games already written in run_dir, from the sidecars of the shards present
    (a shard's data file is renamed into place after its sidecar, so both are complete)."""
    done: set[int] = set()
    for shard in _shards(Path(run_dir)):
        done.update(_listed_games(shard))
    return done


def run_problem(run_dir: str | Path) -> str | None:
    """What keeps a self-play run from being complete, or None if it is: its settings readable,
    every shard intact (`shard_problem`, no game in two shards) and every game of the settings in one."""
    run_dir = Path(run_dir)
    total = _run_games(run_dir)
    if total is None:
        return f"{run_dir / 'selfplay.json'} is missing or does not say how many games the run plays"
    intact, damaged = _check_shards(run_dir)
    if damaged:
        shard, problem = next(iter(damaged.items()))
        return f"{shard.name} is damaged: {problem}"
    missing = set(range(total)) - set().union(*intact.values())
    if missing:
        return f"{len(missing)} of its {total} games are not written yet (games {_span(missing)})"
    return None


def read_records(run_dir: str | Path) -> list[GameRecord]:
    """Every game record written in run_dir, in game order."""
    records = []
    for path in (Path(run_dir) / RECORDS).glob("shard-*.jsonl"):
        if not shard_path(Path(run_dir), shard_first(path)).exists():
            continue  # an interrupted shard: its examples were never written
        records += GameRecord.read_file(path)
    return sorted(records, key=lambda r: r.meta["index"])
