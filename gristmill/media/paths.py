"""Where media produced by mappers go, and how relative media paths resolve.

Produced files follow Data-Juicer's layout (``save_dir`` > ``$DJ_PRODUCED_DATA_DIR/<op>`` >
``<source dir>/__dj__produced_data__/<op>``; name ``<stem>__dj_hash_#<hash>#<ext>``), but the hash is
of the op's config and the source (not of a process id and the time), so a rerun writes the same
names: output stays byte-identical across runs and worker counts. Files are written to a temporary
name and renamed, so two workers producing the same file never expose a partial one.

Under the service's trust policy a produced file must land inside its data roots: a relative ``save_dir``
(it would be the server's working directory), or no ``save_dir`` beside a source outside the roots, is
refused (``trust.Refused``, the row's reject) before anything is written.
"""
from __future__ import annotations

import hashlib
import json
import os
import re

from ..core import trust

PRODUCED_DIR = "__dj__produced_data__"
SOURCE_FILE = "__dj__source_file__"  # Data-Juicer's field keeping the original paths of changed media
_HASH = re.compile(r"__dj_hash_#.*?#")


def resolve_relative(value, base_dir: str):
    """A media item as ops expect it: an absolute path (relative ones taken from ``base_dir``, the
    dataset file's directory, as Data-Juicer's formatters do), or bytes unchanged. URLs (``scheme://``)
    are left as they are."""
    if not isinstance(value, str) or not value or os.path.isabs(value) or "://" in value:
        return value
    return os.path.normpath(os.path.join(base_dir, value))


def digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\x00")
    return h.hexdigest()[:32]


def produced_path(source: str, op_name: str, save_dir: str | None, config: dict) -> str:
    """The path a mapper writes its version of ``source`` to (see the module docstring); Refused when the
    trust policy does not let it be written."""
    if save_dir:
        trust.check_write(save_dir, f"{op_name}.save_dir")
        new_dir = os.path.abspath(save_dir)
    elif os.environ.get("DJ_PRODUCED_DATA_DIR"):
        new_dir = os.path.join(os.path.abspath(os.environ["DJ_PRODUCED_DATA_DIR"]), op_name)
    else:
        src_dir = os.path.dirname(os.path.abspath(source))
        token = f"/{PRODUCED_DIR}/"
        if token in src_dir + "/":
            src_dir = (src_dir + "/").split(token)[0]
        new_dir = os.path.join(src_dir, PRODUCED_DIR, op_name)
    stem, ext = os.path.splitext(os.path.basename(source))
    stem = _HASH.split(stem)[0]
    out = os.path.join(new_dir, f"{stem}__dj_hash_#{digest(config, source)}#{ext}")
    return trust.check_write(out, f"{op_name}: produced file")


def write_atomic(path: str, write) -> None:
    """``write(tmp_path)`` then rename to ``path`` (directories created); Refused when the trust policy
    does not let ``path`` be written."""
    trust.check_write(path, "produced file")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
