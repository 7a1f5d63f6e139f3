"""User strings in the engine's search language (docs/compatibility.md#listing-and-search): what cannot be searched
for as a literal, in one place for the spec's validation, the admission policy (hack/gen_admission.py) and the oVirt
client's quoting (machine_controller/ovirt/search.py).

A search value is a pattern: `*` is a wildcard even inside double quotes. Double quotes delimit a value, and the
engine's grammar documents no escape, so a quote or a backslash cannot be taken literally; control characters (a
newline would end the query line in the engine's log) neither.
"""

from __future__ import annotations

import re

# `*`: the wildcard; `"` and `\`: the quoting itself; C0 controls and DEL. Python's re and CEL's RE2 read it alike.
UNSEARCHABLE_PATTERN = r'[*"\\\x00-\x1f\x7f]'
_UNSEARCHABLE = re.compile(UNSEARCHABLE_PATTERN)
UNSEARCHABLE = ("must not hold a wildcard (*), a double quote, a backslash or a control character: the engine's "
                "search cannot take them as a literal")


def unsearchable_char(value: str) -> str | None:
    """The first character of `value` the engine's search cannot take as a literal, or None."""
    bad = _UNSEARCHABLE.search(value)
    return bad.group() if bad is not None else None
