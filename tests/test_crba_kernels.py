"""CRBA's two batch mechanisms: the joint angles' cos and sin from one vectorized loop
(``joints.sincos_table``) and the non-temporal stores of a large output stack
(``streaming.stream_copy``), each against a reference it could disagree with."""
import importlib
import math

import numpy as np
import pytest

import geppetto.dynamics as gd
from geppetto.dynamics import joints, lane_tiles
from geppetto.dynamics.config import kernel
from geppetto.dynamics.streaming import STREAM_BYTES

pin = pytest.importorskip("pinocchio")


@kernel
def _sincos_table(angles, start, stop):
    out = np.empty((2, stop - start))
    joints.sincos_table(angles, start, stop, out)
    return out


@kernel
def _sincos_lanes(angles):
    """(2, n) = cos, sin through lane_tiles.sincos_lanes, n a multiple of TILE."""
    T = lane_tiles.TILE
    out, cs = np.empty((2, angles.shape[0])), np.empty(2 * T)
    for b in range(0, angles.shape[0], T):
        lane_tiles.sincos_lanes(angles, b, cs)
        out[0, b:b + T] = cs[:T]
        out[1, b:b + T] = cs[T:]
    return out


def test_sincos_table_is_libm_to_an_ulp_and_the_lanes_to_the_bit():
    """Random angles, quadrant boundaries, angles beyond the reduction's range (libm
    there) and NaN; an offset start, as CRBA's blocks of states use."""
    rng = np.random.default_rng(15)
    angles = np.concatenate([rng.uniform(-10.0, 10.0, 1500), rng.uniform(-1e4, 1e4, 400),
                             np.arange(-8, 9) * (math.pi / 4),
                             [0.0, -0.0, 1e5 + 0.3, -3e6, 1e12, 5e-300, math.nan]])
    angles = np.concatenate([angles, np.zeros(-angles.size % lane_tiles.TILE)])
    table = _sincos_table(angles, 3, angles.size)
    finite = np.isfinite(angles[3:])
    for row, libm in ((0, np.cos), (1, np.sin)):
        exact = libm(angles[3:][finite])
        assert np.max(np.abs(table[row][finite] - exact)) <= 2.3e-16
    assert np.isnan(table[:, ~finite]).all()
    far = np.abs(angles[3:]) > joints.SINCOS_RANGE
    np.testing.assert_array_equal(table[0][far], np.cos(angles[3:][far]))
    np.testing.assert_array_equal(table[:, :-7], _sincos_lanes(angles)[:, 3:-7])


def test_crba_streamed_stack_equals_its_states(load_case, assert_close):
    """A talos stack over STREAM_BYTES (written with non-temporal stores) equals the
    states computed one by one (plain stores) to the bit, and Pinocchio to 1e-12."""
    case = load_case("talos")
    m = case.model
    K = STREAM_BYTES // (8 * m.nv * m.nv) + 3
    q = case.states(K, seed=3).q
    M = gd.crba(m, case.data(), q)
    d, pd = case.data(), case.pin_data()
    for k in (0, 1, 2, K // 2, K - 2, K - 1):
        np.testing.assert_array_equal(M[k], gd.crba(m, d, q[k]))
        M_pin = np.array(pin.crba(case.pin_model, pd, q[k]))
        assert_close(np.triu(M[k]), np.triu(M_pin), 1e-12, f"talos crba state {k}")
    assert_close(M, M.transpose(0, 2, 1), 0.0, "symmetric")


def test_crba_reaches_the_passes_its_joints_run_by_address(load_case, assert_close):
    """An arm's table of passes holds none (the free flyer's and the general joint's
    passes are not compiled for it); a free-flyer robot's holds the two free-flyer
    passes, and its M is Pinocchio's to 1e-12.  A table without the passes the model
    runs raises TypeError from the kernel instead of calling address 0."""
    from geppetto.dynamics.validation import call_kernel

    crba_module = importlib.import_module("geppetto.dynamics.crba")  # not the function

    ur5 = load_case("ur5").model
    np.testing.assert_array_equal(crba_module.crba_passes(ur5), 0)
    case = load_case("solo12")
    m = case.model
    table = crba_module.crba_passes(m)
    assert table[crba_module.GENERAL_JOINT].tolist() == [0, 0]
    assert np.all(table[[crba_module.ROOT_FREE_FLYER, crba_module.FREE_FLYER_COMPOSITE]] != 0)
    assert crba_module.crba_passes(m) is table  # kept on the model
    q = case.states(3, seed=5).q
    M = gd.crba(m, case.data(), q)
    for k in range(3):
        M_pin = np.array(pin.crba(case.pin_model, case.pin_data(), q[k]))
        assert_close(np.triu(M[k]), np.triu(M_pin), 1e-12, f"solo12 crba state {k}")
    empty = np.zeros_like(table)
    empty.flags.writeable = False
    d = case.data()
    with pytest.raises(TypeError, match="call by address"):
        call_kernel(crba_module._crba, m, q, d.oR, d.op, np.empty((3, m.nv, m.nv)), empty)
