"""CSQP's filter fallback (``filter_fallback``, issue 19, glob29): where the l1 merit
refuses every trial of a solved QP's step, the largest trial Waechter & Biegler's filter
accepts (Math. Prog. 106, 2006, Sec. 2.3) is taken before any restoration.

- kinova "pose" (benchmarks/constrained.py untuned3) from the guess: the first QP's step
  (850 N m on the last knot's light wrist) was refused at every trial by the merit (its nu
  ~1e2 times the gaps' second-order growth), the restoration ran 37 ProxDDP iterations and
  the SQP crawled at 1/64 for 27 iterations after it: 94 iterations.  The filter takes the
  full step (the cost falls, the gaps grow, as IPOPT's do) and the SQP converges in 8,
  without a restoration, at the same optimum.
- The step of a QP certified infeasible (the swing-up from rest) is the merit's alone.
"""
import numpy as np

import geppetto as gp
from geppetto.benchmarks import constrained
from geppetto.solvers.csqp import (FILTER_GAMMA_PHI, FILTER_GAMMA_THETA, FILTER_THETA_MAX,
                                   FILTER_THETA_MIN, _Filter)


def test_filter_envelope_margins_and_switching():
    filter_ = _Filter(2.0)              # theta_0 = 2: theta_min 2e-4, theta_max 2e4
    assert filter_.theta_min == FILTER_THETA_MIN * 2.0
    assert filter_.theta_max == FILTER_THETA_MAX * 2.0
    c1 = 1e-4
    # h-type: theta or cost decreased by a margin of theta
    assert filter_.accepts(1.0, 2.0, 0.5, 1.0, 0.99, 3.0, c1) == "h"      # cost falls
    assert filter_.accepts(1.0, 2.0, 0.5, 1.0, 5.0, 1.9, c1) == "h"       # theta falls
    # neither by its margin: refused
    assert filter_.accepts(1.0, 2.0, 0.5, 1.0, 1.0 - 0.5 * FILTER_GAMMA_PHI * 2.0,
                           2.0 * (1.0 - 0.5 * FILTER_GAMMA_THETA), c1) is None
    # above theta_max, or not finite: refused whatever the cost
    assert filter_.accepts(1.0, 2.0, -1.0, 1.0, -1e9, 2.1e4, c1) is None
    assert filter_.accepts(1.0, 2.0, -1.0, 1.0, np.nan, 1.0, c1) is None
    # the iterate's envelope: a later trial at or beyond both its corners is refused
    filter_.add(1.0, 2.0)
    corner = ((1.0 - FILTER_GAMMA_THETA) * 2.0, 1.0 - FILTER_GAMMA_PHI * 2.0)
    assert filter_.entries == [corner]
    # (from an iterate (cost 2, theta 3) that either trial would improve on)
    assert filter_.accepts(2.0, 3.0, 0.1, 1.0, corner[1], corner[0], c1) is None
    assert filter_.accepts(2.0, 3.0, 0.1, 1.0, 1.5, 1.01 * corner[0], c1) is None
    assert filter_.accepts(2.0, 3.0, 0.1, 1.0, corner[1], 0.99 * corner[0], c1) == "h"
    assert filter_.accepts(2.0, 3.0, 0.1, 1.0, 0.99 * corner[1], 1.5 * corner[0], c1) == "h"
    # f-type below theta_min with the switching condition (cost slope -1, theta 1e-5):
    # Armijo on the cost alone, the infeasibility may grow within the filter
    filter_ = _Filter(2.0)
    assert filter_.accepts(1.0, 1e-5, -1.0, 0.5, 1.0 - 0.6 * c1, 1e-3, c1) == "f"
    assert filter_.accepts(1.0, 1e-5, -1.0, 0.5, 1.0 - 0.4 * c1, 1e-6, c1) is None


def test_pose_from_the_guess_takes_the_filter_step_before_any_restoration():
    """Measured (glob29): 8 SQP iterations and no restoration (merit alone: 94 with 37
    restoration iterations), 0.96843491965 against 0.96843491959; asserted: converged,
    no restoration, at most 12 iterations, the first step full, the cost of the merit
    alone to 1e-8 relative.  On the code before: no option, and 94 iterations."""
    problem = constrained.untuned3("pose")
    # the merit alone on the linear trials (with the rollout fallback and no filter: 12
    # iterations, no restoration; gl33)
    merit = gp.solvers.CSQP(problem, filter_fallback=False,
                            rollout_fallback=False).solve(max_iter=500)
    assert merit.converged and merit.restoration_iterations > 0, merit.status
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=500)
    assert result.converged, result.status
    assert result.restoration_iterations == 0 and solver.restored is None
    assert result.iterations <= 12, result.iterations
    assert result.history["step"][0] == 1.0, result.history["step"][:3]
    assert result.violation <= 1e-8 and result.gaps <= 1e-9
    np.testing.assert_allclose(result.cost, merit.cost, rtol=1e-8)


def test_a_certified_qp_step_is_the_merits_alone():
    """The swing-up from rest: its first QP is certified infeasible; the merit accepts 1/8
    of its step (the filter alone took the full step, from where ProxDDP's restoration
    did not converge in 500 iterations).  The fallback leaves that step to the merit: the
    same iterate to the bit."""
    problem = constrained.untuned3("swingup")
    results = [gp.solvers.CSQP(problem, filter_fallback=fallback).solve(max_iter=1)
               for fallback in (True, False)]
    assert [r.history["step"][0] for r in results] == [0.125, 0.125]
    np.testing.assert_array_equal(results[0].xs, results[1].xs)
    np.testing.assert_array_equal(results[0].us, results[1].us)


def test_a_run_the_merit_accepts_is_bitwise_the_merit_alone():
    """untuned3 "start_bound" (30 knots): every step accepted by the merit; the filter is
    never asked, the iterates are those of ``filter_fallback=False`` to the bit."""
    problem = constrained.untuned3("start_bound", 30)
    new, old = (gp.solvers.CSQP(problem, filter_fallback=f).solve(max_iter=100)
                for f in (True, False))
    assert new.converged and new.iterations == old.iterations
    assert new.cost == old.cost
    np.testing.assert_array_equal(new.xs, old.xs)
    np.testing.assert_array_equal(new.us, old.us)


def test_filter_steps_in_a_row_start_the_restoration():
    """A filter step (the merit refused every trial) counts as a crawl: two in a row start
    the restoration, as two smallest steps do (before the fallback a single refusal did).
    Forced here by a merit that refuses every trial (c1 1e3) on obstacle (30 knots): two
    full filter steps, then the restoration (ProxDDP) from the second's point; without a
    restoration the SQP goes on with filter steps (and converges there, at 0.0833178289,
    where the restoration's hand-back ends at another local optimum, 0.0876580054: the
    price of the trigger, measured)."""
    problem = constrained.untuned3("obstacle", 30)
    seen = []
    solver = gp.solvers.CSQP(problem, c1=1e3)
    result = solver.solve(max_iter=60, callbacks=[lambda s, i, record: seen.append(i)])
    assert result.history["step"][:2] == [1.0, 1.0], result.history["step"]
    assert solver.restored is not None and result.restoration_iterations > 0
    assert seen[:2] == [1, 2] and (len(seen) == 2 or seen[2] > 3), seen
    alone = gp.solvers.CSQP(problem, c1=1e3, restoration=None).solve(max_iter=60)
    assert alone.restoration_iterations == 0 and alone.history["step"][:3] == [1.0] * 3
