"""Batched calls: a stack of K states gives the same results as K single calls.

The single form has no batch axis; the stack form has a leading K axis on
every output (and on the Data arrays it fills: a stack leaves some intermediates
as they were, see dynamics/data.py).  A single v, a, tau or f_ext
given with a stack of configurations is used for every state.
"""
import numpy as np
import pytest

import geppetto.dynamics as gd

K = 4
RTOL = 1e-13


def _take(array, s):
    """The part of a Data array that holds the results of the call on ``s``."""
    return array[0] if s.q.ndim == 1 else array[:s.q.shape[0]]


def _frame(m):
    return m.nframes - 1


# name -> f(model, data, s) for s a single state (q (nq,), ...) or a stack
# (q (K, nq), ...); returns an array or a tuple of arrays.
CALLS = {
    "rnea": lambda m, d, s: gd.rnea(m, d, s.q, s.v, s.a),
    "rnea_f_ext": lambda m, d, s: gd.rnea(m, d, s.q, s.v, s.a, s.f_ext),
    # a stack fills tau and oMi per state, its other intermediates stay in scratch
    # (dynamics/data.py); one state fills every field, as Pinocchio does
    "rnea_data": lambda m, d, s: (gd.rnea(m, d, s.q, s.v, s.a, s.f_ext), _take(d.tau, s),
                                  _take(d.oR, s), _take(d.op, s)),
    "nonlinear_effects": lambda m, d, s: gd.nonlinear_effects(m, d, s.q, s.v),
    "generalized_gravity": lambda m, d, s: gd.generalized_gravity(m, d, s.q),
    "crba": lambda m, d, s: (gd.crba(m, d, s.q), _take(d.oR, s), _take(d.op, s)),
    "aba": lambda m, d, s: gd.aba(m, d, s.q, s.v, s.tau),
    "aba_f_ext": lambda m, d, s: (gd.aba(m, d, s.q, s.v, s.tau, s.f_ext), _take(d.ddq, s)),
    "compute_minverse": lambda m, d, s: (gd.compute_minverse(m, d, s.q), _take(d.Minv, s)),
    "forward_kinematics": lambda m, d, s: gd.forward_kinematics(m, d, s.q),
    "forward_kinematics_va": lambda m, d, s: gd.forward_kinematics(m, d, s.q, s.v, s.a) + (
        _take(d.v, s), _take(d.a, s), _take(d.liR, s), _take(d.lip, s)),
    "update_frame_placements": lambda m, d, s: (
        gd.forward_kinematics(m, d, s.q), gd.update_frame_placements(m, d),
        _take(d.oRf, s), _take(d.opf, s))[2:],
    "frame_placement": lambda m, d, s: (gd.forward_kinematics(m, d, s.q),
                                        gd.frame_placement(m, d, _frame(m)))[1],
    "frame_placement_q": lambda m, d, s: gd.frame_placement(m, d, _frame(m), q=s.q),
    "frame_jacobian_local": lambda m, d, s: gd.frame_jacobian(m, d, s.q, _frame(m), gd.LOCAL),
    "frame_jacobian_world": lambda m, d, s: gd.frame_jacobian(m, d, s.q, _frame(m), gd.WORLD),
    "frame_jacobian_lwa": lambda m, d, s: gd.frame_jacobian(m, d, s.q, _frame(m),
                                                            gd.LOCAL_WORLD_ALIGNED),
    "joint_jacobian": lambda m, d, s: gd.joint_jacobian(m, d, s.q, m.njoints - 1,
                                                        gd.LOCAL_WORLD_ALIGNED),
    "compute_joint_jacobians": lambda m, d, s: (gd.compute_joint_jacobians(m, d, s.q),
                                                _take(d.J, s)),
    "center_of_mass": lambda m, d, s: (gd.center_of_mass(m, d, s.q), _take(d.com, s),
                                       _take(d.mass, s)),
    "jacobian_center_of_mass": lambda m, d, s: (gd.jacobian_center_of_mass(m, d, s.q),
                                                _take(d.com, s)),
    "kinetic_energy": lambda m, d, s: gd.kinetic_energy(m, d, s.q, s.v),
    "potential_energy": lambda m, d, s: gd.potential_energy(m, d, s.q),
    "integrate": lambda m, d, s: gd.integrate(m, s.q, s.v),
    "difference": lambda m, d, s: gd.difference(m, s.q, s.q1),
    "interpolate": lambda m, d, s: gd.interpolate(m, s.q, s.q1, s.u),
    "normalize": lambda m, d, s: gd.normalize(m, s.q),
}


def _as_tuple(out):
    return tuple(np.asarray(x) for x in out) if isinstance(out, tuple) else (np.asarray(out),)


def _single(s, k):
    return type(s)(*(x[k] for x in s))


@pytest.fixture(scope="module")
def stack(case):
    return case.states(K, seed=1)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_stack_equals_single_calls(case, stack, name, assert_close):
    m, call = case.model, CALLS[name]
    singles = [_as_tuple(call(m, case.data(), _single(stack, k))) for k in range(K)]
    batched = _as_tuple(call(m, case.data(), stack))
    assert len(batched) == len(singles[0])
    for j, out in enumerate(batched):
        assert out.shape == (K,) + singles[0][j].shape, f"{name} output {j}"
        for k in range(K):
            assert_close(out[k], singles[k][j], RTOL, f"{name} output {j}, state {k}")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_stack_of_one_keeps_the_axis(case, stack, name, assert_close):
    m, call = case.model, CALLS[name]
    one = type(stack)(*(x[:1] for x in stack))
    single = _as_tuple(call(m, case.data(), _single(stack, 0)))
    batched = _as_tuple(call(m, case.data(), one))
    for j, out in enumerate(batched):
        assert out.shape == (1,) + single[j].shape, f"{name} output {j}"
        assert_close(out[0], single[j], RTOL, f"{name} output {j}")


def test_crba_returns_its_own_array(case, stack, assert_close):
    """crba returns a new array that no later call on the same Data changes (a stack is
    written straight into it, not into data.M); data.M holds M after a one-state call."""
    m, d = case.model, case.data()
    first = gd.crba(m, d, stack.q)
    kept = first.copy()
    reversed_stack = np.ascontiguousarray(stack.q[::-1])
    second = gd.crba(m, d, reversed_stack)
    one = gd.crba(m, d, stack.q[1])
    one_kept = one.copy()
    gd.crba(m, d, stack.q[2])
    gd.crba(m, d, stack.q[:1])
    assert np.array_equal(first, kept)
    assert np.array_equal(one, one_kept)
    assert_close(d.M[0], first[0], 0.0, "data.M after a stack of one")
    for k in range(K):
        assert_close(second[K - 1 - k], first[k], 0.0, f"reversed stack, state {k}")
    assert_close(one, first[1], RTOL, "one state")


def test_single_arguments_broadcast_over_a_stack(case, stack, assert_close):
    """v, a, tau, f_ext of one state are used for every configuration of a stack."""
    m, d = case.model, case.data()
    s = stack
    tiled = lambda x: np.broadcast_to(x, (K,) + np.shape(x))
    assert_close(gd.rnea(m, d, s.q, s.v[0], s.a[0], s.f_ext[0]),
                 gd.rnea(m, d, s.q, tiled(s.v[0]), tiled(s.a[0]), tiled(s.f_ext[0])),
                 RTOL, "rnea")
    assert_close(gd.aba(m, d, s.q, s.v[0], s.tau[0], s.f_ext[0]),
                 gd.aba(m, d, s.q, tiled(s.v[0]), tiled(s.tau[0]), tiled(s.f_ext[0])),
                 RTOL, "aba")
    assert_close(gd.rnea(m, d, s.q, s.v, s.a, s.f_ext[0]),
                 gd.rnea(m, d, s.q, s.v, s.a, tiled(s.f_ext[0])), RTOL, "rnea, f_ext only")
    assert_close(gd.integrate(m, s.q, s.v[0]), gd.integrate(m, s.q, tiled(s.v[0])), RTOL,
                 "integrate")
    assert_close(gd.interpolate(m, s.q, s.q1, 0.25),
                 gd.interpolate(m, s.q, s.q1, np.full(K, 0.25)), RTOL, "interpolate u")


def test_data_reused_across_batch_sizes(case, assert_close):
    """One Data serves stacks of any size and single states, in any order."""
    m = case.model
    s = case.states(7, seed=2)
    shared = case.data()
    for sl in (slice(0, 7), slice(2, 4), 5, slice(1, 6), 0):
        part = type(s)(*(x[sl] for x in s))
        fresh = case.data()
        for name in ("rnea_data", "aba_f_ext", "crba", "compute_minverse",
                     "forward_kinematics_va", "frame_placement", "center_of_mass",
                     "kinetic_energy"):
            got = _as_tuple(CALLS[name](m, shared, part))
            expected = _as_tuple(CALLS[name](m, fresh, part))
            for j, (x, y) in enumerate(zip(got, expected)):
                assert_close(x, y, 0.0, f"{name} output {j} on states {sl}")


def test_empty_stack(case):
    """A stack of zero states gives empty results of the right shapes."""
    m, d = case.model, case.data()
    q, v = np.zeros((0, m.nq)), np.zeros((0, m.nv))
    assert gd.rnea(m, d, q, v, v).shape == (0, m.nv)
    assert gd.aba(m, d, q, v, v).shape == (0, m.nv)
    assert gd.crba(m, d, q).shape == (0, m.nv, m.nv)
    assert gd.compute_minverse(m, d, q).shape == (0, m.nv, m.nv)
    assert gd.frame_jacobian(m, d, q, 0, gd.WORLD).shape == (0, 6, m.nv)
    assert gd.center_of_mass(m, d, q).shape == (0, 3)
    assert gd.kinetic_energy(m, d, q, v).shape == (0,)
    assert gd.integrate(m, q, v).shape == (0, m.nq)
    assert gd.difference(m, q, q).shape == (0, m.nv)
    assert gd.interpolate(m, q, q, 0.5).shape == (0, m.nq)
