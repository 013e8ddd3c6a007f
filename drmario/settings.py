"""Settings: the one place each setting is defined.

Every component's settings are a dataclass deriving from `Settings`, and each field is made with
`setting`: its name, type annotation, default, one-line doc and range, all in one line::

    simulations: int = setting(200, "simulations per decision", ge=0, le=1_000_000)

Everything else is derived from those fields: validation (exact types, ranges, unknown keys, all
problems reported at once), ``to_dict``/``from_dict`` for JSON and YAML, dotted overrides
(``search.simulations=400``), the command line's flags (`drmario.run.cli`), the notebooks'
parameters and the pipeline's profiles (`drmario.run.profiles`).

Types are checked exactly: a bool is not an int, a string is not a number, a float must be finite
and an int-typed setting takes no float; lists from JSON or YAML become tuples where the type says
tuple, and dicts become nested settings. (pydantic was tried: its lax mode takes ``True`` and
``"5"`` as the int 1 and 5, and its strict mode refuses YAML lists for tuples and dicts for nested
settings; this module's rules are the ones a profile's author expects.)
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import re
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Literal, NamedTuple, TypeVar

S = TypeVar("S", bound="Settings")
_RANGES = ("ge", "gt", "le", "lt")
# An integer setting without a bound of its own on a side gets this one: every consumer takes it
# (torch and numpy seeds, numba's int64 kernels, C ints), so a huge value is refused up front, not
# as an overflow deep in a run.
INT_LIMITS = (-(2**31), 2**31 - 1)


class SettingsError(ValueError):
    """Settings that do not validate; ``problems`` lists each one ("path = value: what is wrong")."""

    def __init__(self, where: str, problems: list[str]) -> None:
        self.where, self.problems = where, problems
        lines = problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n  " + "\n  ".join(problems)
        super().__init__(f"{where}: {lines}")


def setting(
    default: Any,
    doc: str,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    prefix: bool = False,
) -> Any:
    """A settings field: default, one-line doc and range (numbers, or each number of a list).

    A mutable default (list, dict, nested settings) is copied for each instance. ``prefix``: for a
    nested settings field, its leaves are named ``<field>_<leaf>`` when flattened (`leaves`).
    """
    meta = {"doc": doc, "ge": ge, "gt": gt, "le": le, "lt": lt, "prefix": prefix}
    if isinstance(default, (list, dict, set, Settings)):
        return dataclasses.field(default_factory=functools.partial(_copy, default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _copy(value: Any) -> Any:
    if isinstance(value, Settings):
        return value.replace()
    return json.loads(json.dumps(value))


class SettingInfo(NamedTuple):
    """One leaf setting of a settings class, as `leaves` lists it."""

    name: str  # flat name (a notebook parameter, a profile key)
    path: str  # dotted path from the root settings class, e.g. "search.simulations"
    type: Any  # the annotation
    default: Any
    doc: str
    owner: type  # the settings class that defines it

    @property
    def type_text(self) -> str:
        return type_text(self.type)


class Settings:
    """Base of the settings dataclasses: validation on construction, plain-dict form and back.

    Subclasses add rules that involve several fields in `check` (return a list of problems).
    """

    def __post_init__(self) -> None:
        problems: list[str] = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            try:
                if isinstance(value, Mapping) and f.default_factory is not dataclasses.MISSING:
                    default = f.default_factory()
                    if isinstance(default, Settings):  # a partial dict overlays the field's own default
                        value = apply_dotted(default.to_dict(), _dotted(value), type(self).__name__)
                ok, converted, want = _convert(value, _hints(type(self))[f.name])
            except SettingsError as e:  # a nested settings dict with problems of its own
                problems += [f"{f.name}.{p}" for p in e.problems]
                continue
            if ok and (problem := _range_problem(converted, _bounds(f.metadata, _hints(type(self))[f.name]))):
                ok, want = False, problem
            if not ok:
                doc = f.metadata.get("doc")
                problems.append(f"{f.name} = {_show(value)}: expected {want}" + (f" ({doc})" if doc else ""))
            elif converted is not value:
                object.__setattr__(self, f.name, converted)
        if not problems:
            problems = self.check()
        if problems:
            raise SettingsError(type(self).__name__, problems)

    def check(self) -> list[str]:
        """Rules that involve several fields; each problem as "name = value: what is wrong"."""
        return []

    def unread(self) -> dict[str, str]:
        """The settings these never read (dotted path -> why): another search mode's, a switch's that is
        off. A value given for one is likely a slip, named before a run (`why_unread`). Here the nested
        settings' own; subclasses add theirs."""
        unread: dict[str, str] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, Settings):
                unread.update({f"{f.name}.{path}": why for path, why in value.unread().items()})
        return unread

    def why_unread(self, path: str) -> str | None:
        """Why the setting at path (dotted: ``search.puct.c_puct``) is never read (`unread`); None when it is."""
        return next((why for p, why in self.unread().items() if path == p or path.startswith(p + ".")), None)

    def to_dict(self) -> dict:
        """JSON-ready: nested settings as dicts, tuples as lists."""
        return json.loads(json.dumps(dataclasses.asdict(self)))  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[S], d: Mapping[str, Any]) -> S:
        """From a plain dict (missing keys take their defaults); unknown keys are refused."""
        if not isinstance(d, Mapping):
            raise SettingsError(cls.__name__, [f"expected a mapping of settings, got {type(d).__name__}"])
        known = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        unknown = [k for k in d if k not in known]
        if unknown:
            raise SettingsError(cls.__name__, [_unknown(k, known) for k in unknown])
        return cls(**d)

    def replace(self: S, **changes: Any) -> S:
        """A copy with some settings changed (validated like a new one)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]  # (subclasses are dataclasses)

    def with_overrides(self: S, overrides: Mapping[str, Any]) -> S:
        """A copy with dotted settings replaced, e.g. {"search.simulations": 400, "games": 8}."""
        return type(self).from_dict(apply_dotted(self.to_dict(), overrides, type(self).__name__))

    @classmethod
    def leaves(cls) -> Iterator[SettingInfo]:
        """Every leaf setting, nested settings flattened: a nested field's leaves keep their own
        names, or get ``<field>_`` in front where the field says ``prefix``. The flat names are the
        flags, `--set` keys and notebook parameters, so two leaves with one name are a TypeError."""
        seen: dict[str, SettingInfo] = {}
        for leaf in cls._leaves("", ""):
            if leaf.name in seen:
                raise TypeError(
                    f"{cls.__name__}: {seen[leaf.name].path} and {leaf.path} both flatten to {leaf.name!r} "
                    "(rename one, or give the nested field prefix=True)"
                )
            seen[leaf.name] = leaf
            yield leaf

    @classmethod
    def _leaves(cls, prefix: str, path: str) -> Iterator[SettingInfo]:
        hints = _hints(cls)
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            tp = hints[f.name]
            dotted = f"{path}{f.name}"
            if isinstance(tp, type) and issubclass(tp, Settings):
                inner = f"{prefix}{f.name}_" if f.metadata.get("prefix") else prefix
                yield from tp._leaves(inner, f"{dotted}.")
            else:
                factory: Any = f.default_factory
                default = factory() if f.default is dataclasses.MISSING else f.default
                yield SettingInfo(f"{prefix}{f.name}", dotted, tp, default, f.metadata.get("doc", ""), cls)


def apply_dotted(d: dict, overrides: Mapping[str, Any], where: str = "settings") -> dict:
    """A copy of the nested dict d with {"a.b": value} overrides set (nested dicts created)."""
    out = json.loads(json.dumps(d))
    for key, value in overrides.items():
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SettingsError(where, [f"{key}: {part} is not a group of settings"])
        node[leaf] = value
    return out


def load_yaml(text: str) -> Any:
    """YAML as a settings file means it: like ``yaml.safe_load``, but ``1e-3`` is a number (YAML 1.1
    reads exponents without a dot as strings), and a key given twice in one mapping is an error
    (yaml.YAMLError naming both lines) rather than the last one silently winning."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            first: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        "in a mapping", first[key], f"the key {key!r} is given twice", key_node.start_mark
                    )
                first[key] = key_node.start_mark
            return super().construct_mapping(node, deep=deep)

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."),
    )
    return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)


def _dotted(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested dict flattened to {"a.b": value} (nested settings' dicts only)."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, Mapping) and value:
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


TEXT_TYPES = (str, str | None)  # settings whose values are text: paths, devices, agents


def text_value(text: str) -> str | None:
    """A text setting's value as typed, where YAML would read ``2024-01-01`` as a date, ``yes`` as
    true and ``@x`` not at all; null, ~ and None still mean None, and one pair of quotes around the
    whole is dropped (as YAML would)."""
    if text in ("None", "null", "~"):
        return None
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def read_value(raw: str, tp: Any = None, where: str | None = None) -> Any:
    """A setting's value from its text: as typed for a text setting (tp in `TEXT_TYPES`), else YAML
    (`load_yaml`): ``500``, ``0.1``, ``1e-3``, ``true``, ``[0, 4]`` and ``null`` are typed. where:
    what a YAML error names (default: the text)."""
    import yaml

    if tp in TEXT_TYPES:
        return text_value(raw.strip())
    try:
        return load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ValueError(f"{where or raw!r}: the value is not valid YAML: {e}") from e


def split_assignment(text: str) -> tuple[str, str]:
    """``key=value`` -> (key, the value's text)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{text!r}: expected KEY=VALUE, e.g. steps=500 or search.simulations=400")
    return key, raw


def type_text(tp: Any) -> str:
    """A short readable form of a type annotation: int, list[int], 'puct' | 'gumbel', int | None."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else type_text(a) for a in args)
    if origin in (list, tuple, dict):
        inner = ", ".join("..." if a is Ellipsis else type_text(a) for a in args)
        return f"{origin.__name__}[{inner}]" if args else origin.__name__
    return getattr(tp, "__name__", str(tp))


# ------------------------------------------------------------------------------------------------
# Validation


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The resolved field annotations of a settings class (cached: resolving them is slow)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unknown(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{key}: not a setting{hint}; the settings are {', '.join(known)}"


def _convert(value: Any, tp: Any) -> tuple[bool, Any, str]:
    """(ok, value converted to tp's form, what tp wants in words)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return True, value, "anything"
    if origin is Literal:
        return value in args and type(value) in {type(a) for a in args}, value, f"one of {type_text(tp)}"
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            ok, converted, _ = _convert(value, arg)
            if ok:
                return True, converted, ""
        return False, value, " or ".join("None" if a is type(None) else _want(a) for a in args)
    if tp is type(None):
        return value is None, value, "None"
    if tp is bool:
        return isinstance(value, bool), value, "true or false"
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool) or _is_np_int(value)
        return ok, int(value) if ok else value, "an integer"
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) or _is_np_number(value)
        try:
            ok = ok and math.isfinite(value)
        except OverflowError:  # an int past float's range (10**400) is not a finite float either
            ok = False
        return ok, float(value) if ok else value, "a finite number"
    if tp is str:
        return isinstance(value, str), value, "a string"
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False, value, _want(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            item_types = list(args)
            if len(value) != len(item_types):
                return False, value, _want(tp)
        else:
            item_types = [args[0] if args else Any] * len(value)
        items = []
        for v, t in zip(value, item_types):
            ok, converted, _ = _convert(v, t)
            if not ok:
                return False, value, _want(tp)
            items.append(converted)
        return True, (tuple(items) if origin is tuple else items), _want(tp)
    if origin is dict or tp is dict:
        return isinstance(value, dict), value, "a mapping"
    if isinstance(tp, type) and issubclass(tp, Settings):
        if isinstance(value, tp):
            return True, value, ""
        if isinstance(value, Mapping):
            return True, tp.from_dict(value), ""  # its own problems raise with its own name
        return False, value, f"{tp.__name__} settings (a mapping)"
    return isinstance(value, tp), value, type_text(tp)


def _want(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        return f"a list ({type_text(tp)}, written [a, b])"
    return {int: "an integer", float: "a finite number", str: "a string", bool: "true or false"}.get(tp, type_text(tp))


def _is_np_int(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.dtype.kind in "iu"


def _is_np_number(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.dtype.kind in "iuf"


def _has_int(tp: Any) -> bool:
    """Whether a type annotation takes integers (int, int | None, list[int], tuple[int, ...])."""
    return tp is int or any(_has_int(a) for a in typing.get_args(tp) if a is not Ellipsis)


def _bounds(meta: Mapping[str, Any], tp: Any) -> dict[str, Any]:
    """A field's range: its own, with `INT_LIMITS` on a side it leaves open if it takes integers."""
    bounds = {k: meta.get(k) for k in _RANGES}
    if _has_int(tp):
        if bounds["ge"] is None and bounds["gt"] is None:
            bounds["ge"] = INT_LIMITS[0]
        if bounds["le"] is None and bounds["lt"] is None:
            bounds["le"] = INT_LIMITS[1]
    return bounds


def setting_range(cls: type[Settings], name: str) -> dict[str, Any]:
    """The range a field of a settings class is checked against (``ge``, ``gt``, ``le``, ``lt``;
    None where there is no bound)."""
    field = next(f for f in dataclasses.fields(cls) if f.name == name)  # type: ignore[arg-type]
    return _bounds(field.metadata, _hints(cls)[name])


def _range_problem(value: Any, meta: Mapping[str, Any]) -> str | None:
    bounds = {k: meta.get(k) for k in _RANGES if meta.get(k) is not None}
    if not bounds or value is None:
        return None
    numbers = value if isinstance(value, (list, tuple)) else [value]
    tests = {"ge": lambda v, b: v >= b, "gt": lambda v, b: v > b, "le": lambda v, b: v <= b, "lt": lambda v, b: v < b}
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    for v in numbers:
        if isinstance(v, (int, float)) and not all(tests[k](v, b) for k, b in bounds.items()):
            each = "each " if isinstance(value, (list, tuple)) else ""
            return f"{each}" + " and ".join(f"{words[k]} {b}" for k, b in bounds.items())
    return None


def differences(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Each leaf where two nested settings dicts differ, as "dotted.key: old -> new" ("<unset>"
    where one lacks it), in key order."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "<unset>"), new.get(key, "<unset>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out
