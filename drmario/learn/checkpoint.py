"""The checkpoint format: torch files with a content digest, read back into a network.

A checkpoint is a dict saved with ``torch.save``: at least ``net_config`` (a `NetConfig` dict) and
``model`` (the state dict); a training checkpoint adds the optimiser, schedule, step and RNG states
(`train`). Every file the kit writes carries ``sha256``, the digest of its content (`state_digest`),
checked when it is read, so a flipped byte is found. A file without it was not written by the kit
(or had its digest removed) and is refused unless the caller asks for an unverified load
(``unverified=True``, or the environment variable ``DRMARIO_UNVERIFIED_CHECKPOINTS=1``).

A damaged ``latest.pt`` of a training run is not the end of its network: `load_net` (and
`read_checkpoint` with ``fallback=True``) use the newest intact ``step-*.pt`` beside it, and say so.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from drmario.files import atomic_file
from drmario.learn.encode import DESIGN_PLANES
from drmario.learn.net import DrMarioNet, NetConfig


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read or does not fit the network asked for."""


DIGEST = "sha256"  # the checkpoint key holding the content digest
UNVERIFIED_ENV = "DRMARIO_UNVERIFIED_CHECKPOINTS"  # "1": load checkpoints without a digest (not the kit's)


def state_digest(state: object) -> str:
    """SHA-256 of a checkpoint's content: every tensor's dtype, shape and bytes, and every other
    value's repr, walked in key order (so it is stable across saves and loads)."""
    h = hashlib.sha256()

    def walk(value: object) -> None:
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            for key in sorted(value, key=repr):
                if key != DIGEST:
                    h.update(repr(key).encode())
                    walk(value[key])
        elif isinstance(value, (list, tuple)):
            h.update(f"L{len(value)}".encode())
            for item in value:
                walk(item)
        else:
            h.update(repr(value).encode())

    walk(state)
    return h.hexdigest()


def save_checkpoint(path: str | Path, state: dict) -> Path:
    """torch.save state, with its content digest (`state_digest`), to path atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as f:
        torch.save({**state, DIGEST: state_digest(state)}, f)
    return path


def _load(path: Path) -> tuple[object, bool]:
    """(torch.load of path onto the CPU, weights only, whether it carried a digest); the digest, if
    any, checked and removed. FileNotFoundError if path is missing; CheckpointError naming the file
    if it is truncated or corrupted (a flipped byte in a weight changes the digest)."""
    if path.is_dir():
        found = sorted(path.glob("**/checkpoints/latest.pt"))
        hint = f", e.g. {found[0]}" if found else ""
        raise FileNotFoundError(f"checkpoint {path} is a directory: give a checkpoint file (.pt){hint}")
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for damaged files
        # torch's unpickling message advises weights_only=False, which would run any code in the file
        why = "not a file torch.save wrote" if isinstance(e, pickle.UnpicklingError) else str(e).strip()
        raise CheckpointError(
            f"checkpoint {path} cannot be read (not a checkpoint, or truncated or corrupted?): "
            f"{type(e).__name__}: {why}"
        ) from e
    if isinstance(state, dict) and DIGEST in state:
        saved = state.pop(DIGEST)
        if saved != state_digest(state):
            raise CheckpointError(f"checkpoint {path} is corrupted: its content does not match its sha256 digest")
        return state, True
    return state, False


def _refuse_unsigned(path: Path, unverified: bool) -> None:
    if not (unverified or os.environ.get(UNVERIFIED_ENV) == "1"):
        raise CheckpointError(
            f"checkpoint {path} has no {DIGEST!r} digest, which every checkpoint the kit writes carries: it was "
            "not written by the kit, or its digest was removed, so a changed byte would go unnoticed; load it "
            f"only if you trust it, with unverified=True or the environment variable {UNVERIFIED_ENV}=1"
        )


def load_file(path: str | Path, *, unverified: bool = False) -> object:
    """torch.load onto the CPU, weights only (no code runs), with the content digest checked.
    FileNotFoundError if path is missing; CheckpointError naming the file if it is truncated or
    corrupted, or carries no digest (unless unverified, module docstring)."""
    path = Path(path)
    state, signed = _load(path)
    if not signed:
        _refuse_unsigned(path, unverified)
    return state


def _read_one(path: Path, unverified: bool) -> dict:
    state, signed = _load(path)
    if not isinstance(state, dict) or "model" not in state or "net_config" not in state:
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"checkpoint {path} is not a drmario network checkpoint (found {keys})")
    if not signed:
        _refuse_unsigned(path, unverified)
    return state


def step_checkpoints(folder: str | Path) -> list[Path]:
    """A training run's ``step-N.pt`` checkpoints in folder, newest (highest step) first: by number,
    as the names grow past their zero padding (step 1,000,000 comes after step 999,500)."""
    steps = [p for p in Path(folder).glob("step-*.pt") if p.stem.removeprefix("step-").isdigit()]
    return sorted(steps, key=lambda p: int(p.stem.removeprefix("step-")), reverse=True)


def prune_steps(folder: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` step checkpoints in folder (0: keep all)."""
    if keep:
        for old in step_checkpoints(folder)[keep:]:
            old.unlink()


def read_checkpoint(path: str | Path, *, fallback: bool = False, unverified: bool = False) -> dict:
    """A network checkpoint dict (digest checked, `load_file`); CheckpointError if the file holds
    something else. fallback: if path is a training run's ``latest.pt`` that is damaged, the newest
    intact ``step-*.pt`` beside it, with a warning that names both (CheckpointError listing every
    file tried if none is intact)."""
    path = Path(path)
    try:
        return _read_one(path, unverified)
    except CheckpointError as e:
        if not fallback or path.name != "latest.pt":
            raise
        problems = [str(e)]
    for step in step_checkpoints(path.parent):
        try:
            state = _read_one(step, unverified)
        except CheckpointError as e:
            problems.append(str(e))
            continue
        warnings.warn(
            f"{'; '.join(problems)}; using {step} instead (the newest intact checkpoint beside it)", stacklevel=2
        )
        return state
    raise CheckpointError(f"no intact checkpoint in {path.parent}: {'; '.join(problems)}")


# What a checkpoint from before these settings existed was made with: the design's 18 planes (no
# preview) and its relative count error.
LEGACY_NET = {"planes": DESIGN_PLANES, "count_error": "relative"}


def checkpoint_config(state: dict, path: str | Path = "checkpoint") -> NetConfig:
    """The network configuration a checkpoint was saved with (`LEGACY_NET` for the settings it
    was made before)."""
    try:
        return NetConfig.from_dict({**LEGACY_NET, **state["net_config"]})
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path}: bad network configuration: {e}") from e


def load_state(
    net: DrMarioNet, state_dict: dict, path: str | Path, saved: NetConfig | None = None, optional: Sequence[str] = ()
) -> None:
    """net.load_state_dict with an error that names the file and lists what does not fit. Weights
    whose names start with one of `optional` may be missing (net keeps its own) or unexpected (left out)."""
    own = net.state_dict()
    state_dict = {k: v for k, v in state_dict.items() if k in own or not k.startswith(tuple(optional))}
    missing = [k for k in own if k not in state_dict and not k.startswith(tuple(optional))]
    unexpected = [k for k in state_dict if k not in own]
    shapes = [
        f"{k} {tuple(state_dict[k].shape)} vs {tuple(v.shape)}"
        for k, v in own.items()
        if k in state_dict and tuple(state_dict[k].shape) != tuple(v.shape)
    ]
    if missing or unexpected or shapes:
        parts = []
        if saved is not None and saved != net.cfg:
            a, b = saved.to_dict(), net.cfg.to_dict()
            diff = ", ".join(f"{k}={a[k]!r} (this network: {b[k]!r})" for k in a if a[k] != b[k])
            parts.append(f"it was saved from another configuration: {diff}")
        for label, items in (("shape mismatches (saved vs this)", shapes), ("missing", missing)):
            if items:
                parts.append(f"{len(items)} {label}: {', '.join(items[:4])}{', ...' if len(items) > 4 else ''}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected: {', '.join(unexpected[:4])}{', ...' * (len(unexpected) > 4)}")
        raise CheckpointError(f"checkpoint {path} does not fit this network: " + "; ".join(parts))
    net.load_state_dict(state_dict, strict=not optional)


def save_net(net: DrMarioNet, path: str | Path) -> Path:
    """Write the network alone (its config and weights) in the checkpoint format."""
    return save_checkpoint(path, {"net_config": net.cfg.to_dict(), "model": net.state_dict()})


def load_net(
    path: str | Path, cfg: NetConfig | None = None, *, fallback: bool = True, unverified: bool = False
) -> DrMarioNet:
    """A network (CPU, eval mode) from a checkpoint, built from its stored config, or from cfg to
    insist on a configuration (a mismatch is a CheckpointError listing the differences). A damaged
    ``latest.pt`` falls back to the newest intact ``step-*.pt`` beside it (`read_checkpoint`)."""
    state = read_checkpoint(path, fallback=fallback, unverified=unverified)
    saved = checkpoint_config(state, path)
    net = DrMarioNet(cfg or saved)
    load_state(net, state["model"], path, saved)
    return net.eval()
