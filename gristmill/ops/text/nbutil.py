"""``unmanaged(arr)``: a view of an array that numba does not reference-count.

numba passes arrays to compiled helper functions with an atomic reference-count increment and decrement
unless its pruning pass can prove them redundant, which it cannot for helpers with several return
paths. In the tokenizer's per-character helpers these atomic updates cost ~10x the work itself. A view
without a memory-info pointer makes them no-ops (numba skips null pointers).

Safe only while something else owns the memory for the whole use: wrap a kernel's arguments (the caller
holds them during the call), never an array the kernel allocates and then drops or replaces.
"""
from __future__ import annotations

from .._lazy_jit import lazy


def _unmanaged():
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def unmanaged(typingctx, arr):
        def codegen(context, builder, sig, args):
            a = context.make_array(sig.args[0])(context, builder, value=args[0])
            a.meminfo = cgutils.get_null_value(a.meminfo.type)
            return a._getvalue()
        return arr(arr), codegen
    return unmanaged


unmanaged = lazy(_unmanaged)  # made with the kernels, when numba is imported (ops/_lazy_jit.py)
