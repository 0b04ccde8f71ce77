"""The forward passes a refactor of the blocks must not move: record them once, check after.

    python bench/forward_unchanged.py --record /tmp/forward_before.pt
    python bench/forward_unchanged.py --check /tmp/forward_before.pt

Builds a tiny seeded model of every architecture × block layout × the flags the registry
supports (norm, gated or plain FFN, positions, q/k norms, heads, grouped-query attention, no
biases, softcaps, sliding windows, per-layer rotary bases, partial rotary, wide heads over long
contexts, which take the fused attention kernel) and records, on one torch thread:

- the reference forward's logits and its activation cache (keys and tensors), with and without
  dropout where dropout is built, and the gradient of its loss;
- the fast (inference) forward's logits, and ``fast=None``'s;
- the fast forward under ``torch.vmap`` over two seeds (the batched path);
- the parameter names and shapes in order, the symmetry spec (axes, variables, norm readers,
  fixed-gain norms, why the stream is blocked), each processing step's output and ``describe``.

``--check`` prints the largest difference over every tensor and every mismatch of keys, shapes or
text (a refusal's wording is only noted), and exits 1 unless the largest difference is 0.0 and
nothing else differs.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

import torch

from landscape.models import ModelConfig, forward, init_params, param_shapes
from landscape.models.functional import loss_and_accuracy
from landscape.models.primitives import Dropout
from landscape.models.registry import describe, random_inputs
from landscape.symmetry.processing import STEPS
from landscape.symmetry.spec import fixed_gain_norms, resid_blocked, spec_for

SMALL = dict(d_model=8, d_mlp=12, n_layers=2, n_heads=2, d_head=4)


def _base(arch: str) -> dict[str, Any]:
    if arch == "mlp":
        return dict(d_model=8, d_mlp=12, n_layers=2, n_out=5, d_in=6)
    if arch == "vit":
        return dict(SMALL, n_out=5, image_size=4, patch_size=2)
    return dict(SMALL, n_out=7, d_vocab=7, n_ctx=6)


def configs() -> dict[str, ModelConfig]:
    """Every valid combination of the grid below, by a readable name."""
    out: dict[str, ModelConfig] = {}

    def add(name: str, **kw: Any) -> None:
        try:
            out[name] = ModelConfig(**kw)
        except ValueError:
            pass  # a combination the config refuses

    for arch, block, norm, mlp in itertools.product(
        ("mlp", "vit", "gpt", "bert", "bert-cls"),
        ("pre", "post", "parallel", "sandwich", "postln"),
        ("rms", "ln"),
        ("plain", "gated"),
    ):
        heads = ("linear", "mlm", "pooler") if block == "postln" else ("linear",)
        for head in heads:
            name = f"{arch}-{block}-{norm}-{mlp}-{head}"
            add(name, arch=arch, block=block, norm=norm, mlp=mlp, head=head, **_base(arch))
    attention = ("vit", "gpt", "bert", "bert-cls")
    flags: dict[str, dict[str, Any]] = {
        "rotary": dict(pos="rotary"),
        "rotary-part": dict(pos="rotary", rotary_dim=2),
        "nopos": dict(pos="none"),
        "qk-head": dict(qk_norm="head"),
        "qk-full": dict(qk_norm="full"),
        "qk-head-rotary": dict(qk_norm="head", pos="rotary"),
        "gqa": dict(n_heads=4, d_head=2, n_kv_heads=2),
        "gqa-qk-full-rotary": dict(n_heads=4, d_head=2, n_kv_heads=2, qk_norm="full", pos="rotary"),
        "nobias": dict(bias=False),
        "scale": dict(attn_scale=0.3),
        "silu": dict(act="silu"),
        "relu": dict(act="relu"),
        "gelu-tanh": dict(act="gelu_tanh"),
        "softcap": dict(attn_softcap=2.0, logit_softcap=3.0),
        "windows": dict(windows=(2, 0)),
        "bases": dict(pos="rotary", rotary_bases=(100.0, 10000.0)),
        "eps": dict(eps=1e-3),
    }
    for arch, block, (flag, kw) in itertools.product(
        attention, ("pre", "post", "parallel", "sandwich", "postln"), flags.items()
    ):
        head = {"bert": "mlm", "bert-cls": "pooler"}.get(arch, "linear") if block == "postln" \
            else "linear"  # fmt: skip
        base = {**_base(arch), **kw}
        add(f"{arch}-{block}-{flag}", arch=arch, block=block, head=head, mlp="gated", **base)
    # wide heads over long contexts: the fused attention kernel's side of the inference path
    for arch, block in itertools.product(attention, ("pre", "post", "parallel", "postln")):
        base = dict(_base(arch), d_model=32, n_heads=2, d_head=16)
        if arch == "vit":
            base.update(image_size=12, patch_size=2)  # 37 positions
        else:
            base.update(n_ctx=40)
        add(f"{arch}-{block}-wide", arch=arch, block=block, **base)
        add(f"{arch}-{block}-wide-windows", arch=arch, block=block, windows=(8, 0), **base)
        add(f"{arch}-{block}-wide-gqa-rotary", arch=arch, block=block, pos="rotary",
            n_kv_heads=1, **base)  # fmt: skip
    return out


def _tensors(prefix: str, d: dict[str, torch.Tensor], out: dict[str, Any]) -> None:
    out[f"{prefix}:keys"] = list(d)
    for k, v in d.items():
        out[f"{prefix}:{k}"] = v.detach().clone()


def measure(cfg: ModelConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    params = init_params(cfg, seed=1)
    # perturb gains and biases, which init sets to 1 and 0, so every norm parameter counts
    gen = torch.Generator().manual_seed(2)
    params = {k: v + 0.1 * torch.randn(v.shape, generator=gen) for k, v in params.items()}
    x = random_inputs(cfg, 3, torch.Generator().manual_seed(3))
    out["shapes"] = [(k, tuple(s)) for k, s in param_shapes(cfg).items()]
    cache: dict[str, torch.Tensor] = {}
    out["ref"] = forward(cfg, params, x, cache, fast=False)
    _tensors("cache", cache, out)
    with torch.no_grad():
        out["fast"] = forward(cfg, params, x, fast=True)
        out["default"] = forward(cfg, params, x)
    leaves = {k: v.clone().requires_grad_() for k, v in params.items()}
    logits = forward(cfg, leaves, x)  # fast=None: the reference, as autograd records
    targets = torch.zeros(logits.shape[:-1], dtype=torch.long)
    loss, _ = loss_and_accuracy(cfg, logits, targets)
    _tensors("grad", dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values())),
                              strict=True)), out)  # fmt: skip
    try:
        out["dropout"] = forward(cfg, params, x, fast=False, dropout=Dropout(0.2, 5))
    except ValueError as e:
        out["dropout"] = f"refused: {e}"
    other = init_params(cfg, seed=4)
    stacked = {k: torch.stack([params[k], other[k]]) for k in params}
    with torch.no_grad():
        out["vmap"] = torch.vmap(lambda p: forward(cfg, p, x, fast=True))(stacked)
    spec = spec_for(cfg)
    out["spec"] = repr((spec.variables, spec.axes, spec.norm_readers))
    out["fixed"] = repr(fixed_gain_norms(cfg))
    out["blocked"] = resid_blocked(cfg)
    out["describe"] = describe(cfg)
    for step, fn in STEPS.items():
        try:
            cfg_p, p = fn(cfg, params)
        except ValueError as e:
            out[f"step:{step}"] = f"refused: {e}"
            continue
        out[f"step:{step}:cfg"] = repr(cfg_p)
        _tensors(f"step:{step}", p, out)
        with torch.no_grad():
            out[f"step:{step}:logits"] = forward(cfg_p, p, x, fast=False)
    return out


def collect() -> dict[str, dict[str, Any]]:
    torch.set_num_threads(1)
    return {name: measure(cfg) for name, cfg in configs().items()}


def compare(before: dict[str, Any], after: dict[str, Any]) -> tuple[float, list[str], list[str]]:
    """The largest difference, the mismatches and the notes (refusals reworded)."""
    worst, problems, notes = 0.0, [], []
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            problems.append(f"{name}: only {'after' if name in after else 'before'}")
            continue
        b, a = before[name], after[name]
        for key in sorted(set(b) | set(a)):
            if key not in b or key not in a:
                problems.append(f"{name} {key}: only {'after' if key in a else 'before'}")
                continue
            u, v = b[key], a[key]
            if isinstance(u, torch.Tensor) and isinstance(v, torch.Tensor):
                if u.shape != v.shape or u.dtype != v.dtype:
                    problems.append(f"{name} {key}: {u.shape} {u.dtype} → {v.shape} {v.dtype}")
                    continue
                diff = (u.double() - v.double()).abs()
                same_nan = torch.isnan(u) == torch.isnan(v)
                d = float(diff.nan_to_num(0.0).max()) if diff.numel() else 0.0
                if not bool(same_nan.all()):
                    problems.append(f"{name} {key}: NaNs moved")
                if d > worst:
                    worst = d
                if d > 0:
                    problems.append(f"{name} {key}: differs by {d:.3g}")
            elif isinstance(u, str) and u.startswith("refused") and str(v).startswith("refused"):
                if u != v:  # refused both times: the wording may change
                    notes.append(f"{name} {key}: {u[:80]!r} → {v[:80]!r}")
            elif u != v:
                problems.append(f"{name} {key}: {str(u)[:120]!r} → {str(v)[:120]!r}")
    return worst, problems, notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--record", metavar="FILE")
    group.add_argument("--check", metavar="FILE")
    args = ap.parse_args()
    numbers = collect()
    if args.record:
        torch.save(numbers, args.record)
        print(f"recorded {len(numbers)} models in {args.record}")
        return
    before = torch.load(args.check, weights_only=False)
    worst, problems, notes = compare(before, numbers)
    for line in problems[:40]:
        print(line)
    if notes:
        print(f"{len(notes)} refusals reworded, e.g. {notes[0]}")
    print(f"{len(numbers)} models; largest difference {worst!r}; {len(problems)} mismatches")
    sys.exit(0 if worst == 0.0 and not problems else 1)


if __name__ == "__main__":
    main()
