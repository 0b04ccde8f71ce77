"""A large Llama pair through ``landscape pair-barrier``: peak memory and time (issue #18).

    .venv/bin/python bench/bench_big.py [--layers 22] [--dir /work/big_tmp] [--limit-gb 20]

Makes two Llama checkpoints of TinyLlama's configuration (d_model 2048, 32 heads, 4 KV heads,
d_mlp 5632, vocabulary 32000, RMSNorm, RoPE, SwiGLU; ``--layers`` of them, 22 for the full 1.1B
parameters): A initialised from seed 0, B a fine-tune stand-in, A plus ``--noise`` (default 0.1)
times each parameter's standard deviation in Gaussian noise drawn from seed 1 (``--noise 0``: B
initialised from seed 1 instead), each built and saved on its own in float32 safetensors, so
making them holds one model at a time. Then it runs ``landscape pair-barrier A B --method weight
--group orth --points 5 --n-ctx 64 --max-windows 16`` (``--max-rounds`` passed on) in a child
process on a text file (this repository's README by default), with an empty cache, and reports
the child's peak RSS (``ru_maxrss``), a sampled RSS timeline split into resident anonymous and
file-backed memory, and the time split into loading, matching (with its function check) and the
curve. The child is killed when its RSS passes ``--limit-gb`` (a guard for a shared machine);
the report then says so. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# TinyLlama-1.1B's configuration (its config.json), the number of layers aside
TINYLLAMA = {
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}


def make_model(path: Path, layers: int, seed: int, noise: float) -> float:
    """One random Llama saved as float32 safetensors under ``path``; returns seconds taken.

    Initialised from seed 0; ``noise`` > 0 then adds ``noise``·σ_W·N(0, 1) to every parameter W
    (σ_W its own standard deviation, 1 for a norm gain, N drawn from ``seed``): a stand-in for a
    fine-tune of the model of seed 0. ``noise`` = 0: the plain initialisation from ``seed``.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    t = time.perf_counter()
    torch.manual_seed(0 if noise > 0 else seed)
    cfg = LlamaConfig(num_hidden_layers=layers, **TINYLLAMA)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    if noise > 0:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for w in model.parameters():  # one parameter at a time
                sigma = float(w.std()) if w.ndim > 1 else 1.0
                w.add_(torch.randn(w.shape, generator=gen), alpha=noise * sigma)
    # shards of 1 GB: the writer serialises one shard at a time
    model.save_pretrained(path, safe_serialization=True, max_shard_size="1GB")
    return time.perf_counter() - t


def make_pair(root: Path, layers: int, noise: float) -> tuple[Path, Path]:
    """A (seed 0) and B (seed 1: A plus noise, or with ``noise`` 0 its own initialisation), each
    made in its own process (one model in memory at a time); kept when already there."""
    tag = f"n{noise:g}" if noise > 0 else "seed"
    dirs = (root / f"llama{layers}_a", root / f"llama{layers}_b_{tag}")
    for seed, d in enumerate(dirs):
        if (d / "config.json").is_file():
            continue
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); from bench.bench_big import make_model; "
            "from pathlib import Path; "
            "print(make_model(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), "
            "float(sys.argv[5])))"
        )
        args = [str(ROOT), str(d), str(layers), str(seed), str(noise if seed else 0.0)]
        out = subprocess.run([sys.executable, "-c", code, *args], check=True,
                             capture_output=True, text=True)  # fmt: skip
        print(f"made {d.name} in {float(out.stdout.split()[-1]):.0f} s", flush=True)
    return dirs


def _rss(pid: int) -> tuple[int, int] | None:
    """(resident anonymous, resident file-backed) bytes of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    kb = [int(fields.get(k, "0 kB").split()[0]) for k in ("RssAnon", "RssFile")]
    return kb[0] * 1024, kb[1] * 1024


def run_pair(a: Path, b: Path, text: Path, cache: Path, limit_gb: float, log: Path,
             cli: str, max_rounds: int | None) -> dict:  # fmt: skip
    """``landscape pair-barrier`` on the pair in a child; its JSON plus memory and time."""
    cmd = [cli, "pair-barrier", str(a), str(b), "--method", "weight", "--group", "orth",
           "--points", "5", "--n-ctx", "64", "--max-windows", "16", "--text", str(text),
           "--json"]  # fmt: skip
    if max_rounds is not None:
        cmd += ["--max-rounds", str(max_rounds)]
    env = {**os.environ, "LANDSCAPE_CACHE": str(cache), "LANDSCAPE_THREADS": "2"}
    t0 = time.perf_counter()
    with open(log, "w") as err:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        timeline = []
        killed = False
        while child.poll() is None:
            got = _rss(child.pid)
            if got is not None:
                timeline.append((round(time.perf_counter() - t0, 1), *got))
                if sum(got) > limit_gb * 2**30:
                    child.kill()
                    killed = True
            time.sleep(0.5)
        out = child.stdout.read()
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # kB → GB
    result = json.loads(out) if child.returncode == 0 and out.strip() else {}
    top = max(timeline, key=lambda r: r[1] + r[2]) if timeline else (0, 0, 0)
    return {
        "returncode": child.returncode,
        "killed_at_limit": killed,
        "wall_s": round(wall, 1),
        "peak_rss_gb": round(peak, 2),
        "sampled_peak": {
            "t_s": top[0],
            "anon_gb": round(top[1] / 2**30, 2),
            "file_gb": round(top[2] / 2**30, 2),
        },  # fmt: skip
        "timeline": [(t, round(x / 2**30, 2), round(y / 2**30, 2)) for t, x, y in timeline[::10]],
        "result": result,
    }


def summary(r: dict) -> str:
    """Lines for the report: memory, time split, barrier and checks."""
    lines = [f"peak RSS {r['peak_rss_gb']:.2f} GB (sampled peak at {r['sampled_peak']['t_s']} s: "
             f"{r['sampled_peak']['anon_gb']} GB anonymous + {r['sampled_peak']['file_gb']} GB "
             f"file-backed); wall {r['wall_s']:.0f} s; exit {r['returncode']}"
             + ("; killed at the limit" if r["killed_at_limit"] else "")]  # fmt: skip
    res = r["result"]
    if res:
        total, compute = res["seconds"], res["compute_seconds"]
        match = res["matching"]["seconds"]
        lines.append(f"time: load {total - compute:.0f} s, matching {match:.0f} s "
                     f"({res['matching']['rounds']} rounds), curve {compute - match:.0f} s, "
                     f"all {total:.0f} s")  # fmt: skip
        lines.append(f"barrier loss {res['barrier_loss']:.4f}, accuracy "
                     f"{res['barrier_accuracy']:.4f}; endpoint loss {res['endpoint_loss']}; "
                     f"function check {res['function_check']:.2e} (A: "
                     f"{res['function_check_a']:.2e}); {res['parameters']} parameters, "
                     f"{res['windows']} windows")  # fmt: skip
    return "\n".join(lines)


def measure(
    layers: int = 22,
    root: Path = Path("/work/big_tmp"),
    text: Path = ROOT / "README.md",
    *,
    limit_gb: float = 20.0,
    max_rounds: int | None = None,
    noise: float = 0.1,
    keep: bool = False,
    cli: str = str(Path(sys.executable).parent / "landscape"),
    tag: str = "",
) -> dict:
    """Make the pair under ``root`` (module docstring), measure it and write
    ``pair{layers}{tag}.json`` and the child's stderr log there; the checkpoints are removed
    afterwards unless ``keep``."""
    root.mkdir(parents=True, exist_ok=True)
    a, b = make_pair(root, layers, noise)
    cache = root / f"cache{layers}{tag}"
    shutil.rmtree(cache, ignore_errors=True)
    name = f"pair{layers}{tag}"
    r = run_pair(a, b, text, cache, limit_gb, root / f"{name}.stderr.log", cli, max_rounds)
    shutil.rmtree(cache, ignore_errors=True)
    if not keep:
        shutil.rmtree(a), shutil.rmtree(b)
    (root / f"{name}.json").write_text(json.dumps(r, indent=1))
    return r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=22, help="Llama layers (22: 1.1B parameters)")
    p.add_argument("--dir", default="/work/big_tmp", help="where the pair and logs are written")
    p.add_argument("--text", default=str(ROOT / "README.md"), help="evaluation text")
    p.add_argument("--limit-gb", type=float, default=20.0, help="kill the child above this RSS")
    p.add_argument("--keep", action="store_true", help="keep the checkpoints afterwards")
    p.add_argument("--max-rounds", type=int, help="cap on weight-matching rounds")
    p.add_argument(
        "--cli",
        default=str(Path(sys.executable).parent / "landscape"),
        help="the landscape command to measure (e.g. another checkout's)",
    )
    p.add_argument("--noise", type=float, default=0.1,
                   help="B = A + noise·σ_W·N(0, 1) per parameter (0: B its own seed)")  # fmt: skip
    p.add_argument("--tag", default="", help="suffix of the log and result file names")
    args = p.parse_args()
    r = measure(args.layers, Path(args.dir), Path(args.text), limit_gb=args.limit_gb,
                max_rounds=args.max_rounds, noise=args.noise, keep=args.keep, cli=args.cli,
                tag=args.tag)  # fmt: skip
    print(summary(r))


if __name__ == "__main__":
    main()
