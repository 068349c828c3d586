"""The dedup merge with bounded driver memory (``_extcc``): the same roots as the in-memory union-find on
random forests of every shape and range width, the same bytes end to end (export, removed rows, clusters
file, signature file) when the budget forces it, and a resolve that completes under an address-space cap
that the in-memory merge cannot run in."""
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from deduputil import random_doc, write_parts

from gristmill.dataset import Dataset
from gristmill.ops.dedup import _extcc as X
from gristmill.ops.dedup import _shuffle as S
from gristmill.ops.dedup.minhash import DocumentMinhashDeduplicator


@pytest.mark.parametrize("seed", range(6))
def test_same_roots_and_members_as_the_in_memory_union_find(tmp_path, seed):
    rng = np.random.default_rng(seed)
    for trial in range(25):
        n = int(rng.integers(1, 400))
        files = []
        for f in range(int(rng.integers(0, 5))):
            m = int(rng.integers(0, 2 * n))
            if trial % 3 == 0:  # long chains across ranges: i - i+1 in alternating forests
                u = np.arange(f % 2, n - 1, 2)
                v = u + 1
            else:
                u, v = rng.integers(0, n, m), rng.integers(0, n, m)
            files.append(S.save_pairs(tmp_path / f"{trial}-{f}.bin", *S.forest(u, v)))
        ref = S.merge_forests(files, n)
        sizes = np.bincount(ref, minlength=n)
        width = int(rng.integers(1, n + 2))
        ext = X.components(files, n, tmp_path / f"cc{trial}", width, int(rng.integers(1, 64)))
        root, member = ext.rows(0, n)
        assert np.array_equal(root, ref), (n, width)
        assert np.array_equal(member, sizes[ref] > 1)
        assert np.array_equal(ext.kept()[3:n - 2], (ref == np.arange(n))[3:n - 2])


def test_budget_parsing(monkeypatch):
    monkeypatch.setenv(X.BUDGET_ENV, "3M")
    assert X.budget() == 3 << 20
    monkeypatch.setenv(X.BUDGET_ENV, "1.5GiB")
    assert X.budget() == 3 << 29
    monkeypatch.setenv(X.BUDGET_ENV, "4096")
    assert X.budget() == 4096
    monkeypatch.setenv(X.BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match="GRISTMILL_RESOLVE_MEMORY"):
        X.budget()


def _corpus() -> list[dict]:
    """Families of near-copies spread over the whole dataset (so clusters cross every range)."""
    rng = random.Random(11)
    docs = [random_doc(rng, 60) for _ in range(40)]
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(docs)]
    for k in range(3):
        rows += [{"id": f"n{k}-{i}", "text": docs[i] + f" and {k} more"} for i in range(k, 40, 3)]
    rows += [{"id": f"u{i}", "text": random_doc(rng, 40)} for i in range(30)]
    rng.shuffle(rows)
    return rows


def _run(tmp: Path, src: Path, np_: int) -> dict:
    op = DocumentMinhashDeduplicator(preset="datatrove", save_signatures_path=str(tmp / "sig.parquet"))
    report = Dataset.load(str(src)).process([op]).export(
        str(tmp / "out.jsonl"), np=np_, work_dir=str(tmp / "w"), keep_removed=True)
    o = next(o for o in report["ops"] if o["op"] == op.name)
    got = {"export": b"".join(Path(p).read_bytes() for p in report["exported_files"]),
           "removed": Path(o["removed_samples"]).read_bytes(),
           "signatures": (tmp / "sig.parquet").read_bytes(),
           "counts": (o["rows_in"], o["rows_out"], o["removed"], o["reasons"])}
    for p in o.get("outputs", []):
        got[Path(p).name] = Path(p).read_bytes()
    return got


@pytest.mark.parametrize("np_", [1, 2])
def test_forced_spill_gives_the_same_bytes(tmp_path, monkeypatch, np_):
    rows = _corpus()
    src = write_parts(tmp_path / "in", rows, 4)
    monkeypatch.delenv(X.BUDGET_ENV, raising=False)
    memory = _run(tmp_path / "memory", src, np_)
    calls = []
    real = X.components
    monkeypatch.setattr(X, "components", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    monkeypatch.setenv(X.BUDGET_ENV, str(13 * X.BYTES_PER_ROW))  # ranges of 13 rows: 12 of them
    spilled = _run(tmp_path / "spill", src, np_)
    assert calls == [memory["counts"][0]]  # the resolve went through the range-by-range merge
    assert memory["counts"][2] >= 20 and "clusters.parquet" in memory
    assert spilled == memory


CAPPED = textwrap.dedent("""
    import resource, sys
    from pathlib import Path
    import numpy as np
    from gristmill.ops.dedup import _extcc as X, _shuffle as S

    tmp, n = Path(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(5)
    files = []
    for f in range(4):  # clusters of 2-4 rows anywhere in the dataset, chains across forests
        u = rng.integers(0, n, n // 80)
        v = np.where(rng.random(u.size) < 0.5, u + rng.integers(1, 50, u.size), rng.integers(0, n, u.size)) % n
        files.append(S.save_pairs(tmp / f"f{f}.bin", *S.forest(u, v)))
    vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
    cap = vm + (40 << 20)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        S.merge_forests(files, n)
        print("in-memory merge ran under the cap")
        sys.exit(3)
    except MemoryError:
        pass
    budget = 2 << 20
    ext = X.components(files, n, tmp / "cc", X.range_rows(budget), X.chunk_pairs(budget))
    kept = sum(int((ext.load(k)[0] == np.arange(*ext.bounds(k))).sum()) for k in range(ext.ranges))
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    ref = S.merge_forests(files, n)
    root, member = ext.rows(0, n)
    assert np.array_equal(root, ref) and kept == int((ref == np.arange(n)).sum())
    assert np.array_equal(member, np.bincount(ref, minlength=n)[ref] > 1)
    print("ok", ext.ranges)
""")


def test_resolve_under_an_address_space_cap(tmp_path):
    """200,000 pairs over 8M rows: the in-memory merge needs 64 MB for its parent array alone and fails
    under a cap of 40 MB above the process's start; the range-by-range merge with a 2 MB budget (250
    ranges) completes under it and gives the same roots."""
    script = tmp_path / "capped.py"
    script.write_text(CAPPED)
    p = subprocess.run([sys.executable, str(script), str(tmp_path), str(8_000_000)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout + p.stderr[-2000:]


class _IdContext:
    """Ids "0".."n-1" in shards and batches that do not line up with the ranges; removals recorded."""

    def __init__(self, tmp: Path, n: int, batch: int):
        self.scratch_dir, self.output_dir, self.n, self.batch = tmp / "s", tmp / "o", n, batch
        self.removed = []

    def iter_columns(self, columns):
        import pyarrow as pa
        import pyarrow.compute as pc

        per = -(-self.n // 3)
        for s in range(3):
            for off in range(0, max(0, min(per, self.n - s * per)), self.batch):
                g0 = s * per + off
                g1 = min(g0 + self.batch, (s + 1) * per, self.n)
                yield s, off, pa.record_batch([pc.cast(pa.array(np.arange(g0, g1)), pa.string())], names=["id"])

    def remove(self, shard, rows, reason, extra=None):
        self.removed.append((shard, list(rows), reason, list(extra["cluster"]), extra["kept_id"].to_pylist()))


@pytest.mark.parametrize("width,chunk,batch", [(5, 3, 7), (64, 2, 16), (31, 1000, 100)])
def test_emit_from_ranges_equals_emit_from_memory(tmp_path, width, chunk, batch):
    """Many kept-id requests per range, spread over several request chunks and id pieces."""
    from gristmill.ops.dedup import _resolve as R

    rng = np.random.default_rng(width)
    n = 600
    u = rng.integers(0, n, 500)
    v = np.where(rng.random(500) < 0.5, u + 3, rng.integers(0, n, 500)) % n
    files = [S.save_pairs(tmp_path / "f.bin", *S.forest(u, v))]
    ref = S.merge_forests(files, n)
    a, b = _IdContext(tmp_path / "a", n, batch), _IdContext(tmp_path / "b", n, batch)
    sa = R.emit(a, ref, "dup")
    sb = R.emit(b, X.components(files, n, tmp_path / "cc", width, chunk), "dup")
    assert a.removed == b.removed and len(a.removed) > 5
    assert {k: v for k, v in sa.items() if k != "clusters_file"} == {k: v for k, v in sb.items() if k != "clusters_file"}
    assert Path(sa["clusters_file"]).read_bytes() == Path(sb["clusters_file"]).read_bytes()


def test_removals_spilled_to_disk_give_the_same_files(tmp_path, monkeypatch):
    """The resolve context keeps at most REMOVALS_IN_MEMORY bytes of removals in the driver; what it
    spills comes back in order, and the removals files are the same bytes."""
    from gristmill.engine import resolve_context as RC

    def fill(ctx):
        rng = np.random.default_rng(3)
        for i in range(40):
            rows = np.sort(rng.choice(1000, int(rng.integers(1, 30)), replace=False))
            shard = i % 3
            if i % 5 == 0:
                ctx.remove(shard, rows, [f"r{x % 3}" for x in rows])
            else:
                ctx.remove(shard, rows, "dup", {"cluster": rows // 2, "kept_id": [f"k{x}" for x in rows]})

    out = {}
    for name, limit in (("memory", 1 << 40), ("spill", 200)):
        monkeypatch.setattr(RC, "REMOVALS_IN_MEMORY", limit)
        ctx = RC.StageResolveContext([[], [], []], str(tmp_path / name), 0)
        fill(ctx)
        assert bool(ctx._spilled) == (name == "spill")
        ctx.write_removals(str(tmp_path / name / "removals"))
        out[name] = {p.name: p.read_bytes() for p in sorted((tmp_path / name / "removals").iterdir())}
    assert len(out["memory"]) == 3 and out["spill"] == out["memory"]


@pytest.mark.parametrize("seed", range(4))
def test_assign_gives_apply_pairs_roots_and_emit(tmp_path, seed):
    """(row, kept row) pairs whose kept rows come before or after their members (exact dedup with keep:
    longest/last, verified stars): the same roots, membership, removals and clusters file."""
    from gristmill.ops.dedup import _resolve as R

    rng = np.random.default_rng(seed)
    n = 500
    gone = rng.permutation(n)[:300]
    kept_rows = rng.permutation(np.setdiff1d(np.arange(n), gone))[:40]
    b = kept_rows[rng.integers(0, kept_rows.size, gone.size)]
    files = [S.save_pairs(tmp_path / f"p{i}.bin", gone[i::3], b[i::3]) for i in range(3)]
    ref = S.apply_pairs(files, n)
    assert (ref > np.arange(n)).any() and (ref < np.arange(n)).any()
    for width, chunk, batch in [(7, 5, 11), (64, 3, 64), (499, 1000, 37)]:
        ext = X.assign(files, n, tmp_path / f"as{width}", width, chunk)
        root, member = ext.rows(0, n)
        assert np.array_equal(root, ref)
        assert np.array_equal(member, np.bincount(ref, minlength=n)[ref] > 1)
        a, b2 = _IdContext(tmp_path / f"a{width}", n, batch), _IdContext(tmp_path / f"b{width}", n, batch)
        sa = R.emit(a, ref, "dup")
        sb = R.emit(b2, ext, "dup")
        assert a.removed == b2.removed and len(a.removed) > 5
        assert {k: v for k, v in sa.items() if k != "clusters_file"} == \
            {k: v for k, v in sb.items() if k != "clusters_file"}
        assert Path(sa["clusters_file"]).read_bytes() == Path(sb["clusters_file"]).read_bytes()
