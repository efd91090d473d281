"""Identities the dynamics functions satisfy among themselves, on every model.

M(q) is symmetric positive definite; ABA inverts RNEA; compute_minverse
inverts CRBA; RNEA = M a + b; b - g is quadratic in v; the generalized
gravity is the gradient of the potential energy; T = 1/2 v^T M v; Jacobians
map v to the velocities forward kinematics computes and to the time
derivatives of placements and of the centre of mass; external forces enter
through J^T; the Lie-group operations invert each other.  Derivatives are
central differences on the manifold (integrate along a tangent vector).
"""
import numpy as np
import pytest

import geppetto.dynamics as gd

N_STATES = 10
H = 1e-6  # finite-difference step on the manifold


@pytest.fixture(scope="module")
def states(case):
    return case.states(N_STATES, seed=7)


def _log3(R):
    """Rotation vector of a rotation matrix (angles well below pi here)."""
    angle = np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0))
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / 2.0
    return w if angle < 1e-12 else w * angle / np.sin(angle)


def test_mass_matrix_symmetric_positive_definite(case, states, assert_close):
    m, d = case.model, case.data()
    for k in range(N_STATES):
        M = gd.crba(m, d, states.q[k])
        assert_close(M, M.T, 1e-14, f"M symmetric, state {k}")
        assert np.min(np.linalg.eigvalsh(M)) > 0.0, f"M positive definite, state {k}"
        Minv = gd.compute_minverse(m, d, states.q[k])
        assert_close(Minv, Minv.T, 1e-14, f"M^-1 symmetric, state {k}")


def test_minverse_inverts_crba(case, states, assert_close):
    m, d = case.model, case.data()
    eye = np.eye(m.nv)
    for k in range(N_STATES):
        M = gd.crba(m, d, states.q[k])
        Minv = gd.compute_minverse(m, d, states.q[k])
        tol = 1e-13 * np.linalg.cond(M)
        assert_close(Minv @ M, eye, tol, f"M^-1 M = I, state {k}")
        assert_close(M @ Minv, eye, tol, f"M M^-1 = I, state {k}")


def test_aba_inverts_rnea(case, states, assert_close):
    m, d = case.model, case.data()
    s = states
    for k in range(N_STATES):
        cond = np.linalg.cond(gd.crba(m, d, s.q[k]))
        tau = gd.rnea(m, d, s.q[k], s.v[k], s.a[k], s.f_ext[k])
        assert_close(gd.aba(m, d, s.q[k], s.v[k], tau, s.f_ext[k]), s.a[k], 1e-13 * cond,
                     f"aba(rnea(a)) = a, state {k}")
        ddq = gd.aba(m, d, s.q[k], s.v[k], s.tau[k])
        assert_close(gd.rnea(m, d, s.q[k], s.v[k], ddq), s.tau[k], 1e-13 * cond,
                     f"rnea(aba(tau)) = tau, state {k}")


def test_rnea_is_M_a_plus_b(case, states, assert_close):
    m, d = case.model, case.data()
    s = states
    for k in range(N_STATES):
        M = gd.crba(m, d, s.q[k])
        b = gd.nonlinear_effects(m, d, s.q[k], s.v[k])
        assert_close(gd.rnea(m, d, s.q[k], s.v[k], s.a[k]), M @ s.a[k] + b, 1e-12,
                     f"rnea = M a + b, state {k}")
        g = gd.generalized_gravity(m, d, s.q[k])
        assert_close(gd.nonlinear_effects(m, d, s.q[k], np.zeros(m.nv)), g, 1e-14,
                     f"b(q, 0) = g, state {k}")
        c2 = gd.nonlinear_effects(m, d, s.q[k], 2.0 * s.v[k]) - g
        assert_close(c2, 4.0 * (b - g), 1e-12, f"C(q, v) v quadratic in v, state {k}")
        assert_close(gd.rnea(m, d, s.q[k], np.zeros(m.nv), s.a[k]) - g, M @ s.a[k], 1e-12,
                     f"rnea(q, 0, a) - g = M a, state {k}")


def test_minverse_gives_aba(case, states, assert_close):
    m, d = case.model, case.data()
    s = states
    for k in range(N_STATES):
        Minv = gd.compute_minverse(m, d, s.q[k])
        b = gd.nonlinear_effects(m, d, s.q[k], s.v[k])
        cond = np.linalg.cond(Minv)
        assert_close(gd.aba(m, d, s.q[k], s.v[k], s.tau[k]), Minv @ (s.tau[k] - b),
                     1e-13 * cond, f"aba = M^-1 (tau - b), state {k}")


def test_external_forces_enter_through_jacobians(case, states, assert_close):
    """rnea(f) = rnea - sum_i J_i^T f_i, aba(tau, f) = aba(tau + sum_i J_i^T f_i),
    J_i the LOCAL Jacobian of joint i; the universe's force is ignored."""
    m, d = case.model, case.data()
    s = states
    for k in range(N_STATES):
        generalized = sum(gd.joint_jacobian(m, d, s.q[k], i, gd.LOCAL).T @ s.f_ext[k, i]
                          for i in range(1, m.njoints))
        tau = gd.rnea(m, d, s.q[k], s.v[k], s.a[k])
        assert_close(gd.rnea(m, d, s.q[k], s.v[k], s.a[k], s.f_ext[k]), tau - generalized,
                     1e-12, f"rnea with f_ext, state {k}")
        ddq = gd.aba(m, d, s.q[k], s.v[k], s.tau[k] + generalized)
        cond = np.linalg.cond(gd.crba(m, d, s.q[k]))
        assert_close(gd.aba(m, d, s.q[k], s.v[k], s.tau[k], s.f_ext[k]), ddq, 1e-13 * cond,
                     f"aba with f_ext, state {k}")
        f_universe = np.zeros_like(s.f_ext[k])
        f_universe[0] = s.f_ext[k, 0]
        assert_close(gd.rnea(m, d, s.q[k], s.v[k], s.a[k], f_universe), tau, 0.0,
                     f"the universe's external force is ignored, state {k}")


def test_kinetic_energy_is_quadratic_form(case, states, assert_close):
    m, d = case.model, case.data()
    for k in range(N_STATES):
        M = gd.crba(m, d, states.q[k])
        v = states.v[k]
        assert_close(gd.kinetic_energy(m, d, states.q[k], v), 0.5 * v @ M @ v, 1e-12,
                     f"T = 1/2 v^T M v, state {k}")


def test_gravity_is_gradient_of_potential_energy(case, states, assert_close):
    m, d = case.model, case.data()
    for k in range(N_STATES):
        q = states.q[k]
        grad = np.empty(m.nv)
        for i in range(m.nv):
            e = np.zeros(m.nv)
            e[i] = H
            grad[i] = (gd.potential_energy(m, d, gd.integrate(m, q, e))
                       - gd.potential_energy(m, d, gd.integrate(m, q, -e))) / (2 * H)
        scale = max(1.0, abs(gd.potential_energy(m, d, q)))
        assert_close(gd.generalized_gravity(m, d, q), grad, 1e-8 * scale,
                     f"g = dV/dq, state {k}")


def test_jacobians_map_velocities(case, states, assert_close):
    """J_i v is the LOCAL velocity forward_kinematics computes for joint i; the
    LOCAL_WORLD_ALIGNED frame Jacobian and the CoM Jacobian give the time
    derivatives of the frame placement and of the centre of mass."""
    m, d = case.model, case.data()
    s = states
    for k in range(N_STATES):
        q, v = s.q[k], s.v[k]
        gd.forward_kinematics(m, d, q, v)
        velocities = d.v[0].copy()
        J_world = gd.compute_joint_jacobians(m, d, q)
        for i in range(m.njoints):
            J = gd.joint_jacobian(m, d, q, i, gd.LOCAL)
            assert_close(J @ v, velocities[i], 1e-12, f"J_{i} v = v_{i}, state {k}")
        assert_close(gd.joint_jacobian(m, d, q, m.njoints - 1, gd.WORLD),
                     np.where(_support_columns(m, m.njoints - 1), J_world, 0.0), 1e-14,
                     f"WORLD joint Jacobian = supporting columns of data.J, state {k}")
        q_plus, q_minus = gd.integrate(m, q, H * v), gd.integrate(m, q, -H * v)
        for fid in sorted({0, m.nframes // 2, m.nframes - 1}):
            R_plus, p_plus = gd.frame_placement(m, d, fid, q=q_plus)
            R_minus, p_minus = gd.frame_placement(m, d, fid, q=q_minus)
            dp = (p_plus - p_minus) / (2 * H)
            omega = _log3(R_plus @ R_minus.T) / (2 * H)
            J = gd.frame_jacobian(m, d, q, fid, gd.LOCAL_WORLD_ALIGNED)
            scale = max(1.0, np.max(np.abs(J @ v)))
            assert_close(J @ v, np.concatenate([dp, omega]), 1e-7 * scale,
                         f"frame {fid} velocity, state {k}")
        dcom = (gd.center_of_mass(m, d, q_plus) - gd.center_of_mass(m, d, q_minus)) / (2 * H)
        Jcom = gd.jacobian_center_of_mass(m, d, q)
        assert_close(Jcom @ v, dcom, 1e-7 * max(1.0, np.max(np.abs(Jcom @ v))),
                     f"Jcom v = d com / dt, state {k}")


def _support_columns(m, joint):
    """(1, nv) mask of the dofs of joint and of its ancestors."""
    mask = np.zeros((1, m.nv), dtype=bool)
    while joint > 0:
        iv = m.idx_vs[joint]
        mask[0, iv:iv + m.nvs[joint]] = True
        joint = m.parents[joint]
    return mask


def test_integrate_and_difference_invert_each_other(case, states, assert_close):
    m = case.model
    s = states
    for k in range(N_STATES):
        v = 0.3 * s.v[k]  # rotations well below pi: log is the inverse of exp
        assert_close(gd.difference(m, s.q[k], gd.integrate(m, s.q[k], v)), v, 1e-12,
                     f"difference(q, integrate(q, v)) = v, state {k}")
        dq = gd.difference(m, s.q[k], s.q1[k])
        back = gd.integrate(m, s.q[k], dq)
        assert_close(gd.difference(m, s.q1[k], back), np.zeros(m.nv), 1e-10,
                     f"integrate(q0, difference(q0, q1)) = q1, state {k}")
        assert_close(gd.difference(m, s.q1[k], s.q[k]), -dq, 1e-10,
                     f"difference(q1, q0) = -difference(q0, q1), state {k}")
        assert_close(gd.difference(m, s.q[k], s.q[k]), np.zeros(m.nv), 1e-14,
                     f"difference(q, q) = 0, state {k}")
        assert_close(gd.integrate(m, s.q[k], np.zeros(m.nv)), s.q[k], 1e-15,
                     f"integrate(q, 0) = q, state {k}")


def test_interpolate(case, states, assert_close):
    m = case.model
    s = states
    for k in range(N_STATES):
        q0, q1 = s.q[k], s.q1[k]
        assert_close(gd.interpolate(m, q0, q1, 0.0), q0, 1e-15, f"u = 0, state {k}")
        assert_close(gd.difference(m, q1, gd.interpolate(m, q0, q1, 1.0)), np.zeros(m.nv),
                     1e-10, f"u = 1, state {k}")
        u = s.u[k]
        dq = gd.difference(m, q0, q1)
        assert_close(gd.interpolate(m, q0, q1, u), gd.integrate(m, q0, u * dq), 1e-14,
                     f"interpolate = integrate(q0, u dq), state {k}")
        mid = gd.interpolate(m, q0, q1, 0.5)
        assert_close(gd.difference(m, q0, mid), gd.difference(m, mid, q1), 1e-10,
                     f"the midpoint is halfway, state {k}")


def _unit_coordinates(m):
    """Mask (nq,) of the coordinates of quaternions and (cos, sin) pairs."""
    mask = np.zeros(m.nq, dtype=bool)
    offsets = {gd.FREE_FLYER: (3, 4), gd.SPHERICAL: (0, 4), gd.REVOLUTE_UNBOUNDED: (0, 2),
               gd.PLANAR: (2, 2)}
    for i in range(1, m.njoints):
        if int(m.joint_types[i]) in offsets:
            start, length = offsets[int(m.joint_types[i])]
            mask[m.idx_qs[i] + start:m.idx_qs[i] + start + length] = True
    return mask


def test_neutral_and_normalize(case, states, assert_close):
    m = case.model
    q = gd.neutral(m)
    assert q.shape == (m.nq,)
    assert_close(gd.normalize(m, q), q, 0.0, "neutral is normalized")
    assert_close(gd.integrate(m, q, np.zeros(m.nv)), q, 0.0, "integrate(neutral, 0)")
    unit = _unit_coordinates(m)
    np.testing.assert_array_equal(q[~unit], 0.0)
    for k in range(N_STATES):
        scaled = 1.5 * states.q[k]
        expected = np.where(unit, states.q[k], scaled)
        assert_close(gd.normalize(m, scaled), expected, 1e-15, f"normalize, state {k}")
    assert_close(gd.normalize(m, 1.5 * states.q), np.where(unit, states.q, 1.5 * states.q),
                 1e-15, "normalize a stack")


def test_random_configuration(case, assert_close):
    m = case.model
    lower, upper = m.lower_position_limit, m.upper_position_limit
    bounded = (lower > -1e10) & (upper < 1e10)
    q = gd.random_configuration(m, np.random.default_rng(5), size=50,
                                lower=np.where(bounded, lower, -1.0),
                                upper=np.where(bounded, upper, 1.0))
    assert q.shape == (50, m.nq) and np.all(np.isfinite(q))
    assert_close(gd.normalize(m, q), q, 1e-14, "unit quaternions and (cos, sin) pairs")
    assert np.all((q >= lower - 1e-12) & (q <= upper + 1e-12))
    again = gd.random_configuration(m, np.random.default_rng(5), size=50,
                                    lower=np.where(bounded, lower, -1.0),
                                    upper=np.where(bounded, upper, 1.0))
    np.testing.assert_array_equal(q, again)
    assert gd.random_configuration(m, 0).shape == (m.nq,)


@pytest.mark.parametrize("name", ["solo12", "talos", "random_tree_ff"])
def test_random_configuration_with_default_limits(load_case, name):
    """Pinocchio's URDF parser bounds a free-flyer's translation by +-DBL_MAX
    (geppetto's loader copies it): random_configuration must still work with
    the model's own limits, the documented ``random_configuration(model, rng)``."""
    m = load_case(name).model
    q = gd.random_configuration(m, np.random.default_rng(0), size=5)
    assert q.shape == (5, m.nq) and np.all(np.isfinite(q))
    gd.crba(m, m.create_data(), q)  # valid configurations


def test_pendulum_closed_form(load_case, assert_close):
    """ddq = -g / l sin(q) for the built-in pendulum (l = 1)."""
    m = load_case("pendulum").model
    d = m.create_data()
    q = np.linspace(-3.0, 3.0, 13)[:, None]
    ddq = gd.aba(m, d, q, np.zeros_like(q), np.zeros_like(q))
    assert_close(ddq[:, 0], -9.81 * np.sin(q[:, 0]), 1e-12, "pendulum ddq")
    assert_close(gd.crba(m, d, q)[:, 0, 0], np.ones(13), 1e-14, "pendulum M = m l^2")
