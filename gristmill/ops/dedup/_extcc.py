"""Connected components of the dedup forests with bounded memory: the driver's merge when the dataset
has more rows than its memory budget allows for one int64 union-find over every row.

The in-memory merge (``_shuffle.merge_forests``) holds ~24 bytes per row at its peak (the union-find's
parents and pointer-jumping copies), and the cluster-file pass (``_resolve.emit``) ~9 (roots, membership)
plus ~16 and the id per cluster (the kept ids): about 25 GB at 10⁹ rows. Here the rows are cut into
ranges of ``width`` rows (``width`` from the budget, ``GRISTMILL_RESOLVE_MEMORY``), and nothing ever holds
more than one range's dense arrays plus one chunk of edges, whatever the number of rows, edges or the size
of the largest cluster:

1. **Spill.** Every forest pair (a, b), b < a, is appended to the edge file of a's range, ``chunk``
   pairs at a time.
2. **Descending pass** (last range first). A range's edges all have their larger end in it; those whose
   smaller end is there too are joined in a dense union-find of ``width`` rows (its roots: each local
   cluster's first row). Every other edge leads back to an earlier row b; all the earlier rows one local
   cluster C reaches are connected through C, so each of them gets an edge to the smallest, m(C), which
   goes to the (earlier) range of that row and is read when that range's turn comes (a self-edge (m, m)
   marks m as a member of a cluster). What is left for a row of C is a pointer: C's first row, or m(C)
   when C reaches back. Induction down the ranges: the edges added to the earlier ranges join exactly the
   rows that later ranges connected, so when a range is reached every path through later rows is already
   an edge among earlier ones, and a local cluster that reaches no earlier row has its first row as its
   global first row.
3. **Ascending pass.** A range's pointers into earlier ranges are replaced by those rows' final roots,
   which earlier ranges have pushed into this range's answer file (each range writes the answers to the
   requests that later ranges filed against it; no range is ever read twice). The result: per range, each
   row's root (its cluster's first row, as the in-memory union-find gives) and whether it is in a
   cluster of more than one row.

The same pass files, for the cluster-file writer, which kept rows each range will need the ids of
(``id_requests``): ``_resolve.emit`` answers them as it scans the rows in order, so the kept ids it holds
are those of at most a couple of ranges, not of every open cluster.

Files: ``8·width`` bytes of roots and ``width`` bytes of membership per range with any cluster member on
disk under the op's scratch directory (deleted with it), and the edges (16 bytes a pair, a pair spilled
at most once per range it crosses, in practice once or twice).
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyarrow import ipc

from ._unionfind import UnionFind

BUDGET_ENV = "GRISTMILL_RESOLVE_MEMORY"
DEFAULT_BUDGET = 2 << 30
# what one row of a range costs in the passes below: union-find parent and its pointer-jumping copies
# (3 x 8), the reach-back minimum (8), the pointer (8), membership (1), the cluster-file pass's slices.
# Also the switch: the in-memory paths stay under it (union-find 25 B/row at its peak, the cluster-file
# pass 9 B/row + ~16 B and the id per cluster, with_uid's smallest-uid rule 25 B/row with the roots;
# measured at the switch with bench/dedup_resolve_memory.py --switch)
BYTES_PER_ROW = 64
EDGE = np.dtype([("a", "<i8"), ("b", "<i8")])
REQ = np.dtype([("t", "<i8"), ("r", "<i8")])
ANS = np.dtype([("t", "<i8"), ("f", "<i8")])
NONE = np.iinfo(np.int64).max
ID_SCHEMA = pa.schema([("t", pa.int64()), ("id", pa.string())])


def budget() -> int:
    """The driver's memory budget for a resolve in bytes: ``GRISTMILL_RESOLVE_MEMORY`` (a number of
    bytes, or with a K/M/G/T suffix: powers of 1024), 2 GiB if unset."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return DEFAULT_BUDGET
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", raw, re.IGNORECASE)
    if not m:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: expected bytes, e.g. 4G or 512M")
    return int(float(m.group(1)) * (1024 ** " KMGT".index(m.group(2).upper() or " ")))


def range_rows(budget_bytes: int) -> int:
    """Rows per range for a budget (the in-memory merge is used while the dataset fits in one range)."""
    return max(1, budget_bytes // BYTES_PER_ROW)


def chunk_pairs(budget_bytes: int) -> int:
    """Edges read or buffered at once: a quarter of the budget at ~8 working copies of 16 bytes."""
    return max(1024, budget_bytes // (4 * 8 * EDGE.itemsize))


class _Spill:
    """Records appended to per-range files, chosen by ``rng(field) // width``, buffered ``chunk`` at a time."""

    def __init__(self, directory: Path, prefix: str, dtype: np.dtype, field: str, width: int, chunk: int):
        self.dir, self.prefix, self.dtype, self.field = directory, prefix, dtype, field
        self.width, self.chunk = width, chunk
        self._buf: list[np.ndarray] = []
        self._rows = 0
        directory.mkdir(parents=True, exist_ok=True)

    def path(self, k: int) -> Path:
        return self.dir / f"{self.prefix}{k:07d}.bin"

    def add(self, rec: np.ndarray) -> None:
        if rec.size:
            self._buf.append(rec)
            self._rows += rec.size
            if self._rows >= self.chunk:
                self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        rec = np.concatenate(self._buf)
        self._buf, self._rows = [], 0
        k = rec[self.field] // self.width
        order = np.argsort(k, kind="stable")
        rec, k = rec[order], k[order]
        ks, starts = np.unique(k, return_index=True)
        ends = np.append(starts[1:], k.size)
        for kk, s, e in zip(ks.tolist(), starts.tolist(), ends.tolist()):
            with open(self.path(kk), "ab") as f:
                rec[s:e].tofile(f)

    def read(self, k: int, chunk: int) -> Iterator[np.ndarray]:
        p = self.path(k)
        if not p.exists():
            return
        with open(p, "rb") as f:
            while True:
                rec = np.fromfile(f, dtype=self.dtype, count=chunk)
                if not rec.size:
                    return
                yield rec


def _distinct(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not a.size:
        return a, b
    o = np.lexsort((b, a))
    a, b = a[o], b[o]
    keep = np.ones(a.size, bool)
    keep[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[keep], b[keep]


def _pairs(a: np.ndarray, b: np.ndarray, dtype=EDGE) -> np.ndarray:
    rec = np.empty(a.size, dtype)
    rec[dtype.names[0]], rec[dtype.names[1]] = a, b
    return rec


class ExternalRoots:
    """Each row's cluster root, one file per range of ``width`` rows (see the module doc): what
    ``_resolve.emit`` reads instead of an in-memory roots array. Ranges with no cluster member have no
    file (every row its own root)."""

    def __init__(self, directory: str, n: int, width: int, chunk: int, first_roots: bool = True):
        self.directory, self.n, self.width, self.chunk = str(directory), n, width, chunk
        # every root its cluster's first row (``components``); False for ``assign``'s kept rows, which may
        # come after their members: then ``id_requests(k)`` lists every root any range needs (itself too)
        self.first_roots = first_roots
        self.ranges = -(-n // width) if n else 0
        self._cache: tuple[int, np.ndarray, np.ndarray] | None = None

    @property
    def size(self) -> int:
        return self.n

    def bounds(self, k: int) -> tuple[int, int]:
        return k * self.width, min(self.n, (k + 1) * self.width)

    def range_of(self, g: int) -> int:
        return g // self.width

    def _file(self, kind: str, k: int) -> Path:
        return Path(self.directory) / f"{kind}{k:07d}.npy"

    def load(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(root, member) of every row of range k."""
        if self._cache is not None and self._cache[0] == k:
            return self._cache[1], self._cache[2]
        lo, hi = self.bounds(k)
        if self._file("root", k).exists():
            root, member = np.load(self._file("root", k)), np.load(self._file("member", k))
        else:
            root, member = np.arange(lo, hi, dtype=np.int64), np.zeros(hi - lo, bool)
        self._cache = (k, root, member)
        return root, member

    def rows(self, g0: int, g1: int) -> tuple[np.ndarray, np.ndarray]:
        """(root, member) of rows g0..g1-1."""
        roots, members = [], []
        for k in range(self.range_of(g0), self.range_of(g1 - 1) + 1):
            lo, _ = self.bounds(k)
            root, member = self.load(k)
            s, e = max(g0, lo) - lo, min(g1 - lo, root.size)
            roots.append(root[s:e])
            members.append(member[s:e])
        if len(roots) == 1:
            return roots[0], members[0]
        return np.concatenate(roots), np.concatenate(members)

    def kept(self, base: int = 0) -> "KeptMask":
        """Which rows are their own root; ``base``: the mask of rows base.. (numbered from 0)."""
        return KeptMask(self, base)

    # -- the cluster-file pass's kept-id exchange ---------------------------------------------------
    def id_requests(self, k: int) -> Iterator[np.ndarray]:
        """(t, r) records: range r > k needs the id of row t (a kept row in range k)."""
        return _Spill(Path(self.directory), "idreq", REQ, "t", self.width, self.chunk).read(k, self.chunk)

    def put_ids(self, r: int, k: int, t: np.ndarray, ids: pa.Array) -> None:
        d = Path(self.directory) / f"ids{r:07d}"
        d.mkdir(parents=True, exist_ok=True)
        self._pieces = getattr(self, "_pieces", 0) + 1
        path = d / f"{k:07d}-{self._pieces:09d}.arrow"
        with ipc.new_file(str(path), ID_SCHEMA) as w:
            w.write_table(pa.table([pa.array(t, pa.int64()), ids], schema=ID_SCHEMA))

    def get_ids(self, r: int) -> tuple[np.ndarray, pa.Array]:
        """(rows, ids) of the earlier kept rows range r needs, pushed so far by earlier ranges."""
        d = Path(self.directory) / f"ids{r:07d}"
        tables = []
        if d.exists():
            for f in sorted(d.iterdir()):
                with pa.memory_map(str(f)) as src:
                    tables.append(ipc.open_file(src).read_all())
            shutil.rmtree(d, ignore_errors=True)
        t = pa.concat_tables(tables) if tables else ID_SCHEMA.empty_table()
        return t.column("t").to_numpy(), t.column("id").combine_chunks()

    def release(self) -> None:
        """Drop the range ``load`` keeps (a later ``load`` reads it again)."""
        self._cache = None

    def remove(self) -> None:
        self._cache = None
        shutil.rmtree(self.directory, ignore_errors=True)


class KeptMask:
    """``roots == arange(n)`` one slice at a time (what ``save_kept`` indexes)."""

    def __init__(self, roots: ExternalRoots, base: int = 0):
        self.roots, self.base = roots, base

    def __getitem__(self, s: slice) -> np.ndarray:
        g0, g1, _ = s.indices(self.roots.n - self.base)
        if g1 <= g0:
            return np.zeros(0, bool)
        g0, g1 = g0 + self.base, g1 + self.base
        root, _ = self.roots.rows(g0, g1)
        return root == np.arange(g0, g1, dtype=np.int64)


def assign(pair_files, n: int, directory, width: int, chunk: int) -> ExternalRoots:
    """Roots from (row, kept row) pairs, ``roots[a] = b`` (``_shuffle.apply_pairs``: an exact dedup's
    kept row per key, verified MinHash's stars), one range at a time. A kept row may come after its
    members (keep: longest, last; the most central row of a star), so the kept-id requests name every
    root each range's members need, whichever range it is in: ``_resolve.emit`` reads the ids in a first
    scan. The same roots and membership as ``apply_pairs``."""
    out = Path(directory)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    res = ExternalRoots(str(out), n, width, chunk, first_roots=False)
    sets = _Spill(out / "sets", "s", EDGE, "a", width, chunk)  # (row, its root), filed by the row's range
    for path in pair_files:
        with open(path, "rb") as f:
            while (rec := np.fromfile(f, dtype=EDGE, count=chunk)).size:
                d = rec["a"] != rec["b"]
                sets.add(rec[d])
                sets.add(_pairs(rec["b"][d], rec["b"][d]))  # a kept row is a member of its cluster
    sets.flush()
    id_reqs = _Spill(out, "idreq", REQ, "t", width, chunk)
    for k in range(res.ranges):
        if not sets.path(k).exists():
            continue
        lo, hi = res.bounds(k)
        root = np.arange(lo, hi, dtype=np.int64)
        member = np.zeros(hi - lo, bool)
        for rec in sets.read(k, chunk):  # in file order: a row given twice takes its last root, as there
            moved = rec["a"] != rec["b"]
            root[rec["a"][moved] - lo] = rec["b"][moved]
            member[rec["a"] - lo] = True
        os.unlink(sets.path(k))
        t = np.unique(root[member])
        id_reqs.add(_pairs(t, np.full(t.size, k, np.int64), REQ))
        id_reqs.flush()
        np.save(res._file("root", k), root)
        np.save(res._file("member", k), member)
        del root, member
    shutil.rmtree(out / "sets", ignore_errors=True)
    return res


def components(pair_files, n: int, directory, width: int, chunk: int, shift: tuple[int, int] | None = None
               ) -> ExternalRoots:
    """Roots of the clusters the (a, b) pairs of ``pair_files`` form over rows 0..n-1 (every cluster's
    root its first row, as ``merge_forests`` gives), computed range by range on disk. ``shift = (at, by)``:
    the files' rows from ``at`` on are rows ``+ by`` here (an incremental dedup's new rows, moved to start
    a range of their own after the reference rows)."""
    out = Path(directory)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    res = ExternalRoots(str(out), n, width, chunk)
    edges = _Spill(out / "edges", "e", EDGE, "a", width, chunk)
    for path in pair_files:
        with open(path, "rb") as f:
            while (rec := np.fromfile(f, dtype=EDGE, count=chunk)).size:
                if shift is not None:
                    for f_ in EDGE.names:
                        rec[f_] += np.where(rec[f_] >= shift[0], shift[1], 0)
                hi, lo = np.maximum(rec["a"], rec["b"]), np.minimum(rec["a"], rec["b"])
                d = hi != lo
                edges.add(_pairs(hi[d], lo[d]))
    edges.flush()
    reqs = _Spill(out / "req", "r", REQ, "t", width, chunk)
    # descending: local clusters, reach-back edges pushed down, pointers
    for k in reversed(range(res.ranges)):
        if not edges.path(k).exists():
            continue
        lo, hi = res.bounds(k)
        uf = UnionFind(hi - lo)
        member = np.zeros(hi - lo, bool)
        back = False
        for e in edges.read(k, chunk):
            a, b = e["a"] - lo, e["b"] - lo
            member[a] = True
            inside = b >= 0
            member[b[inside]] = True
            if inside.any():
                uf.union(a[inside], b[inside])
            back = back or not inside.all()
        root = uf.roots()
        del uf
        if back:
            reach = np.full(hi - lo, NONE, np.int64)
            for e in edges.read(k, chunk):
                out_ = e["b"] < lo
                np.minimum.at(reach, root[e["a"][out_] - lo], e["b"][out_])
            for e in edges.read(k, chunk):
                out_ = e["b"] < lo
                t = e["b"][out_]
                edges.add(_pairs(*_distinct(t, reach[root[e["a"][out_] - lo]])))
            edges.flush()
            r = reach[root]
            ptr = np.where(r != NONE, r, root + lo)
            del reach, r
            t = np.unique(ptr[ptr < lo])
            reqs.add(_pairs(t, np.full(t.size, k, np.int64), REQ))
            reqs.flush()
        else:
            ptr = root + lo
        del root
        os.unlink(edges.path(k))
        np.save(res._file("root", k), ptr)
        np.save(res._file("member", k), member)
        del ptr, member
    shutil.rmtree(out / "edges", ignore_errors=True)
    # ascending: pointers into earlier ranges become roots; answers pushed to the ranges that asked
    answers = _Spill(out / "ans", "a", ANS, "t", 1, chunk)  # one file per requesting range
    id_reqs = _Spill(out, "idreq", REQ, "t", width, chunk)
    for k in range(res.ranges):
        if not res._file("root", k).exists():
            continue
        lo, hi = res.bounds(k)
        root = np.load(res._file("root", k))
        early = root < lo
        if early.any():
            got = np.fromfile(answers.path(k), dtype=ANS)
            got = got[np.argsort(got["t"])]
            root[early] = got["f"][np.searchsorted(got["t"], root[early])]
            os.unlink(answers.path(k))
            np.save(res._file("root", k), root)
        for q in reqs.read(k, chunk):
            rec = _pairs(q["t"], root[q["t"] - lo], ANS)
            for r in np.unique(q["r"]).tolist():
                with open(answers.path(r), "ab") as f:
                    rec[q["r"] == r].tofile(f)
        member = np.load(res._file("member", k))
        t = np.unique(root[member & early])
        id_reqs.add(_pairs(t, np.full(t.size, k, np.int64), REQ))
        id_reqs.flush()
        del root, member
    shutil.rmtree(out / "req", ignore_errors=True)
    shutil.rmtree(out / "ans", ignore_errors=True)
    return res
