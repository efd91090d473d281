"""CSQP (stagewise SQP, ADMM QP on Riccati sweeps) against exact solutions, on the
problems of tests/test_constrained_solver.py (imported: its kernels are compiled once).

- Equality-constrained LQ (terminal state equality, a path equality on a control):
  the dense KKT solution, to 1e-10, in one SQP iteration (polishing makes it exact).
- Inequality-constrained LQ (control bounds, a state lower bound): SLSQP on the dense
  QP; a random infeasible start (gaps) reaches the same point; time_limit, callbacks
  and a warm start with the multipliers.
- The constrained ur5 reach against IPOPT's optimum: in test_constrained_solver.py's
  test, beside ALDDP and ProxDDP (one IPOPT solve for the three).
- Contradicting terminal equalities end as "infeasible" in bounded iterations.
- panda "torque" from the quasi-static guess (outside its control bounds): the start
  projected onto the bounds, ALDDP's and ProxDDP's optimum (1e-6 relative).
- The warm line search's first trials, and ur5 "stiff" from the guess in at most 34
  iterations (1.8 trials per iteration) at its optimum.
- Its factorization (riccati.backward_range_kept) is backward_range's to the bit, with
  Quu's Cholesky factors and the gap terms kept.
- The talos squat with hard centre-of-pressure rows and torque limits (issue 19's task
  nobody tuned for): the second stopping test (the full step's predicted decrease below
  th_decrease at a feasible iterate, tried after every QP) ends it converged at FDDP's
  optimum, from the guess in fewer iterations than when it waited for a refused search.
- A QP's starting active set: a row without multiplier at its bound starts inactive
  after the first QP (a weakly inactive row no longer enters and leaves at every QP).
- bolt under hard friction pyramids from the guess: the active-set rounds that stalled
  (no fewer changed rows for more than STALL_ROUNDS rounds) peel arcs from their ends
  and solve every QP without ADMM.
- Without constraint rows: the LQ's exact step (the LQ problem in two iterations) and
  FDDP's optimum on ur5.
- The multipliers' signs tested exactly at every QP: kinova under 0.3 x its torque limits
  from the guess ends "infeasible" after its restoration's crawl, as before the tolerance
  on the signs at infeasible iterates (cq33) that sent it to max_iter (review rev33).
"""
import numpy as np
import pytest

import geppetto as gp
from geppetto import ocp

from test_constrained_solver import (X0, _assert_same_solution_from_gaps, _dense, _lq_problem,
                                     _split, _terminal_equality_kkt)


def test_lq_terminal_equality_matches_kkt():
    """x_N = 0 exactly and u_3[0] = 0.5: the dense KKT solution, one SQP step."""
    problem, xs_ref, us_ref = _terminal_equality_kkt()
    result = gp.solvers.CSQP(problem).solve(max_iter=20)
    assert result.converged and result.iterations == 1, result
    assert result.history["polished"] == [True]
    assert result.violation < 1e-11
    np.testing.assert_allclose(result.xs, xs_ref, rtol=0.0, atol=1e-10)
    np.testing.assert_allclose(result.us, us_ref, rtol=0.0, atol=1e-10)


def test_lq_inequalities_match_qp_from_any_start():
    """|u| <= 0.4 and x_1 >= 0.2 on knots 4..8: SLSQP's QP solution (to its 1e-8);
    from a random start with gaps the same point (1e-9); then time_limit 0 stops after
    one iteration, callbacks get every record, and the multipliers of the solution
    as a warm start converge without an SQP step."""
    from scipy.optimize import minimize
    knots = range(4, 9)
    problem = _lq_problem(control_bounds=(-0.4, 0.4), state_bounds=(
        np.array([-np.inf, 0.2, -np.inf, -np.inf]), np.full(4, np.inf)), bounded_knots=knots)
    H, g, A, b, X, U = _dense(problem)
    lower, upper = np.full(H.shape[0], -np.inf), np.full(H.shape[0], np.inf)
    for k in knots:
        lower[U(k)], upper[U(k)] = -0.4, 0.4
        lower[X(k).start + 1] = 0.2
    z0 = np.concatenate([np.repeat(X0[None], problem.N + 1, 0).ravel(),
                         np.zeros(2 * problem.N)])
    qp = minimize(lambda z: 0.5 * z @ H @ z + g @ z, z0, jac=lambda z: H @ z + g,
                  bounds=[(None if np.isinf(lo) else lo, None if np.isinf(hi) else hi)
                          for lo, hi in zip(lower, upper)],
                  constraints=[dict(type="eq", fun=lambda z: A @ z - b, jac=lambda z: A)],
                  method="SLSQP", options=dict(ftol=1e-15, maxiter=1000))
    assert qp.success, qp.message
    xs_ref, us_ref = _split(problem, qp.x, X, U)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=20)
    assert result.converged and result.iterations <= 2, result
    assert result.violation < 1e-9
    np.testing.assert_allclose(result.xs, xs_ref, atol=1e-6)
    np.testing.assert_allclose(result.us, us_ref, atol=1e-6)
    assert abs(result.cost - problem.calc(xs_ref, us_ref)) < 1e-7 * result.cost
    assert np.abs(result.us[list(knots)]).max() > 0.4 - 1e-9       # bounds active
    _assert_same_solution_from_gaps(solver, result, 20, ("violation", "qp_iterations", "cost",
                                                         "stop"))
    warm = solver.solve(result.xs, result.us, multipliers=result.multipliers)
    assert warm.converged and warm.iterations == 0, warm


def test_contradicting_equalities_are_infeasible():
    """x_N[0] = 0 and x_N[0] = 1: status "infeasible" within a few SQP iterations."""
    state = ocp.StateVector(4)
    free = [-np.inf] * 3
    one = ocp.Constraint(ocp.StateResidual(state, np.zeros(4)), [0] + free,
                         [0] + [np.inf] * 3)
    other = ocp.Constraint(ocp.StateResidual(state, np.array([1.0, 0, 0, 0])), [0] + free,
                           [0] + [np.inf] * 3)
    result = gp.solvers.CSQP(_lq_problem(terminal_constraints=[one, other])).solve(max_iter=100)
    assert result.status == "infeasible" and not result.converged, result
    # the SQP's iterations (``iterations`` counts the restoration's too)
    assert result.violation > 0.4 and result.iterations - result.restoration_iterations <= 10


def test_lq_active_set_changes_between_guesses():
    """|u| <= 0.3, x_0 <= 0.8 and x_1 >= -0.1 on knots 1..11: the first guess (the rows
    the start violates) is wrong, the primal-dual active-set method adds and drops rows
    over several solves (one of them with contradicting active rows) and ends at
    qpOASES's solution of the dense QP (1e-8) without an ADMM iteration."""
    import casadi
    knots = range(1, 12)
    lower_x = np.array([-np.inf, -0.1, -np.inf, -np.inf])
    upper_x = np.array([0.8, np.inf, np.inf, np.inf])
    problem = _lq_problem(control_bounds=(-0.3, 0.3), state_bounds=(lower_x, upper_x),
                          bounded_knots=knots)
    H, g, A, b, X, U = _dense(problem)
    lower, upper = np.full(H.shape[0], -np.inf), np.full(H.shape[0], np.inf)
    for k in knots:
        lower[U(k)], upper[U(k)] = -0.3, 0.3
        lower[X(k)], upper[X(k)] = lower_x, upper_x
    qp = casadi.conic("qp", "qpoases", dict(h=casadi.DM(H).sparsity(),
                                             a=casadi.DM(A).sparsity()),
                      dict(printLevel="none"))
    reference = qp(h=H, g=g, a=A, lba=b, uba=b, lbx=lower, ubx=upper)
    assert qp.stats()["success"]
    xs_ref, us_ref = _split(problem, np.array(reference["x"]).ravel(), X, U)
    result = gp.solvers.CSQP(problem).solve(max_iter=20)
    assert result.converged and result.iterations == 1, result
    assert result.history["qp_iterations"] == [0]            # no ADMM iteration
    assert result.history["qp_factorizations"][0] >= 5       # the active set moved
    assert result.violation < 1e-10
    np.testing.assert_allclose(result.xs, xs_ref, rtol=0.0, atol=1e-8)
    np.testing.assert_allclose(result.us, us_ref, rtol=0.0, atol=1e-8)
    assert np.abs(us_ref[list(knots)]).max() > 0.3 - 1e-9      # control bounds active
    assert xs_ref[list(knots), 1].min() < -0.1 + 1e-9         # the state bound active


def test_panda_torque_start_outside_its_bounds_reaches_the_better_optimum():
    """panda "torque" of benchmarks/constrained (|u| <= 12 N m, the first joint's torque
    zero on knots 0..39, the terminal equality) from the quasi-static guess, whose
    torques reach 22 N m: the start projected onto the control bounds, CSQP ends at
    ALDDP's and ProxDDP's optimum 0.1342558 (IPOPT from the same guess: 0.1342563,
    "acceptable"), to 1e-6 relative; the first QP's step from the unprojected guess
    led to 0.2271809.  The caller's guess is not modified."""
    from geppetto.benchmarks.constrained import untuned
    problem = untuned("panda", 100, "torque")
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    us = problem.quasi_static(xs)
    guess = us.copy()
    assert np.abs(us).max() > 20.0                          # outside the 12 N m bounds
    result = gp.solvers.CSQP(problem).solve(xs, us, max_iter=300)
    assert result.converged and result.violation < 1e-8, result
    assert abs(result.cost - 0.134255826) < 1e-6 * 0.134255826, result.cost
    np.testing.assert_array_equal(us, guess)


def test_panda_plane_from_fddp_first_qp_finds_its_active_set_in_few_solves():
    """panda "plane" of benchmarks/constrained (hand z >= 0.45 on knots 50..89, the
    terminal equality) from FDDP's unconstrained optimum, whose hand is below the plane
    on knots 50..88: the first QP's solution has one plane row active.  With the plane
    rows (no control term) inactive at its start and one row per run of violated knots
    entering the active set, the first QP took 2 factorizations when measured (asserted:
    at most 3; from every violated row active, two leaving per solve: 28), and the solve ends at the same optimum
    (cost to 1e-9 relative of the value measured before the change) in 11 iterations
    (12 on the stationarity test before gn19's second stopping test, which ends it after
    the 11th QP, whose step is worth less than 1e-9 of the cost: 1.9e-10 relative)."""
    from geppetto.benchmarks.constrained import PLANE_Z, reaching
    problem = reaching("panda", 100, PLANE_Z, 50, 90)
    warm = gp.solvers.FDDP(problem).solve(max_iter=200)
    assert warm.converged
    result = gp.solvers.CSQP(problem).solve(warm.xs, warm.us, max_iter=100)
    assert result.converged and result.violation < 1e-8, result
    assert abs(result.cost - 0.0529652868475) < 1e-9 * 0.0529652868475, result.cost
    assert result.iterations == 11
    assert result.history["qp_factorizations"][0] <= 3, result.history["qp_factorizations"]
    assert max(result.history["qp_factorizations"][1:]) <= 2


def test_warm_line_search_first_trials_and_the_stiff_ur5_solve():
    """The warm line search (CSQP._first_trial): after an accepted step <= 1/8 the search
    starts at twice it, after a full step that followed a step <= 1/4 at that step,
    else at 1 (and always at 1 without ``warm_line_search``).  On ur5 "stiff" of
    benchmarks/constrained from the quasi-static guess (the hand drops 5 cm in the last
    step; a crawl resumed after each full step) CSQP took 32 SQP iterations when
    measured (43 with ALDDP's rule, two steps <= 1/8 in a row) and 51 line-search trials
    (103): asserted at most 34 iterations and 1.8 trials per iteration, at the cost of
    the solve before the change to 1e-8 relative (both stop at th_stop on a flat
    optimum: 9.2e-10 apart)."""
    from geppetto.benchmarks.constrained import PLANE_Z, reaching
    problem = reaching("ur5", 100, PLANE_Z, 50, 100)
    solver = gp.solvers.CSQP(problem)
    alphas = solver.alphas
    for steps, first in (([1.0, 1.0], 0), ([1.0, 0.125], 2), ([0.5, 1 / 32], 4),
                         ([0.25, 1.0], 2), ([1 / 16, 1.0], 4), ([0.5, 1.0], 0),
                         ([0.5, 0.25], 0), ([1.0], 0)):
        assert solver._first_trial(steps) == first, (steps, alphas[first])
    assert gp.solvers.CSQP(problem, warm_line_search=False)._first_trial([0.5, 1 / 32]) == 0
    trials = []
    trial = solver._trial
    solver._trial = lambda *args: trials.append(args[2]) or trial(*args)
    result = solver.solve(max_iter=100)
    assert result.converged and result.violation < 1e-8, result
    assert abs(result.cost - 0.770586456176) < 1e-8 * 0.770586456176, result.cost
    assert result.iterations <= 34, result.iterations
    assert len(trials) <= 1.8 * result.iterations, (len(trials), result.iterations)


def test_trial_point_equals_integrate_and_calc_to_the_bit():
    """The line search's trial point (one compiled call into the trial buffers, the
    calc without problem.calc's input checks) holds the bits of
    ``state.integrate(xs, a dx)``, ``us + a du`` and of the checked evaluation
    (cost, gaps, violations), on panda "plane" (20 knots) at a random step."""
    from geppetto.benchmarks.constrained import PLANE_Z, reaching
    from geppetto.ocp.fused import CALC
    problem = reaching("panda", 20, PLANE_Z, 10, 18)
    solver = gp.solvers.CSQP(problem)
    rng = np.random.default_rng(3)
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    us = problem.quasi_static(xs)
    solver.dx[:] = 0.1 * rng.standard_normal(solver.dx.shape)
    solver.du[:] = rng.standard_normal(solver.du.shape)
    for step, slot in ((1.0, 0), (0.125, 1)):
        x_try, u_try, trial = solver._trial(xs, us, step, slot)
        np.testing.assert_array_equal(x_try, problem.state.integrate(xs, step * solver.dx))
        np.testing.assert_array_equal(u_try, us + step * solver.du)
        expected = solver._evaluate(x_try.copy(), u_try.copy(), CALC)
        assert trial == expected, (trial, expected)
        assert trial[1] > 1e-3 and trial[3] > 0.0        # gaps and violations nonzero


def test_trial_point_on_every_joint_type_equals_integrate_to_the_bit():
    """csqp._trial_point writes state_integrate's body out around the Lie-group kernel:
    its trial states hold the bits of ``state.integrate(xs, a dx)`` on a random tree
    with a free-flyer root and every other joint type (spherical, planar, unbounded
    revolute, ...), at random states and a random step."""
    model = gp.robots.random_tree(7, seed=5, root_joint="free-flyer")
    dynamics = ocp.FreeDynamics(model)
    state, nu = dynamics.state, dynamics.nu
    rng = np.random.default_rng(11)
    x0 = np.concatenate([gp.dynamics.random_configuration(model, rng), np.zeros(model.nv)])
    costs = [ocp.Cost(ocp.StateResidual(state, x0)), ocp.Cost(ocp.ControlResidual(nu))]
    stage = ocp.StageModel(dynamics, costs, dt=0.01, control_bounds=(-np.ones(nu),
                                                                     np.ones(nu)))
    problem = ocp.ShootingProblem(x0, [stage] * 6, ocp.TerminalModel(state, costs[:1]))
    solver = gp.solvers.CSQP(problem)
    xs = np.stack([np.concatenate([gp.dynamics.random_configuration(model, rng),
                                   rng.standard_normal(model.nv)]) for _ in range(7)])
    us = rng.standard_normal((6, nu))
    solver.dx[:] = rng.standard_normal(solver.dx.shape)
    solver.du[:] = rng.standard_normal(solver.du.shape)
    for step, slot in ((1.0, 0), (0.3, 1)):
        x_try, u_try, _ = solver._trial(xs, us, step, slot)
        np.testing.assert_array_equal(x_try, problem.state.integrate(xs, step * solver.dx))
        np.testing.assert_array_equal(u_try, us + step * solver.du)


def test_a_round_rewrites_the_hessian_at_its_changed_knots_only():
    """An active-set round's Hessian (csqp._hessian with the knots _polish_fix marked):
    equal to the bit to the one rebuilt at every knot after a control-bound row is
    switched (active <-> inactive) at two knots, with a partial t_end too; without
    marking them, H differs there (the stale rows' terms)."""
    from geppetto.solvers import csqp
    knots = range(4, 9)
    problem = _lq_problem(control_bounds=(-0.4, 0.4), state_bounds=(
        np.array([-np.inf, 0.2, -np.inf, -np.inf]), np.full(4, np.inf)), bounded_knots=knots)
    solver = gp.solvers.CSQP(problem)
    assert solver.solve(max_iter=20).converged
    L = (problem.Lxx, problem.Luu, problem.Lxu)
    blocks, N = solver.typed_polished, problem.N
    everywhere = np.ones(N + 1, dtype=bool)
    csqp._hessian(blocks, L, solver.H, N, everywhere)
    rho = [b[7] for b in solver._items(solver._polished[0::3], solver._polished[1::3],
                                       solver._polished[2::3])]
    control = next(r for r, b in zip(rho, solver.blocks) if b.kind == "u")
    changed = np.zeros(N + 1, dtype=bool)
    for k in (1, 3):                            # block knots 1, 3: problem knots 5, 7
        control[k, 0] = 1e5 if control[k, 0] == 0.0 else 0.0
        changed[knots[k]] = True
    for t_end in (N, knots[3] + 1):
        stale = tuple(h.copy() for h in solver.H)
        rebuilt = tuple(h.copy() for h in solver.H)
        csqp._hessian(blocks, L, solver.H, t_end, changed)
        csqp._hessian(blocks, L, rebuilt, t_end, everywhere)
        for marked, full in zip(solver.H[:3], rebuilt[:3]):
            assert np.array_equal(marked, full)
        csqp._hessian(blocks, L, stale, t_end, np.zeros(N + 1, dtype=bool))
        assert not np.array_equal(stale[1], rebuilt[1])
        solver.H = tuple(h.copy() for h in stale)


def test_a_row_without_multiplier_at_its_bound_starts_the_next_qp_inactive():
    """csqp._polish_rows after the first QP of a solve: a control-bound row whose value z
    sits at its upper bound with multiplier exactly 0 (inactive in the last QP's
    solution: a weakly inactive row) starts inactive, with a multiplier of the bound's
    sign it starts active at that bound; in the first QP (``fresh``) the rows at a bound
    start active as before.  Before, such a row entered the active set at every QP and
    left it with a wrong-sign multiplier (kinova "box" of benchmarks/constrained.py: 2
    factorizations per QP over QPs 2-18, then 1)."""
    from geppetto.solvers import csqp
    knots = range(4, 9)
    problem = _lq_problem(control_bounds=(-0.4, 0.4), bounded_knots=knots)
    solver = gp.solvers.CSQP(problem)
    assert solver.solve(max_iter=20).converged
    u = next(i for i, b in enumerate(solver.blocks) if b.kind == "u")
    y, z = solver.y[u], solver.z[u]
    rho = solver._polished[3 * u + 2]
    tolerance = max(solver.eps[0], 1e-9)
    y[:], z[:] = 0.0, 0.0                      # every row inactive, inside its bounds
    z[2, 1] = 0.4 - 1e-12                      # block knot 2, control 1: at its upper bound
    for fresh, multiplier, active in ((False, 0.0, 0), (False, 1e-3, 1), (True, 0.0, 1)):
        y[2, 1] = multiplier
        count = csqp._polish_rows(solver.typed_blocks, solver.typed_polished, solver.big,
                                  tolerance, fresh, solver._sparse, problem.ndx)
        assert count == active and (rho[2, 1] != 0.0) == bool(active), (fresh, multiplier)
        if active:
            assert rho[2, 1] == solver.big and solver._polished[3 * u + 1][2, 1] == 0.4


def test_backward_range_kept_is_backward_range_with_its_factors():
    """riccati.backward_range_kept (CSQP's factorization): Vx, Vxx, Qu, Quu, k, K, Quuk
    equal to the bit to backward_range's (gap term, no box) on panda "plane" (20 knots,
    a random infeasible point), with the dense products and with the Euler block
    structure, over all knots and from a partial t_end on the kept value function; Lq
    the Cholesky factor of Quu (numpy's, 1e-12) and Vf = Vxx f (1e-12)."""
    from geppetto.benchmarks.constrained import PLANE_Z, reaching
    from geppetto.solvers.riccati import backward_range, backward_range_kept
    problem = reaching("panda", 20, PLANE_Z, 10, 18)
    rng = np.random.default_rng(5)
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    xs[:, :problem.nx] += 0.1 * rng.standard_normal(xs.shape)
    us = problem.quasi_static(xs) + rng.standard_normal((problem.N, problem.nu))
    problem.calc_diff(xs, us)
    gaps = np.ascontiguousarray(problem.gaps(xs))
    assert np.abs(gaps).max() > 1e-2
    N, ndx, nu, mu = problem.N, problem.ndx, problem.nu, 1e-8
    L = (problem.Lx, problem.Lu, problem.Lxx, problem.Luu, problem.Lxu)
    shapes = [(N + 1, ndx), (N + 1, ndx, ndx), (N, nu), (N, nu, nu), (N, nu), (N, nu, ndx),
              (N, nu)]
    for structured in (False, True):
        problem.structured_backward = structured
        euler = problem.euler_structure
        assert (euler[0].shape[0] > 0) == structured
        ours = [np.zeros(shape) for shape in shapes]
        theirs = [np.zeros(shape) for shape in shapes]
        Lq, Vf = np.zeros((N, nu, nu)), np.zeros((N + 1, ndx))
        bounds = np.zeros((N, nu))
        for t_end in (N, N // 2):
            assert backward_range(problem.Fx, problem.Fu, *L, gaps, False, mu, problem.nus,
                                  np.zeros(N, dtype=bool), bounds, bounds, bounds, *theirs,
                                  t_end, 0, euler) == -1
            assert backward_range_kept(problem.Fx, problem.Fu, *L, gaps, mu, problem.nus,
                                       *ours, Lq, Vf, t_end, euler) == -1
            for a, b in zip(ours, theirs):
                np.testing.assert_array_equal(a, b)
        Vxx, Quu = ours[1], ours[3]
        for t in range(N):
            expected = np.linalg.cholesky(Quu[t])
            np.testing.assert_allclose(np.tril(Lq[t]), expected, rtol=1e-12,
                                       atol=1e-12 * np.abs(expected).max())
        Vf_expected = np.einsum("tij,tj->ti", Vxx, gaps)
        np.testing.assert_allclose(Vf, Vf_expected, rtol=1e-12,
                                   atol=1e-12 * np.abs(Vf_expected).max())
    problem.structured_backward = "auto"


def _talos_squat_with_hard_rows(N=16, dt=0.05):
    """(hard, soft): the talos squat of examples/talos_squat (reduced: 16 knots of 50 ms)
    with both soles' centre-of-pressure rows and the torque limits as hard constraints
    (hard) or without them (soft); none is active at the optimum."""
    from geppetto.examples.talos_squat import DEPTH, SOLES
    robot = gp.robots.load("talos")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    com0 = gp.dynamics.center_of_mass(model, model.create_data(), robot.q0).copy()
    s = np.arange(N) / (N - 1)
    com_path = com0 + np.c_[np.zeros((N, 2)), -0.5 * DEPTH * (1 - np.cos(2 * np.pi * s))]
    state = ocp.StateMultibody(model)
    weights = np.r_[np.zeros(3), np.full(3, 500.0), np.full(model.nv - 6, 0.01),
                    np.full(6, 10.0), np.ones(model.nv - 6)]
    x_reg = ocp.Cost(ocp.StateResidual(state, x0), ocp.WeightedQuadratic(weights))
    costs = [ocp.Cost(ocp.CenterOfMassResidual(model, com_path), weight=1e4), x_reg,
             ocp.Cost(ocp.ControlResidual(model.nv - 6), weight=1e-3)]
    dynamics = ocp.ContactDynamics(model, [
        gp.dynamics.contact_6d(model, sole, reference=gp.dynamics.LOCAL_WORLD_ALIGNED,
                               Kp=5.0, Kd=2.0) for sole in SOLES])
    rows = [ocp.Constraint(c, *c.bounds) for c in
            (ocp.CenterOfPressureResidual(dynamics, sole, 0.2, 0.1) for sole in SOLES)]
    limit = model.effort_limit[6:]
    terminal = ocp.TerminalModel(state, [ocp.Cost(x_reg.residual, x_reg.activation,
                                                  weight=100.0)])
    stage = ocp.StageModel(dynamics, costs, rows, dt=dt, control_bounds=(-limit, limit))
    hard = ocp.ShootingProblem(x0, [stage] * N, terminal)
    soft = ocp.ShootingProblem(x0, [ocp.StageModel(dynamics, costs, dt=dt)] * N, terminal)
    return hard, soft


def test_talos_squat_settles_where_the_merit_cannot_resolve_the_step():
    """Issue 19, a task nobody tuned for: the talos squat with hard rows.  Near the
    solution the stationarity stays at 6e-4 .. 3e-2 (an ill-conditioned Hessian: the
    step's predicted decrease 3e-10) and the line search refuses every trial (its
    second-order gaps times nu ~1e2 exceed that decrease); the second stopping test (the
    full step's predicted decrease at most th_decrease max(1, |cost|) at a feasible
    iterate) ends both starts "converged" at FDDP's optimum (1e-9 relative; no row active
    there), where main's CSQP said "no step accepted by the line search".  Since gn19 the
    test is tried after every QP, not only after a refused line search: from the guess
    25 iterations when measured (32 before, each of the last 7 gaining < 2e-11 of the
    cost; asserted at most 27).  With th_decrease 1e-15 (and the merit alone) the test
    does not hold and the old status comes back."""
    from geppetto.solvers.csqp import SETTLED
    hard, soft = _talos_squat_with_hard_rows()
    free = gp.solvers.FDDP(soft).solve(max_iter=200)
    assert free.converged
    for xs, us in ((None, None), (free.xs, free.us)):
        result = gp.solvers.CSQP(hard).solve(xs, us, max_iter=100)
        assert result.converged and result.status == SETTLED, result.status
        assert result.stop > 1e-6            # the first test alone would not stop
        assert result.violation <= 1e-6 and result.gaps <= 1e-9
        np.testing.assert_allclose(result.cost, free.cost, rtol=1e-9)
        if xs is None:
            assert result.iterations <= 27, result.iterations
    # (the merit alone: the filter fallback takes steps the merit refuses, glob29)
    strict = gp.solvers.CSQP(hard, th_decrease=1e-15, filter_fallback=False).solve(
        free.xs, free.us, max_iter=5)
    assert not strict.converged
    assert strict.status == "no step accepted by the line search"


def test_z1_joint_position_bounds_enter_the_active_set_one_knot_per_run():
    """z1 with its base yaw and wrist pitch bounded (state bounds on configuration
    coordinates that bind on arcs) and the tool at rest at the target at the last knot
    (benchmarks/constrained.py's "joints" on 40 knots), from the guess and from FDDP's
    optimum.  Up to ext18 a position bound entered the active set over its whole violated
    run and the too long arc was peeled one knot per solve from each end: 33 solves at
    the first QP from the guess (more than the 30 rounds: ADMM took over, 25 iterations).
    Entered one knot per run as the hand-position rows, every QP is solved by the
    active-set method in a few solves, at the optimum IPOPT reaches at tol 1e-11
    (measured: 5e-11 relative in the cost, 5e-6 in the states)."""
    from geppetto.benchmarks.constrained import untuned2
    problem = untuned2("joints", 40)
    free = gp.solvers.FDDP(problem).solve(max_iter=100)
    for xs, us in ((None, None), (free.xs, free.us)):
        solver = gp.solvers.CSQP(problem)
        result = solver.solve(xs, us, max_iter=50)
        assert result.converged, result.status
        assert result.history["qp_iterations"] == [0] * result.iterations
        assert max(result.history["qp_factorizations"]) <= 4
        assert result.violation <= 1e-10 and result.gaps <= 1e-9
        assert abs(result.cost - 0.05039746890660946) <= 1e-9 * 0.0504
    assert solver.active_set_rounds == 40               # max(30, N)
    # 100 knots from the guess: an arc of the wrist pitch's bound (knots ~57-77) is found
    # by its ends (the knot next to an active one enters with the run's most violated
    # knot, csqp._polish_fix): 20 factorizations (24 when each round's most violated knot
    # alone split the run, filling the arc by bisection), the same QP solutions
    result = gp.solvers.CSQP(untuned2("joints", 100)).solve(max_iter=50)
    assert result.converged and result.iterations == 8, result.status
    assert result.history["qp_iterations"] == [0] * 8
    assert sum(result.history["qp_factorizations"]) <= 21
    assert abs(result.cost - 0.04468306359753219) <= 1e-9 * 0.0447
    for bad in (dict(active_set_rounds=-1), dict(polish_rounds=-2)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            gp.solvers.CSQP(problem, **bad)
    for alphas in ([], [1.0, 2.0], [0.5, 1.0], [1.0, np.nan]):     # as the other solvers
        with pytest.raises(ValueError, match="alphas"):
            gp.solvers.CSQP(problem, alphas=alphas)


def test_without_constraints_it_solves_the_lq_and_meets_fddp():
    """No constraint rows: the QP is the LQ itself, so a full SQP step closes the
    linear problem's gaps (before, ADMM's relaxation alpha = 1.6 overshot the LQ step
    and each iteration left -0.6 of the gaps: max_iter 20 on this problem); and on ur5
    reaching an SE3 target (nonlinear, no rows) CSQP ends at FDDP's optimum."""
    import crocoddyl_problems as cp
    problem = _lq_problem()
    H, g, A, b, X, U = _dense(problem)
    kkt = np.block([[H, A.T], [A, np.zeros((A.shape[0], A.shape[0]))]])
    z = np.linalg.solve(kkt, np.concatenate([-g, b]))[:H.shape[0]]
    xs_ref, us_ref = _split(problem, z, X, U)
    result = gp.solvers.CSQP(problem).solve(max_iter=20)
    assert result.converged and result.iterations <= 2, result
    assert result.gaps < 1e-12
    np.testing.assert_allclose(result.xs, xs_ref, rtol=0.0, atol=1e-8)
    np.testing.assert_allclose(result.us, us_ref, rtol=0.0, atol=1e-8)
    arm = cp.build(cp.arm_task("ur5_se3", "ur5", "tool0", (0.4, 0.2, 0.4), knots=20))
    fddp = gp.solvers.FDDP(arm).solve(max_iter=100)
    csqp = gp.solvers.CSQP(arm).solve(max_iter=100)
    assert fddp.converged and csqp.converged, (fddp, csqp)
    assert abs(csqp.cost - fddp.cost) <= 1e-7 * fddp.cost, (csqp.cost, fddp.cost)
    # FDDP stops on its expected improvement: its controls agree to its precision
    np.testing.assert_allclose(csqp.us, fddp.us, rtol=0.0,
                               atol=1e-4 * np.abs(fddp.us).max())



def test_bolt_stalled_active_set_rounds_peel_arc_ends():
    """bolt on its two point feet lowering its centre of mass 3 cm and shifting it 1 cm
    sideways in 30 knots of 20 ms under hard friction pyramids (mu = 0.7; rob21's task
    nobody tuned for), from the guess.  QP 4's 30 active-set rounds visited 30 distinct
    active sets (10-57 pyramid rows changed per round, never fewer than the fewest so far
    for long) and ADMM took over: 175 factorizations, ADMM iterations at QP 4.  After
    more than csqp.STALL_ROUNDS rounds without progress the rounds peel arcs from their
    ends only (csqp._polish_fix's ``peel``): every QP solved by the active-set method,
    98 factorizations, 24 SQP iterations as before, at the same optimum (the old run's
    cost 1.3192629838699546, 3.7e-15 relative)."""
    from geppetto.benchmarks.constrained import quadruped_com_shift
    feet = ("FL_FOOT", "FR_FOOT")
    dynamics, x0, _, residual, costs, cones = quadruped_com_shift(
        "bolt", feet, (0.0, 0.01, -0.03), 0.7)
    stage = ocp.StageModel(dynamics, costs, [ocp.Constraint(c, *c.bounds) for c in cones],
                           dt=0.02, integrator="semi_implicit_euler")
    terminal = ocp.TerminalModel(dynamics.state, [ocp.Cost(residual, weight=1e4), costs[1]])
    problem = ocp.ShootingProblem(x0, [stage] * 30, terminal)
    result = gp.solvers.CSQP(problem).solve(max_iter=100)
    assert result.converged, result.status
    assert result.history["qp_iterations"] == [0] * result.iterations
    assert sum(result.history["qp_factorizations"]) <= 110
    assert result.violation <= 1e-8 and result.gaps <= 1e-9
    assert abs(result.cost - 1.3192629838699546) <= 1e-9 * 1.32


def test_bolt_fallback_qp_polishes_from_admm_with_shrinking_rounds():
    """bolt on its two point feet, hard friction pyramids (mu 0.7), the CoM 3 cm lower
    and 1 cm sideways, 30 knots (rob21's task nobody tuned for), from the guess, with
    ``active_set_rounds=10``, so that the QP of SQP iteration 4, where the pyramids
    become active, leaves the active-set method before its stall rule (``peel``, the
    test above) and ADMM takes over: the fallback path.  A polish from ADMM's active set
    goes on past ``polish_rounds`` while each round changes fewer rows: 250 ADMM
    iterations and 58 factorizations in that QP, where 4 rounds restarted at every rho
    check needed 625 and 87 (measured on the merge of qp23 and qp24).  The QP's solution
    is unique: the iterates are those of a polish with 1000 rounds, the cost the
    default solve's (1.3192629838699546 before qp23, 9e-15 relative measured)."""
    from geppetto.benchmarks.constrained import quadruped_com_shift
    dynamics, x0, _, shift, costs, cones = quadruped_com_shift(
        "bolt", ("FL_FOOT", "FR_FOOT"), (0.0, 0.01, -0.03), 0.7)
    stage = ocp.StageModel(dynamics, costs, [ocp.Constraint(c, *c.bounds) for c in cones],
                           dt=0.02, integrator="semi_implicit_euler")
    terminal = ocp.TerminalModel(dynamics.state, [ocp.Cost(shift, weight=1e4), costs[1]])
    problem = ocp.ShootingProblem(x0, [stage] * 30, terminal)
    result = gp.solvers.CSQP(problem, active_set_rounds=10).solve(max_iter=60)
    assert result.converged and result.iterations == 24, result.status
    history = result.history
    assert history["qp_iterations"][3] == 250           # ADMM's (625 before)
    assert history["qp_factorizations"][3] <= 60        # 87 before
    assert sum(history["qp_iterations"]) == 250
    assert result.violation <= 1e-8 and result.gaps <= 1e-9
    assert abs(result.cost - 1.3192629838699546) <= 1e-9 * 1.32
    reference = gp.solvers.CSQP(problem, active_set_rounds=10,
                                polish_rounds=1000).solve(max_iter=60)
    assert reference.iterations == 24
    assert abs(reference.cost - result.cost) <= 1e-10 * 1.32
    assert np.abs(reference.xs - result.xs).max() <= 1e-8
    assert np.abs(reference.us - result.us).max() <= 1e-6


def test_ur5_barely_cycling_rounds_go_on_damped_without_admm():
    """ur5 reaching benchmarks/constrained.py's target in 0.3 s (30 knots) with its
    torques within 40 % of the URDF limits ("barely" of untuned3, a task nobody tuned
    for), from the guess.  The active-set rounds of QPs 4 and 5 cycle (11 and 7 active
    sets: HIK's method converges on M-matrices only); at the repeated set they went to
    ADMM (QP 4: 225 iterations and 8 failed polishes; 135 factorizations, 250 ADMM
    iterations in the solve).  Now they go on as a damped semismooth Newton method
    (csqp._damped_round): every QP solved by the active-set rounds, 91 factorizations
    measured, the same 16 SQP iterations and optimum (old cost 0.3872647593122951,
    7.7e-16 relative)."""
    from geppetto.benchmarks.constrained import untuned3
    result = gp.solvers.CSQP(untuned3("barely")).solve(max_iter=100)
    assert result.converged and result.iterations == 16, result.status
    assert result.history["qp_iterations"] == [0] * result.iterations
    assert sum(result.history["qp_factorizations"]) <= 100
    assert result.violation <= 1e-8 and result.gaps <= 1e-9
    assert abs(result.cost - 0.3872647593122951) <= 1e-9 * 0.39


def test_row_curvatures_are_the_stage_hessian_along_each_row():
    """csqp._row_curvatures (the damped rounds' scaling of each row's natural residual):
    R_i [Lxx Lxu; Lxu^T Luu] R_i^T + sigma |R_i|^2 at the row's knot, for control bounds
    (Luu_ii), state bounds (Lxx_jj) and residual rows (a stage control residual, the
    terminal state), every row in the polishing blocks' order, on the LQ problem."""
    from geppetto.solvers import csqp
    problem = _lq_problem(
        stage_constraints=[ocp.Constraint(ocp.ControlResidual(2, [0.5, 0.0]), [0.0, -np.inf],
                                          [np.inf, 0.3])],
        terminal_constraints=[ocp.Constraint(ocp.StateResidual(ocp.StateVector(4),
                                                               np.zeros(4)), -1.0, 1.0)],
        control_bounds=(-0.4, 0.4), bounded_knots=range(3, 7),
        state_bounds=([-np.inf, -1.0, -2.0, -np.inf], [np.inf, 1.0, 2.0, np.inf]))
    solver = gp.solvers.CSQP(problem)
    assert solver.solve(max_iter=2).iterations >= 1          # derivatives at an iterate
    sigma = 1e-8
    out = np.full(solver._key.size, np.nan)

    def expected(Lxx, Luu, Lxu):
        values = []
        for block, item in zip(solver.blocks, solver.items):
            kind, start, r, Rx, Ru, y = item[:6]
            index, dx_index = item[10], item[11]
            for k in range(y.shape[0]):
                t = start + k
                for i in range(y.shape[1]):
                    row_x, row_u = np.zeros(problem.ndx), np.zeros(problem.nu)
                    if kind == 1:
                        row_u[i] = 1.0
                    elif kind == 2:
                        row_x[dx_index[i]] = 1.0
                    else:
                        row_x, row_u = Rx[k, index[i]], Ru[k, index[i]]
                    c = row_x @ Lxx[t] @ row_x + sigma * row_x @ row_x
                    if t < problem.N:
                        c += row_u @ Luu[t] @ row_u + 2 * row_x @ Lxu[t] @ row_u \
                            + sigma * row_u @ row_u
                    values.append(c)
        return np.array(values)

    csqp._row_curvatures(solver.typed_polished, problem.Lxx, problem.Luu, problem.Lxu,
                         sigma, out)
    assert expected(problem.Lxx, problem.Luu, problem.Lxu).size == out.size
    assert {b.kind for b in solver.blocks} == {"residual", "u", "x"}
    np.testing.assert_allclose(out, expected(problem.Lxx, problem.Luu, problem.Lxu),
                               rtol=1e-14, atol=1e-20)
    # the cross term R_x Lxu R_u^T (zero above: the LQ's Lxu and the control residual's
    # R_x vanish; review rev32): residual rows with both Jacobians and a Hessian with
    # Lxu, written into the polishing rows' arrays (they are the blocks')
    rng = np.random.default_rng(32)
    for item in solver.items:
        if item[0] == 0:
            item[3][...] = rng.standard_normal(item[3].shape)
            item[4][...] = rng.standard_normal(item[4].shape)
    half_x = rng.standard_normal(problem.Lxx.shape)
    half_u = rng.standard_normal(problem.Luu.shape)
    Lxx = half_x @ half_x.transpose(0, 2, 1) + 4.0 * np.eye(problem.ndx)
    Luu = half_u @ half_u.transpose(0, 2, 1) + 4.0 * np.eye(problem.nu)
    Lxu = 0.5 * rng.standard_normal(problem.Lxu.shape)
    with_cross, without_cross = expected(Lxx, Luu, Lxu), expected(Lxx, Luu, 0 * Lxu)
    assert np.max(np.abs(with_cross - without_cross)) > 0.1
    csqp._row_curvatures(solver.typed_polished, Lxx, Luu, Lxu, sigma, out)
    np.testing.assert_allclose(out, with_cross, rtol=1e-12)
    # rows without curvature (no Hessian along them, no proximal weight) are left unscaled,
    # not divided by zero (review rev32: the damped merit was NaN)
    csqp._row_curvatures(solver.typed_polished, 0 * problem.Lxx, 0 * problem.Luu,
                         0 * problem.Lxu, 0.0, out)
    np.testing.assert_array_equal(out, 1.0)


def _bound_rows(y, z, rho, lower, upper):
    """A typed polishing list of one control-bound block at knot 0 (csqp's damped-round
    kernels' input): the rows' multipliers y, bounds z and penalties rho (1, m)."""
    from geppetto.solvers import csqp
    m = y.shape[1]
    return csqp.typed_list([(1, 0, np.zeros((1, m)), np.zeros((1, m, 2)), np.zeros((1, m, m)),
                             y, z, rho, np.asarray(lower, float), np.asarray(upper, float),
                             np.arange(m), np.arange(m))])


@pytest.mark.parametrize("distance", [1e-3, 1e-7, 1e-10])
def test_damped_kink_step_crosses_the_kink_in_floating_point(distance):
    """A damped round whose line search refuses every step (row 0's residual falls as
    row 1's rises past its upper bound 1 at once) steps past the first kink (row 1's).
    With row 1 within ~1e-7 of its bound the kink lies at t ~ 1e-12 and a step of (1 +
    1e-9) t moved its value by less than half an ulp of 1: it rounded onto the bound, the
    row stayed inactive and the round gave up (-1, ADMM; review rev32).  Now the step
    leaves the bound strictly: row 1 becomes active at 1."""
    from geppetto.solvers import csqp
    y, z, rho = np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 2))
    polished = _bound_rows(y, z, rho, [-1.0, -1.0], [1.0, 1.0])
    iterate = np.array([[1.0, 1.0 - distance], [-1.0, 0.0], [np.nan] * 2, [np.nan] * 2])
    curvature, changed = np.ones(2), np.zeros(2, bool)
    changes, last, step = csqp._damped_round(
        polished, np.zeros((2, 2)), np.array([[0.0, 1e5]]), iterate, curvature, 1e5,
        csqp.POLISH_TOLERANCE, csqp.DAMPED_C1, csqp.DAMPED_SMALLEST, changed)
    assert (changes, last) == (1, 0)
    np.testing.assert_allclose(step, distance / (1e5 - 1.0 + distance), rtol=1e-5)
    assert rho[0, 1] == 1e5 and z[0, 1] == 1.0 and rho[0, 0] == 0.0
    assert changed[0] and iterate[0, 1] + iterate[1, 1] > 1.0


@pytest.mark.parametrize("curvature", [1.0, 10.0, 1e3])
def test_damped_round_drops_a_wrong_signed_row_its_solved_test_rejects(curvature):
    """An active row (at its upper bound 1) whose multiplier is -2e-9, of the wrong sign
    beyond POLISH_TOLERANCE (1e-9), with the penalized solve's value 5e-10 past the bound:
    csqp._damped_target calls the QP unsolved, and the move must then drop the row, as
    _polish_fix would.  The natural residual at the penalized value, 1 + 5e-10 - 2e-9 / c,
    kept the row active for c = 10 (overshoot above |y| / c): nothing changed, the next
    merit was flat, the round gave up (-1, ADMM; review rev32).  The target's value of an
    active row is now its bound."""
    from geppetto.solvers import csqp
    y, z, rho = np.array([[-2e-9]]), np.array([[1.0]]), np.array([[1e5]])
    polished = _bound_rows(y, z, rho, [-1.0], [1.0])
    iterate = np.full((4, 1), np.nan)
    changed = np.zeros(2, bool)
    changes, last, step = csqp._damped_round(
        polished, np.zeros((2, 1)), np.array([[1.0 + 5e-10]]), iterate,
        np.array([curvature]), 1e5, csqp.POLISH_TOLERANCE, csqp.DAMPED_C1,
        csqp.DAMPED_SMALLEST, changed)
    assert (changes, last, step) == (1, 0, 1.0)
    assert rho[0, 0] == 0.0 and y[0, 0] == 0.0
    # the same row with its multiplier's sign right within the tolerance is the solution
    y[0, 0], rho[0, 0] = -0.5e-9, 1e5
    assert csqp._damped_round(
        polished, np.zeros((2, 1)), np.array([[1.0 + 5e-10]]), iterate,
        np.array([curvature]), 1e5, csqp.POLISH_TOLERANCE, csqp.DAMPED_C1,
        csqp.DAMPED_SMALLEST, changed) == (0, -1, 1.0)


def test_forced_damped_rounds_on_redundant_rows_solve_without_admm(monkeypatch):
    """Every round after the first taken damped (CSQP._active_set made to report a
    repeat at once) on the LQ problem with a residual row u_1 <= 0.35 beside the control
    bounds |u| <= 0.4: the damped move made both rows on u_1 active, each at its own
    bound, and the next solve (the two contradict) ran the method of multipliers to its
    last iteration; the round went to ADMM (217 iterations, 2 SQP iterations instead of
    1; review rev32).  Such a round now takes the plain rule's round on the penalized
    step, which drops the wrong-signed row, and the damped rounds go on: no ADMM, the
    plain rounds' solution."""
    from geppetto.solvers import csqp

    def make():
        return _lq_problem(
            control_bounds=(-0.4, 0.4), bounded_knots=range(4, 9),
            state_bounds=([-np.inf, 0.2, -np.inf, -np.inf], np.full(4, np.inf)),
            stage_constraints=[ocp.Constraint(ocp.ControlResidual(2, [0.0, 0.0]),
                                              [0.1, -np.inf], [0.1, 0.35])])
    plain = gp.solvers.CSQP(make()).solve(max_iter=50)
    assert plain.converged
    rounds = []
    real_round = csqp._damped_round
    monkeypatch.setattr(csqp.CSQP, "_active_set", lambda self, keyed=False: b"repeat")
    monkeypatch.setattr(csqp, "_damped_round",
                        lambda *args: rounds.append(real_round(*args)) or rounds[-1])
    forced = gp.solvers.CSQP(make()).solve(max_iter=50)
    assert rounds and all(changes >= 0 for changes, _, _ in rounds)
    assert forced.converged and forced.iterations == plain.iterations
    assert forced.history["qp_iterations"] == [0] * forced.iterations
    assert abs(forced.cost - plain.cost) <= 1e-9 * abs(plain.cost)
    np.testing.assert_allclose(forced.us, plain.us, atol=1e-7)


def test_kinova_torque_limited_reach_ends_infeasible_with_exact_signs():
    """kinova reaching 0.2, -0.2, 0.1 m from its tool's start in 30 knots with its torques
    within 30 % of the URDF limits, from the guess: no feasible trajectory is found; the
    SQP certifies it at QP 12 and the restoration crawls from there: "infeasible" after 15
    iterations (0.09 s).  With the multipliers' signs to a forcing term at infeasible
    iterates (cq33: POLISH_FORCING x KKT, 1.3e-2 at QP 4) one active row there kept a
    multiplier of the wrong sign by 7.5e-7; the step moved by up to 0.42 in the controls
    (of 45), and the restoration started from the new point ran 488 iterations to
    max_iter 500 (review rev33; a cap at 1e-3 of the QP's largest multiplier kept it,
    at 0.1 not: cq33c).  The signs are now tested exactly at every QP."""
    from geppetto.benchmarks import constrained
    model = gp.robots.load("kinova").model
    frame = constrained.UNTUNED2_TOOLS.get("kinova", "tool0")
    _, start = constrained._tool_position(model, frame, gp.robots.load("kinova").q0)
    limit = 0.3 * np.asarray(model.effort_limit)
    problem = constrained._reach("kinova", frame, start + np.array([0.2, -0.2, 0.1]), 30,
                                 constrained.DT, control_bounds=(-limit, limit))
    result = gp.solvers.CSQP(problem).solve(max_iter=500)
    assert result.status == "infeasible" and result.iterations <= 20, \
        (result.status, result.iterations)
    assert sum(result.history["qp_factorizations"]) <= 320
    assert result.violation > 1e-3
