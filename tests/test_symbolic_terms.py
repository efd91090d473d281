"""CasADi twins of the OCP terms (solvers/symbolic_terms.py) against the Numba terms.

For every residual type, the twin's value r and Jacobians Rx (tangent space,
through x (+) dx) and Ru equal the Numba residual's ``calc_diff`` outputs to
1e-10 (scaled by the size of the result) at seeded random points: kinematic
residuals on ur5 and panda (fixed base), solo12 and talos (free flyer); contact
forces, friction cones (pyramid and smooth) on solo12's point feet, LOCAL
and LOCAL_WORLD_ALIGNED, under ContactDynamics and ImpulseDynamics; centre
of pressure and 6D forces on talos's soles.  The twin of a stage's discrete
dynamics x' = F(x, u) equals the integrator's x', Fx, Fu for contact and
impulse stages; the twin of every activation equals its Numba value.
"""
import functools

import casadi as ca
import numpy as np
import pytest

import geppetto as gp
from geppetto.dynamics.constraints import contact_3d, contact_6d
from geppetto.dynamics.kinematics import LOCAL, LOCAL_WORLD_ALIGNED
from geppetto.ocp.costs import _activate
from geppetto.solvers import symbolic_terms as twins

TOLERANCE = 1e-10
K = 3
SOLO_FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
TALOS_SOLES = ("left_sole_link", "right_sole_link")


@functools.lru_cache(maxsize=None)
def robot(name):
    return gp.robots.load(name)


def random_rotation(rng):
    q = rng.standard_normal(4)
    q /= np.linalg.norm(q)
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def random_points(dynamics, seed, around=None):
    """(xs (K, nx), us (K, nu)): random configurations and velocities (around the
    robot's q0 for contact stages, where the contacts are regular) and controls."""
    model = dynamics.model
    rng = np.random.default_rng(seed)
    if around is None:
        qs = gp.dynamics.random_configuration(model, rng, size=K)
    else:
        dq = 0.1 * rng.standard_normal((K, model.nv))
        qs = gp.dynamics.integrate(model, np.repeat(around[None], K, axis=0), dq)
    xs = np.hstack([qs, rng.standard_normal((K, model.nv))])
    us = rng.standard_normal((K, dynamics.nu))
    if around is not None:
        us += dynamics.quasi_static(xs)
    return xs, us


def numba_residual(residual, dynamics, xs, us):
    """(r, Rx, Ru) of the Numba residual at the knots, as a stage evaluates it: the
    dynamics' calc_diff first (kinematics, contact forces), then the residual's."""
    data = dynamics.create_data(K)
    dynamics.calc_diff(data, xs, us)
    rdata = residual.create_data(K, dynamics.state.ndx, dynamics.nu)
    residual.calc_diff(rdata, data.dynamics, xs, us)
    return rdata, (rdata.r, rdata.Rx, rdata.Ru)


def assert_close(actual, desired, what):
    scale = max(1.0, float(np.max(np.abs(desired), initial=0.0)))
    error = float(np.max(np.abs(actual - desired), initial=0.0))
    assert error <= TOLERANCE * scale, f"{what}: |twin - numba| = {error:.2e} (scale {scale:.1e})"


def check_twin(residual, dynamics, xs, us):
    rdata, expected = numba_residual(residual, dynamics, xs, us)
    function = twins.residual_function(residual, dynamics.state, dynamics.nu)
    refs = twins.flat_references(residual, rdata, K)
    for k in range(K):
        outputs = function(xs[k], us[k], refs[k])
        for name, value, numba in zip(("r", "Rx", "Ru"), outputs, expected):
            value = np.asarray(value)
            assert_close(value.reshape(numba[k].shape), numba[k],
                         f"{type(residual).__name__} {name} knot {k}")


def kinematic_residuals(model, dynamics, frame, rng):
    R, p = random_rotation(rng), rng.standard_normal(3)
    residuals = [
        gp.ocp.StateResidual(dynamics.state, np.concatenate(
            [gp.dynamics.random_configuration(model, rng), rng.standard_normal(model.nv)])),
        gp.ocp.ControlResidual(dynamics.nu, rng.standard_normal(dynamics.nu)),
        gp.ocp.FrameTranslationResidual(model, frame, p),
        gp.ocp.FrameTranslationResidual(model, frame, p, axes=[2, 0]),
        gp.ocp.FrameRotationResidual(model, frame, R),
        gp.ocp.FramePlacementResidual(model, frame, R, p),
        gp.ocp.CenterOfMassResidual(model, p)]
    residuals += [gp.ocp.FrameVelocityResidual(model, frame, rng.standard_normal(6), reference)
                  for reference in ("LOCAL", "LOCAL_WORLD_ALIGNED", "WORLD")]
    if dynamics.nu == model.nv:
        residuals.append(gp.ocp.JointTorqueResidual(model, rng.standard_normal(model.nv)))
    return residuals


@pytest.mark.parametrize("name, frame", [("ur5", "tool0"), ("panda", "panda_hand"),
                                         ("solo12", "FL_FOOT"), ("talos", "left_sole_link")])
def test_kinematic_residual_twins_equal_numba(name, frame):
    model = robot(name).model
    dynamics = gp.ocp.FreeDynamics(model)
    rng = np.random.default_rng(7)
    xs, us = random_points(dynamics, seed=8)
    for residual in kinematic_residuals(model, dynamics, frame, rng):
        check_twin(residual, dynamics, xs, us)


def test_placement_and_rotation_twins_near_pi_and_identity():
    """log3 / log6 branches: a reference at the frame's own placement (r = 0) and one
    rotated by nearly pi about a random axis."""
    model = robot("ur5").model
    dynamics = gp.ocp.FreeDynamics(model)
    xs, us = random_points(dynamics, seed=9)
    data = model.create_data()
    R, p = gp.dynamics.frame_placement(model, data, model.frame_id("tool0"),
                                       xs[0, :model.nq])
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    angle = np.pi - 1e-3
    W = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    flip = np.eye(3) + np.sin(angle) * W + (1 - np.cos(angle)) * W @ W      # Rodrigues
    same = xs[:1].repeat(K, 0)
    for reference in (R, R @ flip):
        check_twin(gp.ocp.FramePlacementResidual(model, "tool0", reference, p), dynamics,
                   same, us)
        check_twin(gp.ocp.FrameRotationResidual(model, "tool0", reference), dynamics, same, us)


@functools.lru_cache(maxsize=None)
def solo12_contacts(reference, impulse=False):
    model = robot("solo12").model
    constraints = [contact_3d(model, foot, reference=reference, Kp=2.0, Kd=1.0)
                   for foot in SOLO_FEET]
    if impulse:
        return gp.ocp.ImpulseDynamics(model, constraints, restitution=0.2)
    return gp.ocp.ContactDynamics(model, constraints)


def force_residuals(dynamics, rng):
    foot = dynamics.constraints.names[1]
    return [gp.ocp.ContactForceResidual(dynamics, foot, rng.standard_normal(3)),
            gp.ocp.FrictionConeResidual(dynamics, foot, 0.7, normal=[0.1, -0.2, 1.0]),
            gp.ocp.FrictionConeResidual(dynamics, foot, 0.7, inner=False, min_force=1.0),
            gp.ocp.SmoothFrictionConeResidual(dynamics, foot, 0.7, eps=0.3)]


@pytest.mark.parametrize("reference", [LOCAL, LOCAL_WORLD_ALIGNED])
@pytest.mark.parametrize("impulse", [False, True])
def test_contact_force_twins_equal_numba_on_solo12(reference, impulse):
    dynamics = solo12_contacts(reference, impulse)
    xs, us = random_points(dynamics, seed=10, around=robot("solo12").q0)
    for residual in force_residuals(dynamics, np.random.default_rng(11)):
        check_twin(residual, dynamics, xs, us)


@pytest.mark.parametrize("reference", [LOCAL, LOCAL_WORLD_ALIGNED])
def test_sole_twins_equal_numba_on_talos(reference):
    model = robot("talos").model
    dynamics = gp.ocp.ContactDynamics(model, [contact_6d(model, sole, reference=reference)
                                              for sole in TALOS_SOLES])
    xs, us = random_points(dynamics, seed=12, around=robot("talos").q0)
    rng = np.random.default_rng(13)
    for residual in (gp.ocp.ContactForceResidual(dynamics, 0, rng.standard_normal(6)),
                     gp.ocp.CenterOfPressureResidual(dynamics, 1, 0.2, 0.1),
                     gp.ocp.FrictionConeResidual(dynamics, 1, 0.5)):
        check_twin(residual, dynamics, xs, us)


def step_function(stage):
    """Function (x, u) -> (x', Fx, Fu) of the twin of a stage's discrete dynamics, with
    Fx, Fu the Jacobians of F(x (+) dx, u + du) (-) F(x, u) at 0 (ocp.integrators)."""
    sx_state = twins.SymbolicState(stage.state)
    x, u = ca.SX.sym("x", stage.state.nx), ca.SX.sym("u", stage.nu)
    dx, du = ca.SX.sym("dx", stage.state.ndx), ca.SX.sym("du", stage.nu)
    xnext = twins.next_state(stage, twins.KnotPoint(sx_state, sx_state.integrate(x, dx), u + du))
    zeros = [ca.SX.zeros(stage.state.ndx), ca.SX.zeros(stage.nu)]
    F0 = ca.substitute([xnext], [dx, du], zeros)[0]
    gap = sx_state.difference(F0, xnext)
    Fx, Fu = ca.substitute([ca.jacobian(gap, dx), ca.jacobian(gap, du)], [dx, du], zeros)
    return ca.Function("step", [x, u], [F0, Fx, Fu])


@pytest.mark.parametrize("case", ["contact_rk4", "contact_semi_implicit", "impulse"])
def test_stage_step_twins_equal_numba(case):
    impulse = case == "impulse"
    dynamics = solo12_contacts(LOCAL_WORLD_ALIGNED, impulse)
    if impulse:
        stage = gp.ocp.StageModel(dynamics, dt=1.0)
    else:
        scheme = "rk4" if case == "contact_rk4" else "semi_implicit_euler"
        stage = gp.ocp.StageModel(dynamics, dt=0.01, integrator=scheme)
    xs, us = random_points(dynamics, seed=14, around=robot("solo12").q0)
    idata = stage.integrator.create_data(K)
    stage.integrator.calc_diff(idata, xs, us)
    function = step_function(stage)
    for k in range(K):
        xnext, Fx, Fu = (np.asarray(o) for o in function(xs[k], us[k]))
        assert_close(xnext.ravel(), idata.xnext[k], "x'")
        assert_close(Fx, idata.Fx[k], "Fx")
        assert_close(Fu, idata.Fu[k], "Fu")


@pytest.mark.parametrize("activation", [
    gp.ocp.Quadratic(), gp.ocp.WeightedQuadratic([1.0, 0.5, 2.0, 0.0]),
    gp.ocp.QuadraticBarrier([-0.5, -1.0, 0.0, -0.1], [0.5, 1.0, 0.2, 0.1]),
    gp.ocp.Smooth1Norm(1e-2), gp.ocp.Smooth2Norm(1e-2)])
def test_activation_twins_equal_numba(activation):
    rng = np.random.default_rng(15)
    r = rng.standard_normal((K, 4))
    params = activation.parameters(4)
    value, a_r, A_rr = np.zeros(K), np.zeros((K, 4)), np.zeros((K, 4, 4))
    _activate(activation.code, params, r, value, a_r, A_rr)
    symbol = ca.SX.sym("r", 4)
    a = twins.activation(activation.code, params, symbol)
    function = ca.Function("a", [symbol], [a, ca.gradient(a, symbol)])
    for k in range(K):
        twin_value, twin_gradient = (np.asarray(o).ravel() for o in function(r[k]))
        assert_close(twin_value, value[k:k + 1], "a")
        assert_close(twin_gradient, a_r[k], "a_r")


@pytest.mark.parametrize("name", ["unicycle", "quadrotor"])
def test_custom_dynamics_fields_equal_numba(name):
    """The ``symbolic=`` field of the built-in CustomDynamics against their Numba kernels:
    f, f_x, f_u (CasADi AD)."""
    dynamics = getattr(gp.ocp, name)()
    rng = np.random.default_rng(19)
    xs = rng.uniform(-1.0, 1.0, (K, dynamics.state.nx))
    us = rng.uniform(0.0, 2.0, (K, dynamics.nu))
    data = dynamics.create_data(K)
    dynamics.calc_diff(data, xs, us)
    x, u = ca.SX.sym("x", dynamics.state.nx), ca.SX.sym("u", dynamics.nu)
    f = twins.field(dynamics, twins.KnotPoint(twins.SymbolicState(dynamics.state), x, u))
    function = ca.Function("f", [x, u], [f, ca.jacobian(f, x), ca.jacobian(f, u)])
    for k in range(K):
        f_k, f_x, f_u = (np.asarray(o) for o in function(xs[k], us[k]))
        assert_close(f_k.ravel(), data.f[k], "f")
        assert_close(f_x, data.f_x[k], "f_x")
        assert_close(f_u, data.f_u[k], "f_u")
