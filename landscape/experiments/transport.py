"""Artifact transport between gauge-related models (docs/design.md §1, "Coordinate transport").

An *artifact* is anything trained on or against a model's residual coordinates: a steering
vector, a linear probe, a sparse autoencoder, a LoRA adapter, AdamW optimizer state. For
B = g(A) with g a residual gauge (B writes ``x·G`` where A writes ``x``), the exact rules are
those of the parameters (landscape.symmetry):

- whatever *writes* into the stream moves like a writer, ``v ← v·G``: steering vectors, SAE
  decoder rows and decoder bias, the factor of a LoRA adapter on a writer matrix that faces the
  stream;
- whatever *reads* from it moves like a reader, ``W ← G⁻¹·W`` (``Gᵀ·W`` for signed permutations):
  linear probes, the SAE encoder, the stream-facing factor of a LoRA adapter on a reader matrix;
- AdamW first moments move like their weights; second moments (squares of gradients) by |G|,
  the permutation without signs. A rotation has no such rule (Adam is not rotation-equivariant),
  so optimizer state has an exact transport only for monomial gauges (B_d, S_d).

Every artifact declares the gauge variable acting on each tensor axis (:func:`artifact_roles`,
derived from the kind and the model's symmetry spec), and :func:`transport` is then
``landscape.symmetry.apply`` over those roles. Comparisons: ``"perm-only"`` drops the signs of
every element (what a coordinate-permutation view of the gauge would do) and ``"none"`` uses the
artifact as it is.

Artifacts are saved as ``<stem>.safetensors`` (tensors) plus ``<stem>.json`` (kind, metadata,
optionally the model config), so users can bring their own.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from landscape.errors import LandscapeError
from landscape.experiments.artifacts import (
    Artifact,
    adamw_artifact,
    probe_accuracy,
    sae_nmse,
    steering_effect,
    steering_vector,
    subtask_loss,
    train_lora,
    train_probe,
    train_sae,
    with_lora,
)
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.gauge.coordinates import readout_features
from landscape.fields import Fields
from landscape.models import ModelConfig, Params, param_shapes
from landscape.models.zoo import Checkpoint
from landscape.optim import AdamWOptions, adamw_init, adamw_steps
from landscape.progress import Progress, tell
from landscape.sources import Source
from landscape.store.cache import Cache
from landscape.store.files import JSONFileError, read_json, shared_mode
from landscape.store.scratch import kept_on_disk
from landscape.symmetry import (
    ABS,
    GROUP_OF,
    INV_T,
    PERM,
    PERM_OF,
    SIGNED_PERM,
    Element,
    Role,
    Spec,
    Transform,
    apply,
    random_transform,
    spec_for,
)
from landscape.tasks import Task, task_source

ARTIFACT_KINDS = ("steering", "probe", "sae", "lora", "adamw")
MODES = ("exact", "perm-only", "none")
FORMAT = "landscape-artifact"
FORMAT_VERSION = 1
TRANSPORT_VERSION = 2  # bump when transport_table's algorithm changes

Roles = tuple[Role | None, ...]


# ----------------------------------------------------------------------------- roles and checks


def artifact_roles(cfg: ModelConfig, artifact: Artifact) -> dict[str, Roles]:
    """The gauge role of every axis of every tensor of ``artifact`` (see the module docstring).

    - steering ``vector`` [d]: writer (G);
    - probe ``W`` [d, classes]: reader (G⁻ᵀ), ``b`` [classes] and the optional ``classes``
      [classes] (the class of each column): none;
    - sae ``W_enc`` [d, m]: reader; ``b_enc`` [m]: none; ``W_dec`` [m, d], ``b_dec`` [d]: writer;
    - lora ``{param}.A`` [rows, r], ``{param}.B`` [r, cols] with ``ΔW = A·B`` for a 2-D parameter:
      A takes the parameter's row role, B its column role;
    - adamw ``exp_avg.{param}``: the parameter's roles; ``exp_avg_sq.{param}``: the same variables
      acting by |G|; ``step`` []: none.
    """
    spec = spec_for(cfg)
    res_g, res_r = Role("resid", "G"), Role("resid", INV_T)
    fixed: dict[str, dict[str, Roles]] = {
        "steering": {"vector": (res_g,)},
        "probe": {"W": (res_r, None), "b": (None,), "classes": (None,)},
        "sae": {"W_enc": (res_r, None), "b_enc": (None,), "W_dec": (None, res_g),
                "b_dec": (res_g,)},
    }  # fmt: skip
    kind = artifact.kind
    if kind not in ARTIFACT_KINDS:
        raise LandscapeError(f"unknown artifact kind {kind!r}; expected one of {ARTIFACT_KINDS}")
    out: dict[str, Roles] = {}
    for name in artifact.tensors:
        if kind in fixed:
            roles = fixed[kind].get(name)
        elif kind == "lora":
            param, _, factor = name.rpartition(".")
            base = spec.axes.get(param)
            roles = None
            if base is not None and len(base) == 2 and factor in ("A", "B"):
                roles = (base[0], None) if factor == "A" else (None, base[1])
        else:
            moment, _, param = name.partition(".")
            base = spec.axes.get(param)
            if name == "step":
                roles = ()
            elif base is None or moment not in ("exp_avg", "exp_avg_sq"):
                roles = None
            elif moment == "exp_avg":
                roles = base
            else:
                # second moments see |G|; pure permutation roles (GQA groups, gates) stay
                roles = tuple(r if r is None or r.act in (ABS, GROUP_OF, PERM_OF)
                              else Role(r.var, ABS) for r in base)  # fmt: skip
        if roles is None:
            raise LandscapeError(f"{kind} artifact: unexpected tensor {name!r}")
        out[name] = roles
    return out


def _required(cfg: ModelConfig, artifact: Artifact) -> list[str]:
    if artifact.kind == "steering":
        return ["vector"]
    if artifact.kind == "probe":
        return ["W", "b"]
    if artifact.kind == "sae":
        return ["W_enc", "b_enc", "W_dec", "b_dec"]
    if artifact.kind == "lora":
        params = {n.rpartition(".")[0] for n in artifact.tensors}
        return sorted(f"{p}.{f}" for p in params for f in "AB")
    params = {n.partition(".")[2] for n in artifact.tensors if n != "step"}
    return ["step", *sorted(f"{m}.{p}" for p in params for m in ("exp_avg", "exp_avg_sq"))]


def check_artifact(cfg: ModelConfig, artifact: Artifact) -> None:
    """Raise a LandscapeError naming the problem unless every tensor fits ``cfg``.

    Checks: known kind and tensor names, complete sets (both LoRA factors, both moments), the
    number of axes, the size of every axis a gauge variable acts on, and the inner sizes that
    must agree (probe classes, SAE width, LoRA rank and the adapted parameter's shape).
    """
    roles = artifact_roles(cfg, artifact)
    t = artifact.tensors
    missing = [n for n in _required(cfg, artifact) if n not in t]
    if missing:
        raise LandscapeError(f"{artifact.kind} artifact: missing tensor {missing[0]!r}")
    spec = spec_for(cfg)
    for name, rs in roles.items():
        shape = tuple(t[name].shape)
        if len(shape) != len(rs):
            raise LandscapeError(
                f"{artifact.kind} artifact: {name} has {len(shape)} axes, expected {len(rs)}"
            )
        for axis, r in enumerate(rs):
            if r is None:
                continue
            v = spec.variables[r.var]
            size = v.size // v.group if r.act == GROUP_OF else v.size  # GQA: key/value groups
            if shape[axis] != size:
                raise LandscapeError(
                    f"{artifact.kind} artifact: {name} has shape {shape}; axis {axis} must have "
                    f"size {size} ({r.var} of this model)"
                )

    def same(a: str, i: int, b: str, j: int) -> None:
        if t[a].shape[i] != t[b].shape[j]:
            raise LandscapeError(
                f"{artifact.kind} artifact: {a} {tuple(t[a].shape)} and {b} "
                f"{tuple(t[b].shape)} do not fit together"
            )

    if artifact.kind == "probe":
        same("W", 1, "b", 0)
        if "classes" in t:
            same("W", 1, "classes", 0)
            if t["classes"].is_floating_point() or t["classes"].is_complex():
                raise LandscapeError("probe artifact: classes must hold integer class ids")
    elif artifact.kind == "sae":
        same("W_enc", 1, "b_enc", 0)
        same("W_enc", 1, "W_dec", 0)
    elif artifact.kind == "lora":
        for name in t:
            param = name.rpartition(".")[0]
            if name.endswith(".A"):
                same(name, 1, f"{param}.B", 0)
                want = _param_shape(cfg, param)
                got = (t[name].shape[0], t[f"{param}.B"].shape[1])
                if got != want:
                    raise LandscapeError(
                        f"lora artifact: {param} factors give shape {got}, the parameter is {want}"
                    )
    elif artifact.kind == "adamw":
        for name in t:
            if name != "step":
                param = name.partition(".")[2]
                if tuple(t[name].shape) != _param_shape(cfg, param):
                    raise LandscapeError(
                        f"adamw artifact: {name} has shape {tuple(t[name].shape)}, the parameter "
                        f"is {_param_shape(cfg, param)}"
                    )


def _param_shape(cfg: ModelConfig, name: str) -> tuple[int, ...]:
    shapes = param_shapes(cfg)
    if name not in shapes:
        raise LandscapeError(f"{name!r} is not a parameter of this {cfg.arch}")
    return shapes[name]


# ----------------------------------------------------------------------------- transport


def drop_signs(transform: Transform) -> Transform:
    """The permutation part of a monomial transform: every scale replaced by its modulus."""
    out = {}
    for var, e in transform.elements.items():
        if not e.is_monomial:
            raise LandscapeError(
                f"permutation-only transport needs a monomial gauge; {var} is {e.kind!r}"
            )
        kind = PERM if e.kind in (PERM, SIGNED_PERM, "perm-global-sign") else e.kind
        out[var] = Element(kind, e.perm, e.scale.abs())
    return Transform(out)


def transport(
    cfg: ModelConfig, artifact: Artifact, transform: Transform, mode: str = "exact"
) -> Artifact:
    """Move ``artifact`` from A's coordinates to B = ``transform``(A).

    ``exact``: every axis by its role (writers ·G, readers G⁻ᵀ, second moments |G|);
    ``perm-only``: the same with every sign dropped (:func:`drop_signs`); ``none``: unchanged.
    Optimizer state under a dense (rotation) gauge has no exact transport and is refused.
    """
    if mode not in MODES:
        raise LandscapeError(f"unknown transport mode {mode!r}; expected one of {MODES}")
    check_artifact(cfg, artifact)
    if mode == "none":
        return Artifact(artifact.kind, dict(artifact.tensors), dict(artifact.meta))
    if mode == "perm-only":
        transform = drop_signs(transform)
    if artifact.kind == "adamw" and any(not e.is_monomial for e in transform.elements.values()):
        raise LandscapeError(
            "AdamW state has no exact transport under a rotation: Adam's second moments are "
            "per-coordinate, so only (signed) permutations carry them"
        )
    base = spec_for(cfg)
    spec = Spec(cfg, base.variables, artifact_roles(cfg, artifact), {})
    tensors = apply(spec, transform, artifact.tensors, check=False)
    return Artifact(artifact.kind, tensors, dict(artifact.meta))


# ----------------------------------------------------------------------------- save and load


def _paths(path: str | os.PathLike) -> tuple[Path, Path]:
    p = Path(path)
    if p.suffix in (".safetensors", ".json"):
        p = p.with_suffix("")
    return p.with_name(p.name + ".safetensors"), p.with_name(p.name + ".json")


def save_artifact(
    path: str | os.PathLike, artifact: Artifact, cfg: ModelConfig | None = None
) -> tuple[Path, Path]:
    """Write ``<stem>.safetensors`` and the JSON sidecar ``<stem>.json``; returns both paths.

    With ``cfg`` the artifact is checked against the model first and the config is stored, so
    :func:`load_artifact` can check it again.
    """
    if artifact.kind not in ARTIFACT_KINDS:
        raise LandscapeError(f"unknown artifact kind {artifact.kind!r}")
    if cfg is not None:
        check_artifact(cfg, artifact)
    weights, sidecar = _paths(path)
    weights.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous().cpu() for k, v in artifact.tensors.items()}, weights)
    shared_mode(weights)  # safetensors writes 0600 whatever the umask
    doc = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "kind": artifact.kind,
        "meta": artifact.meta,
        "tensors": {k: list(v.shape) for k, v in artifact.tensors.items()},
        "config": None if cfg is None else cfg.to_dict(),
    }
    sidecar.write_text(json.dumps(doc, indent=1))
    return weights, sidecar


def load_artifact(path: str | os.PathLike, cfg: ModelConfig | None = None) -> Artifact:
    """Read an artifact written by :func:`save_artifact` (or by hand in the same format).

    Checked against ``cfg`` when given, else against the config stored in the sidecar, if any.
    Every problem (missing file, not JSON, wrong format, unreadable tensors, wrong shapes) is a
    LandscapeError naming the file.
    """
    weights, sidecar = _paths(path)
    for f in (sidecar, weights):
        if not f.is_file():
            raise LandscapeError(f"artifact {weights.with_suffix('')}: missing {f.name}")
    try:
        doc = read_json(sidecar)
    except JSONFileError as e:
        raise LandscapeError(f"{sidecar}: not a JSON sidecar ({e.problem})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise LandscapeError(f"{sidecar}: not a landscape artifact (format must be {FORMAT!r})")
    if doc.get("version", 0) > FORMAT_VERSION:
        raise LandscapeError(f"{sidecar}: format version {doc['version']} is newer than this one")
    kind = doc.get("kind")
    if kind not in ARTIFACT_KINDS:
        raise LandscapeError(f"{sidecar}: unknown artifact kind {kind!r}")
    try:
        tensors = load_file(weights)
    except (SafetensorError, OSError) as e:
        raise LandscapeError(f"{weights}: not a valid safetensors file ({e})") from None
    artifact = Artifact(kind, tensors, dict(doc.get("meta") or {}))
    if cfg is None and doc.get("config"):
        cfg = ModelConfig.from_dict(doc["config"])
    if cfg is not None:
        try:
            check_artifact(cfg, artifact)
        except LandscapeError as e:
            raise LandscapeError(f"{weights}: {e}") from None
    return artifact


def _dist(pa: Params, pb: Params) -> float:
    return math.sqrt(sum(float(((pa[k] - pb[k]).double() ** 2).sum()) for k in pa))


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class TransportOptions:
    """What :func:`transport_table` measures: g drawn by ``gauge_seed``; the steering vector,
    probe and SAE at block ``layer`` (None: the middle one); the LoRA trained ``lora_steps``
    steps; AdamW run ``adamw_steps_before`` steps before its state is moved and
    ``adamw_steps_after`` after."""

    gauge_seed: int = 0
    layer: int | None = None
    lora_steps: int = 150
    adamw_steps_before: int = 30
    adamw_steps_after: int = 30


TRANSPORT = TransportOptions()  # the defaults


@in_context
def transport_table(
    model: str | Checkpoint | Source,
    seed: int = 0,
    options: TransportOptions = TRANSPORT,
    *,
    context: RunContext = RUN,
) -> list[dict[str, Any]]:
    """Every artifact × {exact, perm-only, none} moved from A to B = g(A), g a random element
    of the level ``signed-perm`` (B_d on the stream, FFN units and heads permuted); what it
    measures in ``options`` (:class:`TransportOptions`), where it runs in ``context``.

    Rows: ``artifact, mode, metric, value, reference`` (the value on A) and ``kept`` (value
    relative to the reference where that is meaningful, in %; the SAE keeps the NMSE ratio, the
    AdamW row the distance between B's resumed run mapped back and A's, relative to how far A's
    resumed run moved). Cached under kind ``"transport"``.
    """
    gauge_seed, layer, lora_steps = options.gauge_seed, options.layer, options.lora_steps
    adamw_steps_before, adamw_steps_after = options.adamw_steps_before, options.adamw_steps_after
    progress = context.progress
    source = task_source(model, seed, device=context.device)  # the data is read only to compute
    cache = context.cache or Cache()
    inputs = {"version": TRANSPORT_VERSION, "model": source.name, "config": source.cfg.to_dict(),
              "weights": source.digest, "seed": seed, "gauge_seed": gauge_seed, "layer": layer,
              "lora": lora_steps, "adamw": [adamw_steps_before, adamw_steps_after]}  # fmt: skip
    if source.data_key:
        inputs["data"] = source.data_key

    def compute() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        t0 = time.perf_counter()
        rows = transport_rows(source.load(), gauge_seed=gauge_seed, layer=layer,
                              lora_steps=lora_steps, adamw_before=adamw_steps_before,
                              adamw_after=adamw_steps_after, progress=progress)  # fmt: skip
        return {}, {"rows": rows, "seconds": round(time.perf_counter() - t0, 3)}

    entry, _ = cache.get_or_compute("transport", inputs, compute)
    return entry.meta["rows"]


# One row of :func:`transport_rows` (landscape.fields): an artifact moved to g(A) in one mode,
# its metric there and on A, and the share of it kept (None where A's is 0); what the Gauge
# page's figure and table read.
TRANSPORT_ROW = Fields("transport row",
                       ("artifact", "mode", "metric", "value", "reference", "kept"))


def transport_rows(task: Task, *, gauge_seed: int = 0, layer: int | None = None,
                   lora_steps: int = 150, adamw_before: int = 30, adamw_after: int = 30,
                   progress: Progress | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The uncached body of :func:`transport_table` on a :class:`Task`."""
    cfg, pa = task.cfg, task.params
    spec = spec_for(cfg)
    g = random_transform(spec, "signed-perm", gauge_seed)
    pb = apply(spec, g, pa)
    layer = layer or max(1, cfg.n_layers // 2)
    x_tr, y_tr = task.act_inputs, task.act_targets
    x_te, y_te = task.test.inputs, task.test.targets
    fa_tr, fa_te = (readout_features(cfg, pa, x, layer) for x in (x_tr, x_te))
    fb_te = readout_features(cfg, pb, x_te, layer)
    classes = task.frequent_classes(2)
    rows: list[dict[str, Any]] = []

    def add(artifact: str, metric: str, reference: float, values: dict[str, float],
            kept: Callable[[float], float | None]) -> None:  # fmt: skip
        for mode, v in values.items():
            rows.append({"artifact": artifact, "mode": mode, "metric": metric, "value": v,
                         "reference": reference, "kept": kept(v)})  # fmt: skip

    def moved(art: Artifact) -> dict[str, Artifact]:
        return {mode: transport(cfg, art, g, mode) for mode in MODES}

    stages = 5
    # steering: effect on A, effect of the moved vector on B
    art = steering_vector(cfg, pa, x_tr, y_tr, layer=layer, cls=classes[0])
    ref = steering_effect(cfg, pa, art, x_te, y_te)
    vals = {m: steering_effect(cfg, pb, a, x_te, y_te) for m, a in moved(art).items()}
    add("steering", "target-class probability shift", ref, vals, lambda v: 100 * v / ref)
    _tick(progress, 1, stages)
    # probe
    n_cls = cfg.n_out
    art = train_probe(fa_tr, y_tr, n_cls)
    ref = probe_accuracy(art, fa_te, y_te)
    vals = {m: probe_accuracy(a, fb_te, y_te) for m, a in moved(art).items()}
    add("probe", "probe accuracy", ref, vals, lambda v: 100 * v / ref)
    _tick(progress, 2, stages)
    # SAE
    art = train_sae(fa_tr)
    ref = sae_nmse(art, fa_te)
    vals = {m: sae_nmse(a, fb_te) for m, a in moved(art).items()}
    add("sae", "NMSE", ref, vals, lambda v: 100 * v / ref)
    _tick(progress, 3, stages)
    # LoRA on the "swap two classes" sub-task
    art = train_lora(task, classes, steps=lora_steps)
    base_a = subtask_loss(cfg, pa, x_te, y_te, classes)
    ref = base_a - subtask_loss(cfg, with_lora(pa, art), x_te, y_te, classes)
    base_b = subtask_loss(cfg, pb, x_te, y_te, classes)
    vals = {m: base_b - subtask_loss(cfg, with_lora(pb, a), x_te, y_te, classes)
            for m, a in moved(art).items()}  # fmt: skip
    add("lora", "sub-task loss gain (nats)", ref, vals, lambda v: 100 * v / ref)
    _tick(progress, 4, stages)
    # AdamW: train A, move params and state to B = g(A_k), resume both on the same batches.
    # One state in memory at a time: A's state at step k waits in a file while the runs take
    # theirs (on a 135M-parameter model a state is 1.2 GiB), and B's own parameters are gone.
    del pb, fb_te
    a_k, state = adamw_steps(cfg, (pa, None), task.batches(seed=500), adamw_before,
                             AdamWOptions(lr=task.lr / 3))  # fmt: skip
    b_k = apply(spec, g, a_k)
    with kept_on_disk(state, "the AdamW state") as kept_state:
        a_end, _ = adamw_steps(cfg, (a_k, state), task.batches(seed=501), adamw_after,
                               AdamWOptions(lr=task.lr / 3), take_state=True)  # fmt: skip
        del state
        moved_ref = _dist(a_end, a_k)
        del a_k
        vals = {}
        for m in MODES:
            st = transport(cfg, adamw_artifact(kept_state()), g, m).tensors
            b_end, _ = adamw_steps(cfg, (b_k, st), task.batches(seed=501), adamw_after,
                                   AdamWOptions(lr=task.lr / 3), take_state=True)  # fmt: skip
            del st
            vals[m] = _dist(apply(spec, g.inverse(), b_end), a_end) / moved_ref
            del b_end
    fresh_end, _ = adamw_steps(cfg, (b_k, adamw_init(b_k)), task.batches(seed=501), adamw_after,
                               AdamWOptions(lr=task.lr / 3))  # fmt: skip
    vals["fresh state"] = _dist(apply(spec, g.inverse(), fresh_end), a_end) / moved_ref
    add("adamw", "resumed-trajectory distance / step length", 0.0, vals, lambda v: None)
    _tick(progress, 5, stages)
    return rows


def _tick(progress: Progress | None, done: int, total: int) -> None:
    tell(progress, "transport", done, total)
