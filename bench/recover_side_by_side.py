"""The recovery benchmark side by side with mergekit's aligner, on the same scrambled models.

    python bench/recover_side_by_side.py --work DIR [--peer DIR] [--peer-path DIR ...]
        [--models gpt2 llama llama-gqa PATH ...] [--groups LEVEL ...] [--draw 0]
        [--text FILE]

For each model and group level (``landscape.experiments.merging.recover_benchmark``): the model A,
processed as the level needs, and B = g(A), g a random element of the level (seed
``--draw``), are written as Hugging Face directories
(``landscape.models.exporters.export_hf``, float32). Then

- **Landscape** aligns B back to A in memory (weight matching, ``recover.align_back``: the
  same float32 tensors as the files) and reports units recovered (against g⁻¹), units in place
  (``recover.units_in_place``), the barrier between A and the aligned B and the matching's
  seconds;
- **mergekit's aligner** (``mergekit/scripts/align_model_weights.py``, console script
  ``mergekit-rebasin``) aligns the written B to the written A through its own command line,
  ``python -m mergekit.scripts.align_model_weights B --target A -o OUT``, run by
  ``bench/peer_on_cpu.py`` (which maps its hard-coded CUDA placements to the CPU where there is
  no CUDA; nothing of the peer is copied). Its output is read back and scored by what the
  weights alone say: units in place, max |Δlogits| against B, the barrier between A and it;
  seconds are its run after its imports (reading, aligning, writing; timed by the launcher),
  beside its command's wall time and its start-up alone (its ``--help``, median of three). Its
  written ``config.json`` is replaced by B's before reading (under transformers 5 the peer's
  copy loses the vocabulary size; the tensors are what it aligned).

Models: ``gpt2``, ``llama`` (4 heads, 4 key/value heads) and ``llama-gqa`` (2 key/value heads)
are tiny seeded Hugging Face models built here (random weights, perturbed off their init), with
a repeated sentence as their text; any other argument is a Hugging Face directory (give its
``--text``), e.g. SmolLM2-135M's.

The peer: the mergekit release on PyPI (0.1.5, the ``merge`` extra) ships no aligner. The
public repository has it on its ``rope-alignment`` branch; ``--peer DIR`` is a checkout of that
branch, and ``--peer-path`` adds directories to its import path (it imports POT, ``ot``).
Without a peer the Landscape side runs alone and the table says what is missing. Seen at the
branch's commit 33af1ae: the peer reads GPT-2 tensors without transformers' ``transformer.``
prefix (a KeyError on every GPT-2 file), refuses grouped-query attention ("Output dimension
mismatch"), cuts embeddings to 32,000 rows (so no model with a larger vocabulary, SmolLM2's
49,152 among them, comes out whole), permutes the stream without signs and estimates one angle
per head and frequency pair (no scale) for the QK maps and a permutation of each head's
dimensions for the OV maps (not an invertible map); its visiting
order after the first round is an unseeded shuffle, so its results vary between runs. Prints one
table and writes it with every raw result to ``<work>/recover_side_by_side.json``. Nothing here
asserts a time or a value.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.peer_on_cpu import RAN  # noqa: E402
from landscape.errors import LandscapeError  # noqa: E402
from landscape.experiments.merging.recover_benchmark import (  # noqa: E402
    DEFAULT_LEVELS,
    LEVELS,
    align_back,
    barrier_between,
    levels_of,
    scramble,
    units_in_place,
)
from landscape.matching import function_check  # noqa: E402
from landscape.models.exporters import export_hf  # noqa: E402
from landscape.models.importers import import_checkpoint  # noqa: E402
from landscape.sources import DataSpec, Source  # noqa: E402
from landscape.symmetry import spec_for  # noqa: E402

PEER_MODULE = "mergekit.scripts.align_model_weights"
LAUNCHER = ROOT / "bench" / "peer_on_cpu.py"
BUILT = ("gpt2", "llama", "llama-gqa")
TEXT = "To be, or not to be, that is the question. Whether tis nobler in the mind. " * 40


def build(name: str, out: Path) -> Path:
    """A tiny seeded Hugging Face model ``name`` (:data:`BUILT`) saved at ``out``."""
    import transformers

    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=256,
                                      n_positions=32)  # fmt: skip
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
            num_key_value_heads=2 if name == "llama-gqa" else 4, intermediate_size=24,
            vocab_size=256, max_position_embeddings=32, tie_word_embeddings=False,
        )  # fmt: skip
        model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():  # off the init: gains away from 1, biases away from 0
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(out, safe_serialization=True)
    return out


def peer_env(args: argparse.Namespace) -> dict[str, str] | None:
    """The environment the peer runs in, or None when its module cannot be found."""
    path = [str(Path(p).resolve()) for p in [*([args.peer] if args.peer else []),
                                             *args.peer_path]]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # fmt: skip
    probe = (f"import importlib.util, sys; sys.exit(importlib.util.find_spec({PEER_MODULE!r}) "
             "is None)")  # fmt: skip
    found = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True)
    return env if found.returncode == 0 else None


MISSING = (
    "mergekit's aligner not found: the installed mergekit ships no "
    f"{PEER_MODULE} (0.1.5 on PyPI has none); give --peer DIR, a checkout of the public "
    "repository's rope-alignment branch, and --peer-path DIR where POT (ot) is installed"
)


def run_peer(env: dict[str, str], a: Path, b: Path, out: Path, startup: float,
             log: Path) -> dict[str, Any]:  # fmt: skip
    """The peer's command line on (B → A); its wall time less ``startup``."""
    cmd = [sys.executable, str(LAUNCHER), PEER_MODULE, str(b), "--target", str(a), "-o",
           str(out)]  # fmt: skip
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    log.write_text(r.stdout + r.stderr)
    if r.returncode:
        last = [ln for ln in r.stderr.strip().splitlines() if ln.strip()][-1:]
        return {"ok": False, "note": f"failed: {last[0] if last else r.returncode}"}
    shutil.copy(b / "config.json", out / "config.json")
    ran = [ln for ln in r.stderr.splitlines() if ln.startswith(RAN)]
    run = float(ran[-1].split()[3]) if ran else None
    return {"ok": True, "wall_seconds": seconds, "seconds": run}


def peer_startup(env: dict[str, str], repeats: int = 3) -> float:
    """Median wall time of the peer's command line doing nothing (``--help``): its imports and
    start-up, which its wall time on a tiny model is mostly made of."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(LAUNCHER), PEER_MODULE, "--help"], env=env,
                       capture_output=True, check=True)  # fmt: skip
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def score_peer(s, a_dir: Path, b_dir: Path, out: Path, data) -> dict[str, Any]:
    """What the peer's output weights say: units in place, its function, the barrier."""
    got = import_checkpoint(out)
    a_back, b_back = import_checkpoint(a_dir), import_checkpoint(b_dir)
    spec = spec_for(s.cfg)
    placed = units_in_place(spec, s.a, got.params)
    families: dict[str, list[int]] = {}
    for var, (k, n) in placed.items():
        tally = families.setdefault(spec.variables[var].family, [0, 0])
        tally[0], tally[1] = tally[0] + k, tally[1] + n
    return {
        "in_place": sum(k for k, _ in placed.values()) / max(sum(n for _, n in placed.values()), 1),
        "in_place_by_family": {f: k / n for f, (k, n) in families.items()},
        "function_check": function_check(b_back.cfg, b_back.params, got.cfg, got.params),
        "barrier_loss": barrier_between(a_back.cfg, a_back.params, got.params, data)[0],
    }


def run_model(name: str, args: argparse.Namespace, env: dict[str, str] | None,
              startup: float) -> list[dict[str, Any]]:  # fmt: skip
    work = Path(args.work) / Path(name).name
    work.mkdir(parents=True, exist_ok=True)
    if name in BUILT:
        source = work / "source"
        if not source.exists():
            build(name, source)
        text = work / "text.txt"
        text.write_text(TEXT)
    else:
        source, text = Path(name), args.text
        if text is None:
            raise SystemExit(f"{name}: give --text FILE for its barrier")
    a = import_checkpoint(source)
    spec = DataSpec(text=str(text), n_ctx=min(128, a.cfg.n_ctx), max_windows=16)
    data = Source(str(source), data=spec).data_of(a)
    admitted = levels_of(a.cfg)
    rows = []
    for level in args.groups or DEFAULT_LEVELS:
        row: dict[str, Any] = {"model": name, "level": level}
        rows.append(row)
        if level not in admitted:
            row["note"] = "not admitted by the architecture"
            continue
        s = scramble(a.cfg, a.params, level, args.draw)
        ours = align_back(s, data=data)
        row.update({"scramble_check": s.check, "ours_recovered": ours.recovered,
                    "ours_in_place": ours.in_place, "ours_barrier": ours.barrier_loss,
                    "ours_check": ours.function_check,
                    "ours_seconds": ours.seconds})  # fmt: skip
        print(f"{name} {level}: ours {ours.recovered:.3f} in {ours.seconds:.2f} s", flush=True)
        if env is None:
            row["note"] = "peer not run: " + MISSING
            continue
        here = work / level
        shutil.rmtree(here, ignore_errors=True)
        here.mkdir()
        try:
            export_hf(s.cfg, s.a, source, here / "a")
            export_hf(s.cfg, s.b, source, here / "b")
        except LandscapeError as e:  # a format that cannot hold the processed model
            row["note"] = f"peer not run: {e}"
            continue
        peer = run_peer(env, here / "a", here / "b", here / "out", startup, here / "peer.log")
        if not peer["ok"]:
            row["note"] = f"peer {peer['note']}"
            continue
        got = score_peer(s, here / "a", here / "b", here / "out", data)
        row.update({"peer_in_place": got["in_place"], "peer_check": got["function_check"],
                    "peer_in_place_by_family": got["in_place_by_family"],
                    "peer_barrier": got["barrier_loss"],
                    "peer_seconds": peer["seconds"],
                    "peer_wall_seconds": peer["wall_seconds"]})  # fmt: skip
        print(f"{name} {level}: peer in place {got['in_place']:.3f}, {peer['seconds']} s",
              flush=True)  # fmt: skip
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    def f(v: Any, spec: str = ".3g") -> str:
        return "–" if v is None else format(v, spec)

    head = (
        f"{'model':10} {'level':12} {'ours rec':>8} {'in place':>8} {'barrier':>9} "
        f"{'s':>7} | {'peer in place':>13} {'Δlogits':>9} {'barrier':>9} {'s':>7}  note"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['model'][:10]:10} {r['level']:12} {f(r.get('ours_recovered'), '.3f'):>8} "
            f"{f(r.get('ours_in_place'), '.3f'):>8} {f(r.get('ours_barrier')):>9} "
            f"{f(r.get('ours_seconds'), '.2f'):>7} | {f(r.get('peer_in_place'), '.3f'):>13} "
            f"{f(r.get('peer_check')):>9} {f(r.get('peer_barrier')):>9} "
            f"{f(r.get('peer_seconds'), '.2f'):>7}  {r.get('note', '')}"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True, help="folder for the written models and results")
    p.add_argument("--peer", help="checkout of mergekit with its aligner (rope-alignment)")
    p.add_argument("--peer-path", nargs="*", default=[], help="more import paths for the peer")
    p.add_argument(
        "--models",
        nargs="+",
        default=list(BUILT),
        help="built-in tiny models (gpt2, llama, llama-gqa) or Hugging Face dirs",
    )
    p.add_argument("--groups", nargs="+", choices=LEVELS, help="levels (default: all five)")
    p.add_argument("--draw", type=int, default=0, help="seed of the planted elements")
    p.add_argument("--text", help="text file for a Hugging Face directory's barrier")
    args = p.parse_args()
    torch.set_num_threads(1)
    env = peer_env(args)
    startup = peer_startup(env) if env is not None else 0.0
    if env is None:
        print(MISSING, flush=True)
    else:
        print(f"peer start-up (--help, median of 3): {startup:.2f} s", flush=True)
    rows = [r for name in args.models for r in run_model(name, args, env, startup)]
    print(table(rows))
    out = Path(args.work) / "recover_side_by_side.json"
    out.write_text(json.dumps({"rows": rows, "peer_startup_seconds": startup,
                               "peer": args.peer, "draw": args.draw}, indent=1))  # fmt: skip
    print(f"written: {out}")


if __name__ == "__main__":
    main()
