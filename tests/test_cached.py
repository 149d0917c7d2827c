"""The fact cache behind `report`: a rerun over the same blobs parses nothing and says the
same; a changed blob is extracted again."""

import brax_fixtures as fx
from brax_diff.extract.cached import CachedExtractor
from brax_diff.extract.factcache import FactCache
from brax_diff.sources.repository import Repository
from brax_diff.extractors.brax.extractor import BraxExtractor
from gitfixture import add_commit, make_repo


def cached_extractor(root, cache, ref="HEAD"):
    brax = Repository(root / "brax", "brax").resolve(ref)
    playground = Repository(root / "playground", "playground").resolve("HEAD")
    inner = BraxExtractor(brax, playground)
    return CachedExtractor(inner, "brax", {"brax": brax, "playground": playground}, cache,
                           ("defaults", "family", "env")), brax


def test_rerun_is_served_from_the_cache_and_a_changed_blob_is_not(tmp_path):
    make_repo(tmp_path / "brax", fx.BRAX_COMMITS[:2])
    make_repo(tmp_path / "playground", fx.PLAYGROUND_COMMITS)
    cold_cache = FactCache(tmp_path / "cache")
    cold, _ = cached_extractor(tmp_path, cold_cache)
    first = cold.env("WalkerRun")
    assert (cold_cache.hits, cold_cache.misses) == (0, 1)
    assert cold.environments("dm_control") == sorted(cold.environments("dm_control"))  # passes through

    # A commit that touches nothing the extraction read: same answer, from the cache, at the new commit.
    add_commit(tmp_path / "brax", {"README.md": "docs\n"}, index=10)
    warm_cache = FactCache(tmp_path / "cache")
    warm, brax = cached_extractor(tmp_path, warm_cache)
    again = warm.env("WalkerRun")
    assert (warm_cache.hits, warm_cache.misses) == (1, 0)
    assert warm._inner.code._modules == {}  # nothing was parsed
    # The hit's reads are recorded as if read now (`report` tells the user when HEAD's differ on disk).
    assert fx.TRAIN in brax.reads and brax.reads[fx.TRAIN] == brax.object_id(fx.TRAIN)
    assert again.facts.keys() == first.facts.keys()
    assert {k: f.value for k, f in again.facts.items()} == {k: f.value for k, f in first.facts.items()}
    assert again.sources["brax"].commit == brax.sha
    moved = {p.commit for f in again.facts.values() for p in f.provenance if p.path.startswith("brax/")}
    assert moved == {brax.sha}

    # A commit that moves a value the extraction read: extracted again.
    train = (tmp_path / "brax" / fx.TRAIN).read_text()
    assert train.count("clipping_epsilon: float = 0.2,") == 1
    add_commit(tmp_path / "brax", {fx.TRAIN: train.replace("clipping_epsilon: float = 0.2,",
                                                           "clipping_epsilon: float = 0.25,")}, index=11)
    changed_cache = FactCache(tmp_path / "cache")
    changed, _ = cached_extractor(tmp_path, changed_cache)
    assert changed.env("WalkerRun").value("clip_epsilon") == 0.25
    assert (changed_cache.hits, changed_cache.misses) == (0, 1)
