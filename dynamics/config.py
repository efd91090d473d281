"""All Numba options of geppetto, in one place.

Every kernel in the package is compiled through :func:`kernel` so that the
flags are the same everywhere: ``cache=True`` (compile once per machine, not
once per process), ``fastmath=False`` (accuracy is the product: the results
are compared with Pinocchio to 1e-10), no object mode, and NumPy's error
model: a division by zero gives inf or NaN (which the solvers detect and
reject) instead of raising from inside a kernel, and no division pays for a
zero check.  ``NUMBA_BOUNDSCHECK=1``
in the environment turns on bounds checking for all of them, as CI does once
for the dynamics tests.
"""
import numba

NUMBA_OPTIONS = dict(cache=True, fastmath=False, nogil=True, error_model="numpy")


def kernel(function):
    """Compile ``function`` in nopython mode with the project's options."""
    return numba.njit(**NUMBA_OPTIONS)(function)


def inline_kernel(function):
    """Like :func:`kernel`, inlined into its callers at the Numba IR level.

    For the small per-joint helpers that take the whole ``ModelArrays``
    tuple: passing that tuple to a separately compiled function costs more
    than the helper's arithmetic (measured: placements 2.8 us -> 1.0 us on
    ur5), inlining removes the call.
    """
    return numba.njit(inline="always", **NUMBA_OPTIONS)(function)


def parallel_kernel(function):
    """Like :func:`kernel`, for loops written with ``numba.prange``."""
    return numba.njit(parallel=True, **NUMBA_OPTIONS)(function)
