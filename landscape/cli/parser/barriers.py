"""The parsers of the commands that measure the loss between models: along the straight line
(``barrier``, ``table``, ``matrix``, ``controls``, ``widths``, ``pair-barrier``, ``ablation``,
``kv-sharing``), beside it (``curve``, ``spawn``), its curvature (``curvature``) and over a plane
(``triangle``, ``surface``).
"""

from __future__ import annotations

import argparse
import math

from landscape.cli.parser.arguments import (
    CURVATURE_BATCH,
    CURVATURE_DTYPES,
    CURVATURE_POINTS,
    CURVATURE_PROBES,
    CURVATURE_TOP_K,
    CURVE_BENDS,
    CURVE_KINDS,
    CURVE_MAX_BENDS,
    CURVE_STEPS,
    GROUP_HELP,
    METHOD_HELP,
    MODEL_HELP,
    PAIR_HELP,
    PAIRS_HELP,
    POINTS_HELP,
    SPACE_HELP,
    SPAWN_CHILDREN,
    SPLIT_HELP,
    SURFACE_DIRECTIONS,
    _count,
    _distinct,
    _executor,
    _float_in,
    _int_at_least,
    _int_in,
    _learned_options,
    _points,
    _run_steps,
    _seed,
)
from landscape.names import BARRIER_GROUPS, METHODS, SPACES


def add_barrier(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "barrier", parents=[common], help="loss/accuracy barrier along a linear path"
    )
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("barrier"), help=PAIR_HELP)  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--calibrate", action="store_true",
                   help="fit every model's softmax temperature on a slice of A's training data "
                        "before its loss is measured: the barrier no temperature removes")
    _learned_options(p)


def add_curve(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "curve", parents=[common],
        help="a curved low-loss path (Bézier curve or polygonal chain) beside the straight line",
        description="Between A and B, naive and aligned by --method/--group: a curve whose "
        "control points (--bends of them, started on the line) are trained on the training "
        "split with A and B fixed, each step at a uniformly drawn point of the curve; its loss "
        "and accuracy on the --split at the line's λ, and both barriers beside the straight "
        "line's, against the same chord. bezier: φ(t) = (1−t)²A + 2t(1−t)θ + t²B for one bend; "
        "chain: the polygon A → θ → B. An untrained curve (--steps 0) is the straight line.",
    )  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("curve"), help=PAIR_HELP)  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--kind", choices=CURVE_KINDS, default="bezier",
                   help="bezier (a Bézier curve, pulled towards its control points) or chain "
                        "(straight pieces through them)")  # fmt: skip
    p.add_argument("--bends", type=_int_in(1, CURVE_MAX_BENDS), default=CURVE_BENDS,
                   help="control points between A and B")  # fmt: skip
    p.add_argument("--steps", type=_run_steps(0), default=CURVE_STEPS,
                   help="training steps of the control points (0: the straight line)")  # fmt: skip
    p.add_argument("--lr", type=_float_in(0.0, 1.0, open_low=True),
                   help="Adam's learning rate, cosine-decayed to 0 (default: the model's "
                        "training recipe's)")  # fmt: skip
    p.add_argument("--train-seed", type=_seed, default=0,
                   help="seed of the drawn curve points and minibatches")  # fmt: skip
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    _learned_options(p)


def add_curvature(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "curvature", parents=[common],
        help="top Hessian eigenvalues and trace at points along the line, naive and aligned",
        description="At λ = 0, ½ and 1 of the straight line between A and B (more with "
        "--points), naive and aligned by --method/--group as `landscape barrier` aligns them: "
        "the --top-k largest eigenvalues of the loss's Hessian (Lanczos on Hessian-vector "
        "products, never the whole Hessian) and its trace (Hutchinson, Rademacher probes, with "
        "its standard error), on a fixed batch of rows of the --split drawn by --batch-seed. "
        "--per-block adds each block's top eigenvalue (the Hessian restricted to its "
        "parameters). The batch runs in chunks that fit the memory budget "
        "($LANDSCAPE_MEMORY_GB).",
    )  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   action=_distinct("curvature"), help=PAIR_HELP)  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--top-k", type=_count, default=CURVATURE_TOP_K,
                   help="largest Hessian eigenvalues at each point")  # fmt: skip
    p.add_argument("--points", type=_points, default=CURVATURE_POINTS,
                   help=POINTS_HELP + " (3: the endpoints and the midpoint)")  # fmt: skip
    p.add_argument("--probes", type=_int_at_least(0), default=CURVATURE_PROBES,
                   help="Rademacher probes of Hutchinson's trace estimate (0: no trace)")
    p.add_argument("--per-block", action="store_true",
                   help="also the top eigenvalue of each block's Hessian (its parameters alone) "
                        "and of the parameters outside the blocks")  # fmt: skip
    p.add_argument("--batch", type=_count,
                   help=f"rows of the split the loss is taken on (default: "
                        f"{CURVATURE_BATCH['windows']} windows of a text, "
                        f"{CURVATURE_BATCH['rows']} examples else)")  # fmt: skip
    p.add_argument("--batch-seed", type=_seed, default=0,
                   help="seed of the batch's rows, Lanczos' start vector and the probes")
    p.add_argument("--split", choices=["test", "train"], default="train", help=SPLIT_HELP)
    p.add_argument("--dtype", choices=CURVATURE_DTYPES, default="float32",
                   help="precision of the Hessian-vector products")  # fmt: skip
    _learned_options(p)


def add_spawn(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "spawn", parents=[common],
        help="children spawned from a common parent at step k: their barrier against k",
        description="The zoo run of --seed (the parent) is trained once with a snapshot every "
        "--every steps (parameters and optimizer state, cached). From the snapshot at each step "
        "of --at, --children runs go on to the recipe's last step, each with its own data "
        "order; every pair of them is measured along the straight line, naive and aligned by "
        "--method/--group (loss and accuracy barrier on the --split). Spawned at the last step "
        "the children are the parent, with barrier 0.",
    )  # fmt: skip
    p.add_argument("model", help="zoo model")
    p.add_argument("--at", type=_int_at_least(0), nargs="+", required=True, metavar="K",
                   help="spawn steps: multiples of --every, up to the run's last step")  # fmt: skip
    p.add_argument("--seed", type=_seed, default=0, help="seed of the parent run")
    p.add_argument("--children", type=_int_in(2, 8), default=SPAWN_CHILDREN,
                   help="children per spawn step (every pair of them is measured)")  # fmt: skip
    p.add_argument("--every", type=_int_at_least(1),
                   help="steps between the parent's snapshots (default: a fiftieth of the "
                        "run)")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)


def add_triangle(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("triangle", parents=[common], help="loss over a three-model triangle")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs=3, required=True, metavar=("A", "B", "C"),
                   action=_distinct("barrier"),
                   help="models A, B and C (seeds or member numbers); B and C are aligned to "
                        "A")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="orth", help=GROUP_HELP)
    p.add_argument("--resolution", type=_count, default=10,
                   help="grid steps along each edge: (r + 1)(r + 2)/2 points")  # fmt: skip
    p.add_argument("--tol", type=_float_in(0, math.inf), default=0.05,
                   help="basin tolerance above the chord (nats)")  # fmt: skip
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--joint", action="store_true",
                   help="with --method learned: align B and C together over the whole "
                        "triangle (mixtures drawn on the simplex), not edge by edge")  # fmt: skip
    _executor(p, "the alignments and then the grid")


def add_surface(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("surface", parents=[common],
                       help="2-D loss surface: around one model along filter-normalised random "
                            "or Hessian directions, or the plane through three aligned "
                            "models")  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=_seed, help="the model the surface is drawn around")
    which.add_argument("--seeds", type=_seed, nargs=3, metavar=("A", "B", "C"),
                       action=_distinct("plane"),
                       help="the plane through models A, B and C; B and C are aligned to "
                            "A")  # fmt: skip
    p.add_argument("--method", choices=METHODS,
                   help=METHOD_HELP + " (with --seeds; default weight)")  # fmt: skip
    p.add_argument("--group", choices=BARRIER_GROUPS,
                   help=GROUP_HELP + " (with --seeds; default orth)")  # fmt: skip
    p.add_argument("--directions", choices=SURFACE_DIRECTIONS,
                   help="the two directions around the model: random (Gaussian) or hessian (the "
                        "eigenvectors of the Hessian's two largest eigenvalues there, of "
                        "`landscape curvature`'s loss on its default batch of the train split, "
                        "within the memory budget), filter-normalised either way, or trajectory "
                        "(the plane of the seed's own training path: its top two principal "
                        "directions, α and β in units of the path's reach; the run is retrained "
                        "once with snapshots) (with --seed; default random)")  # fmt: skip
    p.add_argument("--directions-seed", type=_seed,
                   help="seed of the two random directions, or with --directions hessian of the "
                        "batch's rows and Lanczos' start (with --seed; default 0)")  # fmt: skip
    p.add_argument("--extent", type=_float_in(0, 1e6, open_low=True),
                   help="α and β run from −extent to extent, in units of the filter-normalised "
                        "directions (with --seed; default 1)")  # fmt: skip
    p.add_argument("--vectors", choices=["zero", "keep"],
                   help="directions of biases, norm gains and the class token: zero (left "
                        "where they are) or keep (the parameter itself) (with --seed; default "
                        "zero)")  # fmt: skip
    p.add_argument("--margin", type=_float_in(0, 100),
                   help="how far the grid reaches past the triangle, as a fraction of its "
                        "larger side (with --seeds; default 0.2)")  # fmt: skip
    p.add_argument("--path-points", type=_points,
                   help="points along each straight path between the models (with --seeds; "
                        "default 21)")  # fmt: skip
    p.add_argument("--trajectories", type=_seed, nargs="+", metavar="S",
                   help="zoo seeds whose training paths are projected onto the surface's plane, "
                        "each with its projection error (the share of its displacement outside "
                        "the plane); each run is retrained once with snapshots, cached (with "
                        "--seed; default: the seed itself with --directions "
                        "trajectory)")  # fmt: skip
    p.add_argument("--every", type=_int_at_least(1),
                   help="steps between a path's snapshots (with --trajectories or --directions "
                        "trajectory; default: a 25th of the run)")  # fmt: skip
    p.add_argument("--resolution", type=_int_at_least(2), default=21,
                   help="grid points along each axis: resolution² points")  # fmt: skip
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)


def add_table(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("table", parents=[common], help="barrier table: methods × groups over pairs")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--pairs", type=_count, default=3, help=PAIRS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    _executor(p, "the pairs × methods × groups")
    both = SPACE_HELP + "; both: every row in each space (the Table 2 layout)"
    p.add_argument("--space", choices=[*SPACES, "both"], default="weights", help=both)
    _learned_options(p, "in the learned rows")


def add_ablation(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "ablation", parents=[common],
        help="the Llama ablation: one change at a time from the dropout GPT to the Llama entry",
        description="Where the barrier of the Llama layout lives: for the dropout GPT, each zoo "
        "entry that changes one thing of it toward llama-shakespeare-d128 (rotary positions, "
        "grouped-query attention, 8 heads of 16, SwiGLU, no biases; dropout off), the Llama "
        "layout under the dropout GPT's recipe and the Llama entry itself: naive, weight/orth "
        "and learned/orth over every pair of three seeds, in the weights and circuits spaces, "
        "with each entry's test loss. Entries not trained are trained first (on one CPU thread "
        "about 16 minutes a seed for a GPT entry, 47 for the Llama layout); every barrier is "
        "cached, so an interrupted run goes on.",
    )  # fmt: skip
    p.add_argument("--models", nargs="+", metavar="MODEL",
                   help="zoo entries to measure, in this order (default: the ablation's "
                        "entries)")  # fmt: skip
    p.add_argument("--seeds", type=_seed, nargs="+", default=[0, 1, 2], metavar="S",
                   action=_distinct("ablation"), help="seeds of every entry; every pair of them")
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--space", choices=[*SPACES, "both"], default="both",
                   help=SPACE_HELP + "; both: each row in each space")  # fmt: skip
    _learned_options(p, "in the learned rows")


def add_kv_sharing(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "kv-sharing", parents=[common],
        help="what grouped-query attention's shared keys and values cost the alignment",
        description="Every pair of --seeds of a grouped-query zoo model aligned twice: as it "
        "is (one QK and one OV map per key/value group, heads permuted with their group) and "
        "with each query head given its own copy of its group's keys and values (the same "
        "functions; the sharing relaxed). A diagnostic: the relaxed merge is a multi-head "
        "model.",
    )  # fmt: skip
    p.add_argument("model", help="zoo model with grouped-query attention")
    p.add_argument("--seeds", type=_seed, nargs="+", default=[0, 1, 2], metavar="S",
                   action=_distinct("barrier"), help="seeds; every pair of them")
    p.add_argument("--method", choices=METHODS, default="learned", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="orth", help=GROUP_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    _learned_options(p)


def add_matrix(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "matrix", parents=[common], help="loss/accuracy barrier of every pair of seeds",
        description="The seeds × seeds matrix of barriers: every pair of --seeds aligned (B, "
        "the later seed, to A) and measured along the straight line, as `landscape barrier` "
        "does and from its cache. The diagonal is each model against itself, 0.",
    )  # fmt: skip
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--seeds", type=_seed, nargs="+", required=True, metavar="S",
                   action=_distinct("barrier"),
                   help="two or more seeds (or family members): one alignment per "
                        "pair")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)


def add_controls(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("controls", parents=[common], help="real pairs against control pairs")
    p.add_argument("model", help="zoo model")
    p.add_argument("--pairs", type=_count, default=3, help=PAIRS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--points", type=_points, default=25, help=POINTS_HELP)
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--layernorm", action="store_true",
                   help="add pairs of LayerNorm variants")  # fmt: skip
    _executor(p, "the control pairs' training and the control rows")


def add_widths(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("widths", parents=[common],
                       help="barriers against narrower models (width d/k, semi-orthogonal G)",
                       description="Seed A of a zoo model (width d) against seed B of the same "
                       "recipe at width d/k for every factor k (trained on a cache miss), B "
                       "embedded into width d by a semi-orthogonal G and aligned to A; the "
                       "straight line is evaluated on A's split.")  # fmt: skip
    p.add_argument("model", help="zoo model")
    p.add_argument("--seeds", type=_seed, nargs=2, required=True, metavar=("A", "B"),
                   help="seed of A (width d) and of every narrow B")  # fmt: skip
    p.add_argument("--factors", type=_count, nargs="+",
                   help="width factors k (B has width d/k; k must divide d; default those "
                        "of 2 4 8 16 that do)")  # fmt: skip
    p.add_argument("--methods", choices=METHODS, nargs="+", default=["naive", "weight"],
                   help="matching methods, a row each (under orth)")  # fmt: skip
    p.add_argument("--points", type=_points, default=11, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--embed-seed", type=_seed, default=0, help="seed of the embedding G")


def add_pair_barrier(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "pair-barrier", parents=[common],
        help="barrier between two checkpoint paths (imported or landscape format)",
        description="Align B to A and measure the loss/accuracy barrier along "
        "λ·A + (1−λ)·π(B), λ = 1 is A. A and B are paths: Hugging Face directories "
        "(config.json + safetensors; GPT-2, Llama family, ViT), .gguf files, or landscape "
        "checkpoint directories, of one architecture (e.g. two fine-tunes of one base). "
        "Language models are evaluated by next-token loss on windows of --text FILE (A's "
        "tokenizer.json when present, else bytes or characters); ViT/MLP classifiers on "
        "--data digits|fashion. Zoo models by name and seed: use `landscape barrier`.",
    )  # fmt: skip
    p.add_argument("a", help="checkpoint A (λ = 1)")
    p.add_argument("b", help="checkpoint B, aligned to A")
    p.add_argument("--method", choices=METHODS, default="weight", help=METHOD_HELP)
    p.add_argument("--group", choices=BARRIER_GROUPS, default="perm", help=GROUP_HELP)
    p.add_argument("--text", help="UTF-8 text file for language models")
    p.add_argument("--data", choices=["digits", "fashion"], help="image data for classifiers")
    p.add_argument("--data-dir", help="directory of the Fashion-MNIST IDX files")
    p.add_argument("--points", type=_points, default=11, help=POINTS_HELP)
    p.add_argument("--split", choices=["test", "train"], default="test", help=SPLIT_HELP)
    p.add_argument("--n-ctx", type=_count, default=128, help="tokens per window")
    p.add_argument("--max-windows", type=_count, default=64, help="windows evaluated")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                   help="evaluation dtype; bfloat16 only on CUDA")  # fmt: skip
    p.add_argument("--space", choices=SPACES, default="weights", help=SPACE_HELP)
    p.add_argument("--max-rounds", type=_count, help="cap on weight-matching rounds (with "
                   "--method weight; default: weight matching's own, 50)")  # fmt: skip
