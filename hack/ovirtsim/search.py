"""The engine's search language, as far as clients use it (docs/compatibility.md#listing-and-search).

`criteria [sortby field [asc|desc]] [page N]`; criteria are `field op value` joined by `and`/`or` (`and` binds
tighter); operators `= != < > <= >=`; `*` is a wildcard; values may be double-quoted (ansible always quotes,
go-ovirt-client does not). Matching is case-insensitive unless `case_sensitive=true`: the engine reads a missing
parameter as false (`AbstractBackendCollectionResource.getSearchParameters`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from hack.ovirtsim.errors import bad_parameters

FieldGetter = Callable[[Any], "str | int | None | Iterable[str]"]

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|(!=|<=|>=|=|<|>)|([^\s=!<>"]+))')
_OPERATORS = {"=", "!=", "<", ">", "<=", ">="}


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: str


@dataclass(frozen=True)
class Query:
    # Disjunction of conjunctions: [[c1 and c2] or [c3]]
    clauses: tuple[tuple[Condition, ...], ...]
    sort_by: str | None = None
    descending: bool = False
    page: int | None = None


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) with kind `str` (quoted), `op` or `word`."""
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise bad_parameters(f"Cannot parse search query '{text}' at position {pos}.")
        quoted, op, word = m.groups()
        if quoted is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", quoted)))
        elif op is not None:
            out.append(("op", op))
        else:
            out.append(("word", word))
        pos = m.end()
    return out


def parse(text: str) -> Query:
    tokens = _tokens(text)
    clauses: list[tuple[Condition, ...]] = []
    current: list[Condition] = []
    sort_by: str | None = None
    descending = False
    page: int | None = None
    i = 0
    while i < len(tokens):
        kind, tok = tokens[i]
        low = tok.lower()
        if kind == "word" and low == "and":
            i += 1
            continue
        if kind == "word" and low == "or":
            if current:
                clauses.append(tuple(current))
            current = []
            i += 1
            continue
        if kind == "word" and low == "sortby" and i + 1 < len(tokens):
            sort_by = tokens[i + 1][1].lower()
            i += 2
            if i < len(tokens) and tokens[i][1].lower() in ("asc", "desc"):
                descending = tokens[i][1].lower() == "desc"
                i += 1
            continue
        if kind == "word" and low == "page" and i + 1 < len(tokens):
            try:
                page = int(tokens[i + 1][1])
            except ValueError:
                raise bad_parameters(f"Invalid page number in search query '{text}'.") from None
            i += 2
            continue
        if i + 2 < len(tokens) and tokens[i + 1][0] == "op":
            value_kind, value = tokens[i + 2]
            if value_kind == "op":
                raise bad_parameters(f"Cannot parse search query '{text}'.")
            current.append(Condition(tok.lower(), tokens[i + 1][1], value))
            i += 3
            continue
        if i + 1 < len(tokens) and tokens[i + 1][0] == "op":  # `name=` with an empty value
            current.append(Condition(tok.lower(), tokens[i + 1][1], ""))
            i += 2
            continue
        raise bad_parameters(f"Cannot parse search query '{text}' near '{tok}'.")
    if current:
        clauses.append(tuple(current))
    return Query(tuple(clauses), sort_by, descending, page)


def _values(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, (str, int, float)):
        return [str(raw)]
    if hasattr(raw, "value"):  # enums
        return [str(raw.value)]
    return [str(v) for v in raw if v is not None]


def _compare(values: list[str], cond: Condition, case_sensitive: bool) -> bool:
    if cond.op in ("=", "!="):
        flags = 0 if case_sensitive else re.IGNORECASE
        pattern = re.compile("^" + ".*".join(re.escape(p) for p in cond.value.split("*")) + "$", flags)
        hit = any(pattern.match(v) for v in values)
        return hit if cond.op == "=" else not hit
    for v in values:
        try:
            a: Any = float(v)
            b: Any = float(cond.value)
        except ValueError:
            a, b = v.lower(), cond.value.lower()
        if (cond.op == "<" and a < b) or (cond.op == ">" and a > b) or (cond.op == "<=" and a <= b) \
                or (cond.op == ">=" and a >= b):
            return True
    return False


def apply(objs: Sequence[Any], text: str | None, fields: dict[str, FieldGetter],
          case_sensitive: bool = False) -> list[Any]:
    if not text or not text.strip():
        return list(objs)
    query = parse(text)
    for clause in query.clauses:
        for cond in clause:
            if cond.field not in fields:
                raise bad_parameters(f"Invalid search query: unknown field '{cond.field}'. "
                                     f"Known fields: {', '.join(sorted(fields))}.")
    result = [o for o in objs
              if not query.clauses or any(all(_compare(_values(fields[c.field](o)), c, case_sensitive)
                                              for c in clause) for clause in query.clauses)]
    if query.sort_by:
        getter = fields.get(query.sort_by)
        if getter is None:
            raise bad_parameters(f"Invalid search query: unknown sort field '{query.sort_by}'.")
        result.sort(key=lambda o: (_values(getter(o)) or [""])[0], reverse=query.descending)
    return result
