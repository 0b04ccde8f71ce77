"""Several seeds trained as one batched model against the same seeds trained one after another.

    .venv/bin/python bench/bench_train_batched.py [--steps 200] [--seeds 0 1 2] [--threads 1 2]
        [--models mlp-digits vit-digits vit-fashion] [--text FILE] [--device cpu] [--repeats 3]
        [--text-base gpt-shakespeare] [--batch-size B]

For each model and torch thread count (set explicitly; the library trains on one), the zoo
recipe cut to ``--steps`` steps is trained for every seed solo (``_train_model``, seed after
seed) and batched (``_train_batched``, all seeds at once), interleaved in this process (medians
of ``--repeats`` after a warm-up). The table gives seed-steps per second of each (seeds × steps /
seconds), their ratio (batched over solo: above 1, batched is faster per seed) and the largest
|Δw| between a seed's batched and solo weights. Evaluation is left out of the timing (it is the
same work per seed in both; the recipe's test evaluations and the final training-split pass
would otherwise dominate a short run on Fashion-MNIST's 60,000 images). A model whose data is
missing here (Fashion-MNIST, the Shakespeare text) is skipped with a line saying so; ``--text``
adds the architecture and recipe of ``--text-base`` (a zoo GPT) on that file, with dropout (its
recipe's, else 0.1) so that the seeds' own dropout draws are exercised. ``--device cuda``
measures on the GPU (thread counts then only affect the host). ``--batch-size 2`` leaves the
arithmetic negligible, so the table compares what a step costs the host (Python, dispatch, vmap's
batching): the CPU's stand-in for a GPU that is bound by launching kernels. Nothing is asserted
about time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.common import machine_line, race, table
from landscape.device import resolve_device
from landscape.errors import LandscapeError
from landscape.models import runs
from landscape.models.zoo import ZooModel, split_for, text_model, zoo_model

MODELS = ("mlp-digits", "vit-digits", "vit-fashion")


@contextlib.contextmanager
def no_evaluation() -> Iterator[None]:
    """Training without its evaluations (they return zeros), restored afterwards."""
    real = runs.evaluate
    runs.evaluate = lambda *args, **kwargs: (0.0, 0.0)
    try:
        yield
    finally:
        runs.evaluate = real


def recipe(model: ZooModel, steps: int, dropout: float | None = None,
           batch_size: int | None = None) -> ZooModel:  # fmt: skip
    """The model's recipe cut to ``steps`` (one evaluation, at the end); the same schedule shape."""
    tc = dataclasses.replace(model.train, steps=steps, eval_every=steps,
                             warmup=min(model.train.warmup, steps // 4),
                             batch_size=batch_size or model.train.batch_size)  # fmt: skip
    if dropout is not None:
        tc = dataclasses.replace(tc, dropout=dropout)
    return dataclasses.replace(model, train=tc)


def models(names: list[str], text: str | None, base: str, steps: int, batch_size: int | None
           ) -> Iterator[ZooModel]:  # fmt: skip
    for name in names:
        model = recipe(zoo_model(name), steps, batch_size=batch_size)
        try:
            split_for(model, "test")
        except LandscapeError as e:
            print(f"{name}: skipped ({e})")
            continue
        yield model
    if text:
        model = text_model(text, base)
        yield recipe(model, steps, model.train.dropout or 0.1, batch_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--text", help="also a GPT (--text-base) on this text file")
    parser.add_argument("--text-base", default="gpt-shakespeare", help="the zoo GPT of --text")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, help="instead of each recipe's own")
    args = parser.parse_args()
    dev = resolve_device(args.device)
    seeds = args.seeds
    rows = []
    for model in models(args.models, args.text, args.text_base, args.steps, args.batch_size):
        for threads in args.threads:
            torch.set_num_threads(threads)

            def solo(model: ZooModel = model) -> list:
                return [runs.run_seed(model, s, dev, None, None) for s in seeds]

            def batched(model: ZooModel = model) -> list:
                return runs.run_seeds(model, seeds, dev, None, None)

            with no_evaluation():
                out = race({"solo": solo, "batched": batched}, repeats=args.repeats)
            (t_solo, a), (t_batched, b) = out["solo"], out["batched"]
            dw = max((x.params[k] - y.params[k]).abs().max().item()
                     for x, y in zip(a, b, strict=True) for k in x.params)  # fmt: skip
            work = len(seeds) * args.steps
            rows.append([model.name, threads, f"{work / t_solo:.1f}", f"{work / t_batched:.1f}",
                         f"{t_solo / t_batched:.2f}", f"{dw:.3g}"])  # fmt: skip
            print(f"{model.name}, {threads} thread(s): solo {t_solo:.2f} s, batched "
                  f"{t_batched:.2f} s", flush=True)  # fmt: skip
    print(machine_line())
    size = f"batches of {args.batch_size}" if args.batch_size else "the recipes' batches"
    print(f"{len(seeds)} seeds × {args.steps} steps on {dev}, {size}, medians of {args.repeats}")
    print(table(["model", "threads", "solo seed-steps/s", "batched seed-steps/s",
                 "batched/solo", "max |Δw|"], rows))  # fmt: skip


if __name__ == "__main__":
    main()
