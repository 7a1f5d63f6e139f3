"""User strings in the engine's search language: quoted here, once, or refused
(docs/architecture.md#acting-only-on-what-is-ours).

A search value is a pattern, not a literal (docs/compatibility.md#listing-and-search): `*` is a wildcard even
inside double quotes, so a CSI volume named `*` would match every disk. Callers compare the names the search
returns exactly, but a value that is a pattern must not reach the engine at all: it costs a list of everything
and says the caller searched for something it did not mean. Double quotes delimit a value; rather than rely on an
escape the engine's grammar does not document, a value holding a quote or a backslash is refused, as are control
characters (a newline would end the query line in the engine's log); the rule is api/search_text.py's, which the
provider spec's validation applies to the template's name where it enters. Spaces are fine inside the quotes.

Ids never go through here: an id goes into a URL path and must be an engine UUID (`api.ids.is_ovirt_id`).
"""

from __future__ import annotations

from api.search_text import unsearchable_char

from .errors import BadRequestError


class UnsearchableValue(BadRequestError):
    """A user string that cannot be searched for as a literal: the request is refused, never sent, never retried."""


def check(value: str, what: str = "name") -> str:
    """`value` unchanged when it can be searched for literally; else UnsearchableValue saying what is wrong."""
    if not value:
        raise UnsearchableValue(f"the {what} is empty")
    char = unsearchable_char(value)
    if char is not None:
        shown = "a wildcard" if char == "*" else "a quote" if char in '"\\' else "a control character"
        raise UnsearchableValue(f"the {what} {value!r} holds {shown} ({char!r}), which the engine's search "
                                "cannot take as a literal")
    return value


def quote(value: str, what: str = "name") -> str:
    """`value` as a double-quoted search value (spaces allowed), or UnsearchableValue."""
    return f'"{check(value, what)}"'


def equals(field: str, value: str, what: str = "name") -> str:
    """The search `field="value"`, e.g. `equals("name", disk_name)`."""
    return f"{field}={quote(value, what)}"
