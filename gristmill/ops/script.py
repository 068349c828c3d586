"""User code as ops (Data-Juicer's python_lambda_mapper / python_file_mapper). They run arbitrary Python,
so recipes must opt in with ``allow_scripts: true``. Per-row Python by nature."""
from __future__ import annotations

import importlib.util

import pyarrow as pa
from pydantic import Field

from ..core import columns as C
from ..core import trust
from ..registry import register
from .base import Mapper, Params


class _ScriptMapper(Mapper):
    is_script = True

    def _fn(self):
        raise NotImplementedError

    def process_batch(self, batch):
        fn = self.resource("fn", self._fn)
        if self.params.batched:
            out = fn(batch.to_pydict())
            return pa.RecordBatch.from_pydict(out)
        rows = [fn(r) for r in C.to_pylist(batch)]  # fields as read, raw JSON ones decoded
        for r in rows:
            if not isinstance(r, dict):
                raise TypeError(f"{self.name}: function must return a dict sample, got {type(r).__name__}")
        return C.from_records(rows)


@register("python_lambda_mapper")
class PythonLambdaMapper(_ScriptMapper):
    """Apply a Python lambda to each sample (a dict) or, with ``batched``, to a dict of column lists."""

    class Params(Params):
        lambda_str: str = Field("", description="e.g. \"lambda s: {**s, 'text': s['text'].lower()}\"")
        batched: bool = Field(False, description="The lambda takes and returns a dict of lists.")

    def __init__(self, **params):
        super().__init__(**params)
        if not self.params.lambda_str.strip().startswith("lambda"):
            raise ValueError("lambda_str must be a Python lambda expression")
        compile(self.params.lambda_str, "<lambda_str>", "eval")

    def _fn(self):
        return eval(self.params.lambda_str, {})  # noqa: S307 - explicitly enabled user code


@register("python_file_mapper")
class PythonFileMapper(_ScriptMapper):
    """Apply a function from a Python file to each sample (or batch, with ``batched``)."""

    class Params(Params):
        file_path: str = trust.path_param("read", "", description="Python file defining the function.")
        function_name: str = Field("process_single", description="Name of the function to call.")
        batched: bool = Field(False, description="The function takes and returns a dict of lists.")

    def _fn(self):
        spec = importlib.util.spec_from_file_location("gristmill_user_script", self.params.file_path)
        if spec is None or spec.loader is None:
            raise FileNotFoundError(self.params.file_path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fn = getattr(mod, self.params.function_name, None)
        if not callable(fn):
            raise AttributeError(f"{self.params.file_path} has no function {self.params.function_name!r}")
        return fn
