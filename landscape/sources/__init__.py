"""Sources: the one way to get a model with its data.

A :class:`Source` names a checkpoint: a zoo seed (``Source("mlp-digits", 3)``, optionally a
control variant of the recipe), a member of an imported family (``Source("tunes", 1)``,
:mod:`landscape.store.families`) or a checkpoint path (a landscape directory, a Hugging Face
directory or a ``.gguf`` file), with a :class:`DataSpec` naming its evaluation data.
``source.load()`` gives the :class:`~landscape.models.zoo.Checkpoint`; :func:`data_of` gives
the checkpoint's :class:`Data`: the splits it is matched and evaluated on, how to batch its
evaluation, its fine-tuning recipe, and the data key that identifies the data in cache keys.

- zoo checkpoints (and landscape directories written from them, whose metadata names the zoo
  model): the zoo model's data (``models.zoo.split_for``), evaluated with the library defaults;
- family members: the family's data (text windows or an image data set), memoised per process;
- paths with a :class:`DataSpec`: the same kind of data as a family's, the text encoded with
  the checkpoint's own ``tokenizer.json`` when it has one (``data.text.token_corpus``).

Families and paths may hold large models: their curves are evaluated one λ at a time in batches
sized so that one batch's widest activation stays near ``LOGIT_BUDGET`` elements.

The package's rooms: :mod:`.source` (``Source``, ``data_of``), :mod:`.zoo` (where a zoo
checkpoint comes from: the cache, the shipped assets, training), :mod:`.checkpoints` (loading,
naming, the same-architecture check), :mod:`.data` (data specs, splits, samplers, evaluation
batching), :mod:`.families` (a family's data, ``add_family``) and :mod:`.inspection`
(``landscape inspect``).

:mod:`landscape.tasks` builds on these: a loaded model on a device with its data as the gauge
sweep and artifact transport use it.
"""

from __future__ import annotations

from landscape.sources.checkpoints import (
    available_seeds,
    check_same_architecture,
    label,
    load_any,
    load_member,
    model_arch,
    model_config,
)
from landscape.sources.data import (
    LOGIT_BUDGET,
    Data,
    DataSpec,
    Sampler,
    SplitData,
    ZooData,
    check_evaluable,
    eval_batch_size,
    evaluation_refusal,
    spec_data,
    spec_splits,
    split_sampler,
    stream_sampler,
)
from landscape.sources.families import add_family, family_data, family_data_note, family_splits
from landscape.sources.inspection import inspect
from landscape.sources.source import Source, data_of
from landscape.store.families import DATASETS

__all__ = [
    "DATASETS",
    "LOGIT_BUDGET",
    "Data",
    "DataSpec",
    "Sampler",
    "Source",
    "SplitData",
    "ZooData",
    "add_family",
    "available_seeds",
    "check_evaluable",
    "check_same_architecture",
    "data_of",
    "eval_batch_size",
    "evaluation_refusal",
    "family_data",
    "family_data_note",
    "family_splits",
    "inspect",
    "label",
    "load_any",
    "load_member",
    "model_arch",
    "model_config",
    "spec_data",
    "spec_splits",
    "split_sampler",
    "stream_sampler",
]
