"""The built-in custom dynamics (unicycle, quadrotor): analytical Jacobians against
central finite differences (``check_dynamics``, ``check_integrator``), the
physics they model (closed-form unicycle arcs, quadrotor hover, free fall and
torque balance), and problems built on them.  Errors are scaled as in
:mod:`geppetto.ocp.checks`; tolerance 1e-7 (these fields are smooth and of
order one)."""
import numpy as np
import pytest

from geppetto import ocp
from geppetto.dynamics.config import kernel

RTOL_FD = 1e-7


def _unicycle_states(rng, K=8):
    return rng.uniform(-3.0, 3.0, (K, 3)), rng.uniform(-2.0, 2.0, (K, 2))


def _quadrotor_states(rng, K=8):
    xs = rng.uniform(-1.0, 1.0, (K, 12))
    xs[:, 3:6] = rng.uniform(-1.2, 1.2, (K, 3))     # away from pitch = +-pi/2
    return xs, rng.uniform(0.0, 3.0, (K, 4))


QUADROTORS = {
    "x": lambda: ocp.quadrotor(),
    "plus_full_inertia": lambda: ocp.quadrotor(
        mass=1.2, inertia=[[2e-2, 1e-3, 2e-3], [1e-3, 3e-2, -1e-3], [2e-3, -1e-3, 4e-2]],
        arm_length=0.25, torque_coefficient=0.02, configuration="+"),
}


def test_unicycle_jacobians():
    rng = np.random.default_rng(0)
    xs, us = _unicycle_states(rng)
    errors = ocp.check_dynamics(ocp.unicycle(), xs, us)
    assert max(errors) < RTOL_FD, errors


@pytest.mark.parametrize("variant", QUADROTORS)
def test_quadrotor_jacobians(variant):
    rng = np.random.default_rng(1)
    xs, us = _quadrotor_states(rng)
    errors = ocp.check_dynamics(QUADROTORS[variant](), xs, us)
    assert max(errors) < RTOL_FD, errors


@pytest.mark.parametrize("scheme", ["explicit_euler", "rk2", "rk3", "rk4"])
@pytest.mark.parametrize("which", ["unicycle", "quadrotor"])
def test_custom_integrators(which, scheme):
    rng = np.random.default_rng(2)
    if which == "unicycle":
        dynamics, (xs, us) = ocp.unicycle(), _unicycle_states(rng)
    else:
        dynamics, (xs, us) = ocp.quadrotor(), _quadrotor_states(rng)
    errors = ocp.check_integrator(ocp.Integrator(dynamics, 0.05, scheme), xs, us)
    assert max(errors) < RTOL_FD, errors


def test_unicycle_follows_a_circle():
    """Constant (v, omega): an arc of radius v / omega, which RK4 tracks to O(dt^4)."""
    v, omega, dt, N = 1.0, 0.5, 0.05, 40
    dynamics = ocp.unicycle()
    model = ocp.StageModel(dynamics, [], dt=dt, integrator="rk4")
    problem = ocp.ShootingProblem(np.zeros(3), [model] * N, ocp.TerminalModel(dynamics.state))
    xs = problem.rollout(np.tile([v, omega], (N, 1)))
    t = dt * np.arange(N + 1)
    exact = np.stack([v / omega * np.sin(omega * t), v / omega * (1.0 - np.cos(omega * t)),
                      omega * t], axis=1)
    np.testing.assert_allclose(xs, exact, atol=1e-7)


def test_quadrotor_physics():
    quad = ocp.quadrotor(mass=0.8)
    data = quad.create_data(3)
    xs = np.zeros((3, 12))
    xs[1, 5] = 0.7                                  # a yaw changes nothing at hover
    xs[2, 3] = 0.3                                  # a roll tilts the thrust
    hover = np.full((3, 4), quad.hover_thrust)
    f = quad.calc(data, xs, hover)
    np.testing.assert_allclose(f[:2], 0.0, atol=1e-12)
    np.testing.assert_allclose(f[2, 6:9], 9.81 * np.array([0.0, -np.sin(0.3),
                                                           np.cos(0.3) - 1.0]), atol=1e-14)
    # free fall without thrust; equal thrusts make no torque; a differential pair yaws
    f = quad.calc(data, xs, np.zeros((3, 4)))
    np.testing.assert_allclose(f[:, 8], -9.81)
    torque = quad.torque_map @ np.array([1.0, 0.0, 1.0, 0.0])
    np.testing.assert_allclose(torque[:2], 0.0, atol=1e-15)
    assert torque[2] < 0.0
    np.testing.assert_allclose(quad.torque_map @ np.ones(4), 0.0, atol=1e-15)


def test_quadrotor_rejects_bad_parameters():
    with pytest.raises(ValueError, match="mass"):
        ocp.quadrotor(mass=-1.0)
    with pytest.raises(ValueError, match="positive definite"):
        ocp.quadrotor(inertia=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="configuration"):
        ocp.quadrotor(configuration="h")
    with pytest.raises(ValueError, match="torque_map"):
        ocp.quadrotor(torque_map=np.ones((3, 3)))
    with pytest.raises(ValueError, match="symplectic"):
        ocp.StageModel(ocp.quadrotor(), [], integrator="semi_implicit_euler")
    with pytest.raises(ValueError, match="symplectic"):
        ocp.StageModel(ocp.quadrotor(), [], integrator="euler")
    assert ocp.StageModel(ocp.quadrotor(), []).integrator.scheme == "explicit_euler"


@pytest.mark.parametrize("scheme", ["explicit_euler", "rk4"])
def test_quadrotor_problem(scheme):
    """A two-phase quadrotor problem: gradient of the total cost, rollout = integrator."""
    quad = ocp.quadrotor()
    state = quad.state
    rng = np.random.default_rng(3)
    N = 5
    target = np.zeros(12)
    target[:3] = [1.0, 0.5, 1.0]
    goal = ocp.Cost(ocp.StateResidual(state, target), ocp.WeightedQuadratic(
        np.r_[np.ones(3), 0.1 * np.ones(9)]))
    u_reg = ocp.Cost(ocp.ControlResidual(4, np.full(4, quad.hover_thrust)), weight=1e-2)
    smooth = ocp.Cost(ocp.StateResidual(state, np.tile(target, (2, 1))), ocp.Smooth2Norm())
    first = ocp.StageModel(quad, [u_reg, smooth], dt=0.05, integrator=scheme)
    second = ocp.StageModel(quad, [goal, u_reg], dt=0.02, integrator="rk2")
    terminal = ocp.TerminalModel(state, [ocp.Cost(goal.residual, weight=10.0)])
    problem = ocp.ShootingProblem(np.zeros(12), [first] * 2 + [second] * 3, terminal)
    us = quad.hover_thrust + 0.3 * rng.standard_normal((N, 4))
    xs = problem.rollout(us)
    for k, model in enumerate(problem.running_models):
        step = model.integrator.calc(model.integrator.create_data(1), xs[k:k + 1], us[k:k + 1])
        np.testing.assert_array_equal(xs[k + 1], step[0])
    xs = xs + 0.1 * rng.standard_normal(xs.shape)
    errors = ocp.check_problem_gradient(problem, xs, us)
    assert max(errors) < RTOL_FD, errors
    problem.calc(xs, us)
    assert np.abs(problem.gaps(xs)).max() > 0.0


@kernel
def _pendulum_calc(xs, us, params, f):
    for k in range(xs.shape[0]):
        f[k, 0] = xs[k, 1]
        f[k, 1] = -params[0] * np.sin(xs[k, 0]) + us[k, 0]


@kernel
def _pendulum_calc_diff_wrong(xs, us, params, f, f_x, f_u):
    _pendulum_calc(xs, us, params, f)
    for k in range(xs.shape[0]):
        f_x[k, 0, 0], f_x[k, 0, 1] = 0.0, 1.0
        f_x[k, 1, 0], f_x[k, 1, 1] = params[0] * np.cos(xs[k, 0]), 0.0   # sign error
        f_u[k, 0, 0], f_u[k, 1, 0] = 0.0, 1.0


def test_user_dynamics_with_a_wrong_jacobian_is_caught():
    """What the helpers are for: a sign error in a user's f_x shows up."""
    pendulum = ocp.CustomDynamics(2, 1, _pendulum_calc, _pendulum_calc_diff_wrong,
                                  params=[9.81], nq=1)
    rng = np.random.default_rng(4)
    errors = ocp.check_dynamics(pendulum, rng.uniform(0.2, 1.0, (4, 2)),
                                rng.standard_normal((4, 1)))
    assert errors.f_x > 1.0 and errors.f_u < RTOL_FD
