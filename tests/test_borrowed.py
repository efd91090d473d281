"""borrowed_all: a kernel's argument tuples (nested, with scalars and a ModelArrays) with
every array's memory owner dropped; the views read and write the caller's memory with
the same shapes and strides, and anything but an array or a tuple is refused."""
import numba
import numpy as np
import pytest

import geppetto as gp
from geppetto.dynamics.borrowed import borrowed_all


@numba.njit
def _write_through(nested, model):
    """Through borrowed views: a[i] += 1, b[i, j] = scale * (i + 10 j) on the strided view,
    and the model's joint count and parents' sum, read back."""
    (a, (b, scale)), m = borrowed_all((nested, model))
    for i in range(a.shape[0]):
        a[i] += 1.0
    for i in range(b.shape[0]):
        for j in range(b.shape[1]):
            b[i, j] = scale * (i + 10 * j)
    return m.njoints, m.parents.sum(), b.strides[0], b.strides[1]


@numba.njit
def _borrow_scalar(x):
    return borrowed_all(x)


def test_borrowed_all_views_are_the_callers_memory():
    model = gp.robots.load("ur5").model
    a = np.arange(4.0)
    base = np.zeros((6, 8))
    b = base[::2, 1::3]                                  # (3, 3), not contiguous
    njoints, parents, stride0, stride1 = _write_through((a, (b, 2.0)), model.arrays)
    np.testing.assert_array_equal(a, np.arange(4.0) + 1.0)
    i, j = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
    np.testing.assert_array_equal(b, 2.0 * (i + 10 * j))
    assert np.count_nonzero(base) == np.count_nonzero(b)  # nothing written elsewhere
    assert (stride0, stride1) == b.strides
    assert njoints == model.arrays.njoints and parents == model.arrays.parents.sum()


def test_borrowed_all_refuses_a_scalar():
    with pytest.raises(numba.core.errors.TypingError):
        _borrow_scalar(1.0)
