"""The base of the settings dataclasses (NetConfig, TrainConfig, SearchConfig, SelfPlayConfig, ...)."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import TypeVar

S = TypeVar("S", bound="Settings")


class Settings:
    """A dataclass's plain-dict form and back. to_dict is JSON-ready (nested settings as dicts,
    tuples as lists); from_dict takes defaults for missing keys and refuses unknown ones, so that
    a typo in a profile or a saved run never passes silently."""

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls: type[S], d: dict) -> S:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown keys {unknown}; known keys are {sorted(known)}")
        return cls(**d)
