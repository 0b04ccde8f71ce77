"""What one learned-matching step asks of the host: the CPU-side proxies of its GPU cost.

    .venv/bin/python bench/bench_learned_proxies.py [--model gpt-shakespeare-d128-drop0.3]
        [--group orth] [--root CHECKOUT]

On a GPU a step costs its kernel launches and every wait for the device: a scalar read
(``.item()``, ``float(t)``, ``bool(t)``: ``aten::_local_scalar_dense``) or a copy between host
and device (``aten::_to_copy`` with a device named). On the CPU the same operations run, so
counting them counts what the step would ask of a GPU. Every ATen operation of the run is
counted by a dispatch mode (the backward pass included), for ``steps`` = 10 and 30 with scoring
off in between; the difference over 20 is the cost of one step (setup, the start and the last
scoring cancel). ``--root`` imports ``landscape`` from another checkout (the code before a
change), so both can be printed side by side.

What the counts cannot tell on the CPU: a scalar read of a tensor that lives on the host (the
λ draw from a CPU generator, Adam's step counters) waits for nothing on a GPU either, and a
copy to the CPU of what is there already in the right dtype is no operation at all.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", default="gpt-shakespeare-d128-drop0.3")
parser.add_argument("--group", default="orth")
parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
args = parser.parse_args()
sys.path.insert(0, args.root)

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from landscape.matching import learned_matching, weight_matching  # noqa: E402
from landscape.sources import Source, data_of  # noqa: E402


class Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        self.ops["all"] += 1
        if name == "aten._local_scalar_dense":
            self.ops["scalar reads"] += 1
        elif name in ("aten._to_copy", "aten.to") and "device" in kwargs:
            self.ops["device copies"] += 1
        return func(*args, **kwargs)


def main() -> None:
    torch.set_num_threads(1)
    a, b = Source(args.model, 0).load(), Source(args.model, 1).load()
    train = data_of(a).split("train")
    start = weight_matching(a.cfg, a.params, b.params, args.group).transform
    counts = {}
    for steps in (10, 30):
        kw = {"steps": steps, "eval_every": 10**6}
        try:  # the code after the change starts from a given weight matching
            learned_matching(a.cfg, a.params, b.params, args.group, train, start=start, steps=1)
            kw["start"] = start
        except TypeError:
            pass
        with Count() as c:
            learned_matching(a.cfg, a.params, b.params, args.group, train, **kw)
        counts[steps] = c.ops
    per = {k: (counts[30][k] - counts[10][k]) / 20 for k in counts[30]}
    print(f"learned/{args.group} on {args.model} 0-1, landscape from {args.root}")
    print(f"  aten operations per step: {per['all']:.0f}")
    print(f"  host waits per step: scalar reads {per.get('scalar reads', 0):.1f}, "
          f"copies between host and device {per.get('device copies', 0):.1f}")


if __name__ == "__main__":
    main()
