"""CSQP on constrained problems with no solution (issue 19): OSQP's primal-infeasibility
certificate in its ADMM (CSQP._certified_infeasible) ends a QP with no solution at its
first rho check, and two such QPs in a row end the SQP with status "infeasible".

- ur5 "infeasible" (benchmarks/constrained.py: the tool at z = 0.4 and z >= 0.45 at the
  last knot), from the guess and from FDDP's optimum: "infeasible" after 2 SQP iterations
  and at most 50 ADMM iterations per QP, where without the certificate (eps_prim_inf 0,
  the old code) every QP ran its 1000 ADMM iterations (6 and 2 SQP iterations).
- Three other kinds, 30 knots: ur5's tool above one plane and below another on knots
  1..29; ur5 held at rest (a stage state equality) by torques of at most 1 N m, too weak
  against gravity; panda's arm joints boxed within 0.05 rad of q0 (state bounds) with the
  hand at a far target at the last knot.
- Rows at knot 0 that x_0 = x0 alone fixes (a state bound the start violates): "infeasible"
  before the first iteration.
- A QP right after a certified one starts with ADMM (the double pendulum's swing-up under
  torque bounds from rest: 1 factorization where the active-set method ran its 50 solves
  again).
- Nearly infeasible but feasible (ur5 "infeasible" with the plane 1e-6 below the target,
  ADMM first): converged, the same iterates as without the certificate.
- LQ: the certificate of contradicting terminal equalities is Farkas' on the dense QP
  (the dynamics' multipliers of the adjoint sweep included); an LQ with bounds solved by
  ADMM first is never certified (the same bits as without the certificate).
"""
import numpy as np
import pytest

import geppetto as gp
from geppetto import ocp
from geppetto.benchmarks import constrained, nlp

from test_constrained_solver import _dense, _lq_problem


def _arm(name, knots, stage_rows=(), terminal_rows=(), state_bounds=None, first=0,
         **options):
    """benchmarks/constrained.py's reaching costs on ``name`` (``knots`` of 10 ms) with the
    stage rows built by ``stage_rows(model, state, frame, x0)`` on knots ``first`` ..
    knots - 1 and the terminal ones by ``terminal_rows``, the state bounds on every knot,
    the terminal one included."""
    robot = gp.robots.load(name)
    model = robot.model
    dynamics = ocp.FreeDynamics(model)
    state = dynamics.state
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    frame = nlp.FRAMES[name]
    reach = ocp.FrameTranslationResidual(model, frame, nlp.TARGET)
    costs = [ocp.Cost(reach), ocp.Cost(ocp.StateResidual(state, x0), weight=1e-2),
             ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-4)]
    stage = ocp.StageModel(dynamics, costs, list(stage_rows(model, state, frame, x0)) if
                           stage_rows else [], dt=constrained.DT,
                           integrator="semi_implicit_euler", state_bounds=state_bounds,
                           **options)
    terminal = ocp.TerminalModel(state, [ocp.Cost(reach, weight=1e3), costs[1]], list(
        terminal_rows(model, state, frame, x0)) if terminal_rows else [],
        state_bounds=state_bounds)
    plain = ocp.StageModel(dynamics, costs, dt=constrained.DT,
                           integrator="semi_implicit_euler", state_bounds=state_bounds,
                           **options)
    return ocp.ShootingProblem(x0, [plain] * first + [stage] * (knots - first), terminal)


def _two_planes(knots=30):
    """ur5: the tool at z >= 0.5 and at z <= 0.3 on knots 1 .. 29 (x0 violates one of
    them: at knot 0 the start check would end it before any QP)."""
    def rows(model, state, frame, x0):
        height = ocp.FrameTranslationResidual(model, frame, np.zeros(3), axes=[2])
        return [ocp.Constraint(height, 0.5, np.inf), ocp.Constraint(height, -np.inf, 0.3)]
    return _arm("ur5", knots, rows, first=1)


def _weak_hold(knots=30):
    """ur5 at rest on every knot (v = 0, a state equality) with |u| <= 1 N m: gravity
    needs more at q0."""
    def rows(model, state, frame, x0):
        nv = model.nv
        lower = np.r_[np.full(nv, -np.inf), np.zeros(nv)]
        upper = np.r_[np.full(nv, np.inf), np.zeros(nv)]
        return [ocp.Constraint(ocp.StateResidual(state, x0), lower, upper)]
    nu = gp.robots.load("ur5").model.nv
    return _arm("ur5", knots, rows, control_bounds=(-np.ones(nu), np.ones(nu)))


def _boxed_joints(knots=30):
    """panda: its seven arm joints within 0.05 rad of q0 on every knot (state bounds),
    the hand exactly at nlp.TARGET at the last knot."""
    robot = gp.robots.load("panda")
    nx = robot.model.nq + robot.model.nv
    lower, upper = np.full(nx, -np.inf), np.full(nx, np.inf)
    lower[:7], upper[:7] = robot.q0[:7] - 0.05, robot.q0[:7] + 0.05

    def rows(model, state, frame, x0):
        return [ocp.Constraint(ocp.FrameTranslationResidual(model, frame, nlp.TARGET), 0.0,
                               0.0)]
    return _arm("panda", knots, terminal_rows=rows, state_bounds=(lower, upper))


def _starts(problem):
    free = gp.solvers.FDDP(problem).solve(max_iter=200)
    return {"guess": (None, None), "fddp": (free.xs, free.us)}


def test_ur5_infeasible_certified_at_the_first_rho_check():
    """ur5 "infeasible": each QP certified infeasible at ADMM's first or second rho check
    (25 iterations each; the old code ran 1000 per QP and ended "infeasible" after 6 SQP
    iterations from the guess), the SQP "infeasible" after its second QP."""
    problem = constrained.untuned2("infeasible", 100)
    for name, (xs, us) in _starts(problem).items():
        solver = gp.solvers.CSQP(problem)
        result = solver.solve(xs, us, max_iter=100)
        assert result.status == "infeasible" and not result.converged, (name, result.status)
        sqp = result.iterations - result.restoration_iterations   # the restoration's apart
        assert sqp == 2, (name, result.iterations)
        # the certificate read dy = y^k - y^{k-1}, not y^{k-1} (review): y grows by about
        # dy per iteration, so after 25 or more |dy| is a small fraction of |y|
        largest_dy = max(np.abs(dy).max() for dy in solver._dy)
        assert 0.0 < largest_dy <= 0.1 * max(np.abs(y).max() for y in solver.y), largest_dy
        assert result.history["qp_iterations"] and \
            max(result.history["qp_iterations"]) <= 50, result.history["qp_iterations"]
        assert result.violation >= 0.025         # the rows 5 cm apart: one violated by half
    old = gp.solvers.CSQP(problem, eps_prim_inf=0.0).solve(max_iter=2)
    assert old.history["qp_iterations"] == [1000, 1000]


@pytest.mark.parametrize("build", [_two_planes, _weak_hold, _boxed_joints])
def test_infeasible_problems_of_other_kinds(build):
    """Contradicting planes, a hold too weak for gravity, a joint box against a terminal
    target: "infeasible" after 2 SQP iterations from the guess and from FDDP's optimum,
    every QP ending ADMM within 100 iterations (the old code: 1000 per QP; 6 SQP
    iterations on the planes and the joint box; on the weak hold from the guess, "no
    step accepted by the line search")."""
    problem = build()
    for name, (xs, us) in _starts(problem).items():
        result = gp.solvers.CSQP(problem).solve(xs, us, max_iter=100)
        assert result.status == "infeasible" and not result.converged, (name, result.status)
        sqp = result.iterations - result.restoration_iterations   # the restoration's apart
        assert sqp <= 2, (name, result.iterations)
        assert max(result.history["qp_iterations"]) <= 100, result.history["qp_iterations"]


def test_rows_violated_by_x0_at_knot_0_end_before_the_first_iteration():
    """ur5's shoulder lift bounded 0.1 rad above its start on every knot (state bounds):
    x_0 = x0 violates the bound at knot 0, which nothing can change: "infeasible" with
    no iteration from the guess and from FDDP's optimum (the old code: 6 SQP iterations
    of 1000 ADMM iterations each; the start projected onto the bounds, its x_0 off x0).
    A plane on the tool's height that x0 violates on every knot: the same.  A state-only
    residual row at a start with a gap at knot 0 is left to the QPs."""
    q0 = gp.robots.load("ur5").q0
    lower, upper = np.full(2 * q0.size, -np.inf), np.full(2 * q0.size, np.inf)
    lower[1] = q0[1] + 0.1
    problem = _arm("ur5", 30, state_bounds=(lower, upper))
    for name, (xs, us) in _starts(problem).items():
        result = gp.solvers.CSQP(problem).solve(xs, us, max_iter=100)
        assert result.status == "infeasible" and result.iterations == 0, (name, result)
        # the bound's 0.1 rad at x0: a gap at knot 0 of the start projected onto it
        assert max(result.violation, result.gaps) >= 0.1 - 1e-12, result
    def plane(model, state, frame, x0):     # the tool starts at z = -0.005
        return [ocp.Constraint(ocp.FrameTranslationResidual(model, frame, np.zeros(3),
                                                            axes=[2]), 0.5, np.inf)]
    problem = _arm("ur5", 30, plane)
    result = gp.solvers.CSQP(problem).solve(max_iter=100)
    assert result.status == "infeasible" and result.iterations == 0, result
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    xs[0, 1] += 0.2                     # a gap at knot 0: the check does not apply
    result = gp.solvers.CSQP(problem).solve(xs, max_iter=1)
    assert result.iterations == 1



def test_qp_after_a_certified_one_starts_with_admm():
    """The double pendulum's swing-up under torque bounds (benchmarks/constrained.py
    untuned3 "swingup", 50 knots of 20 ms) from the guess: the linearization at rest
    cannot reach the upright state; the first QP's active-set rounds give it to ADMM after
    their third round without progress whose active rows contradict each other
    (csqp.CONTRADICTED_ROUNDS, qp29: 11 factorizations; 30 before, where they stopped at an active set they already
    solved, qp23, qp24; 51 before that, the max(30, N) = 50 solves), ADMM certifies it
    infeasible, and the second QP, right after
    the certified one, gets only ``polish_rounds`` (4) active-set solves before ADMM (5
    factorizations; the old code ran the 50 solves again, 51): "infeasible" after 2 SQP
    iterations as before, at the same iterate (the active-set method leaves ADMM's y, z as
    they were when it fails)."""
    problem = constrained.untuned3("swingup", 50)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=100)
    assert result.status == "infeasible", result
    assert result.iterations - result.restoration_iterations == 2, result
    # the certified second QP in the history too (glob27)
    assert result.history["qp_factorizations"] == [11, 5], result.history["qp_factorizations"]
    assert solver._factorizations <= 5, solver._factorizations     # the last QP's
    assert abs(result.violation - 2.9941612907) <= 1e-6, result.violation


def test_contradicting_active_sets_hand_an_infeasible_qp_to_admm(monkeypatch):
    """The swing-up from rest on its own 100 knots (untuned3 "swingup"): the first QP has
    no solution, and its active-set rounds went through all their max(30, N) = 100 solves
    (101 factorizations, 71 ms of CPU) before ADMM certified it in 25 iterations (glob29).
    Rounds that change no fewer rows than the fewest so far and whose active rows
    contradict each other (their method of multipliers runs ``polish_iter`` iterations
    short of the loose tolerance) hand the QP to ADMM after the third (round 10): 11
    factorizations, the same certificate and the same iterate to the bit as the rounds
    run to their end (CONTRADICTED_ROUNDS set out of reach: the old code)."""
    from geppetto.solvers import csqp
    problem = constrained.untuned3("swingup")
    solver = gp.solvers.CSQP(problem)
    new = solver.solve(max_iter=1)
    assert new.history["qp_factorizations"] == [11], new.history["qp_factorizations"]
    assert new.history["qp_iterations"] == [25] and solver._certified
    monkeypatch.setattr(csqp, "CONTRADICTED_ROUNDS", 1 << 30)
    old = solver.solve(max_iter=1)
    assert old.history["qp_factorizations"] == [101], old.history["qp_factorizations"]
    assert old.history["qp_iterations"] == [25] and solver._certified
    assert np.array_equal(new.xs, old.xs) and np.array_equal(new.us, old.us)
    assert new.cost == old.cost


def test_nearly_infeasible_converges_unchanged():
    """ur5 "infeasible" with the plane at z >= 0.4 - 1e-6 (feasible by 1e-6: the terminal
    rows parallel), ADMM first (active_set_rounds 0): converged, and the certificate,
    tested at every rho check of every QP, never holds (the same iterates, cost and
    iterations as with eps_prim_inf 0)."""
    plane = constrained.PLANE_Z
    constrained.PLANE_Z = nlp.TARGET[2] - 1e-6
    try:
        problem = constrained.untuned2("infeasible", 100)
    finally:
        constrained.PLANE_Z = plane
    results = [gp.solvers.CSQP(problem, active_set_rounds=0, eps_prim_inf=eps).solve(
        max_iter=100) for eps in (1e-4, 0.0)]
    assert results[0].converged and results[0].violation <= 1e-8, results[0].status
    assert sum(results[0].history["qp_iterations"]) > 0          # ADMM ran
    assert results[0].iterations == results[1].iterations
    assert results[0].cost == results[1].cost
    np.testing.assert_array_equal(results[0].xs, results[1].xs)


def test_lq_certificate_is_farkas_on_the_dense_qp():
    """x_N[0] = 0 and x_N[0] = 1: the certificate (the dynamics' multipliers mu = -lam
    of the adjoint sweep, the rows' dy) of the last QP meets Farkas' conditions on the
    dense QP, A^T mu + C^T dy = 0 (to eps_prim_inf |dy|) and b^T mu + the rows' support
    < 0 (test_csqp's test_contradicting_equalities_are_infeasible: the status)."""
    state = ocp.StateVector(4)
    free = [-np.inf] * 3
    references = (np.zeros(4), np.array([1.0, 0, 0, 0]))
    rows = [ocp.Constraint(ocp.StateResidual(state, ref), [0] + free, [0] + [np.inf] * 3)
            for ref in references]
    problem = _lq_problem(terminal_constraints=rows)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=100)
    assert result.status == "infeasible", result
    assert result.iterations - result.restoration_iterations == 2, result
    lam = solver._certificate_work[0]
    dy = [d.copy() for d in solver._dy]
    H, g, A, b, X, U = _dense(problem)
    N = problem.N
    mu = -lam.ravel()
    farkas = A.T @ mu
    support = b @ mu
    for block, d, ref in zip(solver.blocks, dy, references):
        for i in range(4):          # the row v = x_N[i] - ref[i] in [lower, upper]
            farkas[X(N).start + i] += d[0, i]
            if d[0, i] > 0.0:
                support += (block.upper[i] + ref[i]) * d[0, i]
            elif d[0, i] < 0.0:
                support += (block.lower[i] + ref[i]) * d[0, i]
    largest = max(np.abs(d).max() for d in dy)
    assert largest > 0.0
    assert np.abs(farkas).max() <= 1e-4 * largest
    assert support < -1e-4 * largest


def test_feasible_lq_with_admm_first_is_never_certified():
    """|u| <= 0.4 and x_1 >= 0.2 on knots 4..8 (test_csqp's inequality LQ) solved by ADMM
    first: the same bits with and without the certificate."""
    problem = _lq_problem(control_bounds=(-0.4, 0.4), state_bounds=(
        np.array([-np.inf, 0.2, -np.inf, -np.inf]), np.full(4, np.inf)),
        bounded_knots=range(4, 9))
    results = [gp.solvers.CSQP(problem, active_set_rounds=0, eps_prim_inf=eps).solve(
        max_iter=20) for eps in (1e-4, 0.0)]
    assert results[0].converged
    assert sum(results[0].history["qp_iterations"]) > 0
    assert results[0].history["qp_iterations"] == results[1].history["qp_iterations"]
    assert results[0].cost == results[1].cost
    np.testing.assert_array_equal(results[0].us, results[1].us)


def test_eps_prim_inf_is_validated():
    problem = _lq_problem()
    for bad in (-1e-4, np.nan, np.inf):
        with pytest.raises(ValueError, match="eps_prim_inf"):
            gp.solvers.CSQP(problem, eps_prim_inf=bad)
