"""DDP (iLQR), FDDP and BoxFDDP (issue 6).

- Crocoddyl's hierarchy and semantics: DDP carries the gaps in its backward
  pass and rolls out from x0; BoxFDDP takes FDDP's gains while infeasible,
  clamps its trials, and once feasible solves the box QP (checked against an
  enumeration of the active sets) and drops the clamped controls from Qu.
- A linear-quadratic problem (an affine, coupled double integrator in the
  plane, as CustomDynamics) is solved in one Newton iteration by every solver,
  to the solution of its dense KKT system built here with NumPy from the
  integrator's exact discretization; with control bounds, BoxFDDP reaches the
  optimum of the convex QP (checked by its KKT conditions, multiplier signs
  included).
- Nonlinear problems: pendulum and cartpole swing-up, the reaching task of
  DESIGN.md on ur5 and panda from the quasi-static guess; FDDP from a random
  infeasible warm start closes the gaps and finds the feasible start's
  optimum; DDP and FDDP agree.
- BoxFDDP never leaves the bounds (every trial is checked) and beats clipping
  the unconstrained solution.
- Callbacks, and the robustness contract: a solve that cannot progress ends
  with a status, never an exception from a kernel; bad warm starts raise
  ValueError at the border.

Every random warm start is seeded.  The NLP comparison waits for the NLP.
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest

import geppetto as gp
from geppetto.examples.reaching import reaching_problem
from geppetto.solvers import DDP, FDDP, BoxFDDP, CallbackLogger, CallbackVerbose

SOLVERS = (DDP, FDDP, BoxFDDP)


# --- a linear-quadratic problem ---------------------------------------------------------
# x = (p, v) in R^4, u in R^2: dx/dt = A x + B u + c, a damped double integrator whose
# axes are coupled by springs and whose actuation is skewed; c is a constant force.
LQ_A = np.array([[0.0, 0.0, 1.0, 0.0],
                 [0.0, 0.0, 0.0, 1.0],
                 [-0.6, 0.2, -0.3, 0.05],
                 [0.1, -0.4, 0.0, -0.2]])
LQ_B = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.3], [-0.2, 0.8]])
LQ_C = np.array([0.0, 0.0, 0.1, -0.5])
LQ_N, LQ_DT = 25, 0.1


def _lq_calc(xs, us, params, f):
    f[:] = xs @ LQ_A.T + us @ LQ_B.T + LQ_C


def _lq_calc_diff(xs, us, params, f, f_x, f_u):
    _lq_calc(xs, us, params, f)
    f_x[:] = LQ_A
    f_u[:] = LQ_B


def _lq_discretization(integrator, h):
    """(Ad, Bd, cd) with x' = Ad x + Bd u + cd, the integrator applied to the affine field."""
    n = LQ_A.shape[0]
    if integrator in ("euler", "semi_implicit_euler"):
        # symplectic Euler: w = (h f_q + h w_v, h f_v) = S h f
        S = np.eye(n)
        S[:2, 2:] = h * np.eye(2)
        return np.eye(n) + h * S @ LQ_A, h * S @ LQ_B, h * S @ LQ_C
    # Runge-Kutta of order p on a linear field is its Taylor polynomial of degree p
    order = {"explicit_euler": 1, "rk2": 2, "rk3": 3, "rk4": 4}[integrator]
    Phi, Gamma = np.zeros((n, n)), np.zeros((n, n))
    power = np.eye(n)
    for j in range(order + 1):
        Phi += power / math.factorial(j)
        if j < order:
            Gamma += h * power / math.factorial(j + 1)
        power = power @ (h * LQ_A)
    return Phi, Gamma @ LQ_B, Gamma @ LQ_C


def _lq_coast(xs, us, params, f):
    f[:] = xs @ LQ_A.T + LQ_C


def _lq_coast_diff(xs, us, params, f, f_x, f_u):
    _lq_coast(xs, us, params, f)
    f_x[:] = LQ_A


def lq_problem(integrator="explicit_euler", bounds=None, coast=()):
    """The LQ problem and everything its dense twin needs.  ``coast``: knots without
    controls (nu = 0: the field without B u, no control cost), which the dense twin
    sees as u_k = 0 (``coast_fixed``) with its control cost there a constant
    (``coast_constant``)."""
    N, dt = LQ_N, LQ_DT
    dynamics = gp.ocp.CustomDynamics(4, 2, _lq_calc, _lq_calc_diff, nq=2, name="lq")
    state = dynamics.state
    t = dt * np.arange(N)
    x_ref = np.stack([np.cos(t), np.sin(t), -np.sin(t), np.cos(t)], axis=1)   # per knot
    u_ref = np.array([0.1, -0.2])
    x_goal = np.array([1.0, -0.5, 0.0, 0.2])
    w_x, wx = 2.0, np.array([1.0, 2.0, 0.5, 0.3])
    w_u, wu = 1.5, np.array([0.5, 0.8])
    wN = np.array([50.0, 40.0, 10.0, 10.0])
    running = gp.ocp.StageModel(dynamics, [
        gp.ocp.Cost(gp.ocp.StateResidual(state, x_ref), gp.ocp.WeightedQuadratic(wx), w_x),
        gp.ocp.Cost(gp.ocp.ControlResidual(2, u_ref), gp.ocp.WeightedQuadratic(wu), w_u)],
        dt=dt, integrator=integrator, control_bounds=bounds, cost_quadrature=False)
    terminal = gp.ocp.TerminalModel(state, [
        gp.ocp.Cost(gp.ocp.StateResidual(state, x_goal), gp.ocp.WeightedQuadratic(wN))])
    x0 = np.array([0.0, 0.5, 0.3, -0.1])
    models = [running] * N
    if coast:               # one model per knot, each with its reference x_ref[k]
        coasting = gp.ocp.CustomDynamics(4, 0, _lq_coast, _lq_coast_diff, nq=2, name="coast")
        models = []
        for k in range(N):
            costs = [gp.ocp.Cost(gp.ocp.StateResidual(state, x_ref[k]),
                                 gp.ocp.WeightedQuadratic(wx), w_x)]
            if k not in coast:
                costs.append(running.costs[1])
            models.append(gp.ocp.StageModel(coasting, costs, dt=dt, integrator=integrator)
                          if k in coast else
                          gp.ocp.StageModel(dynamics, costs, dt=dt, integrator=integrator,
                                            control_bounds=bounds))
    problem = gp.ocp.ShootingProblem(x0, models, terminal)
    Ad, Bd, cd = _lq_discretization(integrator, dt)
    # dense cost 1/2 z^T H z + g^T z over z = (x_0 .. x_N, u_0 .. u_{N-1});
    # running terms scaled by dt at the knot (the stages are built with cost_quadrature=False)
    nx, nu = 4, 2
    nz = (N + 1) * nx + N * nu
    H, g = np.zeros((nz, nz)), np.zeros(nz)
    for k in range(N):
        ix, iu = _x_block(k), _u_block(k, N)
        H[ix, ix] = dt * w_x * np.diag(wx)
        g[ix] = -dt * w_x * wx * x_ref[k]
        H[iu, iu] = dt * w_u * np.diag(wu)
        g[iu] = -dt * w_u * wu * u_ref
    H[_x_block(N), _x_block(N)] = np.diag(wN)
    g[_x_block(N)] = -wN * x_goal
    # dynamics C z = d: x_0 = x0, x_{k+1} - Ad x_k - Bd u_k = cd
    C, d = np.zeros(((N + 1) * nx, nz)), np.zeros((N + 1) * nx)
    C[:nx, _x_block(0)] = np.eye(nx)
    d[:nx] = x0
    for k in range(N):
        rows = slice((k + 1) * nx, (k + 2) * nx)
        C[rows, _x_block(k + 1)] = np.eye(nx)
        C[rows, _x_block(k)] = -Ad
        C[rows, _u_block(k, N)] = -Bd
        d[rows] = cd
    constant = 0.5 * dt * w_x * np.sum(wx * x_ref ** 2) + 0.5 * dt * w_u * N * np.sum(
        wu * u_ref ** 2) + 0.5 * np.sum(wN * x_goal ** 2)
    return SimpleNamespace(problem=problem, H=H, g=g, C=C, d=d, constant=constant,
                           N=N, nx=nx, nu=nu,
                           coast_fixed=[(k, i, 0.0) for k in coast for i in range(nu)],
                           coast_constant=0.5 * dt * w_u * np.sum(wu * u_ref ** 2) * len(coast))


def _x_block(k, nx=4):
    return slice(k * nx, (k + 1) * nx)


def _u_block(k, N, nx=4, nu=2):
    start = (N + 1) * nx + k * nu
    return slice(start, start + nu)


def dense_solution(lq, fixed=()):
    """(xs, us, cost, mu) of the equality-constrained QP, each (k, i, value) of
    ``fixed`` adding u_k[i] = value with multiplier mu (stationarity
    H z + g + C^T lambda + E^T mu = 0)."""
    nz, nc = lq.H.shape[0], lq.C.shape[0]
    E = np.zeros((len(fixed), nz))
    e = np.zeros(len(fixed))
    for row, (k, i, value) in enumerate(fixed):
        E[row, _u_block(k, lq.N).start + i] = 1.0
        e[row] = value
    A = np.vstack([lq.C, E])
    KKT = np.block([[lq.H, A.T], [A, np.zeros((A.shape[0], A.shape[0]))]])
    solution = np.linalg.solve(KKT, np.concatenate([-lq.g, lq.d, e]))
    z = solution[:nz]
    xs = z[:(lq.N + 1) * lq.nx].reshape(lq.N + 1, lq.nx)
    us = z[(lq.N + 1) * lq.nx:].reshape(lq.N, lq.nu)
    cost = 0.5 * z @ lq.H @ z + lq.g @ z + lq.constant
    return xs, us, cost, solution[nz + nc:]


def lq_warm_start(lq, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(lq.N + 1, lq.nx)), rng.normal(size=(lq.N, lq.nu))


@pytest.mark.parametrize("integrator", ["explicit_euler", "euler", "rk2", "rk3", "rk4"])
def test_dense_twin_of_the_lq_problem_has_the_same_cost(integrator):
    """The dense matrices describe the problem the solvers see (its cost and dynamics)."""
    lq = lq_problem(integrator)
    xs, us = lq_warm_start(lq, seed=1)
    z = np.concatenate([xs.ravel(), us.ravel()])
    assert lq.problem.calc(xs, us) == pytest.approx(
        0.5 * z @ lq.H @ z + lq.g @ z + lq.constant, rel=1e-13)
    xs = lq.problem.rollout(us)
    z = np.concatenate([xs.ravel(), us.ravel()])
    np.testing.assert_allclose(lq.C @ z, lq.d, rtol=0, atol=1e-13)


@pytest.mark.parametrize("integrator", ["explicit_euler", "euler", "rk2", "rk3", "rk4"])
@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_lq_problem_is_solved_in_one_iteration(solver_class, integrator, assert_close):
    lq = lq_problem(integrator)
    xs_star, us_star, cost_star, _ = dense_solution(lq)
    xs, us = lq_warm_start(lq)          # infeasible: the gaps close in the first step
    # without Levenberg-Marquardt regularization the first step is the exact Newton step
    exact = solver_class(lq.problem, reg_init=0.0, reg_min=0.0)
    one = exact.solve(xs, us, max_iter=1)
    assert one.iterations == 1 and one.history["step"] == [1.0]
    assert_close(one.xs, xs_star, 1e-9, "xs after one iteration")
    assert_close(one.us, us_star, 1e-9, "us after one iteration")
    assert one.gaps <= 1e-12
    assert one.cost == pytest.approx(cost_star, rel=1e-12)
    # with the default options: the first iteration solves, the second only confirms
    result = solver_class(lq.problem).solve(xs, us)
    assert result.converged and result.status == "converged"
    assert result.iterations == 2 and result.history["step"][0] == 1.0
    assert_close(result.xs, xs_star, 1e-9, "xs")
    assert_close(result.us, us_star, 1e-9, "us")
    assert result.cost == pytest.approx(cost_star, rel=1e-12)


COAST = (0, 7, 8, 15)


@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_knots_without_controls(solver_class, assert_close):
    """Running models with different nu: coast knots (nu = 0, as Crocoddyl's impulse
    models) in the LQ problem, the controls padded to nu = 2.  One exact Newton
    step reaches the dense optimum with u_k = 0 at the coast knots, whose padded
    controls stay zero and have zero gains."""
    lq = lq_problem(coast=COAST)
    assert lq.problem.nu == 2 and list(lq.problem.nus[list(COAST)]) == [0] * len(COAST)
    xs_star, us_star, cost_star, _ = dense_solution(lq, lq.coast_fixed)
    xs, us = lq_warm_start(lq)              # random padding too: ignored
    solver = solver_class(lq.problem, reg_init=0.0, reg_min=0.0)
    one = solver.solve(xs, us, max_iter=1)
    assert one.history["step"] == [1.0]
    assert_close(one.xs, xs_star, 1e-9, "xs")
    assert_close(one.us, us_star, 1e-9, "us")
    assert np.all(one.us[list(COAST)] == 0.0)
    assert np.all(solver.k[list(COAST)] == 0.0) and np.all(solver.K[list(COAST)] == 0.0)
    assert one.cost == pytest.approx(cost_star - lq.coast_constant, rel=1e-12)


def test_nlp_solves_the_lq_problem_with_knots_without_controls(assert_close):
    """The NLP's transcription of knots with nu = 0: their padding variables are fixed
    at zero; IPOPT finds the dense optimum."""
    lq = lq_problem(coast=COAST)
    xs_star, us_star, cost_star, _ = dense_solution(lq, lq.coast_fixed)
    result = gp.solvers.NLP(lq.problem).solve(*lq_warm_start(lq))
    assert result.converged, result
    assert_close(result.xs, xs_star, 1e-6, "xs")
    assert_close(result.us, us_star, 1e-6, "us")
    assert np.all(result.us[list(COAST)] == 0.0)
    assert result.cost == pytest.approx(cost_star - lq.coast_constant, rel=1e-8)
    # casadi mode: the padded layout is supported, but this CustomDynamics has no twin
    with pytest.raises(NotImplementedError, match="CustomDynamics"):
        gp.solvers.NLP(lq.problem, derivatives="casadi")


def test_mpc_with_knots_without_controls():
    """MPC on a problem whose knots have different nu: the control it returns has the
    first knot's nus[0] entries (none when knot 0 is a coast knot), the shifted warm
    start moves each knot's row one knot earlier and the padding it lands in is
    ignored."""
    problem = lq_problem(coast=(1, 8)).problem
    mpc = gp.solvers.MPC(problem, FDDP, max_iter=20, use_feedback=True)
    u = mpc.step(problem.x0.copy())
    assert u.shape == (2,) and mpc.last.converged
    np.testing.assert_array_equal(u, mpc.last.us[0])       # at x = x0 the feedback is zero
    x = problem.rollout(mpc.us)[1]
    xs_warm, us_warm = mpc._warm_start(x)
    np.testing.assert_array_equal(us_warm[:-1], mpc.us[1:])   # knot 2's controls -> knot 1
    u = mpc.step(x)
    assert u.shape == (2,) and mpc.last.converged
    assert np.all(mpc.last.us[[1, 8]] == 0.0)
    coasting = lq_problem(coast=(0,)).problem
    u = gp.solvers.MPC(coasting, FDDP, max_iter=20).step(coasting.x0.copy())
    assert u.shape == (0,)


def test_mpc_steps_are_solves_of_the_shifted_warm_start():
    """The MPC's step on a DDP-family solver (issue 16: ``DDP.iterate`` on the warm start
    shifted into the solver's trial buffers, no result built unless ``last`` is read)
    gives what ``solve(max_iter=1)`` gives from the same shifted warm start, to the bit:
    iterates, cost, gaps, gains and the feedback control, over steps from perturbed
    states (gaps open)."""
    problem, twin = reaching("ur5"), reaching("ur5")
    mpc = gp.solvers.MPC(problem, FDDP, max_iter=1, use_feedback=True)
    solver = FDDP(twin)
    rng = np.random.default_rng(3)
    x, result = problem.x0.copy(), None
    for _ in range(4):
        u = mpc.step(x)
        twin.x0[:] = x
        if result is None:
            xs = np.repeat(x[None], twin.N + 1, axis=0)
            us = twin.quasi_static(xs)
        else:
            xs = np.concatenate([result.xs[1:], result.xs[-1:]])
            us = np.concatenate([result.us[1:], result.us[-1:]])
            xs[0] = x
        result = solver.solve(xs, us, max_iter=1)
        np.testing.assert_array_equal(mpc.xs, result.xs)
        np.testing.assert_array_equal(mpc.us, result.us)
        np.testing.assert_array_equal(mpc.last.K, result.K)
        assert (mpc.cost, mpc.iterations) == (result.cost, result.iterations)
        assert (mpc.last.gaps, mpc.last.stop) == (result.gaps, result.stop)
        dx = problem.state.difference(result.xs[:1], x[None])[0]
        np.testing.assert_allclose(u, result.us[0] - result.K[0] @ dx, rtol=0, atol=1e-12)
        x = problem.rollout(mpc.us)[1] + 1e-3 * rng.standard_normal(problem.nx)


def test_box_fddp_solves_the_bounded_lq_problem(assert_close):
    """With bounds that cut the unconstrained optimum, BoxFDDP's solution satisfies
    the QP's KKT conditions: on the active set, the equality-constrained dense
    solution is the same and its multipliers have the bounds' signs."""
    _, us_free, cost_free, _ = dense_solution(lq_problem())
    lower = np.array([-0.8, -1.0])
    upper = np.array([0.5, 1.0])
    assert np.any(us_free < lower) and np.any(us_free > upper)
    lq = lq_problem(bounds=(lower, upper))
    xs, us = lq_warm_start(lq)
    result = BoxFDDP(lq.problem, th_stop=1e-12).solve(xs, np.clip(us, lower, upper))
    assert result.converged, result
    assert result.gaps <= 1e-12
    assert np.all(result.us >= lower) and np.all(result.us <= upper)
    at_lower = np.abs(result.us - lower) <= 1e-9
    at_upper = np.abs(result.us - upper) <= 1e-9
    assert at_lower.any() and at_upper.any()
    fixed = [(k, i, lower[i]) for k, i in zip(*np.nonzero(at_lower))]
    fixed += [(k, i, upper[i]) for k, i in zip(*np.nonzero(at_upper))]
    xs_star, us_star, cost_star, mu = dense_solution(lq, fixed)
    assert_close(result.xs, xs_star, 1e-8, "xs")
    assert_close(result.us, us_star, 1e-8, "us")
    assert result.cost == pytest.approx(cost_star, rel=1e-10)
    assert cost_star > cost_free
    # u <= upper pushes with mu > 0, u >= lower with mu < 0 (no active bound is spurious)
    signs = np.array([1.0 if value == upper[i] else -1.0 for _, i, value in fixed])
    assert np.all(signs * mu > 1e-8), mu
    # the free controls are strictly inside
    free = ~(at_lower | at_upper)
    assert np.all(result.us[free] > lower[np.nonzero(free)[1]])
    assert np.all(result.us[free] < upper[np.nonzero(free)[1]])


# --- swing-ups --------------------------------------------------------------------------

def pendulum_swing_up(N=60, dt=0.05, bounds=None):
    """The pendulum hangs at q = 0; the terminal cost wants it upright (q = pi) at rest."""
    dynamics = gp.ocp.FreeDynamics(gp.robots.pendulum())
    state = dynamics.state
    upright = np.array([np.pi, 0.0])
    running = gp.ocp.StageModel(dynamics, [
        gp.ocp.Cost(gp.ocp.ControlResidual(1), weight=1e-2),
        gp.ocp.Cost(gp.ocp.StateResidual(state, upright), weight=1e-2)],
        dt=dt, integrator="semi_implicit_euler", control_bounds=bounds)
    terminal = gp.ocp.TerminalModel(state, [
        gp.ocp.Cost(gp.ocp.StateResidual(state, upright), weight=1e3)])
    return gp.ocp.ShootingProblem(np.zeros(2), [running] * N, terminal), upright


def cartpole_swing_up(N=50, dt=0.05, w_u=1e-2, w_x=(1e-1, 1e-1, 1e-2, 1e-2), w_N=1e3):
    """The pole hangs (theta = pi) below the cart at rest; only the cart is pushed."""
    model = gp.robots.cartpole()
    dynamics = gp.ocp.FreeDynamics(model, gp.ocp.Actuation.selection(model, [0]))
    state = dynamics.state
    upright = np.zeros(4)
    running = gp.ocp.StageModel(dynamics, [
        gp.ocp.Cost(gp.ocp.ControlResidual(1), weight=w_u),
        gp.ocp.Cost(gp.ocp.StateResidual(state, upright), gp.ocp.WeightedQuadratic(w_x))],
        dt=dt, integrator="semi_implicit_euler")
    terminal = gp.ocp.TerminalModel(state, [
        gp.ocp.Cost(gp.ocp.StateResidual(state, upright), weight=w_N)])
    x0 = np.array([0.0, np.pi, 0.0, 0.0])
    return gp.ocp.ShootingProblem(x0, [running] * N, terminal), upright


def test_pendulum_swing_up_converges_upright():
    problem, upright = pendulum_swing_up()
    result = FDDP(problem).solve(max_iter=200)
    assert result.converged and result.gaps == 0.0
    np.testing.assert_allclose(result.xs[-1], upright, rtol=0, atol=1e-3)
    # it had to swing: the torque exceeds what holds the mass horizontal (m g l)
    assert np.max(np.abs(result.us)) > 9.81 * 0.5
    np.testing.assert_allclose(problem.rollout(result.us), result.xs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("options", [
    dict(),
    # this one once drove a line-search trial through a singular state (x / 0 in ABA)
    dict(N=100, dt=0.03, w_u=1e-3, w_x=(1e-2, 1e-2, 1e-3, 1e-3), w_N=1e2),
], ids=["N50", "N100"])
def test_cartpole_swing_up_converges_upright(options):
    problem, upright = cartpole_swing_up(**options)
    result = FDDP(problem).solve(max_iter=300)
    assert result.converged and result.gaps == 0.0
    np.testing.assert_allclose(result.xs[-1], upright, rtol=0, atol=1e-3)
    assert np.all(np.diff(result.history["cost"]) <= 1e-12)


# --- reaching (DESIGN.md's task) --------------------------------------------------------
REACHING = {"ur5": "tool0", "panda": "panda_hand"}
TARGET = np.array([0.4, 0.2, 0.4])


def reaching(name):
    """Frame translation + state and control regularization, semi-implicit Euler,
    dt = 10 ms, 100 knots (the benchmark's problem)."""
    robot = gp.robots.load(name)
    return reaching_problem(robot.model, REACHING[name], TARGET, robot.q0,
                            integrator="semi_implicit_euler")[0]


_REFERENCE = {}


def reaching_reference(name):
    """(problem, FDDP result from the quasi-static guess with th_stop = 1e-12), once."""
    if name not in _REFERENCE:
        problem = reaching(name)
        _REFERENCE[name] = problem, FDDP(problem, th_stop=1e-12).solve()
    return _REFERENCE[name]


def frame_position(name, q):
    model = gp.robots.load(name).model
    data = model.create_data()
    gp.dynamics.forward_kinematics(model, data, q)
    return gp.dynamics.frame_placement(model, data, model.frame_id(REACHING[name]))[1]


@pytest.mark.parametrize("name", sorted(REACHING))
def test_reaching_converges_from_the_quasi_static_guess(name):
    problem = reaching(name)
    result = FDDP(problem).solve()
    assert result.converged, result
    assert result.iterations <= 50 and result.gaps == 0.0
    np.testing.assert_allclose(frame_position(name, result.xs[-1, :problem.state.nq]), TARGET,
                               rtol=0, atol=5e-3)
    assert np.all(np.diff(result.history["cost"]) <= 1e-12)      # a feasible descent
    assert result.cost == pytest.approx(problem.calc(result.xs, result.us), rel=1e-12)
    np.testing.assert_allclose(problem.rollout(result.us), result.xs, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", sorted(REACHING))
def test_fddp_closes_the_gaps_of_a_random_infeasible_warm_start(name):
    problem, reference = reaching_reference(name)
    nq, nv = problem.state.nq, problem.state.nv
    rng = np.random.default_rng(5)
    xs = np.tile(problem.x0, (problem.N + 1, 1))
    xs[:, :nq] += 0.2 * rng.standard_normal((problem.N + 1, nq))
    xs[:, nq:] += 0.5 * rng.standard_normal((problem.N + 1, nv))
    us = problem.quasi_static(xs) + rng.standard_normal((problem.N, nv))
    problem.calc(xs, us)
    assert np.max(np.abs(problem.gaps(xs))) > 0.1
    result = FDDP(problem, th_stop=1e-12).solve(xs, us)
    assert result.converged, result
    assert result.gaps <= 1e-9
    assert np.max(np.abs(problem.gaps(result.xs))) <= 1e-9
    assert result.cost == pytest.approx(reference.cost, rel=1e-6)
    np.testing.assert_allclose(result.xs, reference.xs, rtol=0, atol=1e-3)


@pytest.mark.parametrize("name", sorted(REACHING))
def test_ddp_and_fddp_reach_the_same_optimum_from_a_feasible_start(name):
    problem, reference = reaching_reference(name)
    rng = np.random.default_rng(9)
    us = problem.quasi_static(np.tile(problem.x0, (problem.N + 1, 1)))
    us += 0.3 * rng.standard_normal(us.shape)
    xs = problem.rollout(us)
    fddp = FDDP(problem, th_stop=1e-12).solve(xs, us, is_feasible=True)
    ddp = DDP(problem, th_stop=1e-12).solve(xs, us)
    assert fddp.converged and ddp.converged
    assert fddp.cost == pytest.approx(ddp.cost, rel=1e-8)
    assert fddp.cost == pytest.approx(reference.cost, rel=1e-6)
    np.testing.assert_allclose(fddp.us, ddp.us, rtol=0, atol=1e-4)
    np.testing.assert_allclose(fddp.xs, ddp.xs, rtol=0, atol=1e-6)


@pytest.mark.parametrize("solver_class", SOLVERS)
def test_a_reused_solver_repeats_its_iterates_and_its_trials_keep_their_start(solver_class):
    """Trials write into two preallocated buffer sets, never into the iterate they start
    from (issue 16): a second solve from the same warm start repeats the first one's
    costs and iterates to the bit and leaves the first result untouched, and a trial from
    the solver's iterate, or from the previous trial's arrays, leaves its start as it was."""
    problem = reaching("ur5")
    solver = solver_class(problem)
    first = solver.solve(max_iter=4)
    kept = first.xs.copy(), first.us.copy()
    second = solver.solve(max_iter=4)
    np.testing.assert_array_equal(first.xs, kept[0])
    np.testing.assert_array_equal(first.us, kept[1])
    assert second.history["cost"] == first.history["cost"]
    np.testing.assert_array_equal(second.xs, first.xs)
    np.testing.assert_array_equal(second.us, first.us)
    xs, us = solver._initial_guess(first.xs, first.us)
    no_gaps = np.zeros((problem.N + 1, problem.ndx))
    for alpha in (1.0, 0.5):
        start = xs.copy(), us.copy()
        trial = solver.try_step(xs, us, no_gaps, alpha, True)
        assert trial is not None and trial[0] is not xs and trial[1] is not us
        np.testing.assert_array_equal(xs, start[0])
        np.testing.assert_array_equal(us, start[1])
        xs, us = trial[0], trial[1]


# --- BoxFDDP ----------------------------------------------------------------------------

def test_box_fddp_stays_within_bounds_and_beats_clipping():
    limit = 5.0
    free_problem, upright = pendulum_swing_up()
    free = FDDP(free_problem).solve(max_iter=200)
    assert free.converged and np.max(np.abs(free.us)) > limit     # the bounds will bite
    problem, _ = pendulum_swing_up(bounds=([-limit], [limit]))
    # record every control the solver evaluates: iterates and line-search trials
    seen = []
    for method in ("calc", "calc_diff"):
        original = getattr(problem, method)

        def recording(xs, us, *args, _original=original, **kwargs):
            seen.append(np.array(us, copy=True))
            return _original(xs, us, *args, **kwargs)
        setattr(problem, method, recording)
    solver = BoxFDDP(problem)
    try_step = solver.try_step

    def trying(*args):              # a trial costs its controls in one call (ocp.horizon)
        trial = try_step(*args)
        if trial is not None:
            seen.append(trial[1].copy())
        return trial
    solver.try_step = trying
    logger = CallbackLogger()
    result = solver.solve(max_iter=200, callbacks=[logger])
    assert result.converged, result
    assert len(seen) >= result.iterations and len(logger.records) == result.iterations
    for us in seen + [result.us]:
        assert np.all(us >= -limit) and np.all(us <= limit)
    assert np.any(np.abs(result.us) == limit)                # active bounds
    np.testing.assert_allclose(result.xs[-1], upright, rtol=0, atol=1e-2)
    clipped = np.clip(free.us, -limit, limit)
    clipped_cost = free_problem.calc(free_problem.rollout(clipped), clipped)
    assert result.cost < clipped_cost
    assert result.cost > free.cost                           # the bounds cost something


def test_box_fddp_clips_a_warm_start_outside_the_bounds():
    lq = lq_problem(bounds=([-0.8, -1.0], [0.5, 1.0]))
    xs, us = lq_warm_start(lq)
    result = BoxFDDP(lq.problem).solve(xs, 10.0 * us, max_iter=3)
    assert np.all(result.us >= [-0.8, -1.0]) and np.all(result.us <= [0.5, 1.0])


def test_box_fddp_takes_fddp_gains_while_infeasible_and_clamps_its_trials():
    """Crocoddyl's SolverBoxFDDP: from an infeasible warm start the backward pass is
    FDDP's (unconstrained gains, bit for bit) and the rollout clamps the controls;
    once feasible the box QP gives the gains, and the clamped controls drop out of
    Qu (hence out of the stopping value)."""
    lower, upper = np.array([-0.8, -1.0]), np.array([0.5, 1.0])
    free, bounded = lq_problem(), lq_problem(bounds=(lower, upper))
    xs, us = lq_warm_start(free)
    fddp, box = FDDP(free.problem), BoxFDDP(bounded.problem)
    fddp.solve(xs, us, max_iter=1)
    first = box.solve(xs, us, max_iter=1)
    np.testing.assert_array_equal(box.k, fddp.k)
    np.testing.assert_array_equal(box.K, fddp.K)
    assert first.history["gaps"][0] > 0.1
    assert np.all(first.us >= lower) and np.all(first.us <= upper)
    assert np.any(first.us == lower) and np.any(first.us == upper)
    result = box.solve(xs, us, max_iter=50)
    assert result.converged
    clamped = (result.us == lower) | (result.us == upper)
    assert clamped.any()
    # the last backward pass ran the box QP at the converged controls: clamped
    # controls have zero step and zero entries in Qu, and K has no rows for them
    np.testing.assert_array_equal(box.Qu[clamped], 0.0)
    np.testing.assert_array_equal(box.k[clamped], 0.0)
    np.testing.assert_array_equal(box.K[clamped], 0.0)
    assert result.stop < box.th_stop == 5e-5


def _ur5_trial_phase(knots, dt, integrator, seed):
    """ur5 with state, tool-position and tool-velocity costs over ``knots`` stages of
    ``integrator``, its first phase (stage, data), the dynamics, and a trial rollout's
    inputs at random states (alpha 0.5, with gaps) with its empty outputs."""
    from geppetto import ocp
    robot = gp.robots.load("ur5")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    free = ocp.FreeDynamics(model, ocp.Actuation.full(model))
    costs = [ocp.Cost(ocp.StateResidual(free.state, x0), weight=1e-1),
             ocp.Cost(ocp.FrameTranslationResidual(model, "tool0", [0.4, 0.2, 0.4])),
             ocp.Cost(ocp.FrameVelocityResidual(model, "tool0", None, "LOCAL"), weight=0.2)]
    problem = ocp.ShootingProblem(
        x0, [ocp.StageModel(free, costs, dt=dt, integrator=integrator)] * knots,
        ocp.TerminalModel(free.state, costs[:2]))
    stage, start, stop, data = problem.phases[0]
    rng = np.random.default_rng(seed)
    n, nx, ndx, nu = stop - start, problem.nx, problem.ndx, problem.nu
    xs = x0 + 0.1 * rng.standard_normal((n, nx))
    us = problem.quasi_static(np.repeat(x0[None], n + 1, axis=0))
    inputs = (xs, us, rng.standard_normal((n, nu)), 0.1 * rng.standard_normal((n, nu, ndx)),
              0.05 * rng.standard_normal((n, ndx)), us, us, 0.5, True, False)
    outputs = tuple(np.empty(shape) for shape in ((n, nx), (n, nu), (n, nx)))
    return free, x0, stage, data, inputs, outputs


def test_trial_rollout_stores_the_kinematics_its_costs_read():
    """A FreeDynamics Euler phase's trial stores each knot's placements and world
    Jacobians, from its step's ABA, in the phase data (geppetto.ocp.trial.rollout_free):
    they equal a forward-kinematics pass at the trial states (1e-12), and the costs
    computed from them without one (calc_costs right after the rollout) equal a fresh
    calc; calc_costs at other states (a copy) refreshes them."""
    from geppetto.ocp.residuals import JACOBIANS
    free, x0, stage, data, inputs, outputs = _ur5_trial_phase(6, 0.01, None, 7)
    assert stage.kinematics_for_costs == JACOBIANS
    kin = data.kinematics
    stored = (kin.oR, kin.op, kin.liR, kin.lip, kin.J)
    for array in stored:
        array[:, 1:] = np.nan
    assert stage.rollout_trial(inputs, x0, outputs, stage.trial_workspace(data)) == -1
    xs_try, us_try = outputs[0], outputs[1]
    assert np.isfinite(kin.oR[:, 1:]).all() and np.isfinite(kin.J).all()
    stage.calc_costs(data, xs_try, us_try)
    trial_costs = data.outputs.cost.copy()
    from_rollout = [array.copy() for array in stored]
    stage._refresh_kinematics(data, xs_try, JACOBIANS)
    for rolled, refreshed in zip(from_rollout, stored):
        np.testing.assert_allclose(rolled, refreshed, rtol=0, atol=1e-12)
    for array in stored:
        array[:, 1:] = np.nan
    stage.calc_costs(data, xs_try.copy(), us_try)           # other memory: refreshed
    np.testing.assert_allclose(data.outputs.cost, trial_costs, rtol=1e-12, atol=0)
    stage.calc(data, xs_try, us_try)
    np.testing.assert_allclose(data.outputs.cost, trial_costs, rtol=1e-12, atol=0)
    assert np.all(trial_costs > 0)


def test_calc_costs_leaves_the_predicted_states_of_the_iterate():
    """calc_costs (the line search's costs) at a trial whose RK stage points it must
    evaluate (a dynamics the rollout does not store them for: here a FreeDynamics
    subclass) leaves problem.xnext, the iterate's predicted states, as they were: a
    refused search reads them for the gaps a solve reports (review rev31b: BoxFDDP ending
    at the maximum regularization reported gaps 5.6 where the iterate's are 5e-16)."""
    from geppetto import ocp

    class Dynamics(ocp.FreeDynamics):
        pass

    robot = gp.robots.load("ur5")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    free = Dynamics(model, ocp.Actuation.full(model))
    costs = [ocp.Cost(ocp.StateResidual(free.state, x0), weight=1e-1),
             ocp.Cost(ocp.FrameTranslationResidual(model, "tool0", [0.4, 0.2, 0.4]))]
    problem = ocp.ShootingProblem(
        x0, [ocp.StageModel(free, costs, dt=0.02, integrator="rk4")] * 4,
        ocp.TerminalModel(free.state, costs))
    rng = np.random.default_rng(5)
    xs = x0 + 0.1 * rng.standard_normal((5, problem.nx))
    us = problem.quasi_static(xs)
    problem.calc(xs, us)
    predicted = problem.xnext.copy()
    trial = xs + 0.2 * rng.standard_normal(xs.shape)
    cost = problem.calc_costs(trial, us + 0.5)
    np.testing.assert_array_equal(problem.xnext, predicted)
    assert cost == pytest.approx(problem.calc(trial, us + 0.5), rel=1e-14)
    assert not np.array_equal(problem.xnext, predicted)


@pytest.mark.parametrize("scheme", ["rk2", "rk3", "rk4"])
def test_rk_trial_costs_read_the_rollouts_stage_points(scheme):
    """An RK phase's trial rollout (geppetto.ocp.trial.rollout_free) stores each knot's
    stage points and their placements and world Jacobians; calc_costs right after it
    reads them and evaluates no dynamics (calls counted: before, it ran calc, the stage
    fields again), and its costs, over the stage points with the weights b (rk3's b_2 = 0,
    rk2's b_1 = 0), equal those of a fresh calc (1e-12: the rollout's ABA and the batched
    one agree to a few ulps, not to the bit); calc_costs at other states (a copy) runs
    calc."""
    free, x0, stage, data, inputs, outputs = _ur5_trial_phase(5, 0.02, scheme, 11)
    calls = []
    evaluate = free.calc

    def counted(*args):
        calls.append(1)
        return evaluate(*args)

    free.calc = counted
    try:
        assert stage.rollout_trial(inputs, x0, outputs, stage.trial_workspace(data)) == -1
        xs_try, us_try, xnext = outputs
        stage.calc_costs(data, xs_try, us_try)
        assert calls == []                  # no second evaluation of the dynamics
        trial_costs = data.outputs.cost.copy()
        stored = [points.copy() for points in data.integrator.stage_points]
        stage.calc_costs(data, xs_try.copy(), us_try)     # other memory: through calc
        assert len(calls) == len(stage.integrator.weights)
    finally:
        del free.calc
    np.testing.assert_array_equal(stored[0], xs_try)
    calc_costs = data.outputs.cost.copy()
    stage.calc(data, xs_try, us_try)
    np.testing.assert_array_equal(data.outputs.cost, calc_costs)
    np.testing.assert_allclose(trial_costs, calc_costs, rtol=1e-12, atol=0)
    for j in range(1, len(stored)):
        np.testing.assert_allclose(stored[j], data.integrator.points[j], rtol=0, atol=1e-12)
    np.testing.assert_allclose(xnext, data.integrator.xnext, rtol=0, atol=1e-12)
    assert np.all(trial_costs > 0)


@pytest.mark.parametrize("use_gaps", [False, True])
def test_trial_rollout_kernel_matches_the_stage_knot_by_knot(use_gaps):
    """The one-kernel trial of a FreeDynamics phase (geppetto.ocp.trial.rollout_free)
    and the same trial stepped knot by knot through the stage's integrator
    (rollout_python, what CustomDynamics uses): the law u - alpha k - K dx, the gaps
    and the clamping agree on ur5 with random gains."""
    from geppetto.ocp.trial import rollout_python
    robot = gp.robots.load("ur5")
    problem, _ = reaching_problem(robot.model, "tool0", np.array([0.4, 0.2, 0.4]), robot.q0,
                                  knots=6, integrator="rk4")
    stage = problem.running_models[0]
    rng = np.random.default_rng(5)
    n, nx, ndx, nu = problem.N, problem.nx, problem.ndx, problem.nu
    xs = problem.x0 + 0.1 * rng.standard_normal((n, nx))
    us = problem.quasi_static(np.repeat(problem.x0[None], n + 1, axis=0))
    bound = np.full((n, nu), 5.0)
    inputs = (xs, us, rng.standard_normal((n, nu)), rng.standard_normal((n, nu, ndx)),
              0.05 * rng.standard_normal((n, ndx)), -bound, bound, 0.5, use_gaps, True)
    outputs = [tuple(np.empty(shape) for shape in ((n, nx), (n, nu), (n, nx)))
               for _ in range(2)]
    assert stage.rollout_trial(inputs, problem.x0, outputs[0], stage.trial_workspace()) == -1
    assert rollout_python(stage.integrator, inputs, problem.x0, outputs[1],
                          stage.integrator.create_data(1)) == -1
    for kernel, python in zip(*outputs):
        np.testing.assert_allclose(kernel, python, rtol=0, atol=1e-10)
    assert np.any(np.abs(outputs[0][1]) == 5.0)              # some controls clamped
    # the first knot by hand (Crocoddyl's signs)
    state, (_, _, k, K, gaps, _, _, alpha, _, _) = problem.state, inputs
    x_try = problem.x0[None]
    if use_gaps:
        x_try = state.integrate(x_try, (alpha - 1.0) * gaps[:1])
    dx = state.difference(xs[:1], x_try)[0]
    np.testing.assert_allclose(outputs[0][0][0], x_try[0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(outputs[0][1][0], np.clip(us[0] - alpha * k[0] - K[0] @ dx,
                                                         -5.0, 5.0), rtol=0, atol=1e-12)


def _trials_both_ways(problem, seed, use_gaps, u_limit):
    """The trial of step 0.5 (clamped to +-u_limit) at a seeded random point by the
    one-call trial and by the phase-by-phase trial: [xs_try, us_try, xnext, knot costs,
    cost, FDDP's gap term] of each, and the point (xs, gaps, Vxx)."""
    from geppetto.solvers.forward import ForwardPass
    rng = np.random.default_rng(seed)
    N, nx, ndx, nu = problem.N, problem.nx, problem.ndx, problem.nu
    xs = problem.state.integrate(np.repeat(problem.x0[None], N + 1, axis=0),
                                 0.05 * rng.standard_normal((N + 1, ndx)))
    us = problem.quasi_static(xs) + rng.standard_normal((N, nu)) * (problem.nus[:, None] > 0)
    gains = rng.standard_normal((N, nu)), 0.1 * rng.standard_normal((N, nu, ndx))
    bounds = np.full((N, nu), -u_limit), np.full((N, nu), u_limit)
    gaps = 0.05 * rng.standard_normal((N + 1, ndx))
    A = rng.standard_normal((N + 1, ndx, ndx))
    Vxx = A @ A.transpose(0, 2, 1)
    trials = []
    for one_call in (True, False):
        forward = ForwardPass(problem, one_call)
        trial = forward(xs, us, gains, bounds, 0.5, use_gaps, True, gaps, Vxx)
        assert trial is not None and (forward.horizon is not None) == one_call
        dv = forward.gap_decrease(xs, trial[0], gaps, Vxx)
        trials.append([array.copy() for array in trial[:3]] + [problem.costs.copy(),
                                                                 trial[3], dv])
    return trials, (xs, gaps, Vxx)


def _assert_same_trials(problem, trials, point, u_limit):
    """The two trials of :func:`_trials_both_ways` give the same trial states, controls,
    predictions and knot costs to the bit, the same total to round-off, and FDDP's gap
    term equal to gap_decrease of the states' difference."""
    from geppetto.solvers.riccati import gap_decrease
    xs, gaps, Vxx = point
    for one, phased in zip(trials[0][:4], trials[1][:4]):
        np.testing.assert_array_equal(one, phased)
    assert np.any(np.abs(trials[0][1]) == u_limit)             # some controls clamped
    assert trials[0][4] == pytest.approx(trials[1][4], rel=1e-14)
    assert trials[0][5] == pytest.approx(
        gap_decrease(gaps, Vxx, problem.state.difference(trials[0][0], xs)), rel=1e-12)
    assert trials[0][5] == pytest.approx(trials[1][5], rel=1e-12) and trials[0][5] != 0.0


def _assert_one_call_evaluation(problem, xs, us):
    """``problem``'s calc and calc_diff in one compiled call (built on one Numba thread
    even when the process has more: the bug that kept it unused) equal those of a twin
    evaluated phase by phase, to the bit."""
    import numba
    from geppetto.ocp.problem import _numba_threads
    twin = gp.ocp.ShootingProblem(problem.x0, problem.running_models, problem.terminal_model)
    twin.one_call = False                          # phase by phase
    names = ("costs", "xnext", "Lx", "Lu", "Lxx", "Luu", "Lxu", "Fx", "Fu")
    with _numba_threads(min(2, numba.config.NUMBA_NUM_THREADS)):
        for evaluate in ("calc", "calc_diff"):
            values = [getattr(p, evaluate)(xs, us) for p in (problem, twin)]
            assert values[0] == values[1]
            for name in names:
                np.testing.assert_array_equal(getattr(problem, name), getattr(twin, name))
    assert problem.horizon_evaluation is not None


def _assert_callees_of_other_types_fail(problem, xs, us):
    """A callee compiled for other argument types than the one call passes it (the cost
    program's address and key in the slot of the dynamics block, of the rollout) makes
    calc and the trial raise TypeError before calling it, instead of running it on
    misread arguments (ocp.horizon._addresses, dynamics.native.call_checked); with
    the table restored, the same values as before."""
    from geppetto.solvers.forward import ForwardPass
    N, nu, ndx = problem.N, problem.nu, problem.ndx
    forward = ForwardPass(problem)
    trial_arguments = (xs, us, (np.zeros((N, nu)), np.zeros((N, nu, ndx))),
                       (np.full((N, nu), -np.inf), np.full((N, nu), np.inf)), 1.0, False,
                       False, np.zeros((N + 1, ndx)))
    forward.horizon.plans.clear()              # the plan of these arguments alone
    cost, trial = problem.calc(xs, us), forward(*trial_arguments)[3]
    (_, trial_table), = forward.horizon.plans.values()
    for table, run in ((problem.horizon_evaluation.address, lambda: problem.calc(xs, us)),
                       (trial_table, lambda: forward(*trial_arguments))):
        saved = table.copy()
        table[0, 0] = table[0, 1]              # _interpret where the first callee is called
        try:
            with pytest.raises(TypeError, match="compiled for other argument types than "
                                                "this call passes"):
                run()
        finally:
            table[:] = saved
    assert problem.calc(xs, us) == cost and forward(*trial_arguments)[3] == trial


@pytest.mark.parametrize("use_gaps", [False, True])
def test_one_call_trial_of_the_horizon_matches_the_phase_by_phase_trial(use_gaps):
    """The whole-horizon trial in one compiled call (geppetto.ocp.horizon: two free
    Euler phases of ur5 with different costs, a terminal knot with a kinematic cost)
    and the phase-by-phase trial (rollout_trial + calc_costs per phase) agree
    (:func:`_assert_same_trials`); an RK4 horizon keeps the phase-by-phase trial."""
    from geppetto import ocp
    from geppetto.solvers.forward import ForwardPass
    robot = gp.robots.load("ur5")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    free = ocp.FreeDynamics(model)
    reach = ocp.Cost(ocp.FrameTranslationResidual(model, "tool0", [0.4, 0.2, 0.4]))
    regs = [ocp.Cost(ocp.StateResidual(free.state, x0), weight=1e-1),
            ocp.Cost(ocp.ControlResidual(model.nv), weight=1e-3)]
    first = ocp.StageModel(free, regs, dt=0.01)
    second = ocp.StageModel(free, regs + [reach], dt=0.02)
    problem = ocp.ShootingProblem(x0, [first] * 4 + [second] * 5,
                                  ocp.TerminalModel(free.state, [reach, regs[0]]))
    assert len(problem.phases) == 2
    trials, point = _trials_both_ways(problem, 11, use_gaps, 20.0)
    _assert_same_trials(problem, trials, point, 20.0)
    # the one call reached the phases' rollout by its address, whose return type the
    # lookup checks (call_checked_int calls for int64, call_checked for None)
    from numba.core import types
    from geppetto.dynamics.native import compiled_address
    from geppetto.ocp.trial import rollout_free
    signature = next(iter(rollout_free.overloads))
    assert compiled_address(rollout_free, signature, returns=types.int64) > 0
    with pytest.raises(TypeError, match="rollout_free returns int64, expected none"):
        compiled_address(rollout_free, signature)
    if use_gaps:      # calc / calc_diff of the horizon in one call (ocp.horizon._evaluate)
        _assert_one_call_evaluation(problem, point[0], problem.quasi_static(point[0]))
        _assert_callees_of_other_types_fail(problem, point[0], problem.quasi_static(point[0]))


@pytest.mark.parametrize("scheme,use_gaps", [("rk2", True), ("rk3", False), ("rk4", True)])
def test_one_call_trial_of_an_rk_horizon_costs_its_stage_points(scheme, use_gaps):
    """An RK horizon's trial is one compiled call too (ocp.horizon._free_phase: the
    rollout, then the cost program of each cost point on the stage points the rollout
    stored, StageModel.trial_cost_programs); it gives the phase-by-phase trial's
    (rollout_trial + calc_costs) states, controls, predictions, knot costs and total to
    the bit (the total by NumPy's sum, as calc_costs: 12 knots, past NumPy's 8-term
    blocks), and knot costs equal to a fresh calc's (1e-12: the rollout's ABA and the
    batched one agree to a few ulps), which a trial that skipped a stage point or costed
    the knot in its place would not give (rk2 and rk3 weigh the knot by 0; a trial
    that ran only the first cost point's program failed it on rk4)."""
    from geppetto.solvers.forward import ForwardPass
    robot = gp.robots.load("ur5")
    problem, _ = reaching_problem(robot.model, "tool0", np.array([0.4, 0.2, 0.4]),
                                  robot.q0, knots=12, integrator=scheme)
    trials, point = _trials_both_ways(problem, 3, use_gaps, 20.0)
    for one, phased in zip(trials[0][:5], trials[1][:5]):
        np.testing.assert_array_equal(one, phased)
    assert trials[0][5] == trials[1][5] and trials[0][5] != 0.0
    assert np.any(np.abs(trials[0][1]) == 20.0)               # some controls clamped
    xs_try, us_try, _, knot_costs, cost, _ = trials[0]
    assert cost == float(np.sum(knot_costs)) and np.all(knot_costs[:-1] > 0)
    problem.calc(xs_try, us_try)
    np.testing.assert_allclose(knot_costs, problem.costs, rtol=1e-12, atol=0)
    stage = problem.running_models[0]
    assert len(stage.cost_points) == len(stage.integrator.weights) - (scheme != "rk4")


def test_one_call_trial_of_a_trot_matches_the_phase_by_phase_trial():
    """The same on a short solo12 trot (tests/crocoddyl_problems.py: contact phases of
    four and two feet, touchdown impulses without controls, contact-force and
    foot-placement costs): the contact and impulse phases' rollouts and costs in the
    one call."""
    import crocoddyl_problems as cp
    problem = cp.build(cp.trot_task(step_knots=3, support_knots=1))
    kinds = {type(model.dynamics).__name__ for model, _, _, _ in problem.phases}
    assert kinds == {"ContactDynamics", "ImpulseDynamics"} and problem.nus.min() == 0
    trials, point = _trials_both_ways(problem, 5, True, 2.0)
    _assert_same_trials(problem, trials, point, 2.0)


@pytest.mark.parametrize("name", ["ur5", "trot"])
def test_euler_block_structure_of_the_backward_pass_gives_the_dense_gains(name):
    """The backward pass on the symplectic Euler knots' block structure (Fx = E + C [B; R],
    solvers/riccati.py) gives the gains and value function of the dense products to
    rounding, on ur5 (no Lie rows) and a short solo12 trot (the free flyer's six rows;
    its touchdown impulses are explicit Euler knots and keep the dense products), at a
    random infeasible point; "auto" marks the Euler knots on both (ur5: 6 rows of v,
    ocp.problem.STRUCTURED_MIN_ROWS 3)."""
    from geppetto.solvers.riccati import backward_pass
    if name == "ur5":
        robot = gp.robots.load("ur5")
        problem, _ = reaching_problem(robot.model, "tool0", [0.4, 0.2, 0.5], robot.q0, knots=8)
    else:
        import crocoddyl_problems as cp
        problem = cp.build(cp.trot_task(step_knots=3, support_knots=1))
    auto = problem.euler_structure
    assert auto[0].size == problem.N
    with pytest.raises(ValueError, match="structured_backward"):
        problem.structured_backward = "dense"
    problem.structured_backward = True
    dts, lie_rows = problem.euler_structure
    impulses = problem.nus == 0
    np.testing.assert_array_equal(dts == 0.0, impulses)
    np.testing.assert_array_equal(lie_rows, np.arange(6) if name == "trot" else [])
    rng = np.random.default_rng(5)
    xs = np.tile(problem.x0, (problem.N + 1, 1))
    xs[:, problem.state.nq:] += 0.3 * rng.normal(size=(problem.N + 1, problem.state.nv))
    us = rng.normal(size=(problem.N, problem.nu)) * (problem.nus[:, None] > np.arange(problem.nu))
    problem.calc_diff(xs, us)
    gaps = np.zeros((problem.N + 1, problem.ndx))
    problem.gaps(xs, gaps)
    results = []
    dense = (np.zeros(0), np.zeros(0, dtype=np.int64))
    for structure in (dense, problem.euler_structure):
        solver = FDDP(problem)
        assert backward_pass(*solver._riccati_arrays(us, gaps, False, 1e-6)[:-1], structure) < 0
        results.append([solver.Quu.copy(), solver.Vx.copy(), solver.Vxx.copy(),
                        solver.K.copy(), solver.k.copy()])
    # the products and the value function to rounding; the gains through Quu^-1, whose
    # condition number reaches 1.6e9 on the trot here (1e-10 of the largest gain measured)
    for dense, structured, tolerance in zip(*results, (1e-13, 1e-13, 1e-13, 1e-8, 1e-8)):
        assert not np.array_equal(dense, structured)     # the structured products ran
        np.testing.assert_allclose(structured, dense, rtol=0,
                                   atol=tolerance * max(1.0, np.abs(dense).max()))


@pytest.mark.parametrize("ndx, nu", [(12, 1), (36, 12), (38, 1), (50, 18), (76, 32)])
def test_backward_pass_value_function_from_the_lower_triangles_matches_numpy(ndx, nu):
    """Above 36 rows the backward pass computes (Fx^T V') Fx (Euler knots) and Qxu K by
    the row blocks of their lower triangles (riccati._lower_product) and mirrors Vxx;
    up to 36 rows the whole products and the mean of the triangles.  Both, dense and
    Euler-structured (Fx = E + C B, no Lie rows), must give numpy's recursion
    (Qxx = Lxx + Fx^T V' Fx, ..., Vxx = sym(Qxx - Qxu K) + mu I) to rounding, Vxx
    exactly symmetric, on a random well-conditioned LQ problem of 5 knots."""
    from geppetto.solvers.riccati import backward_pass, _lower_product, _last_block_row
    rng = np.random.default_rng(ndx + nu)
    N, n, dt, mu = 5, ndx // 2, 0.05, 1e-6
    B = rng.normal(size=(N, n, ndx)) * 0.3
    Bu = rng.normal(size=(N, n, nu))
    Fx = np.zeros((N, ndx, ndx))
    Fx[:, :n, :n] = np.eye(n)
    Fx[:, :n] += dt * B
    Fx[:, n:] = B
    Fu = np.concatenate([dt * Bu, Bu], axis=1)
    def spd(m, count):
        M = rng.normal(size=(count, m, m))
        return M @ M.transpose(0, 2, 1) / m + np.eye(m)
    Lxx, Luu = spd(ndx, N + 1), spd(nu, N)
    Lxu = 0.1 * rng.normal(size=(N, ndx, nu))
    Lx, Lu = rng.normal(size=(N + 1, ndx)), rng.normal(size=(N, nu))
    Vx_ref, Vxx_ref, K_ref, k_ref = np.zeros((N + 1, ndx)), np.zeros((N + 1, ndx, ndx)), [], []
    Vx_ref[N], Vxx_ref[N] = Lx[N], Lxx[N] + mu * np.eye(ndx)
    for t in range(N - 1, -1, -1):
        V = Vxx_ref[t + 1]
        Qxx = Lxx[t] + Fx[t].T @ V @ Fx[t]
        Qxu = Lxu[t] + Fx[t].T @ V @ Fu[t]
        Quu = Luu[t] + Fu[t].T @ V @ Fu[t] + mu * np.eye(nu)
        Qx, Qu = Lx[t] + Fx[t].T @ Vx_ref[t + 1], Lu[t] + Fu[t].T @ Vx_ref[t + 1]
        K, k = np.linalg.solve(Quu, Qxu.T), np.linalg.solve(Quu, Qu)
        Vx_ref[t] = Qx - K.T @ Qu
        W = Qxx - Qxu @ K
        Vxx_ref[t] = 0.5 * (W + W.T) + mu * np.eye(ndx)
        K_ref.insert(0, K)
        k_ref.insert(0, k)
    for euler in ((np.zeros(0), np.zeros(0, dtype=np.int64)),
                  (np.full(N, dt), np.zeros(0, dtype=np.int64))):
        Vx, Vxx = np.zeros((N + 1, ndx)), np.zeros((N + 1, ndx, ndx))
        Qu, k, Quuk = np.zeros((N, nu)), np.zeros((N, nu)), np.zeros((N, nu))
        Quu, K = np.zeros((N, nu, nu)), np.zeros((N, nu, ndx))
        assert backward_pass(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, np.zeros((N + 1, ndx)), True, mu,
                             np.full(N, nu), np.zeros(0, dtype=np.bool_), np.zeros((N, nu)),
                             np.zeros((N, nu)), np.zeros((N, nu)), Vx, Vxx, Qu, Quu, k, K, Quuk,
                             euler) < 0
        np.testing.assert_array_equal(Vxx, Vxx.transpose(0, 2, 1))
        for got, ref in ((Vxx, Vxx_ref), (Vx, Vx_ref), (K, np.array(K_ref)), (k, np.array(k_ref))):
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11 * np.abs(ref).max())
    # the helper alone: the lower triangle of A B^T, the upper triangle above the last
    # block's rows untouched
    A, Bm = rng.normal(size=(ndx, 7)), rng.normal(size=(ndx, 7))
    last = _last_block_row(ndx)
    assert (last == 0) == (ndx <= 36)
    Q = np.full((ndx, ndx), 3.0)
    _lower_product(A, Bm, Bm.T.copy(), last, Q, np.empty(ndx * ndx))
    lower = np.tril(np.ones((ndx, ndx), dtype=bool))
    np.testing.assert_allclose(Q[lower], (A @ Bm.T)[lower], rtol=0, atol=1e-13 * ndx)
    np.testing.assert_array_equal(Q[:last][~lower[:last]], 3.0)


def test_feed_forward_gain_is_the_one_column_solve_to_the_bit():
    """The backward pass solves k with K, as the last column of [K | k] (one row-form
    sweep of ``cholesky_solve``); each k_t must equal, bit for bit, Quu_t^-1 Qu_t solved
    alone (``cholesky_solve``'s one-column form, the gains' former code), and a
    multi-column solve each of its columns solved alone (ur5 reaching, 8 knots, at a
    random infeasible point)."""
    from geppetto.dynamics.linalg import cholesky_factor, cholesky_solve
    robot = gp.robots.load("ur5")
    problem, _ = reaching_problem(robot.model, "tool0", [0.4, 0.2, 0.5], robot.q0, knots=8)
    rng = np.random.default_rng(7)
    xs = np.tile(problem.x0, (problem.N + 1, 1))
    xs[:, problem.state.nq:] += 0.3 * rng.normal(size=(problem.N + 1, problem.state.nv))
    us = rng.normal(size=(problem.N, problem.nu))
    solver = FDDP(problem)
    result = solver.solve(xs, us, max_iter=1)
    assert result.iterations == 1
    nu = problem.nu
    for t in range(problem.N):
        L = np.zeros((nu, nu))
        assert cholesky_factor(solver.Quu[t].copy(), nu, L, 0.0)
        alone = solver.Qu[t].copy().reshape(nu, 1)
        cholesky_solve(L, nu, alone)
        np.testing.assert_array_equal(solver.k[t], alone[:, 0])
        columns = rng.normal(size=(nu, 13))
        together = columns.copy()
        cholesky_solve(L, nu, together)
        for c in range(columns.shape[1]):
            one = columns[:, c:c + 1].copy()
            cholesky_solve(L, nu, one)
            np.testing.assert_array_equal(together[:, c], one[:, 0])


def test_cholesky_solve_four_terms_per_pass_is_the_row_form_to_the_bit():
    """``cholesky_solve``'s several-column form (the Riccati gains' [K | k] and box-gain
    solves, the constrained dynamics' derivatives; four terms per pass over a row) must
    equal the plain row form, one term per pass, bit for bit: each entry's terms in the
    same order.  Sizes on both sides of each multiple of four, one to 77 columns, a
    factor of a random SPD matrix, and rows below n left alone."""
    from geppetto.dynamics.linalg import cholesky_factor, cholesky_solve
    rng = np.random.default_rng(11)
    for n in (1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 32):
        M = rng.normal(size=(n, n))
        L = np.zeros((n, n))
        assert cholesky_factor(M @ M.T + n * np.eye(n), n, L, 0.0)
        for ncols in (1, 2, 13, 77):
            X = rng.normal(size=(n + 2, ncols))
            expected, got = X.copy(), X.copy()
            for i in range(n):                  # the row form, one term per pass
                for p in range(i):
                    expected[i] -= L[i, p] * expected[p]
                expected[i] /= L[i, i]
            for i in range(n - 1, -1, -1):
                for p in range(i + 1, n):
                    expected[i] -= L[p, i] * expected[p]
                expected[i] /= L[i, i]
            cholesky_solve(L, n, got)
            np.testing.assert_array_equal(got, expected)
            np.testing.assert_array_equal(got[n:], X[n:])


def test_cholesky_factor_four_rows_per_pass_is_the_column_form_to_the_bit():
    """``cholesky_factor`` (four rows of a column per pass over p) must equal the plain
    column form, one row at a time (Golub & Van Loan, Alg. 4.2.1), bit for bit: each
    entry's subtractions in the same order.  Sizes on both sides of each multiple of
    four, the leading block of a larger matrix, in place (C = A, its strict upper
    triangle kept), and the same first failing pivot on an indefinite matrix."""
    from geppetto.dynamics.linalg import cholesky_factor
    rng = np.random.default_rng(5)

    def column_form(A, n):
        C = np.zeros((n, n))
        for j in range(n):
            s = A[j, j]
            for p in range(j):
                s -= C[j, p] * C[j, p]
            if not s > 0.0:
                return False, C
            C[j, j] = np.sqrt(s)
            for i in range(j + 1, n):
                s = A[i, j]
                for p in range(j):
                    s -= C[i, p] * C[j, p]
                C[i, j] = s / C[j, j]
        return True, C

    for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 31, 32, 33):
        M = rng.normal(size=(n + 3, n + 3))
        A = M @ M.T + 0.1 * np.eye(n + 3)
        ok, expected = column_form(A, n)
        assert ok
        C = np.full((n + 3, n + 3), 7.0)
        assert cholesky_factor(A, n, C, 0.0)
        np.testing.assert_array_equal(np.tril(C[:n, :n]), expected)
        upper = np.triu(np.ones((n + 3, n + 3), dtype=bool), 1)
        assert np.all(C[upper] == 7.0) and np.all(C[n:] == 7.0)
        inplace = A.copy()
        assert cholesky_factor(inplace, n, inplace, 0.0)
        np.testing.assert_array_equal(np.tril(inplace[:n, :n]), expected)
        np.testing.assert_array_equal(np.triu(inplace, 1), np.triu(A, 1))
        if n >= 6:                              # an indefinite matrix stops at the same pivot
            bad = A[:n, :n].copy()
            bad[n - 2, n - 2] = -1.0
            ok, partial = column_form(bad, n)
            C = np.zeros((n, n))
            assert not ok and not cholesky_factor(bad, n, C, 0.0)
            np.testing.assert_array_equal(np.tril(C[:, :n - 2]), partial[:, :n - 2])


def test_backward_pass_stops_at_the_first_knot_whose_quu_is_not_positive_definite():
    """The recursion runs from the last knot down and returns the first knot (from the
    end) whose Quu is not positive definite: the knots after it hold the gains and value
    function of a pass without the defect (to the bit), the knots before it are not
    written (ur5 reaching, 8 knots, a random infeasible point, Luu made indefinite at
    knot 4; dense products and the Euler structure)."""
    from geppetto.solvers.riccati import backward_pass
    robot = gp.robots.load("ur5")
    problem, _ = reaching_problem(robot.model, "tool0", [0.4, 0.2, 0.5], robot.q0, knots=8)
    rng = np.random.default_rng(11)
    xs = np.tile(problem.x0, (problem.N + 1, 1))
    xs[:, problem.state.nq:] += 0.3 * rng.normal(size=(problem.N + 1, problem.state.nv))
    us = rng.normal(size=(problem.N, problem.nu))
    problem.calc_diff(xs, us)
    gaps = np.zeros((problem.N + 1, problem.ndx))
    problem.gaps(xs, gaps)
    bad = 4
    dense = (np.zeros(0), np.zeros(0, dtype=np.int64))
    problem.structured_backward = True          # ur5's Euler knots' structure, forced
    euler = problem.euler_structure
    assert euler[0].size == problem.N
    for structure in (dense, euler):
        reference = FDDP(problem)
        assert backward_pass(*reference._riccati_arrays(us, gaps, False, 1e-6)[:-1],
                             structure) == -1
        solver = FDDP(problem)
        for array in (solver.Vx, solver.Vxx, solver.K, solver.k):
            array[:] = np.nan
        arrays = list(solver._riccati_arrays(us, gaps, False, 1e-6)[:-1])
        arrays[5] = problem.Luu.copy()
        arrays[5][bad] -= 1e6 * np.eye(problem.nu)
        assert backward_pass(*arrays, structure) == bad
        for name in ("Vx", "Vxx", "K", "k"):
            written, expected = getattr(solver, name), getattr(reference, name)
            np.testing.assert_array_equal(written[bad + 1:], expected[bad + 1:])
            assert np.isnan(written[:bad]).all()


def test_backward_pass_with_expected_terms_equals_the_two_calls():
    """:func:`.riccati.backward_pass_expected` (the solvers' one call) gives the gains,
    value function and (dg, dq) of :func:`.riccati.backward_pass` then
    :func:`.riccati.expected_terms` to the bit, with and without the gap terms, on an
    infeasible and a feasible iterate (ur5 reaching, 8 knots, a random point, dense
    products and the Euler structure); a knot whose Quu is not positive definite is
    returned with (dg, dq) = (0, 0)."""
    from geppetto.solvers.riccati import backward_pass, backward_pass_expected, expected_terms
    robot = gp.robots.load("ur5")
    problem, _ = reaching_problem(robot.model, "tool0", [0.4, 0.2, 0.5], robot.q0, knots=8)
    rng = np.random.default_rng(5)
    xs = np.tile(problem.x0, (problem.N + 1, 1))
    xs[:, problem.state.nq:] += 0.3 * rng.normal(size=(problem.N + 1, problem.state.nv))
    us = rng.normal(size=(problem.N, problem.nu))
    problem.calc_diff(xs, us)
    gaps = np.zeros((problem.N + 1, problem.ndx))
    problem.gaps(xs, gaps)
    assert np.abs(gaps).max() > 0.1
    dense = (np.zeros(0), np.zeros(0, dtype=np.int64))
    problem.structured_backward = True
    for structure in (dense, problem.euler_structure):
        for feasible in (False, True):
            for with_gaps in (False, True):
                two, one = FDDP(problem), FDDP(problem)
                arrays = two._riccati_arrays(us, gaps, feasible, 1e-6)[:-1]
                assert backward_pass(*arrays, structure) == -1
                expected = expected_terms(two.Qu, two.k, two.Quuk, two.Vx, two.Vxx, gaps,
                                          with_gaps)
                got = backward_pass_expected(*one._riccati_arrays(us, gaps, feasible, 1e-6)[:-1],
                                             structure, one.Vf, with_gaps)
                assert got[0] == -1
                assert got[1:] == expected and expected[1] != 0.0
                for name in ("Vx", "Vxx", "Qu", "Quu", "k", "K", "Quuk"):
                    np.testing.assert_array_equal(getattr(one, name), getattr(two, name))
        solver = FDDP(problem)
        arrays = list(solver._riccati_arrays(us, gaps, False, 1e-6)[:-1])
        arrays[5] = problem.Luu.copy()
        arrays[5][3] -= 1e6 * np.eye(problem.nu)
        assert backward_pass_expected(*arrays, structure, solver.Vf, True) == (3, 0.0, 0.0)


def _box_qp_by_enumeration(H, q, lower, upper):
    """The minimizer of 1/2 x^T H x + q^T x in the box: every assignment of each
    coordinate to free / lower / upper, keeping the feasible stationary points."""
    import itertools
    n, best, best_value = q.shape[0], None, np.inf
    for assignment in itertools.product((0, 1, 2), repeat=n):
        x = np.where(np.array(assignment) == 1, lower, upper)
        free = np.array(assignment) == 0
        if free.any():
            rhs = -(q[free] + H[np.ix_(free, ~free)] @ x[~free])
            x[free] = np.linalg.solve(H[np.ix_(free, free)], rhs)
        if np.all(x >= lower - 1e-12) and np.all(x <= upper + 1e-12):
            value = 0.5 * x @ H @ x + q @ x
            if value < best_value:
                best, best_value = x, value
    return best


def test_box_qp_finds_the_minimizer_of_random_box_qps():
    from geppetto.solvers.riccati import box_qp
    rng = np.random.default_rng(3)
    n = 4
    for trial in range(20):
        A = rng.normal(size=(n, n))
        H = A @ A.T + 0.1 * np.eye(n)
        q = 3.0 * rng.normal(size=n)
        lower = -rng.uniform(0.1, 1.0, n)
        upper = rng.uniform(0.1, 1.0, n)
        x = rng.normal(size=n)                      # warm start, clamped by box_qp
        free, L = np.zeros(n, dtype=bool), np.zeros((n, n))
        n_free = box_qp(H, q, lower, upper, x, free, L, np.zeros((n + 4, n)))
        expected = _box_qp_by_enumeration(H, q, lower, upper)
        np.testing.assert_allclose(x, expected, rtol=0, atol=1e-6, err_msg=f"trial {trial}")
        assert n_free == free.sum()
        gradient = H @ x + q
        assert np.all(gradient[~free & (x == lower)] > 0.0)
        assert np.all(gradient[~free & (x == upper)] < 0.0)


def test_ddp_from_an_infeasible_guess_is_a_rollout_after_its_first_step():
    """Crocoddyl's SolverDDP: the backward pass carries the gaps, the trial is a rollout
    from x0, and any descent step is taken while infeasible."""
    problem, _ = pendulum_swing_up()
    rng = np.random.default_rng(4)
    xs = rng.normal(size=(problem.N + 1, problem.nx))
    us = rng.normal(size=(problem.N, problem.nu))
    one = DDP(problem).solve(xs, us, max_iter=1)
    assert one.history["gaps"][0] > 0.5 and one.gaps == 0.0
    np.testing.assert_array_equal(one.xs, problem.rollout(one.us))
    result = DDP(problem).solve(xs, us, max_iter=300)
    reference = FDDP(problem).solve(max_iter=300)
    assert result.converged and reference.converged
    assert result.cost == pytest.approx(reference.cost, rel=1e-6)


# --- callbacks --------------------------------------------------------------------------

def test_verbose_prints_a_header_and_one_line_per_iteration(capsys):
    problem, _ = pendulum_swing_up()
    result = FDDP(problem).solve(max_iter=200, verbose=True)
    lines = capsys.readouterr().out.splitlines()
    headers = [line for line in lines if line.split() == list(CallbackVerbose.COLUMNS)]
    rows = [line.split() for line in lines if line.split() != list(CallbackVerbose.COLUMNS)]
    assert result.iterations > 10
    assert len(headers) == math.ceil(result.iterations / 10)
    assert lines[0].split() == list(CallbackVerbose.COLUMNS)
    assert [int(row[0]) for row in rows] == list(range(1, result.iterations + 1))
    assert all(len(row) == len(CallbackVerbose.COLUMNS) for row in rows)
    np.testing.assert_allclose([float(row[1]) for row in rows], result.history["cost"],
                               rtol=1e-4)


def test_logger_keeps_the_history_and_plots_a_png(tmp_path):
    problem, _ = pendulum_swing_up()
    logger = CallbackLogger()
    result = FDDP(problem).solve(max_iter=200, callbacks=[logger])
    assert [r["iteration"] for r in logger.records] == list(range(1, result.iterations + 1))
    np.testing.assert_array_equal(logger.series("cost"), result.history["cost"])
    assert logger.series("cost")[-1] == pytest.approx(result.cost, rel=1e-12)
    path = tmp_path / "convergence.png"
    logger.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000


# --- robustness -------------------------------------------------------------------------

def point_mass(calc, calc_diff, N=10):
    """A 1-D point mass driven to p = 2 with user dynamics (nan-producing variants)."""
    dynamics = gp.ocp.CustomDynamics(2, 1, calc, calc_diff, nq=1)
    state = dynamics.state
    goal = np.array([2.0, 0.0])
    running = gp.ocp.StageModel(dynamics, [
        gp.ocp.Cost(gp.ocp.ControlResidual(1), weight=1e-2),
        gp.ocp.Cost(gp.ocp.StateResidual(state, goal))], dt=0.1)
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(gp.ocp.StateResidual(state, goal),
                                                        weight=10.0)])
    return gp.ocp.ShootingProblem(np.zeros(2), [running] * N, terminal)


def _double_integrator(xs, us, params, f):
    f[:, 0] = xs[:, 1]
    f[:, 1] = us[:, 0]


def _nan_unless_at_rest(xs, us, params, f):
    """NaN as soon as a control moves: no step can ever be taken."""
    _double_integrator(xs, us, params, f)
    f[us[:, 0] != 0.0] = np.nan


def _nan_unless_at_rest_diff(xs, us, params, f, f_x, f_u):
    _nan_unless_at_rest(xs, us, params, f)
    f_x[:] = [[0.0, 1.0], [0.0, 0.0]]
    f_u[:] = [[0.0], [1.0]]


def _nan_jacobians(xs, us, params, f, f_x, f_u):
    _double_integrator(xs, us, params, f)
    f_x[:] = np.nan
    f_u[:] = [[0.0], [1.0]]


@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_nan_trials_end_with_a_status(solver_class):
    problem = point_mass(_nan_unless_at_rest, _nan_unless_at_rest_diff)
    us = np.zeros((problem.N, 1))
    result = solver_class(problem).solve(us=us)
    assert not result.converged
    assert result.status == "no step accepted at maximum regularization"
    np.testing.assert_array_equal(result.us, us)
    assert np.isfinite(result.cost) and result.gaps == 0.0


@pytest.mark.parametrize("reg_init", [1e-9, 0.0])
@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_nan_derivatives_end_with_a_status(solver_class, reg_init):
    problem = point_mass(_double_integrator, _nan_jacobians)
    result = solver_class(problem, reg_init=reg_init, reg_min=reg_init).solve(
        us=np.zeros((problem.N, 1)))
    assert not result.converged and result.iterations == 0
    assert result.status.startswith("regularization at maximum")


def test_diverging_warm_starts_end_with_a_status():
    """Finite but absurd warm starts drive the multibody kernels into singular
    states (x / 0 in ABA): a status, not an exception from the kernel."""
    problem, _ = cartpole_swing_up()
    us = np.full((problem.N, 1), 1e6)
    # Crocoddyl's DDP takes any descent step while infeasible: a rollout, not the
    # absurd controls themselves, becomes its iterate
    result = DDP(problem).solve(us=us, max_iter=30)
    assert not result.converged and np.isfinite(result.cost) and result.gaps == 0.0
    xs = np.full((problem.N + 1, 4), 1e100)
    for solver_class in SOLVERS:
        result = solver_class(problem).solve(xs, us, max_iter=5)
        assert not result.converged and result.status != "max_iter"


@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_max_iter_and_time_limit(solver_class):
    problem, _ = pendulum_swing_up()
    initial = problem.calc(problem.rollout(np.zeros((problem.N, 1))), np.zeros((problem.N, 1)))
    result = solver_class(problem).solve(max_iter=1)
    assert (result.status, result.converged, result.iterations) == ("max_iter", False, 1)
    assert all(len(values) == 1 for values in result.history.values())
    assert result.cost < initial
    result = solver_class(problem).solve(max_iter=200, time_limit=0.0)
    assert (result.status, result.converged, result.iterations) == ("time_limit", False, 1)


@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_bad_warm_starts_raise_value_error(solver_class):
    lq = lq_problem()
    solver = solver_class(lq.problem)
    xs, us = lq_warm_start(lq)
    bad = [(xs[:-1], us), (xs[:, :3], us), (xs, us[:-1]), (xs, us[:, :1]), (xs, us[0])]
    nan_us = us.copy()
    nan_us[3, 1] = np.nan
    nan_xs = xs.copy()
    nan_xs[2, 0] = np.inf
    bad += [(xs, nan_us), (nan_xs, us)]
    for xs_bad, us_bad in bad:
        with pytest.raises(ValueError):
            solver.solve(xs_bad, us_bad)


@pytest.mark.parametrize("name", ["ur5", "solo12"])
def test_trial_rollout_steps_equal_the_lie_group_kernels_to_the_bit(name):
    """The trial rollout's state steps (ocp.trial: the sums written in place where nq = nv,
    ur5; the compiled integrate_state / difference_state calls otherwise, solo12's free
    flyer) give the state's integrate to the bit, x_t^try = x_t^pred (+) (alpha - 1) f_t
    (FDDP while infeasible), and FDDP's gap term that of the states' difference.  (The
    predictions xnext are the rollout's one-state ABA, calc's the lanes': round-off apart.)"""
    from geppetto import ocp
    from geppetto.solvers.forward import ForwardPass
    from geppetto.solvers.riccati import gap_decrease
    robot = gp.robots.load(name)
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    free = ocp.FreeDynamics(model)
    regs = [ocp.Cost(ocp.StateResidual(free.state, x0), weight=1e-1),
            ocp.Cost(ocp.ControlResidual(free.nu), weight=1e-3)]
    problem = ocp.ShootingProblem(x0, [ocp.StageModel(free, regs, dt=0.01)] * 6,
                                  ocp.TerminalModel(free.state, regs[:1]))
    rng = np.random.default_rng(3)
    N, ndx, nu = problem.N, problem.ndx, problem.nu
    xs = problem.state.integrate(np.repeat(x0[None], N + 1, axis=0),
                                 0.05 * rng.standard_normal((N + 1, ndx)))
    us = problem.quasi_static(xs) + 0.1 * rng.standard_normal((N, nu))
    gains = 0.1 * rng.standard_normal((N, nu)), 0.01 * rng.standard_normal((N, nu, ndx))
    bounds = np.full((N, nu), -np.inf), np.full((N, nu), np.inf)
    gaps = 0.02 * rng.standard_normal((N + 1, ndx))
    A = rng.standard_normal((N + 1, ndx, ndx))
    Vxx = A @ A.transpose(0, 2, 1)
    forward = ForwardPass(problem)
    alpha = 0.5
    xs_try, us_try, xnext, _ = forward(xs, us, gains, bounds, alpha, True, False, gaps, Vxx)
    xs_try, us_try, xnext = xs_try.copy(), us_try.copy(), xnext.copy()
    predicted = np.r_[x0[None], xnext]
    np.testing.assert_array_equal(
        xs_try, problem.state.integrate(predicted, (alpha - 1.0) * gaps))
    dv = forward.gap_decrease(xs, xs_try, gaps, Vxx)
    assert dv == pytest.approx(
        gap_decrease(gaps, Vxx, problem.state.difference(xs_try, xs)), rel=1e-12)
    assert (model.nq == model.nv) == (name == "ur5")
