"""numba's CPU target checks for a BLAS by importing scipy.linalg (~0.2 s of CPU per process, issue 25);
``executor.defer_blas_check`` answers that check from scipy's files, so a process running gristmill's kernels
does not import scipy.linalg, and numba's answer and a kernel that does call BLAS are unchanged."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("numba")

CHILD = r"""
import json, sys
import numpy as np
import gristmill.ops.text.gopher  # a kernel module: imports numba
from gristmill.engine.executor import warm_worker
warm_worker(["gristmill.ops.text.gopher"])  # what the fork server and every task do before the first kernel
import numba, numba.np.arraymath as arraymath, numba.np.linalg as linalg
out = {"scipy_linalg": "scipy.linalg" in sys.modules, "have_blas": arraymath._HAVE_BLAS,
       "restored": linalg.ensure_blas.__module__ == "numba.np.linalg" and arraymath.ensure_blas is linalg.ensure_blas}
dot = numba.njit(lambda a, b: np.dot(a, b))  # a kernel that calls BLAS: scipy.linalg is imported for it
out["dot"] = float(dot(np.arange(3.0), np.arange(3.0)))
out["scipy_linalg_after"] = "scipy.linalg" in sys.modules
print(json.dumps(out))
"""

REFERENCE = r"""
import json
import numba.np.arraymath as arraymath
print(json.dumps(arraymath._HAVE_BLAS))
"""


def _run(code):
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_kernels_run_without_scipy_linalg_and_blas_still_works():
    got = _run(CHILD)
    assert got["scipy_linalg"] is False
    assert got["have_blas"] == _run(REFERENCE)  # numba's own answer, in a process without the deferral
    assert got["restored"]
    assert got["dot"] == 5.0 and got["scipy_linalg_after"] is True
