"""The matching contract: what a method declares, and what a group level means.

The names (``Method``, ``Group`` and their tuples) are :mod:`landscape.names`'s, re-exported
here: every layer reads them from there instead of writing the strings again.

A matching method is one :class:`MatchingMethod` entry in the registry
(:mod:`landscape.matching.registry`): whether it needs data, its settings as a frozen dataclass
(the ``options``, part of every cache key), and ``run``. :func:`given_settings` and
:func:`options_key` are how a dict of settings becomes that dataclass and how the dataclass
becomes a cache key, for every method alike; :func:`text_settings` reads settings given as text
(the command line's ``--option KEY=VALUE``), typed from the dataclass's declarations. Beside
its settings every method takes one :class:`MatchContext`: the seed of its draws, where it
computes and who hears it.

A group level means a kind per gauge variable (:func:`matching_kinds`) and the processing that
makes it exact on both endpoints (:func:`prepare_pair`).
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import torch

from landscape.errors import LandscapeError
from landscape.models import ModelConfig, Params
from landscape.names import BARRIER_GROUPS, MATCH_GROUPS, METHODS, MONOMIAL_GROUPS, Group, Method
from landscape.progress import Progress
from landscape.symmetry import RESID_GROUPS, Element, Spec, group_kinds
from landscape.symmetry.processing import prepare

if TYPE_CHECKING:  # the result type sits in result.py, which imports this module
    from landscape.matching.result import MatchResult

__all__ = [
    "BARRIER_GROUPS",
    "MATCH_CONTEXT",
    "MATCH_GROUPS",
    "METHODS",
    "MONOMIAL_GROUPS",
    "Group",
    "MatchContext",
    "MatchingMethod",
    "Method",
    "NoOptions",
    "OnElements",
    "Prepared",
    "Run",
    "Setting",
    "declared_settings",
    "given_settings",
    "matching_kinds",
    "options_key",
    "prepare_pair",
    "refuse_experts",
    "said_default",
    "setting",
    "settings_of",
    "text_settings",
]


# Told the elements found so far (acting on B as processed) at every point a method has them:
# weight matching's rounds (round 0: the identity, no element yet), learned matching's scoring
# steps (step 0: the start)
OnElements = Callable[[int, Mapping[str, Element]], None]

# prepare_pair's processed config, A and B
Prepared = tuple[ModelConfig, Params, Params]


@dataclass(frozen=True)
class MatchContext:
    """One call of a matching method, besides the pair, the group and the method's settings.

    ``seed`` seeds whatever the method draws (weight matching's visiting order, learned
    matching's batches and mixtures): it changes the answer, so a cache key holds it beside the
    settings. The rest changes nothing in the answer: ``device`` is where the method computes
    (None: where the parameters are, or the CPU, as the method says), ``progress``
    (:mod:`landscape.progress`) hears its stages and ``on_elements`` (:data:`OnElements`) its
    elements after each round or scoring step (a method without rounds tells it nothing).
    """

    seed: int = 0
    device: torch.device | None = None
    progress: Progress | None = None
    on_elements: OnElements | None = None


MATCH_CONTEXT = MatchContext()  # seed 0, where the parameters are, nobody told


class Run(Protocol):
    """A method's work: align B to A under ``group`` with ``options`` (its settings).

    ``train_split`` is A's training data (a ``data.Split``) for a method that ``needs_data``,
    else None; ``context`` (:class:`MatchContext`) holds the seed, the device and who hears
    the work. ``hooks`` are the method's own per-call arguments that are no setting and key no
    cache (weight matching's ``consume``, learned matching's ``start``, activation matching's
    ``inputs``), named in its entry's ``hooks``.
    """

    def __call__(self, cfg: ModelConfig, params_a: Params, params_b: Params, group: str,
                 options: Any, *, train_split: Any, context: MatchContext,
                 **hooks: Any) -> MatchResult: ...  # fmt: skip


def setting(default: Any, help: str) -> Any:
    """One field of a method's options dataclass: the setting's ``default`` and ``help``, what
    it means in a line (what ``--option help`` lists, :func:`declared_settings`). Its type is
    the field's annotation."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Setting:
    """One setting a method declares: its ``name`` (the keyword, the ``--option`` key), its
    ``type`` (the field's annotation: what ``--option`` text is read as), its ``default`` and its
    ``help``."""

    name: str
    type: Any
    default: Any
    help: str

    def kind(self) -> str:
        """What a value of this setting is, in words (``a whole number``, ``one of …``)."""
        return _kind(self.type)


def declared_settings(cls: type) -> tuple[Setting, ...]:
    """The settings the options dataclass ``cls`` declares, in its fields' order: name, type,
    default and help (:func:`setting`; a field declared without help has ``""``)."""
    hints = get_type_hints(cls)
    return tuple(Setting(f.name, hints[f.name], f.default, f.metadata.get("help", ""))
                 for f in fields(cls))  # fmt: skip


@dataclass(frozen=True)
class NoOptions:
    """The settings of a method that has none (naive)."""


@dataclass(frozen=True)
class MatchingMethod:
    """One matching method: the facts other code branches on, its settings and its work.

    ``options`` is a frozen dataclass whose fields are the method's settings with their
    defaults, written once (:func:`given_settings` builds it from keywords); ``run`` aligns
    (:class:`Run`). ``needs_data``: it reads A's training split (activation and learned
    matching), so the pipeline loads it. ``learned``: it descends the merge's loss, so it has
    a ``space`` setting, which follows the space a barrier is measured in, and it starts from
    weight matching's transform (read from the cache) when its ``init`` setting is
    ``"weight"``. ``consumes``: it can work on handed-over input dicts, emptying them
    (``consume=True``: the same result in fewer copies of a large pair). ``aligns``: it moves
    B at all (naive does not). ``experts``: it aligns mixtures of experts (one without it
    refuses them, :func:`refuse_experts`, and tables leave its rows out of theirs).
    ``fixed_batch``: the name of its setting that counts the rows of A's training split it
    reads as one fixed batch (activation matching's ``batch``; "" for none), which a language
    model's data sizes from its budget of positions (``landscape.sources.Data.match_options``).
    ``hooks``: the names of its per-call arguments that are no setting (:class:`Run`).
    The settings it accepts are its ``options``' fields, each declared with its type, default
    and help (:func:`setting`, :meth:`declared`).
    """

    name: str
    title: str  # what it is in words, e.g. "weight matching"
    options: type
    run: Run
    needs_data: bool = False
    learned: bool = False
    consumes: bool = False
    aligns: bool = True
    experts: bool = True
    fixed_batch: str = ""
    hooks: tuple[str, ...] = ()

    def fits(self, cfg: ModelConfig) -> bool:
        """Whether this method aligns models of ``cfg`` (a mixture of experts needs
        ``experts``)."""
        return self.experts or not cfg.moe

    def settings(self, given: Mapping[str, Any] | Any | None = None, **more: Any) -> Any:
        """This method's ``options`` from ``given`` (a dict of settings, or the dataclass
        itself) and ``more`` keywords (:func:`given_settings`)."""
        return given_settings(self.options, given, what=self.title, **more)

    def text_settings(self, texts: Mapping[str, str]) -> dict[str, Any]:
        """This method's settings given as text, typed from its options' declarations
        (:func:`text_settings`)."""
        return text_settings(self.options, texts, what=self.title)

    def declared(self) -> tuple[Setting, ...]:
        """The settings this method accepts: name, type, default and help of each
        (:func:`declared_settings` of its ``options``)."""
        return declared_settings(self.options)


_PLAIN = (bool, int, float, str)


def said_default(value: Any, default: Any) -> bool:
    """A plain value (number, text, flag) equal to the default, of its type: said or left out,
    it means the same setting, so it keys the same cached result."""
    return isinstance(value, _PLAIN) and type(value) is type(default) and value == default


def settings_of(options: Any) -> dict[str, Any]:
    """Every setting of an options dataclass, by name (the method's keywords)."""
    return {f.name: getattr(options, f.name) for f in fields(options)}


def given_settings(
    cls: type, given: Mapping[str, Any] | Any | None = None, *, what: str = "", **more: Any
) -> Any:
    """The options dataclass ``cls`` from the settings ``given`` (a dict, or an instance, kept
    as it is) updated by ``more``. A name that is not one of its settings is one line naming
    the settings there are."""
    if isinstance(given, cls) and not more:
        return given
    values = settings_of(given) if isinstance(given, cls) else dict(given or {})
    values.update(more)
    _refuse_unknown(cls, values, what)
    return cls(**values)


def _refuse_unknown(cls: type, given: Mapping[str, Any], what: str) -> None:
    """One line naming the settings of ``cls`` there are, for names in ``given`` that are none
    of them."""
    names = [f.name for f in fields(cls)]
    unknown = [k for k in given if k not in names]
    if unknown:
        known = ", ".join(names) if names else "none"
        raise LandscapeError(
            f"unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}"
            f"{' of ' + what if what else ''}; its settings: {known}"
        )


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
_KINDS = {bool: "a flag (true or false)", int: "a whole number", float: "a finite number",
          str: "text"}  # fmt: skip


def _kind(hint: Any) -> str:
    """What a value of a setting declared ``hint`` is, in words."""
    if get_origin(hint) is Literal:
        return "one of " + ", ".join(map(str, get_args(hint)))
    if get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint):
        rest = [a for a in get_args(hint) if a is not type(None)]
        return " or ".join([*(_kind(a) for a in rest), "none"])
    return _KINDS.get(hint, f"a {getattr(hint, '__name__', hint)}")


def _typed(hint: Any, text: str) -> Any:
    """``text`` read as a value of ``hint``; ValueError where it does not read as one."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType) and type(None) in args:
        if text.strip().lower() == "none":
            return None
        rest = [a for a in args if a is not type(None)]
        for a in rest:
            try:
                return _typed(a, text)
            except ValueError:
                pass
        raise ValueError(text)
    if origin is Literal:
        for a in args:
            if str(a) == text:
                return a
        raise ValueError(text)
    if hint is bool:
        word = text.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise ValueError(text)
    if hint is int:
        return int(text)
    if hint is float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(text)
        return value
    if hint is str:
        return text
    raise ValueError(text)


def text_settings(cls: type, texts: Mapping[str, str], *, what: str = "") -> dict[str, Any]:
    """The settings of the options dataclass ``cls`` given as text (name → text), each typed
    from its field's declaration: a flag (true/false, yes/no, on/off, 1/0), a whole number, a
    finite number, text, one of a ``Literal``'s values, or ``none`` where the setting may be
    None. A name that is not one of its settings is one line naming the settings there are; a
    value that does not read as its type, one line naming the setting, the type and its
    default."""
    _refuse_unknown(cls, texts, what)
    hints = get_type_hints(cls)
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    out = {}
    for name, text in texts.items():
        try:
            out[name] = _typed(hints[name], text)
        except ValueError:
            default = f", default {defaults[name]!r}" if name in defaults else ""
            raise LandscapeError(
                f"bad value {text!r} for the setting {name!r}{' of ' + what if what else ''}: "
                f"expected {_kind(hints[name])}{default}"
            ) from None
    return out


def options_key(options: Any) -> dict[str, Any]:
    """The settings of ``options`` that differ from their defaults: its part of a cache key, so
    that a default said explicitly keys the same entry as one left out."""
    out = {}
    for f in fields(options):
        value = getattr(options, f.name)
        if not (value is f.default or said_default(value, f.default)):
            out[f.name] = value
    return out


def matching_kinds(spec: Spec, group: str) -> dict[str, str]:
    """Kind per matched variable: the group's residual kind, permutations of FFN units and heads.

    :func:`landscape.symmetry.group_kinds` with ``gated_signs=True``: gated FFN units (SwiGLU)
    admit signed permutations (signs act on the linear up projection, the gate is only
    permuted), so with a signed or orthogonal residual group they are matched as signed
    permutations; ``perm`` keeps plain permutations everywhere. Only residual levels are
    matched here; weight matching adds the within-head maps
    (:func:`landscape.matching.weight.weight_kinds`).
    """
    if group not in RESID_GROUPS:
        raise ValueError(f"matching needs a group in {MATCH_GROUPS}, got {group!r}")
    return group_kinds(spec, group, gated_signs=True)


def refuse_experts(cfg: ModelConfig, what: str) -> None:
    """One line for a method not built for a mixture of experts (``cfg.n_experts`` > 0): its
    units are matched per expert slot, which weight and learned matching do."""
    if cfg.moe:
        raise LandscapeError(f"{what} is not built for mixtures of experts ({cfg.n_experts} "
                             "experts per FFN); weight and learned matching are")  # fmt: skip


def prepare_pair(
    cfg: ModelConfig, params_a: Params, params_b: Params, group: str, *, consume: bool = False
) -> Prepared:
    """Process A and B with the steps that make ``group`` exact (the same steps for both).

    ``consume``: the input dicts are emptied as soon as each is processed, so that a caller who
    handed them over holds one processed copy of each model, not the originals as well (tensors
    the processing leaves alone are shared, and stay).
    """
    cfg_a, a = prepare(cfg, params_a, group)
    if consume:  # a group that needs no processing returns the input dict itself
        a = dict(a)
        params_a.clear()
    cfg_b, b = prepare(cfg, params_b, group)
    if consume:
        b = dict(b)
        params_b.clear()
    if cfg_a != cfg_b or set(a) != set(b):
        raise ValueError("A and B process differently: are they the same architecture?")
    return cfg_a, a, b
