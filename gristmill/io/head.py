"""The first rows of a dataset, read without running anything (``gristmill head``, previews, ``Dataset.head``)."""
from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from ..core import columns as C
from ..core.defaults import TEXT_KEY


def head(source, n: int = 5, text_key: str = TEXT_KEY, format: str | None = None, reader_params: dict | None = None,
         text_optional: bool = False) -> list[dict]:
    """The first ``n`` input rows of ``source`` (any path, glob or weighted spec a run reads); rows without the
    text field are skipped unless ``text_optional`` (as for a recipe whose first op makes the text). Unknown
    reader params raise ValueError."""
    from .base import ReadOptions, check_reader_params
    from .formats import read_shard
    from .planner import common_root, plan_dataset
    params = check_reader_params(dict(reader_params or {}))
    opts = ReadOptions(text_key=text_key, params=tuple(sorted(params.items())), text_optional=text_optional)
    shards = plan_dataset(source, opts, format)
    opts = replace(opts, root=common_root(shards))
    out: list[dict] = []
    for s in shards:
        for item in read_shard(s, opts):
            if isinstance(item, pa.RecordBatch):
                out.extend(C.to_pylist(item.slice(0, n - len(out))))
                if len(out) >= n:
                    return out
    return out
