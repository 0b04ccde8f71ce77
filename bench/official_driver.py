"""The reference implementation's half of ``bench/official_side_by_side.py``.

Runs under the reference code's own interpreter (its pinned libraries, not ours) and imports its
modules from ``--official`` (a fetched copy of the public repository). Nothing of that code is
copied here: this script only calls its scripts and functions with the side-by-side's settings.

    python official_driver.py --official DIR --work DIR prepare
    python official_driver.py --official DIR --work DIR train --seed S --steps 1500
    python official_driver.py --official DIR --work DIR merge --method M --group G [--steps 300]
    python official_driver.py --official DIR --work DIR factored --method M --group G

``prepare`` writes a 65-character tokenizer (one id per character of the text, plus an
end-of-text token outside the model's vocabulary, which the reference code uses as padding),
the reference code's contiguous 90/5/5 split and its token counts. ``train`` trains one seed
with the reference training script for a fixed number of steps. ``merge`` measures one
method's test-loss barrier with the reference merger on seeds 0 and 1 (``--seeds A B`` for
another trained pair; 11 points on λ) and
writes ``merge-<method>-<group>.json``; ``factored`` then measures that merger's alignment on
the straight line between the factored weights (``merge-<method>-<group>-weights.json``).
Each stage writes a JSON file in ``--work`` and prints its path.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def _max_steps(module, max_steps: int):
    """Within the block, ``module.TrainingArguments`` (the name a reference script builds its
    arguments with) fixes ``max_steps`` (the scripts expose epochs only) and reports nowhere;
    everything else stays what the script passes."""
    original = module.TrainingArguments

    def make(*args, **kwargs):
        return original(*args, **{**kwargs, "max_steps": max_steps, "report_to": "none"})

    module.TrainingArguments = make
    try:
        yield
    finally:
        module.TrainingArguments = original


def prepare(args) -> dict:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    work = Path(args.work)
    text_file = Path(args.official) / "tinyshakespeare.txt"
    text = text_file.read_text(encoding="utf-8")
    chars = sorted(set(text))
    tok = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        model_input_names=["input_ids", "attention_mask"],
    )
    assert fast(text[:1000])["input_ids"] == [chars.index(c) for c in text[:1000]]
    fast.save_pretrained(work / "char_tokenizer")
    splits = work / "splits"
    split = ["create_splits.py", "--data_file", str(text_file), "--out_dir", str(splits),
             "--val_frac", "0.05", "--test_frac", "0.05", "--method", "contiguous"]  # fmt: skip
    counts = ["compute_token_freqs.py", "--splits_dir", str(splits), "--tokenizer_dir",
              str(work / "char_tokenizer"), "--out_name", "token_freqs.pt"]  # fmt: skip
    for script in (split, counts):
        subprocess.run([sys.executable, *script], cwd=args.official, check=True)
    meta = json.loads((splits / "split_metadata.json").read_text())
    return {"vocab": len(chars), "chars": len(text), **meta}


def train(args) -> dict:
    import transformers

    work = Path(args.work)
    out = work / f"seed{args.seed}"
    sys.argv = ["train.py", "--splits_dir", str(work / "splits"), "--tokenizer_dir",
                str(work / "char_tokenizer"), "--seed", str(args.seed), "--n_layer", "2",
                "--n_embd", "64", "--n_inner", "256", "--n_head", "4", "--batch_size", "32",
                "--output_dir", str(out)]  # fmt: skip
    t = time.perf_counter()
    with _max_steps(transformers, args.steps):
        runpy.run_path(str(Path(args.official) / "train.py"), run_name="__main__")
    seconds = time.perf_counter() - t
    test = json.loads((out / "test_metrics.json").read_text())
    state = out.glob("checkpoint-*/trainer_state.json")
    steps = max((json.loads(f.read_text())["global_step"] for f in state), default=None)
    return {
        "seed": args.seed,
        "seconds": seconds,
        "test_loss": test["test_loss"],
        "steps": steps,
        "dir": str(out),
    }


def _line(model, a: dict, b: dict, tokenizer, test_ds, out: Path) -> dict:
    """Test losses along the straight line between state dicts ``a`` (λ = 1) and ``b``, 11
    points, evaluated with ``model`` (of their form), and the barrier over the chord."""
    import eval as reference_eval
    import transformers

    trainer = transformers.Trainer(
        model=model,
        args=transformers.TrainingArguments(
            output_dir=str(out / "eval_tmp"), per_device_eval_batch_size=64, report_to="none"
        ),
        eval_dataset=test_ds,
        data_collator=transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
    losses = {}
    for i in range(11):
        lam = i / 10
        model.load_state_dict(reference_eval.interpolate_state_dict(a, b, lam), strict=False)
        losses[f"{lam:.6f}"] = reference_eval.evaluate_model(model, trainer)
    ends = losses["0.000000"], losses["1.000000"]
    barrier = max(v - (float(k) * ends[1] + (1 - float(k)) * ends[0]) for k, v in losses.items())
    return {"coeff_losses": losses, "max_barrier": barrier}


def _setup(args, out: Path):
    """The reference merger's module, tokenizer, splits and settings, as its scripts use them."""
    sys.path.insert(0, args.official)
    os.chdir(args.official)
    import train_merger  # the reference merger's training and sweep
    from transformers import AutoTokenizer, set_seed

    work = Path(args.work)
    tokenizer = AutoTokenizer.from_pretrained(work / "char_tokenizer")
    tokenizer.pad_token = tokenizer.eos_token
    train_ds, val_ds, test_ds = train_merger.build_datasets_from_splits(
        splits_dir=str(work / "splits"), tokenizer=tokenizer, block_size=256
    )
    ns = argparse.Namespace(
        model_dir_0=str(work / f"seed{args.seeds[0]}"),
        model_dir_1=str(work / f"seed{args.seeds[1]}"),
        splits_dir=str(work / "splits"),
        output_dir=str(out),
        results_name="sweep.json",
        seed=42,
        sampler="narrow_uniform",
        permutations_only=args.group == "perm",
        block_size=256,
        batch_size=32,
        epochs=5.0,
        lr=3e-4,
        warmup_ratio=0.05,
        weight_decay=0.01,
        eval_steps=50,
        logging_steps=25,
        save_total_limit=2,
        fp16=False,
        early_stop=False,
        early_stop_patience=10,
        eval_batch_size=64,
        coeff_start=0.0,
        coeff_end=1.0,
        coeff_step=0.1,
        token_freqs_path=str(work / "splits" / "token_freqs.pt"),
        wandb=False,
    )
    os.makedirs(out, exist_ok=True)
    set_seed(ns.seed)
    return train_merger, tokenizer, (train_ds, val_ds, test_ds), ns


def merge(args) -> dict:
    import torch
    import transformers

    out = Path(args.work) / f"merge-{args.method}-{args.group}"
    train_merger, tokenizer, (train_ds, val_ds, test_ds), ns = _setup(args, out)
    result = {"method": args.method, "group": args.group, "threads": torch.get_num_threads()}
    if args.method == "naive":
        import eval as reference_eval

        a = reference_eval.load_state_dict_generic(ns.model_dir_0)
        b = reference_eval.load_state_dict_generic(ns.model_dir_1)
        model = transformers.GPT2LMHeadModel.from_pretrained(ns.model_dir_0).eval()
        result.update(_line(model, a, b, tokenizer, test_ds, out))
    else:
        t = time.perf_counter()
        if args.method == "weight":
            model = train_merger.build_merger_wrapper(
                ns.model_dir_0,
                ns.model_dir_1,
                ns.sampler,
                ns.permutations_only,
                token_freqs_path=ns.token_freqs_path,
            )
        else:
            with _max_steps(train_merger, args.steps):
                model = train_merger.run_training_and_save(ns, tokenizer, train_ds, val_ds)
            result["steps"] = args.steps
            best = (out / "BEST_CHECKPOINT.txt").read_text().strip()
            result["returned_checkpoint"] = os.path.basename(best)
        result["seconds"] = time.perf_counter() - t
        path = train_merger.evaluate_sweep(model, tokenizer, test_ds, ns, None)
        sweep = json.loads(Path(path).read_text())
        result["coeff_losses"] = sweep["coeff_losses"]
        result["max_barrier"] = sweep["max_barrier"]
    return result


def _permute_heads(block, order, n_head: int) -> None:
    """Head j of ``block`` becomes its old head ``order[j]`` (Q, K, V columns, O rows)."""
    import torch

    d = block.attn.c_attn.weight.shape[0]
    dh = d // n_head
    heads = torch.cat([int(o) * dh + torch.arange(dh) for o in order])
    qkv = torch.cat([b * d + heads for b in range(3)])
    a, o = block.attn.c_attn, block.attn.c_proj
    a.weight.copy_(a.weight[:, qkv].clone())
    a.bias.copy_(a.bias[qkv].clone())
    o.weight.copy_(o.weight[heads].clone())


def _permute_mlp(block, order) -> None:
    """Hidden unit j of ``block``'s MLP becomes its old unit ``order[j]``."""
    f, p = block.mlp.c_fc, block.mlp.c_proj
    f.weight.copy_(f.weight[:, order].clone())
    f.bias.copy_(f.bias[order].clone())
    p.weight.copy_(p.weight[order].clone())


def _unique(order, what: str):
    if len(set(order.tolist())) != len(order):
        raise SystemExit(f"the {what} recovered from the reference merger is not a permutation")
    return order


def factored(args) -> dict:
    """The reference merger's own alignment, on the straight line between factored weights.

    The reference merger aligns B in circuit form. Its alignment is read back from what it
    holds: the residual rotation by orthogonal Procrustes on the embeddings and the unembedding,
    each head by its QK circuit, each MLP unit by its input weights; then its own learned (or,
    for weight matching, initial) residual, head and MLP matrices on top, as its forward applies
    them. B's factored weights in the merger's normal form (norm gains folded, centred, RMS
    norms, by the merger's own routine) are aligned with these, checked against the merger's
    B (λ = 0) on test windows, and the straight line to A's factored weights is measured.
    """
    import copy

    import torch
    import transformers

    out = Path(args.work) / f"merge-{args.method}-{args.group}"
    train_merger, tokenizer, (_, _, test_ds), ns = _setup(args, out)
    import eval as reference_eval
    from enums import MatrixType
    from merger import GPTMerger
    from utils import project
    from weight_matching import ortho_residual

    wrapper = train_merger.build_merger_wrapper(
        ns.model_dir_0, ns.model_dir_1, ns.sampler, ns.permutations_only,
        token_freqs_path=ns.token_freqs_path,
    )  # fmt: skip
    if args.method == "learned":  # the merger its training returned, as its evaluation loads it
        wrapper.load_state_dict(reference_eval.load_state_dict_generic(str(out)), strict=False)
    merger = wrapper.merger_model.eval()
    merged = merger.model
    f0, f1 = (transformers.GPT2LMHeadModel.from_pretrained(d).eval() for d in
              (ns.model_dir_0, ns.model_dir_1))  # fmt: skip
    for f in (f0, f1):
        f.config._attn_implementation = "eager"
        GPTMerger._absorb(None, f)  # the merger's normal form; it checks the function itself
    d, h = f1.config.n_embd, f1.config.n_head
    result = {"method": args.method, "group": args.group, "space": "weights"}
    with torch.no_grad():
        stack = (f1.transformer.wte.weight, f1.transformer.wpe.weight, f1.lm_head.weight)
        before = torch.cat(stack)
        after = torch.cat((merged.transformer.wte.embedding_1.weight,
                           merged.transformer.wpe.embedding_1.weight,
                           merged.lm_head.conv1d_1_weight.t()))  # fmt: skip
        u, _, vt = torch.linalg.svd(before.T @ after)
        ortho_residual(f1, u @ vt)
        result["residual_fit"] = float((before @ (u @ vt) - after).abs().max())
        fits = []
        for i, block in enumerate(f1.transformer.h):
            w = torch.cat((block.attn.c_attn.weight.t(), block.attn.c_attn.bias[:, None]), 1)
            q, k = w[:d].reshape(h, d // h, d + 1), w[d : 2 * d].reshape(h, d // h, d + 1)
            qk = (q.transpose(1, 2) @ k).flatten(1)
            c = merged.transformer.h[i].attn.c_attn
            wa = torch.cat((c.conv1d_1_weight.t(), c.conv1d_1_bias[:, None]), 1)
            qa = wa[: h * (d + 1)].reshape(h, d + 1, d + 1).transpose(1, 2).flatten(1)
            unit = torch.nn.functional.normalize
            order = _unique(torch.cdist(unit(qa, dim=1), unit(qk, dim=1)).argmin(1), "heads")
            fits.append(float(torch.cdist(unit(qa, dim=1), unit(qk[order], dim=1)).diag().max()))
            _permute_heads(block, order, h)
            fc = merged.transformer.h[i].mlp.c_fc.conv1d_1_weight
            order = _unique(torch.cdist(fc.t(), block.mlp.c_fc.weight.t()).argmin(1), "units")
            _permute_mlp(block, order)
            fits.append(float((block.mlp.c_fc.weight - fc).abs().max()))
        result["heads_and_units_fit"] = max(fits)
        kind = MatrixType.PERM if ns.permutations_only else MatrixType.ORTHO
        ortho_residual(f1, project(merger.proj["residual"], matrix_type=kind).detach())
        for i, block in enumerate(f1.transformer.h):
            heads = project(merger.proj[f"attention_heads_{i}"], matrix_type=MatrixType.PERM)
            _permute_heads(block, heads.argmax(1), h)
            units = project(merger.proj[f"mlp_{i}"], matrix_type=MatrixType.PERM)
            _permute_mlp(block, units.argmax(0))
        ids = torch.stack([test_ds[j]["input_ids"] for j in range(8)])
        merger.set_sampler(sampler_type=None, fixed_coeff=0.0)
        result["function_check"] = float(
            (merger(input_ids=ids).logits - f1(ids).logits).abs().max()
        )
    if result["function_check"] > 1e-3:
        raise SystemExit(f"the aligned factored B is not the merger's B: {result}")
    result.update(
        _line(copy.deepcopy(f0), f0.state_dict(), f1.state_dict(), tokenizer, test_ds, out)
    )
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--official", required=True, help="a fetched copy of the reference code")
    p.add_argument("--work", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--seeds",
        type=int,
        nargs=2,
        default=[0, 1],
        metavar=("A", "B"),
        help="the pair merge and factored measure (trained by train --seed)",
    )
    sub = p.add_subparsers(dest="stage", required=True)
    sub.add_parser("prepare")
    t = sub.add_parser("train")
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--steps", type=int, default=1500)
    m = sub.add_parser("merge")
    m.add_argument("--method", choices=["naive", "weight", "learned"], required=True)
    m.add_argument("--group", choices=["perm", "orth"], default="orth")
    m.add_argument("--steps", type=int, default=300)
    f = sub.add_parser("factored")
    f.add_argument("--method", choices=["weight", "learned"], required=True)
    f.add_argument("--group", choices=["perm", "orth"], default="orth")
    args = p.parse_args()
    args.official = str(Path(args.official).resolve())
    args.work = str(Path(args.work).resolve())
    os.makedirs(args.work, exist_ok=True)
    import torch

    torch.set_num_threads(args.threads)
    stages = {"prepare": prepare, "train": train, "merge": merge, "factored": factored}
    result = stages[args.stage](args)
    name = {
        "prepare": "prepare",
        "train": f"train-seed{getattr(args, 'seed', '')}",
        "merge": f"merge-{getattr(args, 'method', '')}-{getattr(args, 'group', '')}",
        "factored": f"merge-{getattr(args, 'method', '')}-{getattr(args, 'group', '')}-weights",
    }
    path = Path(args.work) / f"{name[args.stage]}.json"
    path.write_text(json.dumps(result, indent=2))
    print(path)


if __name__ == "__main__":
    main()
