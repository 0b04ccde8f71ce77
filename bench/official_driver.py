"""The reference implementation's half of ``bench/official_side_by_side.py``.

Runs under the reference code's own interpreter (its pinned libraries, not ours) and imports its
modules from ``--official`` (a fetched copy of the public repository). Nothing of that code is
copied here: this script only calls its scripts and functions with the side-by-side's settings.

    python official_driver.py --official DIR --work DIR prepare
    python official_driver.py --official DIR --work DIR train --seed S --steps 1500
    python official_driver.py --official DIR --work DIR merge --method M --group G [--steps 300]

``prepare`` writes a 65-character tokenizer (one id per character of the text, plus an
end-of-text token outside the model's vocabulary, which the reference code uses as padding),
the reference code's contiguous 90/5/5 split and its token counts. ``train`` trains one seed
with the reference training script for a fixed number of steps. ``merge`` measures one
method's test-loss barrier with the reference merger on seeds 0 and 1 (11 points on λ) and
writes ``merge-<method>-<group>.json``. Each stage writes a JSON file in ``--work`` and prints
its path.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
import time
from pathlib import Path


def _training_arguments_with(max_steps: int):
    """The library's TrainingArguments with ``max_steps`` fixed (the reference scripts expose
    epochs only); everything else stays what the scripts pass."""
    import transformers

    original = transformers.TrainingArguments

    def make(*args, **kwargs):
        kwargs["max_steps"] = max_steps
        kwargs["report_to"] = "none"
        return original(*args, **kwargs)

    return original, make


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
    subprocess.run(
        [
            sys.executable,
            "create_splits.py",
            "--data_file",
            str(text_file),
            "--out_dir",
            str(splits),
            "--val_frac",
            "0.05",
            "--test_frac",
            "0.05",
            "--method",
            "contiguous",
        ],
        cwd=args.official,
        check=True,
    )
    subprocess.run(
        [
            sys.executable,
            "compute_token_freqs.py",
            "--splits_dir",
            str(splits),
            "--tokenizer_dir",
            str(work / "char_tokenizer"),
            "--out_name",
            "token_freqs.pt",
        ],
        cwd=args.official,
        check=True,
    )
    meta = json.loads((splits / "split_metadata.json").read_text())
    return {"vocab": len(chars), "chars": len(text), **meta}


def train(args) -> dict:
    import transformers

    work = Path(args.work)
    out = work / f"seed{args.seed}"
    original, make = _training_arguments_with(args.steps)
    transformers.TrainingArguments = make
    sys.argv = [
        "train.py",
        "--splits_dir",
        str(work / "splits"),
        "--tokenizer_dir",
        str(work / "char_tokenizer"),
        "--seed",
        str(args.seed),
        "--n_layer",
        "2",
        "--n_embd",
        "64",
        "--n_inner",
        "256",
        "--n_head",
        "4",
        "--batch_size",
        "32",
        "--output_dir",
        str(out),
    ]
    t = time.perf_counter()
    try:
        runpy.run_path(str(Path(args.official) / "train.py"), run_name="__main__")
    finally:
        transformers.TrainingArguments = original
    seconds = time.perf_counter() - t
    test = json.loads((out / "test_metrics.json").read_text())
    state = sorted(out.glob("checkpoint-*/trainer_state.json"))
    steps = json.loads(state[-1].read_text())["global_step"] if state else None
    return {
        "seed": args.seed,
        "seconds": seconds,
        "test_loss": test["test_loss"],
        "steps": steps,
        "dir": str(out),
    }


def merge(args) -> dict:
    import torch
    import transformers

    sys.path.insert(0, args.official)
    os.chdir(args.official)
    import train_merger  # the reference merger's training and sweep
    from transformers import AutoTokenizer, set_seed

    work = Path(args.work)
    out = work / f"merge-{args.method}-{args.group}"
    tokenizer = AutoTokenizer.from_pretrained(work / "char_tokenizer")
    tokenizer.pad_token = tokenizer.eos_token
    train_ds, val_ds, test_ds = train_merger.build_datasets_from_splits(
        splits_dir=str(work / "splits"), tokenizer=tokenizer, block_size=256
    )
    ns = argparse.Namespace(
        model_dir_0=str(work / "seed0"),
        model_dir_1=str(work / "seed1"),
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
    result = {"method": args.method, "group": args.group, "threads": torch.get_num_threads()}
    if args.method == "naive":
        sys.path.insert(0, args.official)
        import eval as reference_eval

        a = reference_eval.load_state_dict_generic(ns.model_dir_0)
        b = reference_eval.load_state_dict_generic(ns.model_dir_1)
        model = transformers.GPT2LMHeadModel.from_pretrained(ns.model_dir_0).eval()
        trainer = transformers.Trainer(
            model=model,
            args=transformers.TrainingArguments(
                output_dir=str(out / "eval_tmp"),
                per_device_eval_batch_size=64,
                report_to="none",
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
        result["coeff_losses"] = losses
        result["max_barrier"] = max(
            v - (float(k) * ends[1] + (1 - float(k)) * ends[0]) for k, v in losses.items()
        )
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
            original, make = _training_arguments_with(args.steps)
            train_merger.TrainingArguments = make
            try:
                model = train_merger.run_training_and_save(ns, tokenizer, train_ds, val_ds)
            finally:
                train_merger.TrainingArguments = original
            result["steps"] = args.steps
            best = (out / "BEST_CHECKPOINT.txt").read_text().strip()
            result["returned_checkpoint"] = os.path.basename(best)
        result["seconds"] = time.perf_counter() - t
        path = train_merger.evaluate_sweep(model, tokenizer, test_ds, ns, None)
        sweep = json.loads(Path(path).read_text())
        result["coeff_losses"] = sweep["coeff_losses"]
        result["max_barrier"] = sweep["max_barrier"]
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--official", required=True, help="a fetched copy of the reference code")
    p.add_argument("--work", required=True)
    p.add_argument("--threads", type=int, default=1)
    sub = p.add_subparsers(dest="stage", required=True)
    sub.add_parser("prepare")
    t = sub.add_parser("train")
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--steps", type=int, default=1500)
    m = sub.add_parser("merge")
    m.add_argument("--method", choices=["naive", "weight", "learned"], required=True)
    m.add_argument("--group", choices=["perm", "orth"], default="orth")
    m.add_argument("--steps", type=int, default=300)
    args = p.parse_args()
    args.official = str(Path(args.official).resolve())
    args.work = str(Path(args.work).resolve())
    os.makedirs(args.work, exist_ok=True)
    import torch

    torch.set_num_threads(args.threads)
    result = {"prepare": prepare, "train": train, "merge": merge}[args.stage](args)
    name = {
        "prepare": "prepare",
        "train": f"train-seed{getattr(args, 'seed', '')}",
        "merge": f"merge-{getattr(args, 'method', '')}-{getattr(args, 'group', '')}",
    }
    path = Path(args.work) / f"{name[args.stage]}.json"
    path.write_text(json.dumps(result, indent=2))
    print(path)


if __name__ == "__main__":
    main()
