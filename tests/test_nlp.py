"""The multiple-shooting NLP (``solvers/nlp.py``) in both derivative modes.

- On the ur5 reaching task (frame translation + state and control
  regularization, semi-implicit Euler, 20 knots) the NLP warm-started from a
  3-iteration FDDP iterate reaches FDDP's optimum (cost 1e-6 relative,
  trajectories 1e-5), both solvers run to tight tolerances (FDDP th_stop 1e-20,
  IPOPT tol 1e-10): the optimum is flat along the wrist's velocities.
- A terminal equality (end-effector at the target) and a path inequality
  (end-effector above a plane in the second half of the motion), both
  violated by the unconstrained optimum, hold to 1e-8; state (velocity) and
  control bounds hold.
- Derivatives against central differences in the NLP variables w: the
  constraint Jacobian's sparsity handed to IPOPT holds every nonzero of a
  dense finite-difference Jacobian and equals the analytical block structure;
  gradient and Jacobian values; the exact Hessian (casadi mode); on ur5 and on
  a free-flyer tree with every joint type (the chart x = xbar (+) dx).
- Statuses (infeasible, max_iter, time_limit), callbacks, history, errors.
- Every term has a CasADi twin: an SE3 reach on ur5 (log6 placement cost and a
  tool-velocity cost) reaches FDDP's optimum in both modes (1e-6 relative);
  solo12 balancing on four point feet (ContactDynamics, friction pyramids as
  constraints, a contact-force cost) builds and solves in casadi mode, to the
  analytical mode's optimum; a user's residual class makes casadi mode fail at
  construction with a message naming the term and its stage.
"""
import functools

import casadi as ca
import numpy as np
import pytest

import geppetto as gp
from geppetto.benchmarks.constrained import quadruped_com_shift
from geppetto.solvers import NLP, CallbackLogger
from geppetto.solvers.symbolic_terms import MissingTwinError

MODES = ("analytical", "casadi")
N = 20
TARGET = np.array([0.4, 0.2, 0.4])
PLANE_Z = 0.3          # the tool stays above it on knots 10..19 (it is below at knot 10)
V_MAX, U_MAX = 8.0, 120.0


@functools.lru_cache(maxsize=None)
def ur5():
    robot = gp.robots.load("ur5")
    dynamics = gp.ocp.FreeDynamics(robot.model)
    x0 = np.concatenate([robot.q0, np.zeros(robot.model.nv)])
    return robot.model, dynamics, x0


def reaching(constrained=False, bounded=False, N=N, costs_only_regularization=False):
    """The reaching problem; ``constrained``: terminal equality + plane on knots 10..N-1;
    ``bounded``: |v| <= V_MAX at knots 1..N and |u| <= U_MAX."""
    model, dynamics, x0 = ur5()
    state, nu = dynamics.state, dynamics.nu
    reach = gp.ocp.Cost(gp.ocp.FrameTranslationResidual(model, "tool0", TARGET))
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(nu), weight=1e-4)
    costs = [x_reg, u_reg] if costs_only_regularization else [reach, x_reg, u_reg]
    v_bounds = None
    if bounded:
        v = np.r_[np.full(model.nv, np.inf), np.full(model.nv, V_MAX)]
        v_bounds = (-v, v)
    options = dict(dt=0.01, integrator="semi_implicit_euler", state_bounds=v_bounds,
                   control_bounds=(-U_MAX, U_MAX) if bounded else None)
    running = gp.ocp.StageModel(dynamics, costs, **options)
    terminal_costs = [gp.ocp.Cost(reach.residual, weight=1e3), x_reg][
        int(costs_only_regularization):]
    if not constrained:
        terminal = gp.ocp.TerminalModel(state, terminal_costs, state_bounds=v_bounds)
        return gp.ocp.ShootingProblem(x0, [running] * N, terminal)
    plane = gp.ocp.Constraint(
        gp.ocp.FrameTranslationResidual(model, "tool0", [0.0, 0.0, PLANE_Z], axes=[2]),
        0.0, np.inf, name="above plane")
    above = gp.ocp.StageModel(dynamics, costs, [plane], **options)
    at_target = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(model, "tool0", TARGET),
                                  0.0, 0.0, name="at target")
    terminal = gp.ocp.TerminalModel(state, terminal_costs, [at_target])
    half = N // 2
    return gp.ocp.ShootingProblem(x0, [running] * half + [above] * (N - half), terminal)


@functools.lru_cache(maxsize=None)
def fddp_solutions():
    """(optimum, warm start): FDDP to th_stop 1e-20 (the wrist's velocities sit in a
    valley of curvature ~1e-6: with the default th_stop they end 3e-2 away), and its
    third iterate."""
    problem = reaching()
    optimum = gp.solvers.FDDP(problem, th_stop=1e-20).solve(max_iter=500)
    assert optimum.converged
    warm = gp.solvers.FDDP(problem).solve(max_iter=3)
    return optimum, warm


def tool_positions(xs):
    model = ur5()[0]
    data, frame = model.create_data(), model.frame_id("tool0")
    return np.array([gp.dynamics.frame_placement(model, data, frame, x[:model.nq])[1]
                     for x in xs])


# --- optimum ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_reaching_optimum_equals_fddp(mode):
    optimum, warm = fddp_solutions()
    result = NLP(reaching(), derivatives=mode, tol=1e-10).solve(warm.xs, warm.us)
    assert result.converged, result.status
    assert abs(result.cost - optimum.cost) <= 1e-6 * optimum.cost
    np.testing.assert_allclose(result.xs, optimum.xs, rtol=0, atol=1e-5)
    np.testing.assert_allclose(result.us, optimum.us, rtol=0, atol=1e-5)
    assert result.gaps < 1e-8
    assert result.K.shape == optimum.K.shape and not np.any(result.K)


@pytest.mark.parametrize("mode", MODES)
def test_terminal_equality_and_path_inequality_hold(mode):
    optimum, warm = fddp_solutions()
    free = tool_positions(optimum.xs)
    assert np.max(np.abs(free[-1] - TARGET)) > 1e-4            # the cost alone misses the target
    assert np.min(free[N // 2:N, 2]) < PLANE_Z - 1e-2          # and dips below the plane
    nlp = NLP(reaching(constrained=True), derivatives=mode)
    result = nlp.solve(warm.xs, warm.us)
    assert result.converged, result.status
    tool = tool_positions(result.xs)
    assert np.max(np.abs(tool[-1] - TARGET)) <= 1e-8
    assert np.min(tool[N // 2:N, 2]) >= PLANE_Z - 1e-8
    assert np.min(tool[N // 2:N, 2]) <= PLANE_Z + 1e-6         # active somewhere
    assert result.gaps <= 1e-8


@functools.lru_cache(maxsize=None)
def constrained_solutions():
    optimum, warm = fddp_solutions()
    problem = reaching(constrained=True)
    return [NLP(problem, derivatives=mode).solve(warm.xs, warm.us) for mode in MODES]


def test_constrained_optimum_is_the_same_in_both_modes():
    analytical, symbolic = constrained_solutions()
    assert abs(analytical.cost - symbolic.cost) <= 1e-6 * symbolic.cost
    np.testing.assert_allclose(analytical.xs, symbolic.xs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_state_and_control_bounds_hold(mode):
    optimum, warm = fddp_solutions()
    nv = ur5()[0].nv
    assert np.max(np.abs(optimum.xs[:, nv:])) > V_MAX + 1.0     # the bounds are active
    assert np.max(np.abs(optimum.us)) > U_MAX + 1.0
    result = NLP(reaching(bounded=True), derivatives=mode).solve(warm.xs, warm.us)
    assert result.converged, result.status
    assert np.max(np.abs(result.xs[:, nv:])) <= V_MAX + 1e-8
    assert np.max(np.abs(result.us)) <= U_MAX + 1e-8
    assert np.max(np.abs(result.us)) >= U_MAX - 1e-4                # active (interior point)
    assert result.gaps <= 1e-8


# --- derivatives and sparsity ----------------------------------------------------------

def random_point(nlp, seed, scale=0.1):
    w0, xbar = nlp.initial_point()
    rng = np.random.default_rng(seed)
    return w0 + scale * rng.standard_normal(w0.size), nlp.parameters(xbar)


def evaluate(function, *args):
    return [np.asarray(ca.DM(out).full()) for out in function.call(list(args))]


def central_jacobian(nlp, w, p, step=1e-6):
    """(grad f (nw,), J (ng, nw)) by central differences of the NLP's f and g in w."""
    grad, J = np.zeros(w.size), np.zeros((nlp.transcription.ng, w.size))
    for i in range(w.size):
        e = np.zeros(w.size)
        e[i] = step
        f1, g1 = evaluate(nlp.functions["nlp"], w + e, p)
        f0, g0 = evaluate(nlp.functions["nlp"], w - e, p)
        grad[i] = (f1 - f0).item() / (2 * step)
        J[:, i] = (g1 - g0).ravel() / (2 * step)
    return grad, J


def expected_nonzeros(t):
    """Entries of the block structure: dd_k/dz_k dense, dd_k/ddx_{k+1} on the joints'
    tangent blocks, dc/dz on the columns each constraint depends on."""
    count = t.N * t.ndx * t.nz + t.N * int(t.tangent_pattern.sum())
    return count + sum(rows.size * len(columns) for _, _, rows, columns in t.terms)


def check_derivatives(nlp, seed, atol=1e-6):
    w, p = random_point(nlp, seed)
    grad_fd, J_fd = central_jacobian(nlp, w, p)
    _, grad = evaluate(nlp.functions["grad_f"], w, p)
    _, J = evaluate(nlp.functions["jac_g"], w, p)
    scale = max(1.0, np.max(np.abs(grad_fd)))
    assert np.max(np.abs(grad.ravel() - grad_fd)) <= atol * scale
    assert np.max(np.abs(J - J_fd)) <= atol * max(1.0, np.max(np.abs(J_fd)))
    # the pattern IPOPT gets holds every nonzero of the finite-difference Jacobian
    solver = nlp._solver(10, None, False, nlp._monitor.function)
    sparsity = solver.get_function("nlp_jac_g").sparsity_out(1)
    pattern = np.array(ca.DM(sparsity, 1.0).full(), dtype=bool)
    assert not np.any((np.abs(J_fd) > 1e-9) & ~pattern), "nonzeros missing from the pattern"
    assert sparsity == nlp.functions["jac_g"].sparsity_out(1)
    rows, cols = nlp.transcription.jacobian_structure()
    structure = np.zeros_like(pattern)
    structure[rows, cols] = True
    assert np.array_equal(pattern, structure)
    assert sparsity.nnz() == expected_nonzeros(nlp.transcription)
    return w, p


@pytest.mark.parametrize("mode", MODES)
def test_jacobian_sparsity_and_derivatives_on_ur5(mode):
    nlp = NLP(reaching(constrained=True, N=4), derivatives=mode)
    check_derivatives(nlp, seed=0)


@functools.lru_cache(maxsize=None)
def free_flyer_problem(cost_quadrature=True):
    """A 5-joint tree on a free-flyer root with spherical, planar, unbounded revolute,
    prismatic and translation joints; RK2 (its running cost at the midpoint, Crocoddyl's
    quadrature, unless ``cost_quadrature`` is False); costs and constraints of every
    twin."""
    model = gp.robots.builtin.random_tree(5, seed=11, root_joint="free-flyer", armature=True)
    dynamics = gp.ocp.FreeDynamics(model)
    state = dynamics.state
    rng = np.random.default_rng(5)
    x0 = np.concatenate([gp.dynamics.random_configuration(model, rng), np.zeros(model.nv)])
    reach = gp.ocp.FrameTranslationResidual(model, "frame4", [0.3, 0.1, 0.5])
    costs = [gp.ocp.Cost(reach), gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2),
             gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=1e-3),
             gp.ocp.Cost(gp.ocp.JointTorqueResidual(model), weight=1e-4),
             gp.ocp.Cost(gp.ocp.CenterOfMassResidual(model, [0.0, 0.0, 0.1]),
                         gp.ocp.WeightedQuadratic([1.0, 2.0, 3.0]))]
    height = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(model, "frame2", [0, 0, -5.0],
                                                               axes=[2]), 0.0, np.inf)
    running = gp.ocp.StageModel(dynamics, costs, [height], dt=0.02, integrator="rk2",
                                cost_quadrature=cost_quadrature)
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(reach, weight=10.0)], [
        gp.ocp.Constraint(gp.ocp.CenterOfMassResidual(model, [0.0, 0.0, 0.0]), -1.0, 1.0)])
    return gp.ocp.ShootingProblem(x0, [running] * 3, terminal)


@pytest.mark.parametrize("mode", MODES)
def test_derivatives_on_the_manifold(mode):
    nlp = NLP(free_flyer_problem(), derivatives=mode)
    check_derivatives(nlp, seed=1)


def test_exact_hessian_matches_finite_differences():
    nlp = NLP(free_flyer_problem(), derivatives="casadi")
    w, p = random_point(nlp, seed=2)
    lam_f = 0.7
    lam_g = np.random.default_rng(3).standard_normal(nlp.transcription.ng)

    def lagrangian_gradient(w):
        _, grad = evaluate(nlp.functions["grad_f"], w, p)
        _, J = evaluate(nlp.functions["jac_g"], w, p)
        return lam_f * grad.ravel() + J.T @ lam_g

    step = 1e-6
    H_fd = np.zeros((w.size, w.size))
    for i in range(w.size):
        e = np.zeros(w.size)
        e[i] = step
        H_fd[:, i] = (lagrangian_gradient(w + e) - lagrangian_gradient(w - e)) / (2 * step)
    (H,) = evaluate(nlp.functions["hess_lag"], w, p, lam_f, lam_g)
    assert np.max(np.abs(H - np.triu(H_fd))) <= 1e-5 * max(1.0, np.max(np.abs(H_fd)))


def test_gauss_newton_hessian_is_exact_for_linear_residuals():
    """State and control regularization only (linear residuals of w for ur5): the
    Gauss-Newton blocks equal the exact Hessian of the cost."""
    problem = reaching(costs_only_regularization=True, N=3)
    analytical, symbolic = NLP(problem), NLP(problem, derivatives="casadi")
    w, _ = random_point(analytical, seed=4)
    xbar = analytical.initial_point()[1]
    zeros = np.zeros(analytical.transcription.ng)
    (H_gn,) = evaluate(analytical.functions["hess_lag"], w, analytical.parameters(xbar), 0.5,
                       zeros)
    (H,) = evaluate(symbolic.functions["hess_lag"], w, symbolic.parameters(xbar), 0.5, zeros)
    np.testing.assert_allclose(H_gn, H, rtol=0, atol=1e-10 * np.max(np.abs(H)))


@pytest.mark.parametrize("mode", MODES)
def test_free_flyer_solution_is_feasible_and_same_in_both_modes(mode):
    # the cost at the knots: with the midpoint cost the Gauss-Newton IPOPT of the
    # analytical mode stopped at max_iter (1000 iterations, gaps 3e-3)
    problem = free_flyer_problem(cost_quadrature=False)
    result = NLP(problem, derivatives=mode).solve()
    reference = NLP(problem, derivatives="casadi").solve()
    assert result.converged and reference.converged
    assert result.gaps <= 1e-8
    assert abs(result.cost - reference.cost) <= 1e-6 * max(1.0, reference.cost)


# --- the plane residual ------------------------------------------------------------------

def test_frame_translation_axes_selects_rows():
    model, dynamics, x0 = ur5()
    rng = np.random.default_rng(6)
    xs = np.hstack([gp.dynamics.random_configuration(model, rng, size=4),
                    rng.standard_normal((4, model.nv))])
    full = gp.ocp.FrameTranslationResidual(model, "tool0", TARGET)
    part = gp.ocp.FrameTranslationResidual(model, "tool0", TARGET, axes=[2, 0])
    assert part.nr == 2
    errors = gp.ocp.check_residual(part, dynamics.state, xs)
    assert max(errors) < 1e-6
    problem_data = []
    for residual in (full, part):
        data = residual.create_data(4, dynamics.state.ndx, 0)
        kinematics = dynamics.create_data(4)
        dynamics.calc_diff(kinematics, xs, np.zeros((4, dynamics.nu)))
        residual.calc_diff(data, kinematics.dynamics, xs, None)
        problem_data.append(data)
    np.testing.assert_array_equal(problem_data[1].r, problem_data[0].r[:, [2, 0]])
    np.testing.assert_array_equal(problem_data[1].Rx, problem_data[0].Rx[:, [2, 0]])
    with pytest.raises(ValueError, match="axes"):
        gp.ocp.FrameTranslationResidual(model, "tool0", TARGET, axes=[3])


# --- statuses, callbacks, errors ----------------------------------------------------------

@functools.lru_cache(maxsize=None)
def infeasible_problem():
    """The tool must stay above z = 0 at every knot; it starts at z = -0.005 (x_0 fixed)."""
    model, dynamics, x0 = ur5()
    assert tool_positions(x0[None])[0, 2] < 0.0
    floor = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(model, "tool0", [0, 0, 0.0],
                                                              axes=[2]), 0.0, np.inf)
    problem = reaching(N=10)
    running = gp.ocp.StageModel(dynamics, problem.running_models[0].costs, [floor], dt=0.01,
                                integrator="semi_implicit_euler")
    return gp.ocp.ShootingProblem(x0, [running] * 10, problem.terminal_model)


@pytest.mark.parametrize("mode", MODES)
def test_statuses(mode):
    nlp = NLP(infeasible_problem(), derivatives=mode)
    result = nlp.solve()
    assert (result.status, result.converged) == ("infeasible", False)
    assert nlp.stats["return_status"] == "Infeasible_Problem_Detected"
    result = NLP(reaching(N=10), derivatives=mode).solve(max_iter=2)
    assert (result.status, result.converged, result.iterations) == ("max_iter", False, 2)
    result = NLP(reaching(N=10), derivatives=mode).solve(time_limit=1e-6)
    assert (result.status, result.converged) == ("time_limit", False)


def test_callbacks_history_and_verbose(capsys):
    optimum, warm = fddp_solutions()
    logger = CallbackLogger()
    nlp = NLP(reaching())
    result = nlp.solve(warm.xs, warm.us, callbacks=[logger], verbose=True)
    out = capsys.readouterr().out
    assert "||gaps||" in out and len(out.splitlines()) >= result.iterations + 1
    assert len(logger.records) == result.iterations + 1              # iteration 0 included
    assert logger.records[-1]["gaps"] == pytest.approx(result.history["gaps"][-1])
    assert logger.records[-1]["cost"] == pytest.approx(result.cost, rel=1e-9)
    for key in ("cost", "inf_pr", "inf_du", "mu", "step", "gaps", "time"):
        assert len(result.history[key]) == result.iterations + 1, key
    assert result.stop == result.history["inf_du"][-1] <= 1e-6
    for key in ("t_wall_nlp_f", "t_wall_nlp_g", "t_wall_nlp_grad_f", "t_wall_nlp_jac_g",
                "t_wall_nlp_hess_l"):
        assert nlp.stats[key] >= 0.0


def test_ipopt_output(capfd):
    NLP(reaching(N=5)).solve(max_iter=3, verbose="ipopt")
    assert "Number of Iterations" in capfd.readouterr().out


def test_errors():
    model, dynamics, x0 = ur5()
    problem = reaching(N=3)
    with pytest.raises(ValueError, match="derivatives"):
        NLP(problem, derivatives="finite")
    with pytest.raises(ValueError, match="hessian"):
        NLP(problem, hessian="exact")
    unicycle = gp.ocp.unicycle()
    numba_only = gp.ocp.CustomDynamics(3, 2, unicycle._calc, unicycle._calc_diff)
    stage = gp.ocp.StageModel(numba_only, [gp.ocp.Cost(gp.ocp.ControlResidual(2))])
    custom = gp.ocp.ShootingProblem(np.zeros(3), [stage] * 3,
                                    gp.ocp.TerminalModel(numba_only.state))
    assert NLP(custom).solve().converged
    with pytest.raises(MissingTwinError, match="stage 'running' .*CustomDynamics without "
                                               "symbolic="):
        NLP(custom, derivatives="casadi")
    tree = free_flyer_problem()
    lower = np.full(tree.nx, -np.inf)
    lower[3] = -1.0                                            # a quaternion coordinate
    terminal = gp.ocp.TerminalModel(tree.state, state_bounds=(lower, np.inf))
    bounded = gp.ocp.ShootingProblem(tree.x0, tree.running_models, terminal)
    with pytest.raises(ValueError, match="Lie-group"):
        NLP(bounded)


class ShiftedTranslation(gp.ocp.FrameTranslationResidual):
    """A user's residual class: its calc may differ from its base's, so it has no twin."""


def test_missing_twins_are_named_at_construction():
    model, dynamics, x0 = ur5()
    problem = reaching(N=3)
    mine = gp.ocp.Cost(ShiftedTranslation(model, "tool0", TARGET), name="mine")
    running = gp.ocp.StageModel(dynamics, [mine], dt=0.01, name="reach")
    terminal = gp.ocp.TerminalModel(dynamics.state, constraints=[
        gp.ocp.Constraint(ShiftedTranslation(model, "tool0", TARGET), 0.0, 0.0, name="end")])
    user = gp.ocp.ShootingProblem(x0, [running] * 3, terminal)
    NLP(user)                                                  # analytical: any residual
    with pytest.raises(MissingTwinError) as error:
        NLP(user, derivatives="casadi")
    message = str(error.value)
    assert "stage 'reach' (knots 0..2): cost 'mine' (ShiftedTranslation)" in message
    assert "stage 'terminal' (knots 3..3): constraint 'end' (ShiftedTranslation)" in message
    assert NLP(problem, derivatives="casadi").transcription.N == 3


# --- every term has a twin: an SE3 reach and a contact problem -----------------------------

def tool_rotation_target():
    """The tool's rotation at x0, turned by 0.4 rad about a tilted axis."""
    model, _, x0 = ur5()
    R, _ = gp.dynamics.frame_placement(model, model.create_data(), model.frame_id("tool0"),
                                       x0[:model.nq])
    axis = np.array([0.2, 1.0, -0.3]) / np.linalg.norm([0.2, 1.0, -0.3])
    W = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return R @ (np.eye(3) + np.sin(0.4) * W + (1 - np.cos(0.4)) * W @ W)


@functools.lru_cache(maxsize=None)
def se3_reaching(N=10):
    """ur5 reaching a placement (log6), with a tool-velocity cost (LOCAL_WORLD_ALIGNED)."""
    model, dynamics, x0 = ur5()
    state, nu = dynamics.state, dynamics.nu
    reach = gp.ocp.FramePlacementResidual(model, "tool0", tool_rotation_target(), TARGET)
    costs = [gp.ocp.Cost(reach, weight=1.0),
             gp.ocp.Cost(gp.ocp.FrameVelocityResidual(model, "tool0",
                                                      reference_frame="LOCAL_WORLD_ALIGNED"),
                         weight=1e-3),
             gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2),
             gp.ocp.Cost(gp.ocp.ControlResidual(nu), weight=1e-4)]
    running = gp.ocp.StageModel(dynamics, costs, dt=0.02, integrator="semi_implicit_euler")
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(reach, weight=1e3), costs[2]])
    return gp.ocp.ShootingProblem(x0, [running] * N, terminal)


def test_se3_reaching_optimum_is_the_same_in_both_modes_and_fddp():
    problem = se3_reaching()
    optimum = gp.solvers.FDDP(problem, th_stop=1e-20).solve(max_iter=500)
    assert optimum.converged
    warm = gp.solvers.FDDP(problem).solve(max_iter=3)
    for mode in MODES:
        result = NLP(problem, derivatives=mode, tol=1e-10).solve(warm.xs, warm.us)
        assert result.converged, (mode, result.status)
        assert abs(result.cost - optimum.cost) <= 1e-6 * optimum.cost, mode
        np.testing.assert_allclose(result.xs, optimum.xs, rtol=0, atol=1e-5)
        assert result.gaps < 1e-8


SOLO_FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


@functools.lru_cache(maxsize=None)
def solo12_balance(N=4):
    """solo12 on its four point feet shifting its centre of mass by (2, -1, -2) cm in
    N knots, the friction pyramids as constraints, a force cost on one foot."""
    dynamics, x0, _, _, costs, cones = quadruped_com_shift("solo12", SOLO_FEET,
                                                           [0.02, -0.01, -0.02], 0.7)
    state = dynamics.state
    costs.append(gp.ocp.Cost(gp.ocp.ContactForceResidual(dynamics, 0, [0.0, 0.0, 6.0]),
                             weight=1e-3))
    constraints = [gp.ocp.Constraint(r, *r.bounds) for r in cones]
    running = gp.ocp.StageModel(dynamics, costs, constraints, dt=0.02,
                                integrator="semi_implicit_euler")
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(costs[0].residual, weight=1e3),
                                            costs[1]])
    return gp.ocp.ShootingProblem(x0, [running] * N, terminal), cones


def test_contact_problem_builds_and_solves_in_casadi_mode():
    problem, cones = solo12_balance()
    results = {mode: NLP(problem, derivatives=mode, tol=1e-9).solve() for mode in MODES}
    for mode, result in results.items():
        assert result.converged, (mode, result.status)
        assert result.gaps <= 1e-8
    analytical, symbolic = results["analytical"], results["casadi"]
    assert abs(analytical.cost - symbolic.cost) <= 1e-6 * symbolic.cost
    np.testing.assert_allclose(analytical.xs, symbolic.xs, rtol=0, atol=1e-5)
    # the pyramids hold at the solution, by the Numba residuals
    stage = problem.running_models[0]
    xs, us = symbolic.xs[:-1], symbolic.us
    data = stage.dynamics.create_data(len(us))
    stage.dynamics.calc(data, xs, us)
    for cone in cones:
        rdata = cone.create_data(len(us), stage.state.ndx, stage.nu)
        cone.calc(rdata, data.dynamics, xs, us)
        assert np.min(rdata.r) >= -1e-8


@functools.lru_cache(maxsize=None)
def solo12_landing():
    """An impulse knot (all four feet, restitution 0.1) then two knots on LOCAL point
    feet: force, smooth cone and centre-of-mass costs, a placement and a WORLD
    velocity cost on the base at the end."""
    robot = gp.robots.load("solo12")
    model = robot.model
    feet = [gp.dynamics.constraints.contact_3d(model, foot, Kp=5.0, Kd=2.0)
            for foot in SOLO_FEET]
    impulse = gp.ocp.ImpulseDynamics(model, feet, restitution=0.1)
    contact = gp.ocp.ContactDynamics(model, feet)
    state = contact.state
    x0 = np.concatenate([robot.q0, 0.1 * np.random.default_rng(16).standard_normal(model.nv)])
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-1)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(contact.nu), weight=1e-3)
    landing = gp.ocp.StageModel(impulse, [x_reg, gp.ocp.Cost(
        gp.ocp.ContactForceResidual(impulse, 2, [0.0, 0.0, 0.1]), weight=1e-1)], dt=1.0,
        name="impulse")
    cone = gp.ocp.SmoothFrictionConeResidual(contact, 1, 0.7, eps=0.5)
    standing = gp.ocp.StageModel(contact, [
        x_reg, u_reg, gp.ocp.Cost(cone, gp.ocp.QuadraticBarrier(*cone.bounds), weight=1e-2),
        gp.ocp.Cost(gp.ocp.CenterOfMassResidual(model, [0.01, 0.0, 0.2]), weight=10.0)],
        [gp.ocp.Constraint(gp.ocp.FrictionConeResidual(contact, 3, 0.5), 0.0, np.inf)],
        dt=0.02, integrator="rk2", name="standing")
    base = gp.ocp.FramePlacementResidual(model, "base_link", np.eye(3), [0.0, 0.0, 0.25])
    velocity = gp.ocp.FrameVelocityResidual(model, "base_link", reference_frame="WORLD")
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(base), gp.ocp.Cost(velocity)])
    return gp.ocp.ShootingProblem(x0, [landing, standing, standing], terminal)


def test_modes_agree_on_an_impulse_and_contact_problem():
    """f, g, grad f and the Jacobian of g: the casadi mode (twins, AD) equals the
    analytical mode (Numba kernels) at random points near the standing pose."""
    problem = solo12_landing()
    nlps = [NLP(problem, derivatives=mode) for mode in MODES]
    for seed in (17, 18):
        w, _ = random_point(nlps[0], seed, scale=0.02)
        xbar = nlps[0].initial_point()[1]
        outputs = []
        for nlp in nlps:
            p = nlp.parameters(xbar)
            outputs.append(evaluate(nlp.functions["nlp"], w, p)
                           + evaluate(nlp.functions["grad_f"], w, p)[1:]
                           + evaluate(nlp.functions["jac_g"], w, p)[1:])
        for name, analytical, symbolic in zip(("f", "g", "grad_f", "jac_g"), *outputs):
            scale = max(1.0, np.max(np.abs(analytical)))
            error = np.max(np.abs(symbolic - analytical))
            assert error <= 1e-9 * scale, f"{name}: {error:.2e} (scale {scale:.1e})"


@pytest.mark.parametrize("name", ["unicycle", "quadrotor"])
def test_custom_dynamics_with_a_symbolic_field_solve_alike_in_both_modes(name):
    """The built-in CustomDynamics carry their field for casadi mode: a unicycle
    parking and a quadrotor climbing 1 m (rk4) reach the same optimum."""
    if name == "unicycle":
        dynamics = gp.ocp.unicycle()
        x0, target, u_ref = np.array([-1.0, 0.5, 0.3]), np.zeros(3), np.zeros(2)
        scheme = "explicit_euler"
    else:
        dynamics = gp.ocp.quadrotor()
        x0, target = np.zeros(12), np.r_[0.3, 0.0, 1.0, np.zeros(9)]
        u_ref, scheme = np.full(4, dynamics.hover_thrust), "rk4"
    state = dynamics.state
    costs = [gp.ocp.Cost(gp.ocp.StateResidual(state, target), weight=1.0),
             gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu, u_ref), weight=1e-2)]
    stage = gp.ocp.StageModel(dynamics, costs, dt=0.1, integrator=scheme)
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(costs[0].residual, weight=1e2)])
    problem = gp.ocp.ShootingProblem(x0, [stage] * 10, terminal)
    results = [NLP(problem, derivatives=mode, tol=1e-10).solve() for mode in MODES]
    assert all(result.converged for result in results)
    assert abs(results[0].cost - results[1].cost) <= 1e-8 * results[1].cost
    np.testing.assert_allclose(results[0].xs, results[1].xs, rtol=0, atol=1e-6)


def test_a_twin_out_of_step_with_its_kernel_is_refused(monkeypatch):
    """The casadi NLP compares itself with the Numba problem at construction: an
    integrator twin changed under it (as a renamed scheme would) and a residual twin
    that differs are named."""
    from geppetto.solvers import symbolic_terms
    problem = reaching(N=3)
    stage_points = symbolic_terms.stage_points

    def explicit_in_place_of_symplectic(stage, point):
        points, _ = stage_points(stage, point)
        return points, stage.dt * symbolic_terms.field(stage.dynamics, point)

    monkeypatch.setattr(symbolic_terms, "stage_points", explicit_in_place_of_symplectic)
    with pytest.raises(RuntimeError, match="stage 'running' \\(knots 0..2\\): .* rows of g"):
        NLP(problem, derivatives="casadi")
    monkeypatch.undo()
    monkeypatch.setitem(symbolic_terms.RESIDUALS, gp.ocp.ControlResidual,
                        lambda residual, point, ref: point.u - ref + 1.0)
    with pytest.raises(RuntimeError, match="the cost"):
        NLP(problem, derivatives="casadi")
