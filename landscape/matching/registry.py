"""The matching methods: one :class:`~landscape.matching.methods.MatchingMethod` entry each.

:func:`method_of` is how code asks about a method (``method_of(name).needs_data``), never by
comparing its name; :func:`landscape.matching.match` runs one by looking it up here.

Adding a method
---------------
1. One module in ``landscape/matching/`` with its settings as a frozen dataclass (every field a
   setting declared with its type, default and help: ``setting(default, help)``, which
   ``--option help`` lists), its run function (``landscape.matching.methods.Run``) and its
   entry, e.g. ``SIGNS = MatchingMethod("signs", "sign matching", SignOptions, _run)``, with
   the facts other code asks in place of its name (``aligns``, ``needs_data``, ``learned``,
   ``fixed_batch``, …).
2. One line in :data:`METHODS_BY_NAME` below. The library (``match``, ``align``,
   ``measure_barrier``, ``barrier``) then takes it by name; to offer it on the command line
   and in the app, its name goes into ``landscape.names.Method`` as well (a test keeps the
   two lists equal). ``docs/architecture.md`` walks through a whole example.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from landscape.matching.activation import ACTIVATION
from landscape.matching.learned import LEARNED
from landscape.matching.methods import MatchingMethod, said_default
from landscape.matching.result import NAIVE
from landscape.matching.weight import WEIGHT
from landscape.names import method_key

__all__ = [
    "METHODS_BY_NAME",
    "aligns",
    "declaring",
    "given_options",
    "matching_key",
    "matching_keys",
    "method_of",
    "register",
    "result_aligns",
    "unregister",
]

# in the order tables and pages show them (landscape.names.METHODS)
METHODS_BY_NAME: dict[str, MatchingMethod] = {
    NAIVE.name: NAIVE,
    ACTIVATION.name: ACTIVATION,
    WEIGHT.name: WEIGHT,
    LEARNED.name: LEARNED,
}


def method_of(name: str) -> MatchingMethod:
    """The entry of the method called ``name``; a ValueError naming the methods there are."""
    try:
        return METHODS_BY_NAME[name]
    except (KeyError, TypeError):
        known = ", ".join(METHODS_BY_NAME)
        raise ValueError(f"unknown matching method {name!r}; expected one of {known}") from None


def aligns(name: str) -> bool:
    """Whether the method called ``name`` moves B at all (``MatchingMethod.aligns``): what a
    result that carries only the method's name asks, e.g. whether it has an aligned line beside
    the naive one. A ValueError for a method that is not registered."""
    return method_of(name).aligns


def result_aligns(result: Mapping[str, Any]) -> bool:
    """Whether the matching of a result record (a JSON object with a ``method``) moves B: its
    own ``aligns`` where it carries one (a barrier result,
    ``landscape.experiments.BarrierRun.to_dict``), else its method's entry (:func:`aligns`:
    records that name only their method, such as a table's rows or a curve's alignments, and
    results stored before barrier results carried the field)."""
    said = result.get("aligns")
    return bool(said) if said is not None else aligns(result["method"])


def matching_key(method: str, group: str | None = None) -> str:
    """The key naming ``method`` under ``group`` in tables and legends
    (``landscape.names.method_key``), whether it aligns read from its entry: ``"weight/orth"``,
    ``"naive"``."""
    return method_key(method, group, aligns=aligns(method))


def matching_keys(methods: Sequence[str], groups: Sequence[str]) -> list[str]:
    """The keys of ``methods`` (names of registered methods) under ``groups``, in their order:
    a method that aligns under each group, one that does not (naive) once, as pages offer
    them: ``["naive", "weight/perm", "weight/orth", …]``."""
    return [matching_key(m, g) for m in methods for g in (groups if aligns(m) else groups[:1])]


def declaring(setting: str) -> list[MatchingMethod]:
    """The registered methods that declare a setting called ``setting``, in the registry's
    order (what an error says of a setting given to a method that has no such setting)."""
    return [m for m in METHODS_BY_NAME.values() if any(s.name == setting for s in m.declared())]


def register(method: MatchingMethod) -> MatchingMethod:
    """Add ``method`` to the registry (a method defined outside the package, or a test's);
    a name already taken is refused."""
    if method.name in METHODS_BY_NAME:
        raise ValueError(f"a matching method {method.name!r} is registered already")
    METHODS_BY_NAME[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove the method ``name`` (what :func:`register` added)."""
    METHODS_BY_NAME.pop(name, None)


def given_options(method: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` of ``method`` less those that say the method's own default (a number, text
    or flag equal to its setting's default, of its type), so that a default said explicitly
    keys the same cached result as one left out. Anything else (a tensor, an unknown name) is
    kept, for the method to refuse; so is everything of a method that is not registered."""
    options = dict(options or {})
    entry = METHODS_BY_NAME.get(method)
    if entry is None:
        return options
    defaults = {f.name: f.default for f in fields(entry.options)}
    return {k: v for k, v in options.items()
            if not (k in defaults and said_default(v, defaults[k]))}  # fmt: skip
