"""The atlas's cache entry: keyed as it always was, so atlases stored before are read back."""

from __future__ import annotations

from landscape.experiments.atlas import AtlasOptions, atlas
from landscape.sources import Source
from landscape.store.cache import Cache, digest_tensors


def test_the_atlas_cache_key_is_the_one_it_always_had(monkeypatch):
    """The inputs of the atlas's entry, as they were when ``atlas`` took its options as
    keywords (the shipped atlases among the entries keyed so)."""
    seen = []

    def spy(self, kind, inputs, compute):
        seen.append((kind, inputs))
        return type("Entry", (), {"meta": {}})(), None

    monkeypatch.setattr(Cache, "get_or_compute", spy)
    atlas("mlp-digits", [2, 0, 1], AtlasOptions(reference=1, copies=3, group="signed-perm"))
    ((kind, inputs),) = seen
    digests = [digest_tensors(Source("mlp-digits", s).load().params) for s in (0, 1, 2)]
    assert (kind, inputs) == ("atlas", {"model": "mlp-digits", "digests": digests,
                                        "seeds": [0, 1, 2], "reference": 1, "copies": 3,
                                        "group": "signed-perm", "projection": "pca",
                                        "version": 3})  # fmt: skip
