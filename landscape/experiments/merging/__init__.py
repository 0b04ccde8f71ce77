"""Aligned checkpoints out to other tools and back: aligned Hugging Face directories
(:mod:`.export`), a mergekit configuration for the pair (:mod:`.mergekit`), mergekit's operators
along λ naive and aligned (:mod:`.operators`), and the recovery benchmark
(:mod:`.recover_benchmark`: plant a symmetry element, align it back, score).
"""

from __future__ import annotations

from landscape.experiments.merging.export import (
    ALIGNED,
    AlignedOptions,
    aligned_archive,
    archive_name,
    hf_source,
    write_aligned,
)
from landscape.experiments.merging.mergekit import (
    mergekit_yaml,
    write_mergekit_config,
)
from landscape.experiments.merging.operators import (
    MergesResult,
    check_operators,
    hf_format,
    merge_rows,
    mergekit_installed,
    merges,
    pair_merges,
    require_mergekit,
    run_operator,
)
from landscape.experiments.merging.recover_benchmark import (
    COLUMN_TOL,
    DEFAULT_LEVELS,
    LEVELS,
    RECOVERY,
    RecoveryOptions,
    RecoveryRow,
    Scramble,
    VariableScore,
    align_back,
    barrier_between,
    check_levels,
    levels_of,
    recover,
    recover_level,
    recovery,
    score_transform,
    score_variable,
    scramble,
    units_in_place,
)

__all__ = [
    "mergekit_yaml",
    "write_mergekit_config",
    "hf_source",
    "ALIGNED",
    "AlignedOptions",
    "write_aligned",
    "archive_name",
    "aligned_archive",
    "require_mergekit",
    "mergekit_installed",
    "check_operators",
    "run_operator",
    "hf_format",
    "pair_merges",
    "merge_rows",
    "MergesResult",
    "merges",
    "COLUMN_TOL",
    "DEFAULT_LEVELS",
    "LEVELS",
    "RECOVERY",
    "RecoveryOptions",
    "RecoveryRow",
    "Scramble",
    "VariableScore",
    "align_back",
    "barrier_between",
    "check_levels",
    "levels_of",
    "recover",
    "recover_level",
    "recovery",
    "score_transform",
    "score_variable",
    "scramble",
    "units_in_place",
]
