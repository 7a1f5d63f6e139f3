"""Reading every key of an object being converted (docs/cluster-api.md#migrating-from-the-machine-api): each key is
taken by the code that maps it, and what no one took is refused by its path (`spec.providerSpec.value.someField: has
no Cluster API equivalent`), so nothing is dropped silently; ConversionError carries every refusal at once."""

from __future__ import annotations

from typing import Any, Mapping

from api.field_errors import FieldError

NO_CAPI = "has no Cluster API equivalent"
NO_MAPI = "has no Machine API equivalent"


class ConversionError(ValueError):
    """The object cannot be converted as it is: every field at fault, by its path in the object given."""

    def __init__(self, what: str, errors: list[FieldError]):
        self.errors = list(errors)
        super().__init__(f"{what}: " + "; ".join(str(e) for e in self.errors))


class Fields:
    """A mapping whose keys are taken one by one; what no one took is refused by path at the end (`leftovers`)."""

    def __init__(self, raw: Any, path: str, errors: list[FieldError]):
        self.path = path
        self.errors = errors
        if raw is not None and not isinstance(raw, Mapping):
            self.error("", f"Invalid value: expected an object, got {type(raw).__name__}")
            raw = None
        self._raw = dict(raw or {})

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, message: str) -> None:
        self.errors.append(FieldError(self.at(key) if key else self.path, message))

    def take(self, key: str, default: Any = None) -> Any:
        value = self._raw.pop(key, None)
        return default if value is None else value

    def sub(self, key: str) -> Fields:
        return Fields(self.take(key), self.at(key), self.errors)

    def text(self, key: str) -> str:
        value = self.take(key, "")
        if not isinstance(value, str):
            self.error(key, f"Invalid value: expected a string, got {type(value).__name__}")
            return ""
        return value

    def strings(self, key: str) -> dict[str, str]:
        value = self.take(key, {})
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            self.error(key, "Invalid value: expected a map of strings")
            return {}
        return dict(value)

    def integer(self, key: str, minimum: int = 0) -> int | None:
        value = self.take(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= 2**31 - 1:
            self.error(key, f"Invalid value: {value!r}: must be an integer from {minimum} to {2**31 - 1}")
            return None
        return value

    def refuse_rest(self, why: str) -> None:
        """Every key left that holds something is refused; an empty value (`{}`, `[]`, `""`) holds nothing to lose."""
        for key, value in self._raw.items():
            if value not in (None, {}, [], ""):
                self.error(key, why)
        self._raw.clear()


class SpecFields(Fields):
    """Fields handed over whole once the caller took its own."""

    def take_all(self) -> dict[str, Any]:
        taken = dict(self._raw)
        self._raw.clear()
        return taken


def check_kind(obj: Any, api_version: str, kind: str, what: str) -> None:
    if not isinstance(obj, Mapping):
        raise ConversionError(what, [FieldError("", f"Invalid value: expected an object, got {type(obj).__name__}")])
    errors = [FieldError(k, f'Unsupported value: "{obj.get(k)}": supported values: "{v}"')
              for k, v in (("apiVersion", api_version), ("kind", kind)) if obj.get(k) != v]
    if errors:
        raise ConversionError(what, errors)


def describe(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return "object"
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{obj.get('kind', 'object')} {meta.get('namespace') or ''}/{meta.get('name') or ''}"


def raise_errors(what: str, errors: list[FieldError]) -> None:
    if errors:
        raise ConversionError(what, errors)
