"""A result's fields, declared once beside the code that writes the result.

Results travel as JSON dicts (from the cache, the command line, the app, shipped files). A
result kind's :class:`Fields` names every key it has: ``required`` (always written; its value
may still be ``None`` where the producer writes ``None``) and ``optional`` (written only in
some cases, with the value a reader takes when it is absent). The producer declares it beside
its own code, and everything that reads the result (figures, pages, the command line's
summaries) reads through :meth:`Fields.read`, so a renamed key fails naming the kind and the
field instead of turning into ``None`` on a page; :meth:`Fields.problems` lets a test hold a
producer's records to their declaration (nothing required missing, nothing undeclared).

Torch-free and dependency-free, so that every tier can declare and read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Fields", "MissingField"]


class MissingField(KeyError):
    """A reader asked a result for a field that it does not have (or that is not declared)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class Fields:
    """The fields of one kind of result record (a JSON object)."""

    kind: str
    required: tuple[str, ...]
    optional: Mapping[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        """Every declared field, required ones first."""
        return (*self.required, *self.optional)

    def read(self, record: Mapping[str, Any], name: str) -> Any:
        """``record[name]``; an absent optional field gives its default, an absent required
        field raises :class:`MissingField` naming ``kind`` and ``name``."""
        if name in self.required:
            if name not in record:
                have = ", ".join(map(str, record)) or "nothing"
                raise MissingField(f"{self.kind} has no field {name!r} (it has: {have})")
            return record[name]
        if name in self.optional:
            return record.get(name, self.optional[name])
        raise MissingField(f"{name!r} is read from a {self.kind}, which declares no such "
                           "field; add it to its Fields declaration")  # fmt: skip

    def problems(self, record: Mapping[str, Any]) -> list[str]:
        """What keeps ``record`` from being one of this kind: each required field absent and
        each field written that the declaration does not name (empty: it conforms)."""
        out = [f"{self.kind}: no field {n!r}" for n in self.required if n not in record]
        known = set(self.names)
        out += [f"{self.kind}: undeclared field {k!r}" for k in record if k not in known]
        return out
