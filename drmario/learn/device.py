"""Which torch device a setting names, and whether this machine has it."""

from __future__ import annotations

import os

import torch


def resolve_device(name: str) -> torch.device:
    """The torch device a setting names; auto is this process's CUDA GPU (LOCAL_RANK's under
    torchrun) when there is one, else the CPU. It does not check that the device is here: callers
    ask `device_problem` first."""
    if name == "auto":
        name = f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


INFERENCE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # drmario.play.agents.PlayDtype names them


def resolve_dtype(name: str | None) -> torch.dtype | None:
    """The torch dtype a play setting names; None for auto (the `Player`'s default for its device)."""
    if name in (None, "auto"):
        return None
    if name not in INFERENCE_DTYPES:
        raise ValueError(f"dtype {name!r}: not a play dtype (auto, {', '.join(INFERENCE_DTYPES)})")
    return INFERENCE_DTYPES[name]


def device_problem(name: str) -> str | None:
    """Why a device setting cannot run here ("cuda:7" on a machine with one GPU), or None."""
    if name == "auto":
        return None
    try:
        device = torch.device(name)
    except RuntimeError:
        return "not a torch device (auto, cpu, cuda or cuda:N)"
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            return "this machine has no CUDA GPU (use cpu, or auto)"
        if device.index is not None and device.index >= count:
            return f"this machine has {count} CUDA GPU(s): cuda:0 to cuda:{count - 1}"
    elif device.type != "cpu":
        return f"device type {device.type!r} is not supported (auto, cpu, cuda or cuda:N)"
    return None


def cpu_bf16_problem() -> str | None:
    """Why bfloat16 arithmetic on this machine's CPU would crawl, or None. Without bf16 instructions
    (AMX or AVX512-BF16) torch emulates them: on a 2-core AMD EPYC with AVX2 only, the 64x6 network's
    training step under bf16 autocast ran 12.8 times slower than in float32 (21 against 274 samples/s
    at batch 256, bench/net.py) and its search with 100 simulations in bfloat16 8.5 times slower
    (bench/search.py), where a Sapphire Rapids Xeon's AMX ran the training step 2.3 times faster."""
    try:
        if torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported():
            return None
    except AttributeError:  # torch's probes are private: a torch without them cannot tell, so nothing is refused
        return None
    return (
        f"this CPU has no bf16 instructions (AMX or AVX512-BF16; torch sees {torch.backends.cpu.get_cpu_capability()}),"
        " so torch emulates bf16 (on a 2-core AMD EPYC: 12.8 times slower than float32 in training, 8.5 in search)"
    )
