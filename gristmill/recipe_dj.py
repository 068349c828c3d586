"""Data-Juicer recipe-level keys that need more than a field: the ``dataset:`` block and
``custom_operator_paths``."""
from __future__ import annotations

import importlib
import math
import os
import sys


def dataset_block(data: dict, source: str) -> tuple[dict, list[str]]:
    """Data-Juicer's ``dataset: {configs: [{type: local, path, weight}], max_sample_num}``, with Data-Juicer
    1.6.1's meaning: the local datasets are read one after another (a concatenation) and, without
    ``max_sample_num``, the weights are not used. With ``max_sample_num`` each dataset contributes
    ``ceil(max_sample_num * w / sum(w))`` rows (the last ones capped so the total is ``max_sample_num``; a
    dataset given 0 is left out), drawn at random: here each dataset becomes a source whose chain starts with
    ``random_selector: {select_num: n}`` (the same counts; not the same rows as Data-Juicer's shuffle, and a
    dataset with fewer rows than its count is used once, not repeated). ``dataset_path``, when also given,
    wins (as in Data-Juicer). Returns the recipe data with the block replaced, and warnings."""
    from .recipe import RecipeError
    data = dict(data)
    block = data.pop("dataset")
    warnings: list[str] = []
    if data.get("dataset_path") is not None or data.get("sources") is not None:
        warnings.append("`dataset` ignored: `dataset_path` (or `sources`) is set and wins, as in Data-Juicer")
        return data, warnings
    where = f"{source}: dataset"
    if not isinstance(block, dict) or not isinstance(block.get("configs"), list) or not block["configs"]:
        raise RecipeError(f"{where}: expected {{configs: [{{type: local, path: ..., weight: ...}}, ...]}}")
    unknown = sorted(set(block) - {"configs", "max_sample_num"})
    if unknown:
        warnings.append(f"dataset: keys with no effect here: {', '.join(unknown)}")
    paths, weights = [], []
    for i, c in enumerate(block["configs"]):
        at = f"{where}.configs[{i}]"
        if not isinstance(c, dict):
            raise RecipeError(f"{at}: expected a mapping {{type: local, path: ...}}")
        kind = c.get("type", "local")
        if kind != "local":
            raise RecipeError(f"{at}: type {kind!r} is not read here (only 'local': files on this machine); "
                              f"download the data and give its path")
        if not isinstance(c.get("path"), str):
            raise RecipeError(f"{at}: `path` (a file, directory or glob) is required")
        w = c.get("weight", 1.0)
        if not isinstance(w, (int, float)) or isinstance(w, bool) or w < 0 or not math.isfinite(w):
            raise RecipeError(f"{at}.weight: a number ≥ 0, got {w!r}")
        extra = sorted(set(c) - {"type", "path", "weight", "source"})
        if extra:
            warnings.append(f"dataset.configs[{i}]: keys with no effect here: {', '.join(extra)}")
        paths.append(c["path"])
        weights.append(float(w))
    max_n = block.get("max_sample_num")
    if max_n is None:
        if any(w != 1.0 for w in weights):
            warnings.append("dataset: the weights have no effect without max_sample_num (as in Data-Juicer 1.6.1): "
                            "every dataset is read whole")
        data["dataset_path"] = paths if len(paths) > 1 else paths[0]
        return data, warnings
    if isinstance(max_n, bool) or not isinstance(max_n, int) or max_n <= 0:
        raise RecipeError(f"{where}.max_sample_num: a positive integer, got {max_n!r}")
    counts = sample_numbers(weights, max_n)
    sources = []
    for i, (p, n) in enumerate(zip(paths, counts)):
        if n <= 0:
            warnings.append(f"dataset.configs[{i}] ({p}): 0 of max_sample_num {max_n} rows, left out")
            continue
        sources.append({"name": f"dataset{i}", "path": p, "process": [{"random_selector": {"select_num": n}}]})
    if not sources:
        raise RecipeError(f"{where}: max_sample_num {max_n} leaves no rows to any dataset")
    data["sources"] = sources
    return data, warnings


def sample_numbers(weights: list[float], max_n: int) -> list[int]:
    """Rows per dataset for ``max_sample_num`` (Data-Juicer's rule): ceil of the normalised share, each
    capped by what is left of the total."""
    total = sum(weights)
    if total <= 0:
        from .recipe import RecipeError
        raise RecipeError("dataset: the weights sum to 0")
    out, used = [], 0
    for w in weights:
        n = min(int(math.ceil(max_n * (w / total))), max_n - used)
        out.append(n)
        used += n
    return out


def load_custom_operators(paths: list[str], base: str) -> list[str]:
    """Import user op modules (``.py`` files) or packages (directories with ``__init__.py``) so that their
    ``@register`` ops can be named in the recipe. Each is imported by name from its parent directory, which
    goes at the end of ``sys.path`` (worker processes inherit it, so they unpickle the ops from the same module).
    Relative paths are taken from ``base`` (the recipe's directory). A name already imported from another
    file is an error (Data-Juicer's rule). Returns the module names."""
    names = []
    for p in paths:
        path = os.path.abspath(os.path.join(base, os.path.expanduser(p)))
        if os.path.isfile(path) and path.endswith(".py"):
            parent, name = os.path.dirname(path), os.path.basename(path)[:-3]
            where = path
        elif os.path.isdir(path):
            if not os.path.isfile(os.path.join(path, "__init__.py")):
                raise ValueError(f"{p}: a package directory needs an __init__.py")
            parent, name = os.path.dirname(path.rstrip(os.sep)), os.path.basename(path.rstrip(os.sep))
            where = os.path.join(path, "__init__.py")
        else:
            raise ValueError(f"{p}: no such .py file or package directory ({path})")
        if not name.isidentifier():
            raise ValueError(f"{p}: {name!r} is not a Python module name")
        have = sys.modules.get(name)
        if have is not None:
            if os.path.abspath(getattr(have, "__file__", "") or "") != where:
                raise ValueError(f"{p}: a module named {name!r} is already imported from "
                                 f"{getattr(have, '__file__', None) or 'the standard library'}; rename the file")
            names.append(name)
            continue
        if parent not in sys.path:
            sys.path.append(parent)  # last: the user's directory never shadows an installed module
        mod = importlib.import_module(name)
        if os.path.abspath(getattr(mod, "__file__", "") or "") != where:
            raise ValueError(f"{p}: the name {name!r} is taken by {getattr(mod, '__file__', None)}; rename the file")
        names.append(name)
    return names
