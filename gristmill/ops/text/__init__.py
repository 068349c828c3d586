"""Text cleaning and filtering ops."""
import os as _os

from .._numba_cache import refresh as _refresh

_refresh(_os.path.dirname(__file__))  # before any kernel module is imported
