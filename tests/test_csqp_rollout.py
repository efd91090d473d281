"""CSQP's rollout fallback (``rollout_fallback``, issue 19, gl33): where the linear trials
x (+) a dx, u + a du accept nothing or only the smallest step, the line search is tried
again along the QP's policy rolled out through the nonlinear dynamics (FDDP's trial: the
gaps of a trial of step a are (1 - a) f exactly, a second-order correction of the gaps).

- kinova "pose" (benchmarks/constrained.py untuned3) from FDDP's optimum: the start
  projected onto the velocity bounds leaves gaps 0.485; the first QP's step (598 N m on
  the light wrist) grows them at second order, the merit accepted 2^-9 twice, ProxDDP's
  restoration ran 19 iterations and the SQP 13: 32 iterations.  The rollout takes 1/4,
  1/2, 1/2, 1/4, 1/2 and full steps after: 10 iterations, no restoration, same optimum.
- A run whose linear search never crawls is the same bits with or without the fallback.
- A rollout step taken where the linear search crawled counts as a crawl for the
  restoration's trigger (obstacle, 75 knots).
"""
import numpy as np
import pytest

import geppetto as gp
from geppetto.benchmarks import constrained


def _fddp_start(problem):
    result = gp.solvers.FDDP(problem).solve(max_iter=200)
    return result.xs, result.us


def test_pose_from_fddps_optimum_takes_rollout_steps_instead_of_a_restoration():
    """Measured (gl33): 10 SQP iterations, no restoration, 0.96843491951 (without the
    fallback: 32 iterations of which 19 the restoration's, 0.96843492030).  Asserted:
    converged without a restoration in at most 14 iterations, the cost of the run
    without the fallback to 1e-8 relative, and the first step the rollout's: its gaps
    (1 - a) times the start's (the linear trial's gaps grow at second order).  On the
    code before: no option, and 32 iterations with a restoration."""
    problem = constrained.untuned3("pose")
    xs, us = _fddp_start(problem)
    linear = gp.solvers.CSQP(problem, rollout_fallback=False).solve(xs, us, max_iter=500)
    assert linear.converged and linear.restoration_iterations > 0, linear.status
    result = gp.solvers.CSQP(problem).solve(xs, us, max_iter=500)
    assert result.converged, result.status
    assert result.restoration_iterations == 0
    assert result.iterations <= 14
    assert abs(result.cost - linear.cost) <= 1e-8 * abs(linear.cost)
    assert result.violation <= 1e-8 and result.gaps <= 1e-9
    step, gaps = result.history["step"], result.history["gaps"]
    assert step[0] > 2.0 ** -9
    assert np.isclose(gaps[1], (1.0 - step[0]) * gaps[0], rtol=1e-9, atol=0.0)


def test_a_run_that_never_crawls_is_bitwise_the_linear_search():
    """ur3 "start_bound" (30 knots) from the guess: its searches accept steps above 2^-9,
    so the fallback is never asked: the same iterations, cost, xs and us to the bit."""
    problem = constrained.untuned3("start_bound", knots=30)
    linear = gp.solvers.CSQP(problem, rollout_fallback=False).solve(max_iter=200)
    result = gp.solvers.CSQP(problem).solve(max_iter=200)
    assert linear.converged and result.converged
    assert min(result.history["step"][:-1]) > 2.0 ** -9
    assert result.iterations == linear.iterations
    assert result.cost == linear.cost
    assert np.array_equal(result.xs, linear.xs) and np.array_equal(result.us, linear.us)


def test_no_crawl_clause_at_a_gap_free_iterate():
    """ur5_limited "limits" (30 knots) from FDDP's optimum: the linear search crawls from
    iteration 70 at iterates without gaps.  The rollout is searched there at a crawl (2^-9
    or no step) and in place of the filter's step after a rollout step (it helps: rev33b
    measured 103 iterations against 145 without it), but not in place of a step <= CRAWL:
    that clause at gap-free iterates violated the state bounds the linear trial keeps and
    took 169 + 2 iterations against the linear search's 142 (gl33).  Asserted: converged at
    the linear search's cost to 1e-9 relative in no more iterations than it."""
    problem = constrained.untuned3("limits", knots=30)
    xs, us = _fddp_start(problem)
    linear = gp.solvers.CSQP(problem, rollout_fallback=False).solve(xs, us, max_iter=300)
    result = gp.solvers.CSQP(problem).solve(xs, us, max_iter=300)
    assert linear.converged and result.converged, (linear.status, result.status)
    assert abs(result.cost - linear.cost) <= 1e-9 * abs(linear.cost)
    assert result.iterations <= linear.iterations


@pytest.mark.parametrize("task, from_fddp", [(("obstacle", 30), False), (("pose",), True)])
def test_the_rollouts_policy_is_the_qps_step(monkeypatch, task, from_fddp):
    """The rollout is FDDP's trial of the QP's policy (k, K): rolled out on the linearized
    dynamics from the iterate's gaps (:func:`csqp._rollout`) it gives the QP's step (dx,
    du), and the trial itself (:class:`~geppetto.solvers.forward.ForwardPass`, the
    iterate's gaps) is that step to first order in a: (x_roll (-) x) / a - dx is O(a),
    checked at a = 1e-4 and 1e-5 (the second error at most 0.2 of the first: a first-order
    discrepancy would not fall with a; and below 1e-2 |dx|) at each
    search that asks for the rollout.  panda "obstacle" (30 knots) from the guess: gap-free
    iterates (the guess is a rollout); kinova "pose" from FDDP's optimum: iterates with
    gaps (0.485 at the start) on a state of revolute and continuous joints (SO(2) is
    commutative: no transport of the gap).  On a free-flyer's state with gaps it does not
    hold: the trial puts the gap on the rolled-out prediction, the linearization at
    x_{t+1}, and the group's transport between the two tangent spaces is a first-order
    term (rev33b, solo12 trot with hard cones, noisy start: |(x_roll (-) x) / a - dx| 0.45
    against |dx| 10.5 for a = 1e-3 .. 1e-5; :meth:`CSQP._rollout_search`)."""
    from geppetto.solvers import csqp
    problem = constrained.untuned3(*task)
    xs, us = _fddp_start(problem) if from_fddp else (None, None)
    checked, errors = [], []
    search = csqp.CSQP._rollout_search

    def checking(self, xs, us, *args):
        dx, du = np.zeros_like(self.dx), np.zeros_like(self.du)
        csqp._rollout((self.problem.Fx, self.problem.Fu), self._iterate_gaps, self.k, self.K,
                      dx, du)
        checked.append(np.allclose(dx, self.dx, rtol=1e-12, atol=1e-12 * np.abs(self.dx).max())
                       and np.allclose(du, self.du, rtol=1e-12,
                                       atol=1e-12 * np.abs(self.du).max()))
        found = search(self, xs, us, *args)
        # the trial itself, after the search (the trial buffers are the ForwardPass's own;
        # the accepted trial is a copy in the solver's)
        bounds = (self._no_bounds, self._no_bounds)
        error = []
        for step in (1e-4, 1e-5):
            rolled = self._forward(xs, us, (self.k, self.K), bounds, step, True, False,
                                   self._iterate_gaps)
            tangent = self.problem.state.difference(xs, rolled[0]) / step
            error.append(max(np.abs(tangent - self.dx).max(),
                             np.abs((rolled[1] - us) / step - self.du).max()))
        errors.append((np.abs(self._iterate_gaps).max(), np.abs(self.dx).max(), *error))
        return found

    monkeypatch.setattr(csqp.CSQP, "_rollout_search", checking)
    gp.solvers.CSQP(problem).solve(xs, us, max_iter=20)
    assert checked and all(checked), checked
    assert any(gap > 1e-2 for gap, *_ in errors) == from_fddp, errors
    for gap, size, coarse, fine in errors:
        assert fine <= 1e-2 * size and fine <= 0.2 * coarse, errors


def test_the_filter_grows_only_where_its_step_is_taken(monkeypatch):
    """panda "obstacle" (30 knots) from the guess: after a rollout step the filter accepts
    a linear trial ("h" type) and the rollout's merit step replaces it.  The filter's
    entry (cost, infeasibility) belongs to its own step (Waechter & Biegler Sec. 2.2): no
    entry in an iteration whose step is the rollout's (the code before gl33b added it
    before the rollout's search)."""
    from geppetto.solvers import csqp
    events = []
    solve_qp, search, add = csqp.CSQP._solve_qp, csqp.CSQP._rollout_search, csqp._Filter.add

    def qp(self, *args):
        events.append("qp")
        return solve_qp(self, *args)

    def rollout(self, *args):
        found = search(self, *args)
        events.append("rollout" if found is not None else "refused")
        return found

    def adding(self, *args):
        events.append("add")
        return add(self, *args)

    monkeypatch.setattr(csqp.CSQP, "_solve_qp", qp)
    monkeypatch.setattr(csqp.CSQP, "_rollout_search", rollout)
    monkeypatch.setattr(csqp._Filter, "add", adding)
    gp.solvers.CSQP(constrained.untuned3("obstacle", 30)).solve(max_iter=500)
    iterations = " ".join(events).split("qp")
    assert any("rollout" in it for it in iterations)
    assert not any("add" in it and "rollout" in it for it in iterations), events


def test_a_rollout_step_after_a_linear_crawl_counts_as_a_crawl():
    """panda "obstacle" (75 knots) from the guess: the linear search crawls at 2^-9, the
    rollout takes larger steps.  Counted as crawls, two such steps in a row start the
    restoration as two smallest steps did, and the solve converges as the linear search's
    (2 + 24 iterations).  Not counted (gl33's first rule), the SQP crawled at 1/256 .. 1/64
    next to the optimum to max_iter 500."""
    problem = constrained.untuned3("obstacle", 75)
    linear = gp.solvers.CSQP(problem, rollout_fallback=False).solve(max_iter=500)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=500)
    assert linear.converged and result.converged, (linear.status, result.status)
    assert result.restoration_iterations > 0
    assert result.iterations - result.restoration_iterations <= 4, result.iterations
    assert abs(result.cost - linear.cost) <= 1e-7 * linear.cost, (result.cost, linear.cost)
