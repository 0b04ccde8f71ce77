"""Aligned checkpoints out: π(θ_B), or the merge λ·θ_A + (1−λ)·π(θ_B), written as a checkpoint.

:func:`write_aligned` aligns B to A (the cached matching of ``experiments.align``) and writes
the aligned B, or with ``merge=λ`` the model at λ on the straight line (λ = 1 is A,
docs/design.md §1), in B's own format: a Hugging Face directory for a model imported from one
(:func:`landscape.models.exporters.export_hf`: config.json + safetensors in the source's tensor
names, tokenizer files beside them), the landscape format (config.json + model.safetensors)
for zoo models, GGUF files and landscape directories. The written files are read back and
checked: the aligned B against B (max |Δlogits| on the function-check batch), the merge
against the line's own parameters, and the merge's loss against the curve's value at λ.
:func:`aligned_archive` is the same folder as the bytes of a zip (the app's download).
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.experiments.barriers.alignment import align
from landscape.experiments.barriers.endpoints import check_pair, check_split, load
from landscape.experiments.context import RUN, RunContext, in_context
from landscape.experiments.evaluation import EvalOptions, evaluate_path
from landscape.experiments.merging.mergekit import (
    check_mergekit_covers,
    mergekit_gap,
    mergekit_yaml,
    stored_tensor_names,
    utf8_path,
    write_mergekit_config,
)
from landscape.matching import function_check
from landscape.models.checkpoint import Checkpoint, load_checkpoint_dir, save_new_checkpoint_dir
from landscape.models.config import ModelConfig
from landscape.models.exporters import check_hf_writable, export_hf, hf_config
from landscape.models.importers import import_checkpoint
from landscape.models.params import Params, param_shapes
from landscape.progress import tell, within
from landscape.sources import check_evaluable, data_of
from landscape.store.cache import Cache
from landscape.symmetry import ORTH, RESID_GROUPS, SIGNED_PERM, norm_state, resid_needs
from landscape.symmetry.processing import prepare


@dataclass(frozen=True)
class AlignedOptions:
    """What :func:`write_aligned` writes besides the aligned B: with ``merge`` = λ the model at λ
    on the straight line instead (evaluated on A's ``split``); a mergekit configuration at
    ``mergekit_config`` merging A and the aligned B with ``merge_method`` at λ =
    ``merge_weight``, A written processed to ``out_a`` where it must be; the matching drawn by
    ``seed`` with the method's ``settings`` (None: its defaults)."""

    merge: float | None = None
    mergekit_config: str | os.PathLike | None = None
    merge_method: str = "linear"
    merge_weight: float = 0.5
    out_a: str | os.PathLike | None = None
    split: str = "test"
    seed: int = 0
    settings: dict[str, Any] | None = None


ALIGNED = AlignedOptions()  # the defaults: the aligned B alone


def hf_source(ckpt: Checkpoint) -> str | None:
    """The Hugging Face directory B was imported from, if it was."""
    fmt, source = ckpt.meta.get("format", ""), ckpt.meta.get("source")
    if source and str(fmt).startswith("safetensors") and (Path(source) / "config.json").is_file():
        return str(source)
    return None


def _completed(cfg: ModelConfig, params: Params) -> Params:
    """Every parameter the format stores: norm gains and biases that processing folded away
    are written as what they mean, ones and zeros."""
    out = dict(params)
    like = next(iter(params.values()))
    for name, shape in param_shapes(cfg).items():
        if name not in out:
            if not name.endswith((".w", ".b")):
                raise LandscapeError(f"the aligned model has no {name}")
            fill = torch.ones if name.endswith(".w") else torch.zeros
            out[name] = fill(shape, dtype=like.dtype, device=like.device)
    return out


@in_context
def write_aligned(
    model: str,
    seeds: Sequence[int],
    out: str | os.PathLike,
    method: str = "weight",
    group: str = "perm",
    options: AlignedOptions = ALIGNED,
    *,
    context: RunContext = RUN,
) -> dict[str, Any]:
    """Align seed ``seeds[1]`` of ``model`` to ``seeds[0]`` and write it (module docstring); what
    it writes besides in ``options`` (:class:`AlignedOptions`), where it runs in ``context``.

    Returns ``path``, ``format``, ``written`` (what the writer reports), ``function_check``
    (aligned B as written, reloaded, against B; for a merge, the reloaded merge against the
    line's parameters at λ), ``function_ok`` and, for a merge, ``loss``/``accuracy`` of the
    reloaded model on A's ``split`` beside ``curve_loss``/``curve_accuracy``, the line's value.

    ``mergekit_config``: also write a mergekit configuration there that merges A and the aligned
    B with ``merge_method`` at λ = ``merge_weight`` (:mod:`landscape.experiments.merging.mergekit`;
    ``mergekit`` in the result). Both must be Hugging Face directories in the same coordinates:
    A's source directory when the group needs no processing of A, else A processed as B was,
    written to ``out_a`` (required then, and refused before the matching without it).
    """
    merge, mergekit_config, out_a, split = (options.merge, options.mergekit_config,
                                            options.out_a, options.split)  # fmt: skip
    merge_method, merge_weight = options.merge_method, options.merge_weight
    device, progress = context.device, context.progress
    if len(seeds) != 2 or seeds[0] == seeds[1]:
        raise LandscapeError("give two different seeds: A and B")
    if merge is not None and not 0.0 <= merge <= 1.0:
        raise LandscapeError(f"--merge must lie in [0, 1] (λ = 1 is A), got {merge}")
    for what, path in (("--out", out), ("--out-a", out_a), ("--mergekit-config", mergekit_config)):
        if path is not None:  # refused now, not after the matching and a first write
            utf8_path(path, what)
    _check_distinct(("--out", out), ("--out-a", out_a), ("--mergekit-config", mergekit_config))
    target = Path(out)
    if target.exists():
        raise LandscapeError(f"{target} exists; choose a new folder")
    if not target.parent.is_dir():
        raise LandscapeError(f"{target.parent} does not exist")
    tell(progress, "load", 0)
    a, b = load(model, seeds[0], device), load(model, seeds[1], device)
    check_pair(a, b)
    if merge is not None:  # the merge is evaluated on A's data: refused before anything is written
        check_evaluable(a.cfg)
    source = hf_source(b)
    # signed permutations and full rotations move the mean direction of a centred stream
    moves_mean = RESID_GROUPS.get(group) in (SIGNED_PERM, ORTH)
    written_b = None
    if source is not None:
        # what the writer would refuse after the matching (a model type it has no format for, a
        # group whose processing the format cannot hold), refused before it: the writer's own
        # check on B processed as the matching will process it
        written_b = check_hf_writable(*prepare(b.cfg, b.params, group), source,
                                      moves_mean=moves_mean)  # fmt: skip
    a_dir, unchecked = _mergekit_a(a, group, merge, mergekit_config, merge_method, merge_weight,
                                   out_a, source, moves_mean, written_b)  # fmt: skip
    cache = context.cache or Cache()
    al = align(a, b, method, group, seed=options.seed, options=options.settings,
               context=RunContext(device, cache, within(progress, 0.0, 0.8)))  # fmt: skip
    cfg = al.cfg
    if merge is None:
        params = al.params_b
    else:
        params = {k: merge * al.params_a[k] + (1.0 - merge) * al.params_b[k] for k in al.params_b}
    tell(progress, "write", 0.8)
    meta = {"name": f"{b.name} aligned to {a.name}", "aligned": {
        "model": model, "seeds": list(seeds), "method": method, "group": group,
        "merge": merge}}  # fmt: skip
    if source is not None:
        written = export_hf(cfg, params, source, target)
        back = import_checkpoint(target)
        if mergekit_config is not None:
            if a_dir is None:  # A processed as B was, in its own format
                a_dir = export_hf(cfg, al.params_a, hf_source(a), out_a)["path"]
            mk = write_mergekit_config(mergekit_config, a_dir, target, merge_method,
                                       merge_weight)  # fmt: skip
    else:
        save_new_checkpoint_dir(Checkpoint(cfg, _completed(cfg, params), {**b.meta, **meta}),
                                target)  # fmt: skip
        written = {"path": str(target), "format": "landscape"}
        back = load_checkpoint_dir(target)
    tell(progress, "check", 0.9)
    if merge is None:
        check = function_check(b.cfg, b.params, back.cfg, back.params)
    else:
        check = function_check(cfg, params, back.cfg, back.params)
    result: dict[str, Any] = {
        "model": model, "seeds": list(seeds), "method": method, "group": group, "merge": merge,
        "path": str(target), "format": written["format"], "written": written,
        "function_check": check, "function_ok": bool(check < 1e-4),
        "mergekit": mk if mergekit_config is not None else None,
        "warnings": unchecked + ([] if check < 1e-4 else [
            f"the written model's logits differ by {check:.3g} from what it should compute"]),
    }  # fmt: skip
    if merge is not None:
        check_split(split)
        data = data_of(a)
        ev = data.evaluation(split)  # what the barrier's curve is evaluated on
        opts = EvalOptions(**data.eval_options(cfg, ev.inputs))
        line_loss, line_acc = evaluate_path(cfg, al.params_a, al.params_b, ev.inputs,
                                            ev.targets, [merge], opts)  # fmt: skip
        own_loss, own_acc = evaluate_path(back.cfg, back.params, back.params, ev.inputs,
                                          ev.targets, [1.0], opts)  # fmt: skip
        result.update({"split": split, "loss": float(own_loss[0]), "accuracy": float(own_acc[0]),
                       "curve_loss": float(line_loss[0]),
                       "curve_accuracy": float(line_acc[0])})  # fmt: skip
    tell(progress, "done", 1.0)
    return result


def _check_distinct(*outputs: tuple[str, str | os.PathLike | None]) -> None:
    """Refuse two outputs (option, path) naming one path, before anything is loaded or written:
    the second writer would find the first one's file (paths compared resolved, so ``X``,
    ``./X`` and ``X/`` are one)."""
    seen: dict[Path, str] = {}
    for option, path in outputs:
        if path is None:
            continue
        where = Path(os.path.realpath(path))
        if where in seen:
            raise LandscapeError(f"{option} {path} is the path of {seen[where]}: each output "
                                 "needs its own path")  # fmt: skip
        seen[where] = option


def _mergekit_a(a: Checkpoint, group: str, merge: float | None,
                mergekit_config: str | os.PathLike | None, method: str, weight: float,
                out_a: str | os.PathLike | None, source: str | None,
                moves_mean: bool, written_b: tuple[dict[str, Any], list[str]] | None = None
                ) -> tuple[str | None, list[str]]:  # fmt: skip
    """Check a mergekit request before the matching: (A's directory for the config when A's own
    source directory serves (None: A is written processed to ``out_a``, or no config), warnings).
    ``written_b``: B's config and tensors as written (:func:`check_hf_writable`), refused where
    mergekit's definition does not hold them (:func:`check_mergekit_covers`); A's own directory
    is checked the same way, and where only it falls short (a buffer transformers 5 no longer
    writes) A is written processed to ``--out-a``."""
    if mergekit_config is None:
        if out_a is not None:
            raise LandscapeError("--out-a writes A for --mergekit-config; give that too")
        return None, []
    if merge is not None:
        raise LandscapeError("--mergekit-config writes a config for the aligned pair: leave out "
                             "--merge and give λ as --merge-weight")  # fmt: skip
    mergekit_yaml(".", ".", method, weight)  # refuses a method or weight now, not after matching
    target = Path(mergekit_config)
    if target.exists():
        raise LandscapeError(f"{target} exists; choose a new file")
    if not target.parent.is_dir():
        raise LandscapeError(f"{target.parent} does not exist")
    a_source = hf_source(a)
    if source is None or a_source is None or written_b is None:
        raise LandscapeError(
            "mergekit merges Hugging Face directories; this pair was not "
            "imported from them (write it with --out, without --mergekit-config)"
        )
    a_own = not resid_needs(norm_state(a.cfg, a.params), RESID_GROUPS.get(group, "perm"))
    if not a_own and out_a is None:
        raise LandscapeError(f"--group {group} folds or centres the weights, so A must be written "
                             "processed as B is: give --out-a DIR")  # fmt: skip
    # a tensor mergekit's definition leaves out, or requires and B lacks: refused now
    unchecked = check_mergekit_covers(*written_b)
    if a_own:
        try:
            gap = mergekit_gap(hf_config(a_source), stored_tensor_names(a_source))
        except ImportError:  # said in the warnings
            gap = None
        if out_a is None and gap is not None:
            raise LandscapeError(f"A's directory {a_source}: {gap}; give --out-a DIR to have A "
                                 "written with it")  # fmt: skip
        if out_a is None:
            return a_source, unchecked
        if gap is None:
            raise LandscapeError(f"--group {group} leaves A as it is: the config names A's own "
                                 f"directory {a_source}; leave out --out-a")  # fmt: skip
    check_mergekit_covers(*check_hf_writable(*prepare(a.cfg, a.params, group), a_source,
                                             moves_mean=moves_mean))  # fmt: skip
    folder = Path(out_a)
    if folder.exists() or not folder.parent.is_dir():
        raise LandscapeError(f"--out-a {folder}: must be a new folder in an existing one")
    return None, unchecked


def archive_name(model: str, seeds: Sequence[int], method: str, group: str,
                 merge: float | None = None) -> str:  # fmt: skip
    """The folder an aligned checkpoint is written to by :func:`aligned_archive`, e.g.
    ``mlp-digits-1-aligned-to-0-weight-orth`` or ``…-merge-0.5``."""
    name = f"{model}-{seeds[1]}-aligned-to-{seeds[0]}-{method}-{group}"
    return name if merge is None else f"{name}-merge-{merge:g}"


def aligned_archive(model: str, seeds: Sequence[int], method: str = "weight",
                    group: str = "perm", options: AlignedOptions = ALIGNED, *,
                    context: RunContext = RUN) -> tuple[bytes, dict[str, Any]]:  # fmt: skip
    """What ``landscape align MODEL --seeds A B --method M --group G --out DIR [--merge λ]``
    writes (:func:`write_aligned`), as the bytes of a zip of that folder (named
    :func:`archive_name`, at the zip's root), and the writer's result (``path``: the folder's
    name in the zip). The folder is written to a temporary directory and removed. The zip holds
    that folder alone: options that write elsewhere (``mergekit_config``, ``out_a``) are
    refused."""
    if options.mergekit_config is not None or options.out_a is not None:
        raise LandscapeError("an aligned archive holds the aligned model alone: no mergekit "
                             "configuration, no A written beside it")  # fmt: skip
    name = archive_name(model, seeds, method, group, options.merge)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / name
        result = write_aligned(model, seeds, out, method, group, options, context=context)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(out.rglob("*")):
                if f.is_file():
                    z.write(f, f.relative_to(tmp))
    result["path"] = name
    result["written"] = {**result["written"], "path": name}
    return buffer.getvalue(), result
