"""Shared plumbing for the benchmarks: machine description, timing, and the JSON result file."""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drmario.files import write_atomic

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results"


def machine_info() -> dict:
    info: dict[str, object] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            if found := re.search(r"model name\s*:\s*(.*)", f.read()):
                info["cpu"] = found.group(1).strip()
        with open("/proc/meminfo") as f:
            if found := re.search(r"MemTotal:\s*(\d+)", f.read()):
                info["memory_gib"] = round(int(found.group(1)) / 2**20, 1)
    except OSError:
        pass
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def machine_slug(info: dict) -> str:
    """A short file-name-safe machine name: the GPU's if there is one, else cores and CPU."""
    if os.environ.get("DRMARIO_MACHINE"):
        return os.environ["DRMARIO_MACHINE"]
    name = info.get("gpu") or f"cpu{info['cores']}-{info['cpu']}"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("(r)", "").replace("processor", ""))
    return slug.strip("-")[:48]


def rate(fn: Callable[[], int], min_seconds: float = 1.0) -> float:
    """Items per second of fn (which returns how many items it did), repeated for min_seconds."""
    fn()  # warm up (compilation, caches)
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_seconds:
        done += fn()
    return done / elapsed


def _relative(value: Any) -> Any:
    """Paths inside the repository stored relative to it, so a result file names no machine's folders."""
    if isinstance(value, dict):
        return {k: _relative(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_relative(v) for v in value]
    if isinstance(value, str) and value.startswith(str(REPO) + "/"):
        return value[len(str(REPO)) + 1 :]
    return value


def report(name: str, settings: dict, figures: dict, targets: dict | None = None, echo: bool = True) -> Path:
    """Print the figures (unless not echo) and write them, with the machine and settings, to
    results/NAME-MACHINE.json."""
    info = machine_info()
    result = {
        "benchmark": name,
        "machine": info,
        "settings": _relative(settings),
        "figures": figures,
        "targets": targets or {},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if echo and figures:
        width = max(map(len, figures))
        print(f"{name} on {info.get('gpu') or info['cpu']} ({info['cores']} cores)")
        for key, value in figures.items():
            target = f"   (target {targets[key]:,})" if targets and key in targets else ""
            shown = f"{value}"
            if isinstance(value, float):  # large figures with thousands separators, small ones to 3 digits
                shown = f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
            print(f"  {key:<{width}}  {shown}{target}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}-{machine_slug(info)}.json"
    write_atomic(path, json.dumps(result, indent=2) + "\n")
    if echo:
        print(f"  -> {path}")
    return path


def paired_text(label: str, t: dict, digits: int = 2) -> str:
    """One line for a paired comparison (`drmario.play.gate.compare(...).to_dict()`): wins with McNemar's
    p, then pills per virus on the games both won (none where no game was won by both: its figures are None)."""
    line = (
        f"{label}: wins {t['new_wins']}-{t['old_wins']} of {t['games']} (McNemar exact p = {t['wins_p']:.3g}, "
        f"{t['new_only']} against {t['old_only']} discordant)"
    )
    if not t["both_won"]:
        return f"{line}; no game won by both, no pills per virus to compare"
    d = digits
    return (
        f"{line}; pills per virus, mean per game on the {t['both_won']} both won {t['new_ppv']:.{d}f} against "
        f"{t['old_ppv']:.{d}f} (difference {t['ppv_diff']:+.{d}f}, 95% {t['ppv_diff_low']:+.{d}f} to "
        f"{t['ppv_diff_high']:+.{d}f})"
    )
