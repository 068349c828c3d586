"""semantic_deduplicator's k-means centroids past the memory budget (``GRISTMILL_SEMDEDUP_MEMORY``): in a
file of the scratch dir, read and written one block of ``CENTROIDS`` at a time (k-means++, the update, the
assignment), with the labels of the in-memory centroids, bit for bit."""
import numpy as np
import pytest

from gristmill.ops.dedup import _semantic as S
from gristmill.ops.dedup._semantic_store import MEMORY_ENV


@pytest.mark.parametrize("k, budget, chunk", [(40, "100", 64), (40, "1152", 4), (4, "100", 64)])
def test_centroids_on_disk_give_the_in_memory_labels(tmp_path, monkeypatch, k, budget, chunk):
    """k of 40 in blocks of 5 (k-means++ rows written a block at a time, sums per block, the best of each
    block), rows assigned one chunk or three chunks per read of the centroids; k of 4: one block."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(400, 6)).astype(np.float32)
    x[200:260] = x[:60] + np.float32(1e-3)  # near copies: clusters with many rows
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    monkeypatch.setattr(S, "CHUNK", chunk)
    monkeypatch.setattr(S, "CENTROIDS", 5)
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    memory = S.kmeans(x, k, seed=1, iterations=4, sample=300, work=str(tmp_path))
    assert not (tmp_path / "centroids.bin").exists()
    monkeypatch.setenv(MEMORY_ENV, budget)
    files = []
    real = S.Centroids.__init__
    monkeypatch.setattr(S.Centroids, "__init__", lambda self, *a: files.append(a[2]) or real(self, *a))
    disk = S.kmeans(x, k, seed=1, iterations=4, sample=300, work=str(tmp_path))
    assert files and files[0] == str(tmp_path / "centroids.bin")
    assert (tmp_path / "centroids.bin").stat().st_size == k * 6 * 8
    assert np.unique(memory).size >= min(k, 6)
    assert disk.tolist() == memory.tolist()


def test_tiles_of_scores_give_the_labels_of_one_product_per_block(tmp_path, monkeypatch):
    """Scores in tiles of 3 centroids (the last tile of a block taking the remainder) give the labels of one
    product per block of centroids (the tile as wide as the block: the assignment before tiles), for k
    inside one block and over several, centroids in memory and on disk; the tiles cut as documented."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(300, 5)).astype(np.float32)
    x[150:200] = x[:50] + np.float32(1e-3)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    monkeypatch.setattr(S, "CHUNK", 64)
    monkeypatch.setattr(S, "CENTROIDS", 16)
    monkeypatch.setattr(S, "TILE", 3)
    assert S._tiles(16) == [(0, 3), (3, 6), (6, 9), (9, 12), (12, 16)]
    assert S._tiles(7) == [(0, 3), (3, 7)] and S._tiles(2) == [(0, 2)]
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    for k in (14, 37):  # one block, three blocks (the last of 5 centroids)
        got = {}
        for tile in (3, 16):
            monkeypatch.setattr(S, "TILE", tile)
            for where, budget in (("memory", None), ("disk", "100")):
                if budget:
                    monkeypatch.setenv(MEMORY_ENV, budget)
                got[tile, where] = S.kmeans(x, k, seed=2, iterations=3, sample=250,
                                            work=str(tmp_path)).tolist()
                monkeypatch.delenv(MEMORY_ENV, raising=False)
        assert len(set(got[3, "memory"])) >= min(k, 10)
        assert got[3, "memory"] == got[16, "memory"] == got[3, "disk"] == got[16, "disk"], k
        cent = x[rng.choice(300, k, replace=False)].astype(np.float64)
        monkeypatch.setattr(S, "TILE", 3)
        tiled = S._best(x, cent)
        assert tiled.tolist() == np.argmax(x.astype(np.float64) @ cent.T, axis=1).tolist()
