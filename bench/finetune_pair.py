"""Two fine-tunes of one base model, aligned and interpolated, through an imported family.

Loads a base checkpoint (Hugging Face directory or ``.gguf`` file), fine-tunes two copies with
AdamW on the two halves of a text file's training split (different data and order), saves them
as landscape checkpoint directories (with the base's tokenizer when one can be read), registers
them as a family and measures the barrier between them: naive, and weight matching with
permutations and with rotations. Prints the steps' timings, the barriers and the peak resident
memory. Asserts nothing about time.

    .venv/bin/python bench/finetune_pair.py BASE --text FILE [--steps 20] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch


def _tokenizer(base: Path, out: Path) -> bool:
    """Write the base's tokenizer as ``out/tokenizer.json``; False when none can be read."""
    try:
        from transformers import AutoTokenizer

        if base.suffix == ".gguf":
            tok = AutoTokenizer.from_pretrained(base.parent, gguf_file=base.name)
        else:
            tok = AutoTokenizer.from_pretrained(base)
        tok.save_pretrained(out)
        return (out / "tokenizer.json").is_file()
    except Exception as e:  # noqa: BLE001 - any failure: fall back to bytes
        print(f"no tokenizer from {base}: {type(e).__name__}: {e}", file=sys.stderr)
        return False


def main() -> None:
    from landscape.data.text import NO_TOKENIZER, token_corpus
    from landscape.experiments import barrier, family_members
    from landscape.experiments.barriers.pairs import load_any, peak_rss_mb
    from landscape.models.importers import checkpoint_tokenizer
    from landscape.models.zoo import Checkpoint, save_checkpoint_dir
    from landscape.optim import AdamWOptions, adamw_steps
    from landscape.sources import DataSpec, add_family

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("--text", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--n-ctx", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--windows", type=int, default=16, help="evaluation windows per split")
    ap.add_argument("--points", type=int, default=5)
    ap.add_argument("--out", default="/tmp/landscape-finetunes")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    report: dict = {"base": args.base, "steps": args.steps, "batch": args.batch,
                    "n_ctx": args.n_ctx, "lr": args.lr, "threads": args.threads}  # fmt: skip

    t0 = time.perf_counter()
    base = load_any(args.base)
    report["load_seconds"] = round(time.perf_counter() - t0, 2)
    report["parameters"] = sum(v.numel() for v in base.params.values())
    dirs = [out / "ft-a", out / "ft-b"]
    has_tok = all(_tokenizer(Path(args.base), d) for d in dirs)
    tokenizer = checkpoint_tokenizer(dirs[0]) if has_tok else NO_TOKENIZER
    corpus = token_corpus(args.text, tokenizer, d_vocab=base.cfg.d_vocab)
    report["tokens"] = corpus.tokenizer
    train = corpus.windows("train", args.n_ctx)
    half = len(train) // 2
    for i, d in enumerate(dirs):
        x, y = train.inputs[i * half : (i + 1) * half], train.targets[i * half : (i + 1) * half]
        gen = torch.Generator().manual_seed(100 + i)

        def batches(x=x, y=y, gen=gen):
            while True:
                j = torch.randint(0, len(x), (args.batch,), generator=gen)
                yield x[j], y[j]

        t = time.perf_counter()
        params, _ = adamw_steps(base.cfg, (base.params, None), batches(), args.steps,
                                AdamWOptions(lr=args.lr))
        report[f"finetune_{d.name}_seconds"] = round(time.perf_counter() - t, 2)
        save_checkpoint_dir(Checkpoint(base.cfg, params, {"name": d.name,
                                                          "base": str(args.base)}), d)  # fmt: skip
        del params
    del base
    name = "finetune-pair"
    add_family(name, dirs, DataSpec(text=args.text, n_ctx=args.n_ctx, max_windows=args.windows),
               replace=True)  # fmt: skip
    report["members"] = family_members(name)
    rows = []
    for method, group in (("naive", "perm"), ("weight", "perm"), ("weight", "orth")):
        t = time.perf_counter()
        r = barrier(name, (0, 1), method, group, points=args.points)
        rows.append({"method": method, "group": group, "barrier_loss": r["barrier_loss"],
                     "barrier_accuracy": r["barrier_accuracy"], "loss": r["loss"],
                     "function_check": r["function_check"],
                     "matching_seconds": r["matching_seconds"],
                     "seconds": round(time.perf_counter() - t, 2),
                     "cached": r["cached"]})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    report["barriers"] = rows
    report["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
