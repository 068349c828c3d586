"""gristmill: raw corpora → training-ready data (clean, filter, dedup, tokenize, pack)."""
from .dataset import Dataset
from .registry import all_ops, create_op, register

__all__ = ["Dataset", "all_ops", "create_op", "register"]
__version__ = "0.1.0"
