"""Generic dict <-> dataclass conversion for the API types, driven by the `prop` declarations.

Decoding follows what the Go API machinery does with OpenShift objects: unknown keys are ignored, absent keys
and JSON null take the field default, and a value of the wrong JSON type is an error (Go's unmarshal refuses a
string where an int32 is declared). Errors name the offending field by its JSON path.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, Callable, Mapping, TypeVar

from api._fields import json_fields

T = TypeVar("T")


class DecodeError(ValueError):
    """A value does not have the JSON type its field declares. `path` is relative to the decoded object."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """(T, True) for `T | None`, else (tp, False)."""
    if is_union(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != len(typing.get_args(tp)):
            return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), True
    return tp, False


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_JSON_NAMES = {str: "string", int: "integer", bool: "boolean", float: "number"}


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return _JSON_NAMES.get(type(value), type(value).__name__)


def decode(tp: Any, value: Any, path: str = "") -> Any:
    """Convert a JSON-like value into the Python type `tp`."""
    return _decoder(tp)(value, path)


Decoder = Callable[[Any, str], Any]


@functools.cache
def _decoder(tp: Any) -> Decoder:
    """The decoder of `tp`, worked out once per type: the controller decodes a Machine at every pass, and asking
    `typing` what each field's type is at every value cost more than the rest of a pass (hack/bench/machines.py)."""
    tp, _ = unwrap_optional(tp)
    if tp is Any:
        return lambda value, path: value
    if is_union(tp):  # int-or-string
        alternatives = typing.get_args(tp)

        def union(value: Any, path: str) -> Any:
            for alt in alternatives:
                if _matches_scalar(alt, value):
                    return value
            names = " or ".join(_JSON_NAMES[a] for a in alternatives)
            raise DecodeError(path, f"expected {names}, got {_type_name(value)}")
        return union
    if dataclasses.is_dataclass(tp):
        cls = typing.cast(type, tp)
        return lambda value, path: from_dict(cls, value, path)
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp)
        item_decoder = _decoder(item)

        def array(value: Any, path: str) -> Any:
            if not isinstance(value, list):
                raise DecodeError(path, f"expected array, got {_type_name(value)}")
            return [item_decoder(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return array
    if origin is dict:
        _, item = typing.get_args(tp)
        value_decoder = _decoder(item)

        def mapping(value: Any, path: str) -> Any:
            if not isinstance(value, Mapping):
                raise DecodeError(path, f"expected object, got {_type_name(value)}")
            return {str(k): value_decoder(v, _join(path, str(k))) for k, v in value.items()}
        return mapping

    def scalar(value: Any, path: str) -> Any:
        if _matches_scalar(tp, value):
            return value
        if tp is float and _matches_scalar(int, value):
            return float(value)
        raise DecodeError(path, f"expected {_JSON_NAMES.get(tp, tp)}, got {_type_name(value)}")
    return scalar


def _matches_scalar(tp: Any, value: Any) -> bool:
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


@functools.cache
def _fields_plan(cls: type) -> tuple[tuple[str, str, Decoder], ...]:
    """(attribute, JSON key, decoder) of each field of `cls`."""
    hints = type_hints(cls)
    return tuple((f.name, f.metadata["key"], _decoder(hints[f.name])) for f in json_fields(cls))


def from_dict(cls: type[T], data: Any, path: str = "") -> T:
    """Build `cls` from a mapping; unknown keys are ignored, null/absent keys take the field default."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise DecodeError(path, f"expected object, got {_type_name(data)}")
    kwargs = {}
    plain: type = cls  # typeshed's functools.cache takes Hashable arguments, which mypy does not see in type[T]
    for name, key, field_decoder in _fields_plan(plain):
        raw = data.get(key)
        if raw is not None:
            kwargs[name] = field_decoder(raw, f"{path}.{key}" if path else key)
    return cls(**kwargs)


def encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value


def _is_empty(value: Any) -> bool:
    # Go's omitempty: nil pointers and zero scalars/collections are left out; structs never are.
    if value is None:
        return True
    if isinstance(value, (str, int, float, list, dict)):
        return not value
    return False


def to_dict(obj: Any) -> dict[str, Any]:
    """Serialise with the exact JSON keys, honouring each field's omitempty."""
    out: dict[str, Any] = {}
    cls: type = type(obj)
    hints = type_hints(cls)
    for f in json_fields(cls):
        value = getattr(obj, f.name)
        _, optional = unwrap_optional(hints[f.name])
        if value is None:
            continue
        # A pointer field (Optional) is written whenever it is set, even to a zero value (Go: *int32 = 0).
        if f.metadata["omitempty"] and not optional and _is_empty(value):
            continue
        out[f.metadata["key"]] = encode(value)
    return out


class JSONObject:
    """Mixin giving API dataclasses `from_dict` / `to_dict` with their declared JSON names."""

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any] | None) -> T:
        return from_dict(cls, data)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)
