"""Jacobians of the OCP terms against central finite differences on the manifold.

Every dynamics, integrator, residual, activation and cost of ``geppetto.ocp``
is checked with the public helpers of :mod:`geppetto.ocp.checks` (states
perturbed with ``state.integrate``, step h = eps^(1/3)), on ur5 (armature,
damping), panda (damping) and talos (free-flyer root, floating-base
actuation), at K = 3 seeded random knots with references that differ per
knot (a leading K axis).  Errors are scaled by the size of the derivative,
``max|analytical - numerical| / max(1, max|numerical|)``: truncation O(h^2)
~ 4e-11 and rounding O(eps |y| / h) ~ 4e-11 |y| leave the tolerance 1e-6
(ABA of talos' light limbs reaches |ddq| ~ 1e3 at random states).

The frame velocity residual is also compared with Pinocchio's
``getFrameVelocity`` and ``getFrameVelocityDerivatives`` (1e-10).  In
LOCAL_WORLD_ALIGNED, Pinocchio's dv/dq holds the frame's origin fixed: the
derivative of the residual adds the motion of the origin, [w x J_lin; 0]
(w the frame's angular velocity, J_lin the linear rows of its LWA Jacobian),
and only with that term does it match the finite differences.
"""
import functools

import numpy as np
import pytest

import geppetto as gp
from geppetto import ocp
from ocp_cases import (K, ROBOTS, controls, frame_placements, free_dynamics, rng_for,
                       robot, rotations, states)

RTOL_FD = 1e-6
RTOL_PIN = 1e-10
ROBOT_NAMES = tuple(ROBOTS)


# --- dynamics and integrators ------------------------------------------------------------

@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_free_dynamics(name):
    dynamics = free_dynamics(name)
    model = robot(name).model
    errors = ocp.check_dynamics(dynamics, states(model), controls(name))
    assert max(errors) < RTOL_FD, errors


@pytest.mark.parametrize("scheme", ocp.INTEGRATORS)
@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_integrator(name, scheme):
    dynamics = free_dynamics(name)
    model = robot(name).model
    integrator = ocp.Integrator(dynamics, 0.01, scheme)
    errors = ocp.check_integrator(integrator, states(model, seed=1), controls(name, seed=1))
    assert max(errors) < RTOL_FD, errors


@functools.lru_cache(maxsize=None)
def lie_tree():
    """A random tree on a free-flyer root with spherical and planar joints among the
    others: every Lie block of integrate and difference."""
    return gp.robots.builtin.random_tree(6, seed=11, root_joint="free-flyer")


@pytest.mark.parametrize("scheme", ocp.INTEGRATORS)
def test_integrator_on_every_lie_group(scheme):
    model = lie_tree()
    integrator = ocp.Integrator(ocp.FreeDynamics(model), 0.01, scheme)
    rng = np.random.default_rng(7)
    xs = np.hstack([gp.dynamics.random_configuration(model, rng, size=K),
                    rng.standard_normal((K, model.nv))])
    errors = ocp.check_integrator(integrator, xs, rng.standard_normal((K, model.nv)))
    assert max(errors) < RTOL_FD, errors


@pytest.mark.parametrize("name", ("lie_tree", "ur5"))
def test_chain_integrate_is_the_dense_chain_rule(name):
    """Fx = Dx + Ddx (s A), Fu = Ddx (s B), the products taken on the Lie rows only,
    equal the dense products of the integrate Jacobians (NumPy)."""
    model = lie_tree() if name == "lie_tree" else robot(name).model
    state = ocp.StateMultibody(model)
    rng = np.random.default_rng(3)
    xs = np.hstack([gp.dynamics.random_configuration(model, rng, size=K),
                    rng.standard_normal((K, model.nv))])
    dxs = rng.standard_normal((K, state.ndx))
    A = rng.standard_normal((K, state.ndx, state.ndx))
    B = rng.standard_normal((K, state.ndx, 4))
    Fx, Fu = state.chain_integrate(dxs, A, B, np.empty_like(A), np.empty_like(B), 0.3)
    Dx, Ddx = state.jacobians_integrate(xs, dxs)
    np.testing.assert_allclose(Fx, Dx + Ddx @ (0.3 * A), rtol=0, atol=1e-14)
    np.testing.assert_allclose(Fu, Ddx @ (0.3 * B), rtol=0, atol=1e-14)


@pytest.mark.parametrize("arg", ("x0", "x1"))
def test_jacobian_difference(arg):
    """d (x1 (-) x0) / d arg against central differences on the manifold, and equal to
    the matching half of jacobians_difference."""
    model = lie_tree()
    state = ocp.StateMultibody(model)
    x0s, x1s = states(model, seed=4), states(model, seed=5)
    D = state.jacobian_difference(x0s, x1s, arg)
    if arg == "x0":
        numerical = ocp.checks._central_x(lambda x: state.difference(x, x1s), state, x0s,
                                          ocp.checks.STEP)
    else:
        numerical = ocp.checks._central_x(lambda x: state.difference(x0s, x), state, x1s,
                                          ocp.checks.STEP)
    assert ocp.checks.scaled_error(D, numerical) < RTOL_FD
    pair = state.jacobians_difference(x0s, x1s)
    np.testing.assert_array_equal(D, pair[0 if arg == "x0" else 1])
    d = state.difference(x0s, x1s)
    np.testing.assert_array_equal(state.jacobian_difference(x0s, x1s, arg, d), D)


def test_floating_base_actuation_leaves_the_base_unactuated():
    model = robot("talos").model
    dynamics = free_dynamics("talos")
    assert dynamics.nu == model.nv - 6
    data = dynamics.create_data(K)
    _, _, f_u = dynamics.calc_diff(data, states(model), controls("talos"))
    # f_u = [0; M^-1 B]: zero rows for the configuration part
    assert np.all(f_u[:, :model.nv] == 0.0)
    assert np.abs(f_u[:, model.nv:]).max() > 0.0


def test_damping_and_armature_change_the_dynamics():
    model = robot("ur5").model
    xs, us = states(model), controls("ur5")
    plain = ocp.FreeDynamics(model)
    f_plain = plain.calc(plain.create_data(K), xs, us).copy()
    f_ours = free_dynamics("ur5").calc(free_dynamics("ur5").create_data(K), xs, us)
    assert np.array_equal(f_plain[:, :model.nv], f_ours[:, :model.nv])
    assert np.abs(f_plain[:, model.nv:] - f_ours[:, model.nv:]).max() > 1e-3


# --- residuals -------------------------------------------------------------------------

def _residual(kind, name, xs):
    """A residual of ``kind`` on robot ``name`` with per-knot references near xs."""
    model = robot(name).model
    frame = ROBOTS[name]
    dynamics = free_dynamics(name)
    rng = rng_for(name, 7)
    R, p = frame_placements(model, xs, frame)
    near_R = R @ rotations(rng, K, 1.0)
    if kind == "state":
        return ocp.StateResidual(dynamics.state, states(model, seed=9))
    if kind == "control":
        return ocp.ControlResidual(dynamics.nu, rng.standard_normal((K, dynamics.nu)))
    if kind == "frame_translation":
        return ocp.FrameTranslationResidual(model, frame, p + 0.1 * rng.standard_normal((K, 3)))
    if kind == "frame_rotation":
        return ocp.FrameRotationResidual(model, frame, near_R)
    if kind == "frame_placement":
        return ocp.FramePlacementResidual(model, frame, near_R,
                                          p + 0.1 * rng.standard_normal((K, 3)))
    if kind.startswith("frame_velocity"):
        reference_frame = kind[len("frame_velocity_"):].upper()
        return ocp.FrameVelocityResidual(model, frame, rng.standard_normal((K, 6)),
                                         reference_frame)
    if kind == "center_of_mass":
        return ocp.CenterOfMassResidual(model, rng.standard_normal((K, 3)))
    if kind == "joint_torque":
        return ocp.JointTorqueResidual(model, rng.standard_normal((K, model.nv)))
    raise ValueError(kind)


RESIDUALS = ("state", "control", "frame_translation", "frame_rotation", "frame_placement",
             "frame_velocity_local", "frame_velocity_local_world_aligned",
             "frame_velocity_world", "center_of_mass", "joint_torque")


@pytest.mark.parametrize("kind", RESIDUALS)
@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_residual(name, kind):
    model = robot(name).model
    xs = states(model, seed=2)
    residual = _residual(kind, name, xs)
    state = free_dynamics(name).state
    if kind == "joint_torque":     # controls are the accelerations
        us = rng_for(name, 3).standard_normal((K, model.nv))
    else:
        us = controls(name, seed=2)
    errors = ocp.check_residual(residual, state, xs, us)
    assert max(errors) < RTOL_FD, errors
    if residual.uses_control:
        assert errors.Ru is not None


def test_residual_values():
    """The values the Jacobians are checked around, against independent formulas."""
    name = "panda"
    model = robot(name).model
    xs = states(model, seed=4)
    state = free_dynamics(name).state
    data = model.create_data()
    R, p = frame_placements(model, xs, ROBOTS[name])
    rng = rng_for(name, 8)
    target = rng.standard_normal((K, 3))

    def value(residual, us=None):
        ev_data = residual.create_data(K, state.ndx, 0 if us is None else us.shape[1])
        kin = model.create_data()
        kin.resize(K)
        for k in range(K):
            gp.dynamics.compute_joint_jacobians(model, data, xs[k, :model.nq])
            kin.oR[k], kin.op[k], kin.J[k] = data.oR[0], data.op[0], data.J[0]
        residual.calc(ev_data, kin, xs, us)
        return ev_data.r

    r = value(ocp.FrameTranslationResidual(model, ROBOTS[name], target))
    np.testing.assert_allclose(r, p - target, atol=1e-12)
    r = value(ocp.FrameRotationResidual(model, ROBOTS[name], R))
    np.testing.assert_allclose(r, 0.0, atol=1e-7)
    com = np.array([gp.dynamics.center_of_mass(model, data, x[:model.nq]) for x in xs])
    r = value(ocp.CenterOfMassResidual(model, target))
    np.testing.assert_allclose(r, com - target, atol=1e-12)
    J = np.array([gp.dynamics.frame_jacobian(model, data, x[:model.nq], ROBOTS[name],
                                             gp.dynamics.LOCAL_WORLD_ALIGNED) for x in xs])
    r = value(ocp.FrameVelocityResidual(model, ROBOTS[name], None,
                                        gp.dynamics.LOCAL_WORLD_ALIGNED))
    np.testing.assert_allclose(r, np.einsum("kij,kj->ki", J, xs[:, model.nq:]), atol=1e-12)


@pytest.mark.parametrize("reference_frame", ["LOCAL", "LOCAL_WORLD_ALIGNED", "WORLD"])
@pytest.mark.parametrize("name", ["panda", "talos"])
def test_frame_velocity_against_pinocchio(name, reference_frame):
    pin = pytest.importorskip("pinocchio")
    rob = robot(name)
    model = rob.model
    root = pin.JointModelFreeFlyer() if name == "talos" else None
    pin_model = (pin.buildModelFromUrdf(rob.urdf_path, root) if root is not None
                 else pin.buildModelFromUrdf(rob.urdf_path))
    pin_data = pin_model.createData()
    frame = ROBOTS[name]
    pin_frame = pin_model.getFrameId(frame)
    rf = getattr(pin.ReferenceFrame, reference_frame)
    xs = states(model, seed=5)
    residual = ocp.FrameVelocityResidual(model, frame, None, reference_frame)
    state = free_dynamics(name).state
    data = residual.create_data(K, state.ndx, 0)
    kin = model.create_data()
    kin.resize(K)
    from geppetto.dynamics.kinematics import _compute_joint_jacobians
    _compute_joint_jacobians(model.arrays, np.ascontiguousarray(xs[:, :model.nq]), kin.liR,
                             kin.lip, kin.oR, kin.op, kin.J)
    residual.calc_diff(data, kin, xs, None)
    nq, nv = model.nq, model.nv
    for k in range(K):
        q, v = xs[k, :nq], xs[k, nq:]
        pin.computeForwardKinematicsDerivatives(pin_model, pin_data, q, v, np.zeros(nv))
        pin.updateFramePlacements(pin_model, pin_data)
        velocity = pin.getFrameVelocity(pin_model, pin_data, pin_frame, rf).vector
        dv_dq, dv_dv = pin.getFrameVelocityDerivatives(pin_model, pin_data, pin_frame, rf)
        if reference_frame == "LOCAL_WORLD_ALIGNED":
            dv_dq[:3] += np.cross(velocity[3:, None], dv_dv[:3], axis=0)
        np.testing.assert_allclose(data.r[k], velocity, atol=RTOL_PIN, err_msg="velocity")
        scale = max(1.0, np.abs(dv_dq).max())
        np.testing.assert_allclose(data.Rx[k, :, :nv], dv_dq, atol=RTOL_PIN * scale,
                                   err_msg="d/dq")
        np.testing.assert_allclose(data.Rx[k, :, nv:], dv_dv, atol=RTOL_PIN, err_msg="d/dv")


@pytest.mark.parametrize("reference_frame", ["LOCAL", "LOCAL_WORLD_ALIGNED", "WORLD"])
def test_frame_velocity_against_kinematics_derivatives(reference_frame):
    """The residual's own kernel (reading the stage's kinematics) against
    ``geppetto.dynamics.frame_velocity_derivatives`` on talos' K knots (both give
    the true derivative in LOCAL_WORLD_ALIGNED, with the motion of the origin)."""
    name = "talos"
    model = robot(name).model
    frame = ROBOTS[name]
    xs = states(model, seed=6)
    nq, nv = model.nq, model.nv
    data = model.create_data()
    gp.dynamics.compute_forward_kinematics_derivatives(model, data, xs[:, :nq], xs[:, nq:],
                                                       np.zeros((K, nv)))
    dv_dq, dv_dv = gp.dynamics.frame_velocity_derivatives(model, data, frame, reference_frame)
    residual = ocp.FrameVelocityResidual(model, frame, None, reference_frame)
    rdata = residual.create_data(K, 2 * nv, 0)
    residual.calc_diff(rdata, data, xs, None)        # data holds oR, op, J of the K knots
    np.testing.assert_allclose(rdata.Rx[:, :, nv:], dv_dv, atol=1e-12)
    np.testing.assert_allclose(rdata.Rx[:, :, :nv], dv_dq,
                               atol=1e-11 * max(1.0, np.abs(dv_dq).max()))


# --- activations and costs -----------------------------------------------------------

def _activations(nr, rng):
    lower = -0.5 * np.ones(nr)
    return {
        "quadratic": ocp.Quadratic(),
        "weighted": ocp.WeightedQuadratic(rng.uniform(0.1, 2.0, nr)),
        "barrier": ocp.QuadraticBarrier(lower, -lower),
        "smooth1": ocp.Smooth1Norm(1e-2),
        "smooth2": ocp.Smooth2Norm(1e-2),
    }


ACTIVATIONS = ("quadratic", "weighted", "barrier", "smooth1", "smooth2")


@pytest.mark.parametrize("kind", ACTIVATIONS)
def test_activation(kind):
    rng = rng_for(kind)
    nr = 6
    activation = _activations(nr, rng)[kind]
    rs = rng.uniform(-2.0, 2.0, (20, nr))
    rs[np.abs(np.abs(rs) - 0.5) < 1e-3] = 1.0     # away from the barrier's kinks
    errors = ocp.check_activation(activation, rs)
    assert max(errors) < RTOL_FD, errors


def test_barrier_is_zero_inside_the_bounds():
    activation = ocp.QuadraticBarrier(-np.ones(3), np.ones(3))
    from geppetto.ocp.checks import _activation_values
    value, a_r, A_rr = _activation_values(activation, np.array([[0.5, -0.9, 0.0],
                                                                [2.0, 0.0, -3.0]]))
    np.testing.assert_array_equal(value, [0.0, 0.5 * (1.0 + 4.0)])
    np.testing.assert_array_equal(a_r[1], [1.0, 0.0, -2.0])
    np.testing.assert_array_equal(np.diagonal(A_rr[1]), [1.0, 0.0, 1.0])


@pytest.mark.parametrize("kind", ACTIVATIONS)
@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_cost(name, kind):
    """weight * activation(frame placement): the gradient (Lx, Lu) of each knot."""
    model = robot(name).model
    xs = states(model, seed=6)
    residual = _residual("frame_placement", name, xs)
    cost = ocp.Cost(residual, _activations(6, rng_for(name, 11))[kind], weight=3.0)
    errors = ocp.check_cost(cost, free_dynamics(name).state, xs, controls(name))
    assert max(errors) < RTOL_FD, errors


def test_cost_of_controls():
    name = "ur5"
    model = robot(name).model
    dynamics = free_dynamics(name)
    us = controls(name)
    cost = ocp.Cost(ocp.ControlResidual(dynamics.nu, np.ones(dynamics.nu)),
                    ocp.WeightedQuadratic(np.arange(1.0, dynamics.nu + 1)), weight=0.5)
    errors = ocp.check_cost(cost, dynamics.state, states(model), us)
    assert max(errors) < RTOL_FD, errors
