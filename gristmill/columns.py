"""``gristmill.columns`` is :mod:`gristmill.core.columns` (the column conventions moved into the core package);
this name stays for scripts and notebooks that import it. Code inside gristmill imports ``core.columns``."""
import sys

from .core import columns as _columns

sys.modules[__name__] = _columns
