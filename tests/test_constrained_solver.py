"""ALDDP (augmented-Lagrangian DDP) and ProxDDP (primal-dual augmented-Lagrangian DDP)
against exact solutions (the LQ problems, infeasibility, warm and infeasible starts: both
solvers, parametrized).

- Equality-constrained LQ problems (a linear double integrator, a terminal state
  equality, a path equality on the control): the dense KKT system of the
  whole horizon, to 1e-10.
- An inequality-constrained LQ problem (control bounds and a state lower bound on
  some knots): scipy's SLSQP on the dense QP with tight tolerances.
- The constrained ur5 reach (terminal position equality, hand above a plane on
  the second half): IPOPT's optimum (our NLP) from the same start.
- Contradicting terminal equalities end as "infeasible" in bounded iterations.
- Hard friction cones on solo12's and hyq's contact knots; a closed-loop MPC (ur5) that keeps
  the hand above a plane with shifted multipliers.
"""
import numpy as np
import pytest

import geppetto as gp
from geppetto import ocp
from geppetto.dynamics.config import kernel
from geppetto.ocp.fused import DIFF


@kernel
def _double_integrator(xs, us, params, f):
    """A damped planar double integrator, dv/dt = u - params[0] v; a knot without
    controls (us (K, 0)) coasts, u = 0."""
    for k in range(xs.shape[0]):
        f[k, 0] = xs[k, 2]
        f[k, 1] = xs[k, 3]
        for i in range(2):
            u = us[k, i] if us.shape[1] > 0 else 0.0
            f[k, 2 + i] = u - params[0] * xs[k, 2 + i]


@kernel
def _double_integrator_diff(xs, us, params, f, f_x, f_u):
    _double_integrator(xs, us, params, f)
    for k in range(xs.shape[0]):
        f_x[k, :, :] = 0.0
        f_x[k, 0, 2] = 1.0
        f_x[k, 1, 3] = 1.0
        f_x[k, 2, 2] = -params[0]
        f_x[k, 3, 3] = -params[0]
        f_u[k, :, :] = 0.0
        if us.shape[1] > 0:
            f_u[k, 2, 0] = 1.0
            f_u[k, 3, 1] = 1.0


X0 = np.array([1.0, -0.5, 0.2, 0.3])
SOLVERS = pytest.mark.parametrize("solver_class", [gp.solvers.ALDDP, gp.solvers.ProxDDP],
                                  ids=["ALDDP", "ProxDDP"])
TARGET = np.array([0.3, 0.4, 0.0, 0.0])


def _lq_problem(N=12, stage_constraints=(), terminal_constraints=(), control_bounds=None,
                state_bounds=None, bounded_knots=()):
    """A damped planar double integrator, Euler dt = 0.1, quadratic costs."""
    dynamics = ocp.CustomDynamics(4, 2, _double_integrator, _double_integrator_diff,
                                  params=[0.3], nq=2)
    state = dynamics.state
    costs = [ocp.Cost(ocp.StateResidual(state, TARGET), ocp.WeightedQuadratic([1, 2, .1, .1])),
             ocp.Cost(ocp.ControlResidual(2), weight=0.5)]
    plain = ocp.StageModel(dynamics, costs, dt=0.1)
    special = ocp.StageModel(dynamics, costs, list(stage_constraints), dt=0.1,
                             control_bounds=control_bounds, state_bounds=state_bounds)
    models = [special if k in bounded_knots else plain for k in range(N)]
    terminal = ocp.TerminalModel(state, [ocp.Cost(ocp.StateResidual(state, TARGET))],
                                 list(terminal_constraints))
    return ocp.ShootingProblem(X0, models, terminal)


def _dense(problem):
    """The dense QP of a linear-quadratic problem in z = (x_0 .. x_N, u_0 .. u_{N-1}):
    cost 1/2 z^T H z + g^T z (+ const), dynamics A z = b, from the derivatives at 0."""
    N, n, m = problem.N, problem.ndx, problem.nu
    zeros_x, zeros_u = np.zeros((N + 1, n)), np.zeros((N, m))
    problem.calc_diff(zeros_x, zeros_u)
    nz = (N + 1) * n + N * m
    H, g = np.zeros((nz, nz)), np.zeros(nz)
    X = lambda k: slice(k * n, (k + 1) * n)                       # noqa: E731
    U = lambda k: slice((N + 1) * n + k * m, (N + 1) * n + (k + 1) * m)  # noqa: E731
    for k in range(N + 1):
        H[X(k), X(k)] = problem.Lxx[k]
        g[X(k)] = problem.Lx[k]
    for k in range(N):
        H[U(k), U(k)] = problem.Luu[k]
        H[X(k), U(k)] = problem.Lxu[k]
        H[U(k), X(k)] = problem.Lxu[k].T
        g[U(k)] = problem.Lu[k]
    A, b = np.zeros(((N + 1) * n, nz)), np.zeros((N + 1) * n)
    A[X(0), X(0)] = np.eye(n)
    b[X(0)] = problem.x0
    for k in range(N):
        rows = X(k + 1)
        A[rows, X(k + 1)] = np.eye(n)
        A[rows, X(k)] = -problem.Fx[k]
        A[rows, U(k)] = -problem.Fu[k]
        b[rows] = problem.xnext[k]                                 # F(0, 0)
    return H, g, A, b, X, U


def _split(problem, z, X, U):
    return (np.array([z[X(k)] for k in range(problem.N + 1)]),
            np.array([z[U(k)] for k in range(problem.N)]))


def _terminal_equality_kkt():
    """(problem, xs, us): x_N = (0, 0, 0, 0) exactly and u_3[0] = 0.5 (a path equality)
    on :func:`_lq_problem`, and its solution by the dense KKT system."""
    goal = np.zeros(4)
    problem = _lq_problem(terminal_constraints=[ocp.Constraint(
        ocp.StateResidual(ocp.StateVector(4), goal), 0.0, 0.0)],
        stage_constraints=[ocp.Constraint(ocp.ControlResidual(2, [0.5, 0.0]), [0.0, -np.inf],
                                          [0.0, np.inf])], bounded_knots=(3,))
    H, g, A, b, X, U = _dense(problem)
    n = problem.ndx
    C = np.zeros((n + 1, H.shape[0]))
    C[:n, X(problem.N)] = np.eye(n)
    C[n, U(3).start] = 1.0
    E, e = np.vstack([A, C]), np.concatenate([b, goal, [0.5]])
    kkt = np.block([[H, E.T], [E, np.zeros((E.shape[0], E.shape[0]))]])
    z = np.linalg.solve(kkt, np.concatenate([-g, e]))[:H.shape[0]]
    return (problem,) + _split(problem, z, X, U)


@SOLVERS
def test_lq_terminal_equality_matches_kkt(solver_class):
    """x_N = (0, 0, 0, 0) exactly and u_3[0] = 0.5 (a path equality): the KKT solution."""
    problem, xs_ref, us_ref = _terminal_equality_kkt()
    result = solver_class(problem, th_constraint=1e-12).solve(max_iter=200)
    assert result.converged, result
    assert result.violation < 1e-12
    np.testing.assert_allclose(result.xs, xs_ref, atol=1e-10)
    np.testing.assert_allclose(result.us, us_ref, atol=1e-10)
    cost_ref = problem.calc(xs_ref, us_ref)
    assert abs(result.cost - cost_ref) < 1e-10 * abs(cost_ref)


@SOLVERS
def test_lq_inequalities_match_qp(solver_class):
    """Control bounds |u| <= 0.4 and x_1 >= 0.2 (a position) on knots 4..8:
    SLSQP on the dense QP."""
    from scipy.optimize import minimize
    state_lower = np.array([-np.inf, 0.2, -np.inf, -np.inf])
    knots = range(4, 9)
    problem = _lq_problem(control_bounds=(-0.4, 0.4), state_bounds=(
        state_lower, np.full(4, np.inf)), bounded_knots=knots)
    H, g, A, b, X, U = _dense(problem)
    lower, upper = np.full(H.shape[0], -np.inf), np.full(H.shape[0], np.inf)
    for k in knots:
        lower[U(k)], upper[U(k)] = -0.4, 0.4
        lower[X(k).start + 1] = 0.2
    bounds = list(zip(lower, upper))
    xs0, us0 = np.repeat(X0[None], problem.N + 1, 0), np.zeros((problem.N, 2))
    z0 = np.concatenate([xs0.ravel(), us0.ravel()])
    qp = minimize(lambda z: 0.5 * z @ H @ z + g @ z, z0, jac=lambda z: H @ z + g,
                  bounds=[(None if np.isinf(lo) else lo, None if np.isinf(hi) else hi)
                          for lo, hi in bounds],
                  constraints=[dict(type="eq", fun=lambda z: A @ z - b, jac=lambda z: A)],
                  method="SLSQP", options=dict(ftol=1e-15, maxiter=1000))
    assert qp.success, qp.message
    xs_ref, us_ref = _split(problem, qp.x, X, U)
    result = solver_class(problem).solve(max_iter=300)
    assert result.converged, result
    assert result.violation < 1e-8
    np.testing.assert_allclose(result.xs, xs_ref, atol=1e-6)
    np.testing.assert_allclose(result.us, us_ref, atol=1e-6)
    assert np.min(result.xs[list(knots), 1]) > 0.2 - 1e-8
    cost_ref = problem.calc(xs_ref, us_ref)
    assert abs(result.cost - cost_ref) < 1e-7 * abs(cost_ref)


def test_hopeless_line_search_only_when_no_step_passes():
    """ALDDP._hopeless on merits that are exactly the quadratic it models, dv(a) = a d1
    + a^2 (d2 / 2 - e) (seeded draws over 12 decades of e): a search it ends after a
    trial has no step in ``alphas`` that FDDP's test accepts, and it ends the searches
    whose largest acceptable step is 2x (confirmed curvature) or 256x (not) below
    the smallest alpha."""
    solver = gp.solvers.ALDDP(_lq_problem(terminal_constraints=[ocp.Constraint(
        ocp.StateResidual(ocp.StateVector(4), np.zeros(4)), 0.0, 0.0)]))
    inner = solver.inner
    alphas, th = np.array(inner.alphas), inner.th_acceptstep
    rng = np.random.default_rng(7)
    ended = {True: 0, False: 0}
    for _ in range(2000):
        d1 = 10.0 ** rng.uniform(-10, 0)
        d2 = -d1 * rng.uniform(0.5, 1.5)
        e = d1 * 10.0 ** rng.uniform(-1, 11)
        dv_exp = alphas * (d1 + 0.5 * alphas * d2)
        dv = dv_exp - e * alphas ** 2
        passes = dv > th * dv_exp
        largest = (1.0 - th) * d1 / (e - 0.5 * (1.0 - th) * d2)
        for confirmed in (True, False):
            for i, alpha in enumerate(alphas):
                if passes[i]:
                    break
                before = e if confirmed and i > 0 else np.nan
                if solver._hopeless(d1, d2, dv_exp[i], dv[i], e, before):
                    assert not passes.any(), (d1, d2, e, alpha)
                    margin = 2.0 if confirmed and i > 0 else 256.0
                    assert largest * margin < alphas[-1] * (1 + 1e-9)
                    ended[confirmed] += 1
                    break
            else:
                margin = 2.0 if confirmed else 256.0
                assert largest * margin >= alphas[-1] * (1 - 1e-9) or passes.any()
    assert ended[True] > 100 and ended[False] > 100, ended


def test_proximal_line_search_skips_the_steps_the_interpolation_refuses():
    """ProxDDP's line search on merits that are exactly the quadratic of its model, dv(a)
    = a d1 + a^2 (d2 / 2 - e) (seeded draws; largest acceptable step 2^-9 .. 0.45): it
    accepts the step halving accepts (the largest of ``alphas`` that FDDP's test takes)
    in at most 2 + ceil(k / 3) trials (2^-k that step: after the full step, one trial
    at or above the model's bound, three halvings at most per trial, the step), where
    halving (``interpolated_search=False``) takes k + 1; and ALDDP still halves."""
    problem = _lq_problem(terminal_constraints=[ocp.Constraint(
        ocp.StateResidual(ocp.StateVector(4), np.zeros(4)), 0.0, 0.0)])
    rng = np.random.default_rng(3)
    th = 0.1
    searches = []
    for _ in range(200):
        d1 = 10.0 ** rng.uniform(-8, 0)
        d2 = -d1 * rng.uniform(0.5, 1.5)
        largest = 2.0 ** rng.uniform(-9, np.log2(0.45))
        # FDDP's test dv > th dv_exp (th = 0.1) holds for a < largest: e from the bound
        e = (1.0 - th) * d1 / largest + 0.5 * (1.0 - th) * d2
        searches.append((d1, d2, e))
    trials = {}
    for name, solver in (("interpolated", gp.solvers.ProxDDP(problem)),
                         ("halving", gp.solvers.ProxDDP(problem, interpolated_search=False)),
                         ("alddp", gp.solvers.ALDDP(problem))):
        inner = solver.inner
        assert inner.th_acceptstep == th
        alphas = np.array(inner.alphas)
        tried = []
        inner.try_step = lambda xs, us, gaps, alpha, feasible: tried.append(alpha) or (
            xs, us, None, alpha)
        counts = []
        for d1, d2, e in searches:
            solver._trial_merit = lambda xs, us, trial, mu, alpha: 1.0 - (
                alpha * d1 + alpha * alpha * (0.5 * d2 - e))
            tried.clear()
            # (xs, us, gaps) unread by the stand-ins; a feasible iterate of merit 1
            accepted, refused, hopeless = solver._line_search(None, None, None, True, d1, d2,
                                                              1.0, 1e-2, 0, 0.0)
            dv_exp = alphas * (d1 + 0.5 * alphas * d2)
            passes = alphas * d1 + alphas ** 2 * (0.5 * d2 - e) > th * dv_exp
            best = alphas[np.argmax(passes)]
            assert passes.any() and not refused and not hopeless
            assert accepted[0] == best == tried[-1], (name, best, tried)
            k = int(round(-np.log2(best)))
            counts.append(len(tried))
            if name == "interpolated":
                assert len(tried) <= 2 + int(np.ceil(k / 3)), (tried, best)
            else:
                assert len(tried) == k + 1
        trials[name] = sum(counts)
    assert trials["interpolated"] < 0.7 * trials["halving"], trials
    assert trials["halving"] == trials["alddp"]


class _StopSearch(Exception):
    pass


def test_proximal_merit_model_is_exact_for_linear_rows():
    """On linear dynamics with quadratic costs and control and velocity bounds, every row
    is linear along FDDP's rollout, so ProxDDP's model of the merit along the step
    (:meth:`ProxDDP._next_trial`: the rows' terms piecewise quadratic through the
    iterate and the refused trial) equals the constraint terms of the trials' merit at
    every step of ``alphas``, and the next trial is at or above the largest step of
    ``alphas`` that FDDP's test accepts on the trials' merit (down to the safeguard)."""
    from geppetto.solvers import proxddp as P
    problem = _lq_problem(N=12, control_bounds=(np.array([-0.4, -0.4]), np.array([0.4, 0.4])),
                          state_bounds=(np.array([-np.inf, -np.inf, -0.15, -0.1]),
                                        np.array([np.inf, np.inf, 0.15, 0.1])),
                          bounded_knots=range(12))
    solver = gp.solvers.ProxDDP(problem, mu_init=1e-4)
    inner = solver.inner
    steps = np.array(inner.alphas)
    seen = []
    chosen = solver._next_trial

    def check(index, alpha, d1, d2, dv, feasible, mu):
        if not feasible or seen:
            return chosen(index, alpha, d1, d2, dv, feasible, mu)
        model = np.zeros(len(steps) + 1)
        slope = P._constraint_model(solver.typed_blocks, solver.typed_duals,
                                    solver.typed_values, mu, alpha, steps, model)
        following = chosen(index, alpha, d1, d2, dv, feasible, mu)
        xs, us = seen_iterate
        merits = []
        for a in np.concatenate([[0.0], steps]):
            trial = inner.try_step(xs, us, np.zeros((problem.N + 1, problem.ndx)), a, True)
            merits.append((solver._trial_merit(xs, us, trial, mu, a), trial[3]))
        (m0, c0), later = merits[0], merits[1:]
        terms = np.array([m - c - (m0 - c0) for m, c in later])
        assert np.allclose(model[:-1], terms, rtol=1e-8, atol=1e-10 * abs(m0)), (model, terms)
        dv_all = np.array([m0 - m for m, _ in later])
        passes = [inner.accepts(d1, a * (d1 + 0.5 * a * d2), v, True)
                  for a, v in zip(steps, dv_all)]
        candidates = [j for j in range(index + 1, len(steps))
                      if steps[j] >= P.INTERPOLATION_SAFEGUARD * alpha]
        passing = [j for j in candidates if passes[j]]
        # the larger of the model's step (the largest that passes) and the quadratic's
        assert index < following <= (passing[0] if passing else candidates[-1]), (
            following, passes, alpha)
        seen.append((index, following, passes))
        raise _StopSearch

    solver._next_trial = check
    seen_iterate = []
    search = solver._line_search

    def keep_iterate(xs, us, *args):
        seen_iterate[:] = [xs.copy(), us.copy()]
        return search(xs, us, *args)

    solver._line_search = keep_iterate
    with pytest.raises(_StopSearch):
        solver.solve(max_iter=50)
    assert seen


def test_proximal_search_model_sees_rows_crossing_late():
    """A control bound crossed at a = 0.9 of a step whose full step the penalty refuses
    (mu = 1e-4: the merit's excess 100 at a = 1): the quadratic through the full step's
    merit puts every acceptable step below 0.02, but the rows' model sees the cost's
    quadratic up to 0.9, and the next trial is 1/2 (the quadratic's alone: 1/8); a row
    crossed at 0.3 makes it 1/4."""
    problem = _lq_problem(N=2, control_bounds=(np.array([-1.0, -1.0]), np.array([1.0, 1.0])),
                          bounded_knots=[0])
    solver = gp.solvers.ProxDDP(problem)
    (block,) = [b for b in solver.typed_blocks if b[0] == 1]
    r, upper, mu = block[2], block[9], 1e-4
    d1, d2 = 1.0, -1.0                  # the cost: dv(a) = a - a^2 / 2
    for crossing, expected in ((0.9, 1), (0.3, 2)):
        for values in solver.row_values:
            values[:] = 0.0
        r[:] = 0.0
        r[0, 0] = upper[0] / crossing   # row value a upper / crossing along the step
        excess = upper[0] / crossing - upper[0]
        # psi = excess^2 / (2 mu) and the dual term mu / 2 |lambda+ - 0|^2, the same
        dv = (d1 + 0.5 * d2) - excess ** 2 / mu
        assert solver._next_trial(0, 1.0, d1, d2, dv, True, mu) == expected


@SOLVERS
def test_contradicting_equalities_are_infeasible(solver_class):
    """x_N[0] = 0 and x_N[0] = 1 at the terminal knot: status "infeasible"."""
    state = ocp.StateVector(4)
    one = ocp.Constraint(ocp.StateResidual(state, np.zeros(4)), [0, -np.inf, -np.inf, -np.inf],
                         [0, np.inf, np.inf, np.inf])
    other = ocp.Constraint(ocp.StateResidual(state, np.array([1.0, 0, 0, 0])),
                           [0, -np.inf, -np.inf, -np.inf], [0, np.inf, np.inf, np.inf])
    problem = _lq_problem(terminal_constraints=[one, other])
    result = solver_class(problem).solve(max_iter=300)
    assert not result.converged
    assert result.status == "infeasible", result
    assert result.violation > 0.4
    assert result.iterations < 300


@SOLVERS
def test_warm_start_with_multipliers_converges_at_once(solver_class):
    """From a converged solution and its multipliers and mu: converged in <= 2 sweeps."""
    problem = _lq_problem(terminal_constraints=[ocp.Constraint(
        ocp.StateResidual(ocp.StateVector(4), np.zeros(4)), 0.0, 0.0)])
    solver = solver_class(problem)
    first = solver.solve(max_iter=200)
    assert first.converged
    again = solver.solve(first.xs, first.us, multipliers=first.multipliers, mu=first.mu,
                         is_feasible=True)
    assert again.converged and again.iterations <= 2, again
    # the same solution to the violation's tolerance (th_constraint 1e-8: ProxDDP's first
    # solve ends 1.8e-9 off the terminal state, its warm start closer)
    np.testing.assert_allclose(again.xs, first.xs, atol=1e-8)
    with pytest.raises(ValueError, match="multipliers"):
        solver.solve(multipliers=[np.zeros((3, 3))])


def _constrained_reach(N, plane_z=0.45):
    """ur5: the reach of benchmarks/constrained.py on N knots: tool at (0.4, 0.2, 0.4)
    exactly at the last knot and at z >= plane_z on knots N/2 .. 0.9 N."""
    from geppetto.benchmarks.constrained import reaching
    return reaching("ur5", N, plane_z, N // 2, int(0.9 * N)), reaching("ur5", N)


def test_trial_constraints_read_the_trial_kinematics():
    """The line search's shortcut: after calc_costs at a trial point, the constraints
    evaluated without refreshing the kinematics (refresh=False) equal a fresh
    evaluation there, though the last derivatives were taken at another point."""
    problem, _ = _constrained_reach(10)
    rng = np.random.default_rng(3)
    start = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    xs, other = (start + 0.1 * rng.standard_normal(start.shape) for _ in range(2))
    us = rng.standard_normal((problem.N, problem.nu))

    def values(refresh):
        return np.concatenate([np.ravel(data.r) for _, _, _, phase in
                               problem.constraints(xs, us, refresh=refresh) for data in phase])

    problem.calc_diff(other, us)
    problem.calc_costs(xs, us)
    trial = values(False)
    problem.calc_diff(other, us)
    stale = values(False)
    fresh = values(True)
    np.testing.assert_allclose(trial, fresh, rtol=0.0, atol=1e-14)
    assert np.max(np.abs(stale - fresh)) > 1e-3          # without calc_costs: other's


def test_proximal_trial_multipliers_read_dx_where_the_state_adds():
    """ProxDDP's trial multipliers (lambda + alpha (lambda+ - lambda) + D R (dx, du) / mu)
    with dx read as xs_try - xs in the kernel, where the whole state adds (ur5: revolute
    joints), equal those from the horizon's state difference to the last bit, on a trial
    where rows of the plane and of the terminal equality are active."""
    problem, _ = _constrained_reach(10, plane_z=0.6)
    solver = gp.solvers.ProxDDP(problem)
    assert solver.additive
    rng = np.random.default_rng(5)
    start = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    xs = start + 0.1 * rng.standard_normal(start.shape)
    us = rng.standard_normal((problem.N, problem.nu))
    xs_try, us_try = xs + 0.01 * rng.standard_normal(xs.shape), us + 0.01
    mu = 1e-2
    problem.calc_diff(xs, us)
    solver.constraints.evaluate(xs, us, DIFF)
    solver._al_terms(xs, us, mu, True)
    solver._dual_terms(mu)                             # lambda+ at the iterate
    assert all(np.count_nonzero(plus) for _, plus, _ in solver.duals)
    problem.calc_costs(xs_try, us_try)                 # the trial's kinematics
    merits, multipliers = [], []
    for additive in (True, False):
        solver.additive = additive
        merits.append(solver._trial_merit(xs, us, (xs_try, us_try, None, 0.0), mu, 0.5))
        multipliers.append(np.concatenate([trial.ravel() for _, _, trial in solver.duals]))
    assert merits[0] == merits[1]
    np.testing.assert_array_equal(multipliers[0], multipliers[1])
    moved = multipliers[0] - np.concatenate([(lam + 0.5 * (plus - lam)).ravel()
                                             for lam, plus, _ in solver.duals])
    assert np.max(np.abs(moved)) > 1e-3                # the feedback term D R (dx, du) / mu


def _fused_and_per_term(problem, horizon, points, us, mode, calc):
    """The constraint rows (r, Rx, Ru) of every stage at (points, us) after calc_diff
    (DIFF) or ``calc`` (CALC): from ``horizon`` (HorizonConstraints, one compiled call,
    read where its ``sources`` say) and from the per-term path (problem.constraints)."""
    if mode == DIFF:
        problem.calc_diff(points, us)
    else:
        calc(points, us)
    horizon.evaluate(points, us, mode)
    fused = []
    for _, _, _, data in horizon.stages:
        for cd in data.constraints:
            r, Rx, Ru, rows = horizon.sources[id(cd)]
            fused.append((r[:, rows].copy(), Rx[:, rows].copy(), Ru[:, rows].copy()))
    per_term = [(d.r.copy(), d.Rx.copy(), d.Ru.copy()) for _, _, _, phase in
                problem.constraints(points, us, mode == DIFF, refresh=False) for d in phase]
    return fused, per_term


def test_horizon_constraints_equal_the_per_term_path():
    """ocp.constraints.HorizonConstraints (the constraint residuals of every stage in one
    compiled call, the plane's z row taken from its three-row fused step) leaves the
    values and Jacobians of the per-term path (StageModel.calc_constraints), after
    calc_diff (DIFF) and after a trial's calc_costs (CALC), to 1e-14."""
    from geppetto.ocp.constraints import HorizonConstraints
    from geppetto.ocp.fused import CALC, DIFF
    problem, _ = _constrained_reach(10)
    horizon = HorizonConstraints(problem)
    assert horizon.programs is not None and not horizon.python      # all compiled
    rng = np.random.default_rng(5)
    start = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    xs, trial = (start + 0.1 * rng.standard_normal(start.shape) for _ in range(2))
    us = rng.standard_normal((problem.N, problem.nu))
    for points, mode in ((xs, DIFF), (trial, CALC)):
        fused, per_term = _fused_and_per_term(problem, horizon, points, us, mode,
                                              problem.calc_costs)
        assert len(fused) == len(per_term) == 2
        for (r, Rx, _), (r_ref, Rx_ref, _) in zip(fused, per_term):
            np.testing.assert_allclose(r, r_ref, rtol=0.0, atol=1e-14)
            if mode == DIFF:
                np.testing.assert_allclose(Rx, Rx_ref, rtol=0.0, atol=1e-14)
                assert np.abs(Rx_ref).max() > 0.1


def test_constraints_on_two_loads_of_a_robot_compile_one_program_each():
    """A stage whose constraints use two model objects (the terminal position on one
    load of ur5, the rotation and a stage plane on another, as benchmarks/constrained.py's
    kinova "pose") gets one program per model in HorizonConstraints, none left to Python
    (where each residual's parallel_kernel ran its threaded copy for one knot: 8-12 ms a
    call with two Numba threads on a loaded machine, cq30); the values and Jacobians equal
    the per-term path's to the bit, after calc_diff (DIFF) and after a trial's calc (CALC)."""
    from geppetto.ocp.constraints import HorizonConstraints
    from geppetto.ocp.fused import CALC
    first, second = gp.robots.load("ur5"), gp.robots.load("ur5")
    assert first.model is not second.model
    dynamics = ocp.FreeDynamics(first.model)
    x0 = np.r_[first.q0, np.zeros(first.model.nv)]
    rotation = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    plane = ocp.Constraint(ocp.FrameTranslationResidual(second.model, "tool0", [0, 0, 0.3],
                                                        axes=[2]), 0.0, np.inf)
    reach = ocp.Constraint(ocp.FrameTranslationResidual(first.model, "tool0",
                                                        [0.4, 0.2, 0.4]), 0.0, 0.0)
    turn = ocp.Constraint(ocp.FrameRotationResidual(second.model, "tool0", rotation), 0.0, 0.0)
    stage = ocp.StageModel(dynamics, [ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-3)],
                           [plane], dt=0.01)
    problem = ocp.ShootingProblem(x0, [stage] * 3, ocp.TerminalModel(dynamics.state, [],
                                                                     [reach, turn]))
    horizon = HorizonConstraints(problem)
    assert not horizon.python and len(horizon.programs) == 3
    assert horizon.windows.tolist() == [[0, 3], [3, 4], [3, 4]]
    rng = np.random.default_rng(7)
    start = np.repeat(x0[None], problem.N + 1, axis=0)
    us = rng.standard_normal((problem.N, problem.nu))
    xs, trial = (start + 0.3 * rng.standard_normal(start.shape) for _ in range(2))
    for points, mode in ((xs, DIFF), (trial, CALC)):
        fused, per_term = _fused_and_per_term(problem, horizon, points, us, mode,
                                              problem.calc)
        assert len(fused) == len(per_term) == 3
        for (r, Rx, _), (r_ref, Rx_ref, _) in zip(fused, per_term):
            assert np.abs(r_ref).max() > 1e-3
            np.testing.assert_array_equal(r, r_ref)
            if mode == DIFF:
                assert np.abs(Rx_ref).max() > 0.1
                np.testing.assert_array_equal(Rx, Rx_ref)


def test_grouped_friction_cones_equal_the_per_term_path():
    """The friction pyramids of a stage's four feet (solo12, contact dynamics) are
    evaluated by HorizonConstraints as one group (ocp.contacts.LinearForceRows: one stamp
    check, one kernel call), beside a centre-of-mass row and a tilted cone that rotates
    its force (evaluated alone): values and Jacobians equal those of the per-term path
    (StageModel.calc_constraints) after calc_diff (DIFF) and after a trial's calc (CALC),
    to 1e-12 (the group sums the products in its own order)."""
    from geppetto.dynamics import LOCAL, LOCAL_WORLD_ALIGNED, contact_3d
    from geppetto.ocp.constraints import HorizonConstraints
    from geppetto.ocp.contacts import LinearForceRows
    from geppetto.ocp.fused import CALC
    robot = gp.robots.load("solo12")
    model = robot.model
    feet = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
    dynamics = ocp.ContactDynamics(model, [contact_3d(
        model, foot, reference=LOCAL if foot == "HR_FOOT" else LOCAL_WORLD_ALIGNED)
        for foot in feet])
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    cones = [ocp.FrictionConeResidual(dynamics, foot, mu=0.5 + 0.1 * i)
             for i, foot in enumerate(feet)]
    com = gp.dynamics.center_of_mass(model, model.create_data(), robot.q0)
    height = ocp.Constraint(ocp.CenterOfMassResidual(model, com), [-np.inf, -np.inf, -0.02],
                            np.inf)
    stage = ocp.StageModel(dynamics, [ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-3)],
                           [ocp.Constraint(c, *c.bounds) for c in cones] + [height], dt=0.02)
    problem = ocp.ShootingProblem(x0, [stage] * 4, ocp.TerminalModel(dynamics.state))
    horizon = HorizonConstraints(problem)
    (_, _, _, _, items), = horizon.python
    groups = [item for item in items if isinstance(item, LinearForceRows)]
    assert horizon.programs is not None and len(items) == 2        # the height compiled
    assert len(groups) == 1 and groups[0].A.shape == (3, 5, 3)     # HR_FOOT's is LOCAL
    rng = np.random.default_rng(3)
    start = np.repeat(x0[None], problem.N + 1, axis=0)
    us = problem.quasi_static(start) + rng.standard_normal((problem.N, problem.nu))
    xs, trial = (start + np.r_[np.zeros(7), 0.02 * rng.standard_normal(model.nq + model.nv - 7)]
                 for _ in range(2))
    for points, mode in ((xs, DIFF), (trial, CALC)):
        fused, per_term = _fused_and_per_term(problem, horizon, points, us, mode,
                                              problem.calc)
        assert len(fused) == len(per_term) == 5
        for j, ((r, Rx, Ru), (r_ref, Rx_ref, Ru_ref)) in enumerate(zip(fused, per_term)):
            np.testing.assert_allclose(r, r_ref, rtol=0.0, atol=1e-12 * np.abs(r_ref).max())
            if mode == DIFF:
                assert np.abs(Rx_ref).max() > 0.5
                assert j == 4 or np.abs(Ru_ref).max() > 1e-3        # the cones' forces
                np.testing.assert_allclose(Rx, Rx_ref, rtol=0.0,
                                           atol=1e-12 * np.abs(Rx_ref).max())
                np.testing.assert_allclose(Ru, Ru_ref, rtol=0.0,
                                           atol=1e-12 * np.abs(Ru_ref).max())


def test_ur5_constrained_reach_matches_ipopt():
    """From FDDP's unconstrained optimum: ALDDP, ProxDDP, CSQP and IPOPT (exact Hessian:
    the Gauss-Newton NLP stalls on this task) reach the same optimum, cost to 1e-6
    relative, violation <= 1e-6 (CSQP: <= 1e-8, gaps <= 1e-9)."""
    problem, unconstrained = _constrained_reach(30)
    warm = gp.solvers.FDDP(unconstrained).solve(max_iter=200)
    assert warm.converged
    solver = gp.solvers.ALDDP(problem)
    result = solver.solve(warm.xs, warm.us, max_iter=300)
    assert result.converged, result
    assert result.violation <= 1e-6 and result.gaps <= 1e-9
    reference = gp.solvers.NLP(problem, derivatives="casadi").solve(warm.xs, warm.us,
                                                                     max_iter=300)
    assert reference.converged, reference
    assert abs(result.cost - reference.cost) <= 1e-6 * reference.cost
    # the solution is the point where IPOPT stops: the warm start is not
    assert abs(warm.cost - reference.cost) > 1e-2 * reference.cost
    # the line search that always starts at alpha = 1 ends at the same point, and so
    # does ProxDDP
    for warmed in (gp.solvers.ALDDP(problem, warm_line_search=False).solve(
            warm.xs, warm.us, max_iter=300),
            gp.solvers.ProxDDP(problem).solve(warm.xs, warm.us, max_iter=300)):
        assert warmed.converged and warmed.violation <= 1e-6, warmed
        assert abs(warmed.cost - reference.cost) <= 1e-6 * reference.cost
    sqp = gp.solvers.CSQP(problem).solve(warm.xs, warm.us, max_iter=100)
    assert sqp.converged, sqp
    assert sqp.violation <= 1e-8 and sqp.gaps <= 1e-9
    assert abs(sqp.cost - reference.cost) <= 1e-6 * reference.cost


@pytest.mark.parametrize("name, feet, shift", [
    ("solo12", ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), 0.04),
    ("hyq", ("lf_foot", "rf_foot", "lh_foot", "rh_foot"), 0.05)])
def test_four_feet_hard_friction_cones(name, feet, shift):
    """A quadruped on four feet (contact dynamics, N = 10) shifting its base sideways
    with friction mu = 0.1: without the cones the optimum slides its feet's forces
    out of them; with hard pyramidal cones (Constraint rows >= 0) ALDDP converges with
    every row >= -1e-7 at every knot, at IPOPT's cost from the same start (ALDDP's the
    lower: IPOPT's interior point stops strictly inside the cones; solo12 2.2e-6
    below, hyq 1.7e-7).

    The cone rows are forces in newtons (solo12: Jacobian rows of norm 9-11 against a
    cost of 0.076): each row's penalty is scaled by its Jacobian row's squared norm
    (ALDDP's ``scale_rows``); without it (mu 1e-2 on every row) the inner solves never
    end (measured 2026-11-26: max_iter at 300 on both robots, preg 1e-2 .. 1, full
    steps that push a force row past its bound refused); with it 28 (solo12) and 99
    (hyq) iterations; hyq was not used to choose the scaling."""
    from geppetto.dynamics import LOCAL_WORLD_ALIGNED, contact_3d
    robot = gp.robots.load(name)
    model = robot.model
    dynamics = ocp.ContactDynamics(model, [contact_3d(model, foot, reference=LOCAL_WORLD_ALIGNED)
                                           for foot in feet])
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    target = x0.copy()
    target[1] += shift
    weights = np.r_[np.full(6, 10.0), np.full(model.nv - 6, 1.0), np.full(model.nv, 0.1)]
    x_reg = ocp.Cost(ocp.StateResidual(dynamics.state, target), ocp.WeightedQuadratic(weights))
    u_reg = ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-3)
    cones = [ocp.FrictionConeResidual(dynamics, foot, mu=0.1) for foot in feet]
    terminal = ocp.TerminalModel(dynamics.state, [ocp.Cost(x_reg.residual, x_reg.activation,
                                                           weight=10.0)])
    N = 10
    soft = ocp.ShootingProblem(x0, [ocp.StageModel(dynamics, [x_reg, u_reg], dt=0.02)] * N,
                               terminal)
    hard = ocp.ShootingProblem(x0, [ocp.StageModel(dynamics, [x_reg, u_reg], [
        ocp.Constraint(c, *c.bounds) for c in cones], dt=0.02)] * N, terminal)
    free = gp.solvers.FDDP(soft).solve(max_iter=100)
    assert free.converged, free

    def cone_rows(xs, us):
        return np.concatenate([data.r for _, _, _, datas in hard.constraints(xs, us)
                               for data in datas], axis=1)

    assert cone_rows(free.xs, free.us).min() < -1e-2       # the cones are active
    reference = gp.solvers.NLP(hard).solve(free.xs, free.us, max_iter=100)
    assert reference.converged, reference
    for solver_class in (gp.solvers.ALDDP, gp.solvers.ProxDDP):
        result = solver_class(hard, th_constraint=1e-7).solve(free.xs, free.us, max_iter=200)
        assert result.converged, (solver_class, result)
        assert result.violation <= 1e-7 and result.gaps <= 1e-9
        assert cone_rows(result.xs, result.us).min() >= -1e-7
        assert result.cost > free.cost
        assert -1e-5 * reference.cost <= result.cost - reference.cost <= 1e-9 * reference.cost


def test_solo12_trot_hard_friction_cones():
    """The solo12 trot (examples/solo12_trot: support, two diagonal steps, touchdown
    impulses; 8 knots of 30 ms per step) with its friction cones (mu = 0.7) as hard
    Constraints instead of barrier costs: from FDDP's optimum without them, ALDDP
    ends with every cone row >= -1e-6 at every contact knot."""
    from geppetto.examples.solo12_trot import trotting_problem
    from geppetto.examples.solo12_trot_cones import cone_rows, hard_cones
    robot = gp.robots.load("solo12")
    x0 = np.r_[robot.q0, np.zeros(robot.model.nv)]
    problem, soft = hard_cones(trotting_problem(robot.model, x0, step_knots=8, dt=0.03))
    cones = sum(len(m.constraints) for m in problem.running_models)   # (knot, foot) pairs
    assert cones == sum(len(m.dynamics.constraints.names) for m in problem.running_models
                        if type(m.dynamics) is ocp.ContactDynamics) > 0
    xs = np.repeat(x0[None], problem.N + 1, axis=0)
    free = gp.solvers.FDDP(soft).solve(xs, soft.quasi_static(xs), max_iter=200)
    assert free.converged, free
    assert min(r.min() for r in cone_rows(problem, free.xs, free.us)) < -1e-3
    for solver_class in (gp.solvers.ALDDP, gp.solvers.ProxDDP):
        result = solver_class(problem, th_constraint=1e-7).solve(free.xs, free.us,
                                                                 max_iter=500)
        # ALDDP converged since the outer loop updates only on stop values of preg <=
        # th_reg (before: the line search stalled at mu 1e-8 on "no step accepted")
        assert result.converged, (solver_class, result)
        assert result.violation <= 1e-6 and result.gaps <= 1e-9
        rows = cone_rows(problem, result.xs, result.us)
        assert sum(r.shape[0] for r in rows) == cones
        assert min(r.min() for r in rows) >= -1e-6


def test_ur5_mpc_keeps_the_hand_above_a_plane_under_a_push():
    """Closed loop (examples/ur5_constrained_mpc: ur5, 40 knots of 10 ms, RK4 plant at
    1 ms, 2 s, a 60 N downward push on the wrist for 0.1 s while the hand rides on
    the plane): the hand tracks a circle that dips 12 cm under the plane z = 0.45;
    ALDDP (10 iterations per control step, shifted multipliers, the controller's
    plane 1 mm higher) keeps it above the real plane to 1e-4 at every control step;
    FDDP without the constraint goes centimetres under."""
    from geppetto.examples.ur5_constrained_mpc import closed_loop, rest_above_plane
    robot = gp.robots.load("ur5")
    x0 = rest_above_plane(robot)
    log, height = closed_loop(robot, x0, gp.solvers.ALDDP, dual_warm_start="shift")
    assert height.min() >= -1e-4
    assert log.iterations.max() <= 10
    _, free_height = closed_loop(robot, x0, gp.solvers.FDDP)
    assert free_height.min() < -1e-2


@SOLVERS
def test_infeasible_start_time_limit_and_callbacks(solver_class):
    """From a random warm start with gaps, ALDDP reaches the same solution as from the
    default guess (1e-9); time_limit = 0 stops after one iteration with status
    "time_limit"; callbacks get one record per iteration with the violation and mu."""
    problem = _lq_problem(terminal_constraints=[ocp.Constraint(
        ocp.StateResidual(ocp.StateVector(4), np.zeros(4)), 0.0, 0.0)],
        control_bounds=(-4.0, 4.0), bounded_knots=range(12))
    solver = solver_class(problem)
    reference = solver.solve(max_iter=300)
    assert reference.converged, reference
    assert np.max(np.abs(reference.us)) > 4.0 - 1e-8       # the bounds are active
    _assert_same_solution_from_gaps(solver, reference, 300, ("violation", "mu", "cost", "stop"))


def _assert_same_solution_from_gaps(solver, reference, max_iter, record_keys):
    """From a seeded random start with gaps, ``solver`` converges to ``reference``'s
    solution (1e-9), its callbacks get one record per iteration (with ``record_keys``),
    and time_limit = 0 stops after one iteration with status "time_limit"."""
    rng = np.random.default_rng(19)
    xs = X0 + rng.standard_normal((solver.problem.N + 1, 4))
    us = rng.standard_normal((solver.problem.N, 2))
    records = []
    result = solver.solve(xs, us, max_iter=max_iter,
                          callbacks=[lambda s, i, record: records.append(record)])
    assert result.converged and result.history["gaps"][0] > 0.1, result
    np.testing.assert_allclose(result.xs, reference.xs, atol=1e-9)
    np.testing.assert_allclose(result.us, reference.us, atol=1e-9)
    assert len(records) == result.iterations
    assert set(record_keys) <= set(records[-1])
    stopped = solver.solve(xs, us, max_iter=max_iter, time_limit=0.0)
    assert stopped.status == "time_limit" and stopped.iterations == 1


@SOLVERS
def test_knots_without_controls_match_kkt(solver_class):
    """Knots 4 and 5 coast (nu = 0, padded controls): with a terminal equality the
    solution is the dense KKT one (the padded controls fixed at zero), to 1e-10."""
    base = _lq_problem()
    coasting = ocp.CustomDynamics(4, 0, _double_integrator, _double_integrator_diff,
                                  params=[0.3], nq=2)
    coast = ocp.StageModel(coasting, [base.running_models[0].costs[0]], dt=0.1)
    models = [coast if k in (4, 5) else base.running_models[k] for k in range(base.N)]
    goal = np.array([0.1, 0.0, 0.0, 0.0])
    terminal = ocp.TerminalModel(base.state, base.terminal_model.costs, [ocp.Constraint(
        ocp.StateResidual(base.state, goal), 0.0, 0.0)])
    problem = ocp.ShootingProblem(X0, models, terminal)
    assert list(problem.nus[3:7]) == [2, 0, 0, 2]
    H, g, A, b, X, U = _dense(problem)
    n = problem.ndx
    rows = [np.eye(H.shape[0])[X(problem.N)]]
    for k in (4, 5):                                   # the padding stays zero
        rows.append(np.eye(H.shape[0])[U(k)])
    C = np.vstack(rows)
    d = np.concatenate([goal, np.zeros(C.shape[0] - n)])
    E, e = np.vstack([A, C]), np.concatenate([b, d])
    kkt = np.block([[H, E.T], [E, np.zeros((E.shape[0], E.shape[0]))]])
    z = np.linalg.solve(kkt, np.concatenate([-g, e]))[:H.shape[0]]
    xs_ref, us_ref = _split(problem, z, X, U)
    result = solver_class(problem, th_constraint=1e-12).solve(max_iter=200)
    assert result.converged, result
    np.testing.assert_allclose(result.xs, xs_ref, atol=1e-10)
    np.testing.assert_allclose(result.us, us_ref, atol=1e-10)
    assert np.all(result.us[4:6] == 0.0)


def _untuned_from_fddp(robot, task):
    """benchmarks/constrained's task ALDDP was not tuned on, FDDP's unconstrained optimum
    (the start), ALDDP's and IPOPT's (analytical derivatives) results from it."""
    from geppetto.benchmarks.constrained import untuned
    problem = untuned(robot, 100, task)
    warm = gp.solvers.FDDP(problem).solve(max_iter=200)          # leaves the constraints out
    assert warm.converged, warm
    result = gp.solvers.ALDDP(problem).solve(warm.xs, warm.us, max_iter=500)
    reference = gp.solvers.NLP(problem).solve(warm.xs, warm.us, max_iter=500)
    assert reference.converged, reference
    return problem, warm, result, reference


def test_ur5_torque_limits_and_a_control_equality_match_ipopt():
    """ur5 "torque" (|u| <= 60 N m on every knot, the first joint's torque zero on
    knots 0..39, the terminal position equality; options never tuned on it): from
    FDDP's optimum ALDDP converges at IPOPT's optimum, cost to 1e-6 relative.  From the
    quasi-static guess (controls inside the bounds, which ``box_controls`` then holds
    by clamped trials and the box QP) ALDDP and ProxDDP converge at one optimum, 4 %
    below the one from FDDP's optimum (IPOPT's from the guess, 0.2453417: measured in
    benchmarks/constrained_notes.md; with the bounds as AL rows only, both ended at the
    one from FDDP's optimum)."""
    problem, warm, result, reference = _untuned_from_fddp("ur5", "torque")
    assert result.converged, result
    assert result.violation <= 1e-6
    assert gp.solvers.ALDDP(problem).max_violation(reference.xs, reference.us) <= 1e-6
    assert np.abs(result.us).max() <= 60.0 + 1e-6 and np.abs(result.us[:40, 0]).max() <= 1e-6
    assert abs(result.cost - reference.cost) <= 1e-6 * reference.cost
    assert abs(warm.cost - reference.cost) > 1e-2 * reference.cost
    cold = [solver(problem).solve(max_iter=500) for solver in (gp.solvers.ALDDP,
                                                              gp.solvers.ProxDDP)]
    for guess in cold:
        assert guess.converged and guess.violation <= 1e-6, guess
        assert np.abs(guess.us).max() <= 60.0 + 1e-6
    assert abs(cold[0].cost - cold[1].cost) <= 1e-6 * cold[0].cost
    assert cold[0].cost < (1.0 - 2e-2) * result.cost


def test_ur5_velocity_bounds_and_a_wall_match_ipopt():
    """ur5 "vbound" (joint velocities within 3 rad/s, a wall y <= 0.15 on knots 50..79):
    full steps push the rows at the edge of an arc of active velocity bounds 0.065 rad/s
    past the bound and the line search refuses them; an outer update on such an inner
    solve (stop value from a large preg, k ~ Qu / preg) shrank mu to 1e-9 and stalled
    2e-4 above IPOPT's cost.  From FDDP's optimum ALDDP converges at IPOPT's optimum
    (1e-6 relative), never claiming it from the regularization (preg <= th_reg)."""
    problem, warm, result, reference = _untuned_from_fddp("ur5", "vbound")
    assert result.converged, result
    assert result.violation <= 1e-6
    assert abs(result.cost - reference.cost) <= 1e-6 * reference.cost
    assert abs(warm.cost - reference.cost) > 1e-4 * reference.cost


def test_proximal_trial_difference_on_the_residual_knots_only():
    """ProxDDP reads a trial's dx = xs_try (-) xs only on the knots of residual rows
    (kinova "pose": the terminal knot; its state bounds read xs): the trial's merit and
    multipliers from that difference equal those from the whole horizon's to the last bit;
    and the iterate's terms in one call (AL with derivatives + dual residual) equal the
    two calls."""
    from geppetto.benchmarks.constrained import untuned3
    problem = untuned3("pose", knots=6)
    N = problem.N
    solver = gp.solvers.ProxDDP(problem)
    assert not solver.additive
    assert solver.dx_ranges == [(N, N + 1)]
    rng = np.random.default_rng(7)
    xs = np.repeat(problem.x0[None], N + 1, axis=0)
    xs[:, problem.state.nq:] += 0.5 * rng.standard_normal((N + 1, problem.state.nv))
    us = 0.1 * rng.standard_normal((N, problem.nu))
    xs_try = problem.state.integrate(xs, 0.01 * rng.standard_normal((N + 1, problem.ndx)))
    us_try = us + 0.01
    mu = 1e-2
    problem.calc_diff(xs, us)
    solver.constraints.evaluate(xs, us, DIFF)
    separate = solver._al_terms(xs, us, mu, True) + solver._dual_terms(mu)
    derivatives = [a.copy() for a in (solver.Lx, solver.Lu, solver.Lxx, solver.Luu,
                                      solver.Lxu)]
    al_value, violation, dual = solver._iterate_terms(xs, us, mu)
    assert (al_value, violation) + dual == separate
    for a, b in zip(derivatives, (solver.Lx, solver.Lu, solver.Lxx, solver.Luu, solver.Lxu)):
        np.testing.assert_array_equal(a, b)
    assert any(np.count_nonzero(plus) for _, plus, _ in solver.duals)
    problem.calc_costs(xs_try, us_try)                 # the trial's kinematics
    merits, multipliers = [], []
    for ranges in (solver.dx_ranges, [(0, N + 1)]):
        solver.dx_ranges = ranges
        merits.append(solver._trial_merit(xs, us, (xs_try, us_try, None, 0.0), mu, 0.5))
        multipliers.append(np.concatenate([trial.ravel() for _, _, trial in solver.duals]))
    assert merits[0] == merits[1]
    np.testing.assert_array_equal(multipliers[0], multipliers[1])
    moved = multipliers[0] - np.concatenate([(lam + 0.5 * (plus - lam)).ravel()
                                             for lam, plus, _ in solver.duals])
    assert np.max(np.abs(moved[-6:])) > 1e-6           # the terminal rows' feedback term


def test_constraints_left_to_python_run_on_one_numba_thread():
    """HorizonConstraints evaluates the constraints it could not compile (here a residual
    written in Python, without a fused step) on one Numba thread, as the problem's own
    calc and calc_diff do, whatever the caller's count (their per-term kernels are too
    small for Numba's thread pool: cq30), and gives the caller its count back."""
    import numba
    from geppetto.ocp.constraints import HorizonConstraints
    from geppetto.ocp.fused import CALC
    from geppetto.ocp.problem import _numba_threads
    seen = []

    class FirstJoint(ocp.Residual):
        nr, reference = 1, np.zeros(1)

        def calc(self, data, kinematics, xs, us):
            seen.append(numba.get_num_threads())
            data.r[:, 0] = xs[:, 0]

        def calc_diff(self, data, kinematics, xs, us):
            self.calc(data, kinematics, xs, us)
            data.Rx[:] = 0.0
            data.Rx[:, 0, 0] = 1.0

    robot = gp.robots.load("ur5")
    dynamics = ocp.FreeDynamics(robot.model)
    x0 = np.r_[robot.q0, np.zeros(robot.model.nv)]
    stage = ocp.StageModel(dynamics, [ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-3)],
                           [ocp.Constraint(FirstJoint(), -1.0, 1.0)], dt=0.01)
    problem = ocp.ShootingProblem(x0, [stage] * 4, ocp.TerminalModel(dynamics.state, []))
    horizon = HorizonConstraints(problem)
    assert horizon.python
    xs = np.repeat(x0[None], 5, axis=0) + 0.1 * np.arange(5)[:, None]
    us = np.zeros((4, dynamics.nu))
    problem.calc_diff(xs, us)
    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    with _numba_threads(threads):
        for mode in (DIFF, CALC):
            horizon.evaluate(xs, us, mode)
            assert numba.get_num_threads() == threads
    assert seen[-2:] == [1, 1]
    (_, _, _, data), = horizon.stages
    r, _, _, rows = horizon.sources[id(data.constraints[0])]
    np.testing.assert_array_equal(r[:, rows][:, 0], xs[:4, 0])
