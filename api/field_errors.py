"""Field-level errors of a provider spec, in the format of Kubernetes' field.ErrorList."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem: `path` like `spec.providerSpec.value.cpu.sockets`, `message` like
    `Invalid value: 0: must be greater than 0` (the `<Type>: <detail>` shape of field.Error)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class InvalidProviderSpec(ValueError):
    """The provider spec cannot be used. The Machine goes Failed with errorReason InvalidConfiguration and
    `str(error)` (every problem, joined by "; ") as errorMessage (docs/compatibility.md#provider-spec)."""

    def __init__(self, errors: list[FieldError]):
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))
