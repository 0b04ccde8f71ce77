"""Side by side with the reference implementation on one GPT-2 pair in its own setting.

    python bench/official_side_by_side.py --official DIR --official-python PY --work DIR
        [--seeds 0 1] [--train-steps 1500] [--learned-steps 300] [--jobs 2]

``--official`` is a fetched copy of the public reference code; ``--official-python`` an
interpreter with its pinned libraries (its requirements file). Nothing of that code is copied
here: ``bench/official_driver.py`` runs under that interpreter and calls its scripts.

1. The reference side trains seeds 0 and 1 (``--seeds A B``: another pair, in a ``--work``
   of its own) with its own training script (Hugging Face GPT-2, 2 layers, width 64, 4 heads,
   MLP 256, LayerNorm, windows of 256 characters, batch 32, ``--train-steps`` steps) on its
   contiguous 90/5/5 split of Tiny Shakespeare, with a 65-character tokenizer.
2. Landscape imports the two checkpoints as a family (``landscape family add``) on a text whose
   last tenth is exactly the reference test split (the family's test split), checks that the
   family's test windows are the test split's characters, and measures every method in both
   merge spaces with ``landscape barrier --points 11 --threads 1 --json``.
3. The reference merger measures naive, weight and learned matching (permutations and
   rotations; learned for ``--learned-steps`` steps, batch 32), 11 points on λ, test split, in
   its own merge space (every head as its QK and OV circuits). Its alignment is then read back
   from the merger and measured on the straight line between the factored weights too, so
   both tools appear in both spaces.

Prints one table (test-loss barriers; endpoint losses; matching seconds) and writes it with
every raw result to ``<work>/side_by_side.json``. Each finished stage is kept in ``--work`` and
not re-run. The two tools' test sets differ only in windowing: the reference code cuts the test
split into 256-character windows and predicts 255 characters of each, Landscape cuts 255-input
windows whose targets run on by one, so endpoint losses agree to a few thousandths, not exactly.
Nothing here asserts a time or a value.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METHODS = [  # (method, group) in the order of the paper's Table 2
    ("naive", "perm"),
    ("activation", "perm"),
    ("weight", "perm"),
    ("weight", "orth"),
    ("learned", "perm"),
    ("learned", "orth"),
]
REFERENCE = {
    ("naive", "perm"),
    ("weight", "perm"),
    ("weight", "orth"),
    ("learned", "perm"),
    ("learned", "orth"),
}


def _run(cmd: list[str], log: Path, out: Path | None = None) -> None:
    """Run ``cmd`` with its output in ``log``; with ``out``, its standard output goes to
    ``out`` instead, written whole or not at all."""
    part = out.with_suffix(".part") if out is not None else None
    with open(log, "w") as f:
        if part is None:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        else:
            with open(part, "w") as o:
                r = subprocess.run(cmd, stdout=o, stderr=f, cwd=ROOT)
    if r.returncode:
        tail = log.read_text()[-2000:]
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}); the end of {log}:\n{tail}")
    if part is not None:
        part.replace(out)


def _driver(args, *stage: str) -> list[str]:
    driver = str(ROOT / "bench" / "official_driver.py")
    return [args.official_python, driver, "--official", args.official, "--work", args.work,
            "--seeds", *map(str, args.seeds), *stage]  # fmt: skip


LANDSCAPE = [sys.executable, "-m", "landscape.cli"]


def _family_text(work: Path, official: Path) -> Path:
    """The last 9 test-lengths of the train split, then the test split: the family's test
    split (its last tenth) is exactly the reference test split."""
    meta = json.loads((work / "splits" / "split_metadata.json").read_text())
    text = (official / "tinyshakespeare.txt").read_text(encoding="utf-8")
    n_test, n_train = meta["test_chars"], meta["train_chars"]
    train, test = text[:n_train], text[len(text) - n_test :]
    out = work / "family_text.txt"
    out.write_text(train[-9 * n_test :] + test, encoding="utf-8")
    return out


def _check_family(name: str, work: Path, official: Path) -> int:
    """The family's test windows are the reference test split's characters, in its ids."""
    import torch

    from landscape.sources import Source

    src = Source(name, 0)
    test = src.data_of(src.load()).split("test")
    meta = json.loads((work / "splits" / "split_metadata.json").read_text())
    text = (official / "tinyshakespeare.txt").read_text(encoding="utf-8")
    chars = sorted(set(text))
    want = torch.tensor([chars.index(c) for c in text[len(text) - meta["test_chars"] :]])
    n, ctx = test.inputs.shape
    if not torch.equal(test.inputs.reshape(-1), want[: n * ctx]):
        raise SystemExit("the family's test windows are not the reference test split")
    return n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--official", required=True)
    p.add_argument("--official-python", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--family", default="gpt2-official")
    p.add_argument("--seeds", type=int, nargs=2, default=[0, 1], metavar=("A", "B"))
    p.add_argument("--train-steps", type=int, default=1500)
    p.add_argument("--learned-steps", type=int, default=300)
    p.add_argument("--jobs", type=int, default=2, help="commands at a time, one thread each")
    args = p.parse_args()
    from landscape.matching import aligns, matching_key, method_of  # the methods' facts

    args.official = str(Path(args.official).resolve())
    work = Path(args.work).resolve()
    args.work = str(work)
    work.mkdir(parents=True, exist_ok=True)
    pool = ThreadPoolExecutor(args.jobs)

    def stage(name: str, cmd: list[str], out: Path, stdout: bool = False):
        if out.is_file():
            return pool.submit(lambda: None)

        def go():
            t = time.perf_counter()
            _run(cmd, work / f"{name}.log", out if stdout else None)
            print(f"{name}: {time.perf_counter() - t:.0f} s", flush=True)

        return pool.submit(go)

    if not (work / "prepare.json").is_file():
        _run(_driver(args, "prepare"), work / "prepare.log")
    for f in [
        stage(
            f"train-seed{s}",
            _driver(args, "train", "--seed", str(s), "--steps", str(args.train_steps)),
            work / f"train-seed{s}.json",
        )
        for s in args.seeds
    ]:
        f.result()

    text = _family_text(work, Path(args.official))
    seeds = [str(work / f"seed{s}") for s in args.seeds]  # the family's members 0 and 1
    add = ["family", "add", args.family, *seeds, "--text", str(text), "--n-ctx", "255",
           "--max-windows", "2048", "--replace"]  # fmt: skip
    _run(LANDSCAPE + add, work / "family.log")
    windows = _check_family(args.family, work, Path(args.official))

    jobs = {}
    for method, group in METHODS:
        if (method, group) in REFERENCE:
            out = work / f"merge-{method}-{group}.json"
            cmd = ["merge", "--method", method, "--group", group, "--steps",
                   str(args.learned_steps)]  # fmt: skip
            job = stage(f"reference-{method}-{group}", _driver(args, *cmd), out)
            jobs[("reference", method, group)] = (out, job)
        for space in ("circuits", "weights"):
            out = work / f"ours-{method}-{group}-{space}.json"
            cmd = ["barrier", args.family, "--seeds", "0", "1", "--method", method, "--group",
                   group, "--space", space, "--points", "11", "--threads", "1",
                   "--json"]  # fmt: skip
            if method_of(method).learned:
                cmd += ["--learned-steps", str(args.learned_steps)]
            job = stage(f"ours-{method}-{group}-{space}", LANDSCAPE + cmd, out, stdout=True)
            jobs[("ours", method, group, space)] = (out, job)
    for _out, job in jobs.values():
        job.result()
    for method, group in sorted(REFERENCE - {("naive", "perm")}):  # needs the merger's output
        out = work / f"merge-{method}-{group}-weights.json"
        cmd = _driver(args, "factored", "--method", method, "--group", group)
        jobs[("reference-weights", method, group)] = (out, stage(f"{out.stem}", cmd, out))
    results = {}
    for key, (out, job) in jobs.items():
        job.result()
        results["/".join(key)] = json.loads(out.read_text())

    trained = [json.loads((work / f"train-seed{s}.json").read_text()) for s in args.seeds]
    print()
    print(
        f"GPT-2 pair in the reference setting: {args.train_steps} training steps, seeds "
        f"{args.seeds[0]} and {args.seeds[1]}, reference test loss "
        f"{trained[0]['test_loss']:.4f} / {trained[1]['test_loss']:.4f};"
        f" Landscape's family test split: {windows} windows of 255"
    )
    print(
        f"test-loss barrier, 11 points on λ; learned: {args.learned_steps} steps, batch 32 windows"
    )
    print(
        "| method | reference: circuits | reference: weights | Landscape: circuits | "
        "Landscape: weights | Landscape weights / circuits | matching s: reference / ours "
        "(weights, circuits) |"
    )
    print("|" + "---|" * 7)
    rows = []
    for method, group in METHODS:
        label = matching_key(method, group)
        ref = results.get(f"reference/{method}/{group}")
        if not aligns(method):  # the reference's naive line is the plain parameter average
            ref, ref_w = None, ref
        else:
            ref_w = results.get(f"reference-weights/{method}/{group}")
        c = results[f"ours/{method}/{group}/circuits"]
        w = results[f"ours/{method}/{group}/weights"]
        r, rw = (x["max_barrier"] if x else None for x in (ref, ref_w))
        ratio = w["barrier_loss"] / c["barrier_loss"] if c["barrier_loss"] > 0 else float("nan")
        secs = "–"
        if aligns(method):
            secs = (f"{ref['seconds']:.1f}" if ref else "–") + (
                f" / {w['matching_seconds']:.1f}, {c['matching_seconds']:.1f}"
            )
        cells = ["–" if x is None else f"{x:.4f}" for x in (r, rw)]
        print(
            f"| {label} | {cells[0]} | {cells[1]} | {c['barrier_loss']:.4f} | "
            f"{w['barrier_loss']:.4f} | {ratio:.2f} | {secs} |"
        )
        rows.append(
            {
                "method": label,
                "reference_circuits": r,
                "reference_weights": rw,
                "circuits": c["barrier_loss"],
                "weights": w["barrier_loss"],
                "weights_accuracy": w["barrier_accuracy"],
                "circuits_accuracy": c["barrier_accuracy"],
                "function_check": max(c["function_check"], w["function_check"]),
            }
        )
    print(
        "reference: circuits is its merger (every head rewritten as its QK and OV circuits); "
        "weights is the same alignment, read back from the merger, on the line between the "
        "factored weights (naive: its plain parameter average); its learned seconds include "
        "its validation passes every 50 steps"
    )
    ends_ref = results["reference/naive/perm"]["coeff_losses"]
    ends = results["ours/naive/perm/weights"]["endpoint_loss"]
    print(
        f"\nendpoint test losses (A, B): reference {ends_ref['1.000000']:.4f}, "
        f"{ends_ref['0.000000']:.4f}; Landscape {ends[0]:.4f}, {ends[1]:.4f}"
    )
    (work / "side_by_side.json").write_text(
        json.dumps({"rows": rows, "trained": trained, "results": results}, indent=2)
    )
    print(f"wrote {work / 'side_by_side.json'}")


if __name__ == "__main__":
    main()
