"""Read packed outputs back as training samples; a resumable PyTorch dataset on top.

:class:`PackedRows` (numpy only) gives row ``r`` of any output format as ``seq_len + 1`` tokens plus its
document segments, from the packing plan written beside the data. :class:`PackedDataset` (torch) turns
rows into samples:

- ``input_ids`` = row[:-1], ``labels`` = row[1:] with pad positions and the first token of every
  segment that starts inside the row (a token predicted from another document) set to -100;
- ``position_ids`` restart at 0 at every segment; ``cu_seqlens`` are the segment boundaries (pad is a
  final segment); ``attention_mask`` (optional) is block-diagonal causal.

Order: the ``k``-th sample over all ranks is row ``perm_e[k mod n]`` with ``e = k // n`` and ``perm_e`` a
permutation seeded by ``(seed, e)``; rank ``r`` of ``w`` takes samples ``k ≡ r (mod w)``. The whole state
is one integer, ``consumed_samples`` (global, over all ranks), so a run can resume — even with a
different world size — with ``load_state_dict``. The dataset is map-style, so DataLoader workers and
torchdata's StatefulDataLoader work unchanged.
"""
from __future__ import annotations

import json
import os

import numpy as np

from .formats import read_litgpt_header, read_megatron_idx
from .packing import row_segments

MANIFEST = "gristmill-tokens.json"


class PackedRows:
    """Row access to a gristmill tokenize output directory."""

    def __init__(self, path: str):
        with open(os.path.join(path, MANIFEST)) as f:
            self.m = json.load(f)
        self.path = path
        name = self.m["name"]
        self.width = self.m["width"]
        self.seq_len = self.m["seq_len"]
        self.pad_id = self.m["pad_id"]
        self.mode = self.m["pack"]
        pieces = np.load(os.path.join(path, f"{name}.pieces.npy"))
        rows = np.load(os.path.join(path, f"{name}.rows.npy"))
        self.piece_off = pieces[:, 1].copy()
        self.piece_len = pieces[:, 2].copy()
        self.piece_start = np.concatenate([[0], np.cumsum(self.piece_len)[:-1]]).astype(np.int64)
        self.row_start = rows[:, 0].copy()
        self.row_len = rows[:, 1].copy()
        if not len(self.row_start):
            raise ValueError(f"{path}: no packed rows (pack: {self.mode})")
        fmt = self.m["format"]
        self.fmt = fmt
        self._data = None
        if fmt in ("megatron", "datatrove"):
            self.kind = "stream"
        elif fmt == "parquet":
            self.kind = "rows"
        else:
            self.kind = "rows"

    def __len__(self) -> int:
        return len(self.row_start)

    def _open(self):
        """Lazily (per process) map the data files."""
        if self._data is not None:
            return self._data
        p, name = self.path, self.m["name"]
        if self.fmt == "npy":
            self._data = np.load(os.path.join(p, f"{name}.npy"), mmap_mode="r")
        elif self.fmt == "megatron":
            idx = read_megatron_idx(os.path.join(p, f"{name}.idx"))
            self._data = np.memmap(os.path.join(p, f"{name}.bin"), dtype=idx["dtype"], mode="r")
        elif self.fmt == "datatrove":
            dt = np.dtype(self.m["dtype"])
            self._data = np.memmap(os.path.join(p, f"{name}.ds"), dtype=dt.newbyteorder("<"), mode="r")
        elif self.fmt == "litgpt":
            files = sorted(f for f in self.m["files"] if f.startswith(f"{name}_") and f.endswith(".bin"))
            maps = []
            for f in files:
                dt, chunk = read_litgpt_header(os.path.join(p, f))
                maps.append(np.memmap(os.path.join(p, f), dtype=dt, mode="r", offset=24, shape=(chunk,)))
            self._data = maps
        elif self.fmt == "parquet":
            import pyarrow.parquet as pq
            col = pq.read_table(os.path.join(p, f"{name}.parquet"), columns=["input_ids"]).column(0)
            self._data = col.combine_chunks().flatten().to_numpy()
        return self._data

    def tokens(self, r: int) -> np.ndarray:
        """Row ``r`` as ``width`` int64 tokens (pad after the real ones)."""
        data = self._open()
        W = self.width
        if self.fmt == "npy":
            return np.asarray(data[r], dtype=np.int64)
        if self.fmt == "litgpt":
            rpc = self.m["rows_per_chunk"]
            c, k = divmod(r, rpc)
            return np.asarray(data[c][k * W:(k + 1) * W], dtype=np.int64)
        if self.fmt == "parquet":
            return np.asarray(data[r * W:(r + 1) * W], dtype=np.int64)
        out = np.full(W, self.pad_id, np.int64)
        s, n = int(self.row_start[r]), int(self.row_len[r])
        out[:n] = data[s:s + n]
        return out

    def segments(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """(lengths, begins_document) of the document pieces in row ``r`` (pad not included)."""
        return row_segments(self.piece_start, self.piece_len, self.piece_off, int(self.row_start[r]),
                            int(self.row_len[r]))

    def sample(self, r: int, block_mask: bool = False) -> dict:
        """Training arrays for row ``r`` (numpy)."""
        toks = self.tokens(r)
        L = self.seq_len
        seg_len, _begins = self.segments(r)
        real = int(self.row_len[r])
        bounds = np.concatenate([[0], np.cumsum(seg_len)]).astype(np.int64)  # segment starts in the row
        labels = toks[1:].copy()
        labels[max(real - 1, 0):] = -100  # predicting pad
        inner = bounds[1:-1]  # segment starts after column 0: their first token comes from another document
        labels[inner[inner <= L] - 1] = -100
        cut = np.unique(np.concatenate([np.minimum(bounds, L), [L]]))
        cu = cut.astype(np.int32)
        pos = np.arange(L, dtype=np.int64) - np.repeat(cu[:-1].astype(np.int64), np.diff(cu))
        out = {"input_ids": toks[:-1], "labels": labels, "position_ids": pos, "cu_seqlens": cu}
        if block_mask:
            seg_id = np.repeat(np.arange(len(cu) - 1), np.diff(cu))
            causal = np.tril(np.ones((L, L), dtype=bool))
            out["attention_mask"] = causal & (seg_id[:, None] == seg_id[None, :])
        return out


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - exercised only without torch
        raise ImportError("the PyTorch loader needs torch (pip install torch)") from e
    return torch


try:  # torch is optional: the class exists either way, and needs torch only when used
    from torch.utils.data import Dataset as _Base
except ImportError:  # pragma: no cover
    _Base = object


class PackedDataset(_Base):
    """Map-style dataset of packed samples for one rank; see the module docstring for the order."""

    def __init__(self, path: str, seed: int = 0, shuffle: bool = True, rank: int = 0, world_size: int = 1,
                 epochs: int = 1, block_mask: bool = False, consumed_samples: int = 0):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world size {world_size}")
        self.rows = PackedRows(path)
        self.seed, self.shuffle, self.rank, self.world_size = seed, shuffle, rank, world_size
        self.epochs, self.block_mask = epochs, block_mask
        self.n = len(self.rows)
        self.total = self.n * epochs  # global samples over all ranks
        self.load_state_dict({"consumed_samples": consumed_samples})

    # -- order --------------------------------------------------------------------------------------
    def _perm(self, epoch: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_perms", {})
        if epoch not in cache:
            cache.clear()
            cache[epoch] = np.random.default_rng([self.seed, epoch]).permutation(self.n) if self.shuffle \
                else np.arange(self.n)
        return cache[epoch]

    def global_row(self, k: int) -> int:
        """Row of the ``k``-th global sample."""
        e, i = divmod(k, self.n)
        return int(self._perm(e)[i])

    # -- resumable state ------------------------------------------------------------------------------
    def load_state_dict(self, state: dict) -> None:
        c = int(state.get("consumed_samples", 0))
        self._start = c
        self.consumed_samples = c
        # first global index >= c that belongs to this rank
        self._first = c + ((self.rank - c) % self.world_size)

    def state_dict(self) -> dict:
        return {"consumed_samples": int(self.consumed_samples)}

    def note_consumed(self, local_samples: int) -> None:
        """Record that this rank consumed ``local_samples`` more samples (all ranks step together, so the
        global count grows by ``world_size`` times that)."""
        self.consumed_samples += local_samples * self.world_size

    # -- map-style access -------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._first >= self.total:
            return 0
        return (self.total - 1 - self._first) // self.world_size + 1

    def __getitem__(self, i: int):
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = self._first + i * self.world_size
        s = self.rows.sample(self.global_row(k), self.block_mask)
        torch = _torch()
        out = {"input_ids": torch.from_numpy(s["input_ids"]), "labels": torch.from_numpy(s["labels"]),
               "position_ids": torch.from_numpy(s["position_ids"]),
               "cu_seqlens": torch.from_numpy(s["cu_seqlens"])}
        if "attention_mask" in s:
            out["attention_mask"] = torch.from_numpy(s["attention_mask"])
        return out

    def __iter__(self):
        for i in range(len(self)):
            item = self[i]
            self.note_consumed(1)
            yield item


def collate_packed(samples: list[dict]) -> dict:
    """Stack samples; ``cu_seqlens`` are concatenated over the flattened batch (flash-attn varlen style),
    with ``max_seqlen``."""
    torch = _torch()
    out = {k: torch.stack([s[k] for s in samples]) for k in ("input_ids", "labels", "position_ids")}
    if "attention_mask" in samples[0]:
        out["attention_mask"] = torch.stack([s["attention_mask"] for s in samples])
    L = samples[0]["input_ids"].shape[0]
    cus = [s["cu_seqlens"][:-1].to(torch.int32) + i * L for i, s in enumerate(samples)]
    cu = torch.cat(cus + [torch.tensor([len(samples) * L], dtype=torch.int32)])
    out["cu_seqlens"] = cu
    out["max_seqlen"] = int((cu[1:] - cu[:-1]).max())
    return out


class ResumableLoader:
    """A ``DataLoader`` over a :class:`PackedDataset` that counts what the training loop received, so
    ``state_dict()`` is exact whatever the workers prefetch."""

    def __init__(self, dataset: PackedDataset, batch_size: int, num_workers: int = 0, **kwargs):
        self.dataset = dataset
        self.batch_size = batch_size
        self.kwargs = dict(num_workers=num_workers, collate_fn=collate_packed, shuffle=False, **kwargs)

    def __iter__(self):
        from torch.utils.data import DataLoader
        dl = DataLoader(self.dataset, batch_size=self.batch_size, **self.kwargs)
        for batch in dl:
            self.dataset.note_consumed(batch["input_ids"].shape[0])  # counted once handed to the loop
            yield batch

    def __len__(self):
        return -(-len(self.dataset) // self.batch_size)

    def state_dict(self) -> dict:
        return self.dataset.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.dataset.load_state_dict(state)
