"""Build what ships (``python -m landscape.assets``): the zoo checkpoints in ``assets/zoo``
(:mod:`landscape.assets.checkpoints`); with ``--results`` the pages' default views of the zoo's
transformer entries in ``assets/results`` (:mod:`landscape.assets.results`); ``--check-results``
says which shipped results today's requests no longer reach; ``--readme`` and ``--home`` redraw
the figures that ship as data (:mod:`landscape.assets.figures`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from landscape.assets.checkpoints import DEFAULT_SEEDS, build, verify
from landscape.assets.figures import home_curves, home_curves_path, readme_figure
from landscape.assets.results import build_results, check_results, unlisted_results
from landscape.assets.views import (
    ABLATION_VIEW,
    RESULT_MODELS,
    TABLE_MODELS,
    TABLE_VIEW,
    VIEWS,
    describe,
)
from landscape.store.cache import SHIPPED_DIGESTS
from landscape.store.paths import assets_root, shipped_results_root


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m landscape.assets",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(DEFAULT_SEEDS))
    ap.add_argument("--out", type=Path, help="the folder built into (default assets/zoo; with "
                    "--results and --check-results, assets/results)")  # fmt: skip
    ap.add_argument("--readme", action="store_true", help="only redraw the README figure")
    ap.add_argument("--home", action="store_true", help="only recompute the app's Home curves")
    ap.add_argument(
        "--results",
        action="store_true",
        help="compute the pages' default views of the models (default: the zoo's "
        "transformer entries) and ship their results in assets/results",
    )
    ap.add_argument(
        "--views",
        nargs="+",
        choices=[*VIEWS, ABLATION_VIEW, TABLE_VIEW],
        default=list(VIEWS),
        help="with --results: the pages whose default views are built (ablation: the Llama "
        "ablation's entries as measured in the --work cache; table: the Table 2 cells of "
        f"{', '.join(TABLE_MODELS)}, hours of learned matching; neither by default)",
    )
    ap.add_argument(
        "--ablation-seeds",
        type=int,
        nargs="+",
        help="with --views ablation: the seeds of every entry (default: its first three trained "
        "and its first two, the set the page falls back on)",
    )
    ap.add_argument(
        "--work",
        type=Path,
        help="with --results: the cache the views are computed in, kept (an "
        "interrupted build resumes); default a temporary one",
    )
    ap.add_argument(
        "--reuse",
        type=Path,
        nargs="?",
        const=True,
        help="with --results: answer requests from the verified entries of a results folder "
        "(default, with no folder named: the one built into) before computing them",
    )
    ap.add_argument(
        "--check-results",
        action="store_true",
        help="say which shipped results today's requests no longer reach",
    )
    ap.add_argument("--verify", action="store_true",
                    help="retrain the shipped checkpoints and record this machine's kernels "
                         "where the weights come out bit for bit")  # fmt: skip
    args = ap.parse_args()
    if args.readme:
        print(readme_figure(assets_root() / "readme" / "lmc.png"))
        return
    if args.home:
        print(home_curves(home_curves_path()))
        return
    if args.results:
        if args.models != list(DEFAULT_SEEDS):
            models = args.models
        else:  # the entries each view has
            from landscape.experiments.barriers.ablation import STEPS

            of_view = {ABLATION_VIEW: [name for name, _ in STEPS], TABLE_VIEW: TABLE_MODELS}
            models = list(dict.fromkeys(
                m for v in args.views for m in of_view.get(v, RESULT_MODELS)))
        out = args.out or shipped_results_root()
        reuse = out if args.reuse is True else args.reuse
        # the package's digest list describes the shipped folder alone
        shipped = out.resolve() == shipped_results_root().resolve()
        seeds = tuple(args.ablation_seeds) if args.ablation_seeds else None
        build_results(models, out, tuple(args.views), args.work, reuse,
                      digests=SHIPPED_DIGESTS if shipped else None,
                      ablation_seeds=seeds)  # fmt: skip
        return
    if args.check_results:
        out = args.out or shipped_results_root()
        stale = check_results(out)
        for r in stale:
            print(f"{describe(r)}: {r['why']}")
        print(f"{len(stale)} shipped result(s) not reached")
        unlisted = unlisted_results(out) if out.resolve() == shipped_results_root().resolve() \
            else []
        for line in unlisted:
            print(line)
        if unlisted:
            print(f"{len(unlisted)} shipped result(s) not served as shipped: rebuild them "
                  "(--results --reuse)")  # fmt: skip
        raise SystemExit(1 if stale or unlisted else 0)
    if args.verify:
        verify(args.models, args.out or assets_root() / "zoo")
        return
    build({m: DEFAULT_SEEDS[m] for m in args.models}, args.out or assets_root() / "zoo")


if __name__ == "__main__":
    main()
