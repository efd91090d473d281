"""The ABA family's stack kernels (aba, compute_minverse, aba_derivatives) take the
revolute joints' cos and sin from one vectorized table per block of states
(``joints.placements_from_table``, ``joints.sincos_table``): a stack that is not a
whole number of blocks, with angles beyond the table's range (libm there), against
Pinocchio and against the same states called one at a time."""
import numpy as np
import pytest

import geppetto.dynamics as gd
from geppetto.dynamics import joints
from geppetto.dynamics.crba import SINCOS_BLOCK

pin = pytest.importorskip("pinocchio")


def _stack(case):
    """SINCOS_BLOCK + 3 states of ur5 (a full block and a partial one), two joint
    angles of the last states beyond SINCOS_RANGE, where the table's reduction of
    the angle would be wrong (1e12: libm's cos and sin there, as Pinocchio's)."""
    K = SINCOS_BLOCK + 3
    s = case.states(K, seed=15)
    q = s.q.copy()
    q[-1, 0] = 1e12 + 0.25
    q[-2, 4] = -3e9 - 1.0
    assert abs(q[-2, 4]) > joints.SINCOS_RANGE
    return q, s.v, s.tau


def test_aba_family_stack_against_pinocchio_and_single_states(load_case, assert_close):
    case = load_case("ur5")
    m, pm, pd = case.model, case.pin_model, case.pin_data()
    q, v, tau = _stack(case)
    ddq = gd.aba(m, case.data(), q, v, tau)
    Minv = gd.compute_minverse(m, case.data(), q)
    d_derivatives = case.data()
    dq, dv, dtau = gd.aba_derivatives(m, d_derivatives, q, v, tau)
    # ABA's passes inside aba_derivatives read the same table: ddq to the bit, so
    # an OCP's calc (aba) and calc_diff (aba_derivatives) agree on f
    np.testing.assert_array_equal(d_derivatives.ddq[:q.shape[0]], ddq)
    d = case.data()
    for k in range(q.shape[0]):
        # a state's table entries do not depend on its place in the block
        np.testing.assert_array_equal(ddq[k], gd.aba(m, d, q[k], v[k], tau[k]))
        np.testing.assert_array_equal(Minv[k], gd.compute_minverse(m, d, q[k]))
        for x, y in zip((dq[k], dv[k], dtau[k]), gd.aba_derivatives(m, d, q[k], v[k], tau[k])):
            np.testing.assert_array_equal(x, y)
        assert_close(ddq[k], pin.aba(pm, pd, q[k], v[k], tau[k]), 1e-12, f"aba {k}")
        Mi = np.array(pin.computeMinverse(pm, pd, q[k]))
        assert_close(Minv[k], np.triu(Mi) + np.triu(Mi, 1).T, 1e-12, f"Minv {k}")
        pin.computeABADerivatives(pm, pd, q[k], v[k], tau[k])
        assert_close(dq[k], pd.ddq_dq, 1e-12, f"ddq_dq {k}")
        assert_close(dv[k], pd.ddq_dv, 1e-12, f"ddq_dv {k}")
