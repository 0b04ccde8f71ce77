"""The shipped zoo checkpoints in ``assets/zoo``: each trained through the same cached path as
``landscape train`` and written as ``<name>/seed<S>.safetensors``; ``manifest.json`` records how:
configuration, training recipe, data identity, seed, metrics, curves and the weight digest that
``landscape train`` is checked against."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from landscape.device import CPU
from landscape.models.train import TRAIN_VERSION, tqdm_progress, train
from landscape.models.zoo import ZOO
from landscape.store.cache import Cache
from landscape.store.files import replace_file

DEFAULT_SEEDS = {"mlp-digits": range(12), "vit-digits": range(3), "gpt-shakespeare": range(3),
                 "vit-fashion": range(3), "vit-fashion-d256": range(3),
                 "vit-fashion-d128": range(3), "gpt-shakespeare-d128": range(3),
                 "gpt-shakespeare-d128-drop0.3": range(3),
                 "llama-shakespeare-d128": range(3)}  # fmt: skip

# What may ship in assets/ (checkpoints, manifest, README figure, Home curves; the shipped
# results have a budget of their own, landscape.assets.results.RESULTS_BUDGET_MB): the package
# stays a quick clone. The transformer entries for the barrier tables hold most of it; the
# paper-scale entries (ZooModel.ships False) are not in DEFAULT_SEEDS and never ship.
ASSETS_BUDGET_MB = 60


def build(plan: dict[str, Any], out: Path, device: torch.device = CPU) -> list[dict[str, Any]]:
    records = []
    manifest = out / "manifest.json"
    if manifest.is_file():  # keep the records of models not rebuilt this time
        old = json.loads(manifest.read_text())["checkpoints"]
        records.extend(r for r in old if r["name"] not in plan)
    for name, seeds in plan.items():
        model = ZOO[name]
        for seed in seeds:
            ckpt, _ = train(name, seed, device=device, progress=tqdm_progress(f"{name} {seed}"))
            rel = f"{name}/seed{seed}.safetensors"
            (out / name).mkdir(parents=True, exist_ok=True)
            save_file({k: v.contiguous() for k, v in ckpt.params.items()}, out / rel)
            m = ckpt.meta
            extra = {"curves": m["curves"]}
            if "vocab" in m:
                extra["vocab"] = m["vocab"]
            records.append({
                "name": name, "seed": seed, "file": rel, "dataset": model.dataset,
                "config": model.config.to_dict(), "train": model.train.to_dict(),
                "data": m["data"], "metrics": m["metrics"], "digest": m["digest"],
                "seconds": m["seconds"], "device": m["device"], "train_version": TRAIN_VERSION,
                "kernels": m.get("kernels"), "extra": extra,
            })  # fmt: skip
            print(f"{name} seed {seed}: {m['metrics']}", flush=True)
    _write_manifest(manifest, records)
    return records


def _write_manifest(manifest: Path, records: list[dict[str, Any]]) -> None:
    records.sort(key=lambda r: (list(ZOO).index(r["name"]), r["seed"]))
    replace_file(manifest, lambda tmp: tmp.write_text(json.dumps({"checkpoints": records},
                                                                   indent=1)))  # fmt: skip


def verify(models: list[str], out: Path) -> list[dict[str, Any]]:
    """Retrain every shipped checkpoint of ``models`` in a fresh cache and record this
    machine's CPU kernels with each record whose weight digest it reproduces bit for bit, so
    ``landscape train`` promises bit-identical weights exactly where that has been seen."""
    manifest = out / "manifest.json"
    records = json.loads(manifest.read_text())["checkpoints"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(tmp)
        for rec in records:
            if rec["name"] not in models:
                continue
            ckpt, _ = train(rec["name"], rec["seed"], device=CPU, cache=cache)
            same = ckpt.meta["digest"] == rec["digest"]
            if same:
                rec["kernels"] = ckpt.meta["kernels"]
            rows.append({"name": rec["name"], "seed": rec["seed"], "same_digest": same})
            print(f"{rec['name']} seed {rec['seed']}: "
                  f"{'bit-identical' if same else 'differs'}", flush=True)  # fmt: skip
    _write_manifest(manifest, records)
    return rows
