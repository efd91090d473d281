"""CSQP's restoration (CSQP._restore, issue 19): where the SQP would stop at an infeasible
iterate (its QP certified infeasible twice, a line search that refuses every trial) or
crawls at its smallest step, an augmented-Lagrangian solver (ProxDDP by default) runs
from the iterate and hands its point and multipliers back to the SQP.

- panda "obstacle" (benchmarks/constrained.py untuned3, 30 knots) from the guess: every
  knot linearizes the sphere's exterior as the same half-space; the old code (restoration
  None) accepted steps of 2^-9 for 225 iterations and ended "no step accepted by the line
  search" at violation 0.26.  Now: the crawl's second 2^-9 step starts the restoration,
  and the SQP converges at ALDDP's local optimum from the same start.
- double_pendulum "swingup" (untuned3, 100 knots) from the guess: the linearization at rest
  cannot reach the upright state (QP certified infeasible twice: "infeasible" after 2
  iterations before); now converged at ALDDP's optimum.
- An unconverged restoration whose point is less infeasible than the iterate goes back to
  the SQP where no QP certified the linearization infeasible (obstacle with max_iter 14).
- A truly infeasible problem (two contradicting planes) still ends "infeasible" after 2
  SQP iterations: the restoration ends "infeasible" too (its own test).
- A restoration that may hand back a less infeasible point (no certificate) stops once its
  own line search crawls (ALDDP/ProxDDP ``crawl_limit``): kinova "pose" (untuned3) from
  FDDP's optimum, where the SQP's crawl trigger fires although the SQP recovers by itself,
  took 498 restoration iterations (max_iter) and 11x the SQP's time; now 19, at the same
  optimum.  After a certificate (only a feasible point goes back) the crawl ends it only
  before it reduced the infeasibility to 0.9 of the iterate's: ur5 held by too weak
  torques ends after 2 restoration iterations instead of 99 (the swing-up, whose
  restoration crawls after that reduction, still converges).
"""
import numpy as np
import pytest

import geppetto as gp
from geppetto.benchmarks import constrained
from geppetto.solvers import csqp as csqp_module

from test_csqp_infeasible import _two_planes, _weak_hold


def _converged_at_alddp(problem, result, rtol):
    assert result.converged, result.status
    assert result.violation <= 1e-8 and result.gaps <= 1e-9, result
    reference = gp.solvers.ALDDP(problem).solve(max_iter=500)
    assert reference.converged, reference.status
    assert abs(result.cost - reference.cost) <= rtol * reference.cost, (result.cost,
                                                                       reference.cost)


def test_obstacle_from_the_guess_converges_after_the_crawl():
    problem = constrained.untuned3("obstacle", 30)
    # the SQP alone: no restoration, no filter fallback (glob29), no rollout fallback (with
    # it alone the SQP converges here, 293 iterations at 0.0833178629: gl33)
    old = gp.solvers.CSQP(problem, restoration=None, filter_fallback=False,
                          rollout_fallback=False).solve(max_iter=500)
    assert not old.converged and old.status == "no step accepted by the line search", old
    assert old.violation >= 0.1, old.violation
    # the linear trials alone: two steps of 2^-9, then the restoration; the SQP ends after
    # its first QP there
    solver = gp.solvers.CSQP(problem, rollout_fallback=False)
    result = solver.solve(max_iter=500)
    assert result.history["step"][:2] == [2.0 ** -9] * 2, result.history["step"]
    assert solver.restored.converged and result.restoration_iterations > 0
    assert result.iterations - result.restoration_iterations <= 4, result.iterations
    _converged_at_alddp(problem, result, 1e-7)
    # the rollout fallback (gl33) takes steps of 1/2, 1/4, 1/2 where those crawl, then the
    # restoration runs as before and the SQP converges at the same optimum
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=500)
    assert min(result.history["step"][:2]) > 2.0 ** -9, result.history["step"]
    assert solver.restored.converged and result.restoration_iterations > 0
    assert result.iterations - result.restoration_iterations <= 6, result.iterations
    _converged_at_alddp(problem, result, 1e-7)
    # the other restoration converges too (the same local optimum)
    other = gp.solvers.CSQP(problem, restoration="alddp").solve(max_iter=500)
    assert other.converged and abs(other.cost - result.cost) <= 1e-7 * result.cost, other


def test_swingup_from_the_guess_converges_after_the_certified_qps():
    problem = constrained.untuned3("swingup")
    old = gp.solvers.CSQP(problem, restoration=None).solve(max_iter=500)
    assert old.status == "infeasible" and old.iterations == 2, old
    # every iteration in the history, the certified one too (the old code left it out)
    assert len(old.history["step"]) == 2 and np.isnan(old.history["step"][-1]), old.history
    solver = gp.solvers.CSQP(problem)
    seen = []
    result = solver.solve(max_iter=500, callbacks=[lambda s, i, record: seen.append(i)])
    assert solver.restored.converged, solver.restored.status
    assert len(result.history["step"]) == result.iterations - result.restoration_iterations
    assert seen == list(range(1, 3)) + list(range(3 + result.restoration_iterations,
                                                  result.iterations + 1)), seen
    assert result.iterations - result.restoration_iterations <= 4, result.iterations
    _converged_at_alddp(problem, result, 1e-7)


def test_truly_infeasible_stays_infeasible_after_the_restoration():
    problem = _two_planes()
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=100)
    assert result.status == "infeasible", result
    assert solver.restored is not None and solver.restored.status == "infeasible", \
        solver.restored
    assert 0 < result.restoration_iterations <= 98
    assert result.iterations == 2 + result.restoration_iterations, result


def test_restoration_option_is_validated():
    with pytest.raises(ValueError, match="restoration"):
        gp.solvers.CSQP(constrained.untuned3("swingup", 10), restoration="ipopt")


class _CappedProxDDP(gp.solvers.ProxDDP):
    """A restoration of at most 12 iterations whatever the solve leaves it."""

    def solve(self, *args, max_iter=100, **options):
        return super().solve(*args, max_iter=min(max_iter, 12), **options)


def test_an_unconverged_restoration_less_infeasible_is_handed_back(monkeypatch):
    """obstacle (30 knots), the restoration held to 12 iterations: after the crawl's two
    SQP iterations it ends "max_iter" at violation ~7e-5, below the crawling iterate's
    0.4: no certificate says the linearization has no solution, so its point goes back to
    the SQP, which converges from it (a restoration handing back only feasible points left
    the SQP crawling at 2^-9, violation ~0.4).  max_iter counts the SQP's and the
    restoration's iterations together.  The linear line search's crawl
    (``rollout_fallback=False``): the rollout's steps of 1/2 and 1/4 start the restoration
    from another point, from whose capped hand-back the SQP's first step is 1/16 (gl33)."""
    problem = constrained.untuned3("obstacle", 30)
    monkeypatch.setitem(csqp_module.RESTORATIONS, "proxddp", _CappedProxDDP)
    solver = gp.solvers.CSQP(problem, rollout_fallback=False)
    result = solver.solve(max_iter=100)
    assert solver.restored.status == "max_iter", solver.restored.status
    assert 0 < result.restoration_iterations <= 12, result.restoration_iterations
    assert 0.0 < solver.restored.violation <= 1e-3, solver.restored.violation
    assert result.history["step"][2] >= 2.0 ** -3, result.history["step"]
    assert len(result.history["step"]) == result.iterations - result.restoration_iterations
    _converged_at_alddp(problem, result, 1e-7)


def test_max_iter_bounds_the_sqp_and_the_restoration_together():
    """obstacle (30 knots) from the guess: 2 crawling SQP iterations, then the restoration
    gets the iterations left, no more: the result's iterations (both counted) stay within
    max_iter (the old code gave the restoration max_iter - 2 and the SQP's count left it
    out: 9 + 11 with max_iter 12).  With no iteration left no restoration runs."""
    problem = constrained.untuned3("obstacle", 30)
    for max_iter in (2, 12):
        solver = gp.solvers.CSQP(problem)
        result = solver.solve(max_iter=max_iter)
        assert result.iterations <= max_iter, (max_iter, result.iterations)
        assert result.status == "max_iter", result.status
        if max_iter == 2:
            assert solver.restored is None and result.restoration_iterations == 0
        else:
            assert 0 < result.restoration_iterations <= max_iter - 2, result


def test_a_crawling_restoration_hands_back_at_once():
    """kinova "pose" from FDDP's optimum: the SQP crawls at 2^-9 (the trigger fires after
    two such steps) and recovers by itself without the restoration (61 iterations).
    ProxDDP from the crawling iterate crawls too after 19 iterations (two smallest steps in
    a row): it stops there ("crawling", violation 0.17 below the iterate's 0.64) and the
    SQP converges from its point at the SQP's own optimum (the old rule ran ProxDDP to
    max_iter, 498 iterations, before handing back).  The linear line search alone
    (``rollout_fallback=False``): with the rollout fallback this start needs no
    restoration (10 iterations; test_csqp_rollout.py)."""
    problem = constrained.untuned3("pose")
    free = gp.solvers.FDDP(problem).solve(max_iter=200)
    alone = gp.solvers.CSQP(problem, restoration=None).solve(free.xs, free.us, max_iter=500)
    assert alone.converged, alone.status
    solver = gp.solvers.CSQP(problem, rollout_fallback=False)
    result = solver.solve(free.xs, free.us, max_iter=500)
    restored = solver.restored
    assert restored.status == "crawling", restored.status
    smallest = solver._restorer.inner.alphas[-1]
    assert restored.history["step"][-2:] == [smallest] * 2, restored.history["step"][-2:]
    assert 0 < result.restoration_iterations <= 50, result.restoration_iterations
    assert result.converged and result.violation <= 1e-8 and result.gaps <= 1e-9, result
    assert abs(result.cost - alone.cost) <= 1e-8 * alone.cost, (result.cost, alone.cost)


def test_crawl_limit_is_validated():
    problem = constrained.untuned3("swingup", 10)
    for solver in (gp.solvers.ALDDP(problem), gp.solvers.ProxDDP(problem)):
        for bad in (0, 1.5, "2", True):
            with pytest.raises(ValueError, match="crawl_limit"):
                solver.solve(max_iter=5, crawl_limit=bad)
        for bad in (None, np.nan, -1.0, "0"):
            with pytest.raises(ValueError, match="crawl_above"):
                solver.solve(max_iter=5, crawl_limit=2, crawl_above=bad)
        for bad in (2.5, -1, True):
            with pytest.raises(ValueError, match="max_iter"):
                solver.solve(max_iter=bad)


def test_full_steps_of_the_al_solvers_are_no_crawl():
    """ALDDP / ProxDDP with ``alphas`` [1] (no line search) and ``crawl_limit`` 2: full
    steps at an infeasible iterate are no crawl; obstacle (30 knots) from the guess runs as
    without the limit (review rev26: the old rule ended "crawling" after 2 full steps)."""
    problem = constrained.untuned3("obstacle", 30)
    for kind in (gp.solvers.ALDDP, gp.solvers.ProxDDP):
        free = kind(problem, alphas=[1.0]).solve(max_iter=20)
        limited = kind(problem, alphas=[1.0]).solve(max_iter=20, crawl_limit=2)
        assert limited.status != "crawling" and limited.status == free.status, \
            (kind.__name__, limited.status, free.status)
        assert limited.iterations == free.iterations and limited.cost == free.cost


def test_no_restoration_once_the_time_is_up(monkeypatch):
    """A restoration triggered after the solve's time limit has passed does not run (the
    old code ran one AL iteration and a calc_diff past the limit; review rev26): two
    contradicting planes, the clock moved past the limit at the second certificate."""
    problem = _two_planes()
    solver = gp.solvers.CSQP(problem)
    real = csqp_module.CSQP._certified_infeasible
    clock = {"shift": 0.0, "certified": 0}

    def certified_then_late(self, *args, **kwargs):
        # the second certificate, the one that starts the restoration, comes late
        result = real(self, *args, **kwargs)
        clock["certified"] += bool(result)
        if clock["certified"] >= 2:
            clock["shift"] = 1e3
        return result

    monkeypatch.setattr(csqp_module.CSQP, "_certified_infeasible", certified_then_late)
    perf_counter = csqp_module.time.perf_counter
    monkeypatch.setattr(csqp_module.time, "perf_counter",
                        lambda: perf_counter() + clock["shift"])
    result = solver.solve(max_iter=100, time_limit=100.0)
    assert solver.restored is None and result.restoration_iterations == 0, solver.restored
    assert result.status == "infeasible", result.status


def test_a_restoration_option_set_after_construction_is_checked():
    solver = gp.solvers.CSQP(constrained.untuned3("swingup", 10))
    solver.restoration = "bogus"
    with pytest.raises(ValueError, match="restoration"):
        solver.solve(max_iter=3)


def test_a_certified_restoration_crawling_before_any_progress_ends():
    """ur5 held at rest by torques too weak against gravity (from the guess): the QP is
    certified infeasible at the first iteration; ProxDDP from there takes its smallest
    step at once, twice, at the iterate's infeasibility (gaps 0.33): it ends "crawling"
    after 2 iterations (the old rule ran it to max_iter, 99) and the solve "infeasible"."""
    problem = _weak_hold()
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=100)
    assert result.status == "infeasible", result
    assert solver.restored.status == "crawling", solver.restored.status
    # a few iterations, where the old rule ran it to max_iter (99)
    assert 0 < result.restoration_iterations <= 10, result.restoration_iterations
    assert result.iterations == 1 + result.restoration_iterations, result


class _HurriedProxDDP(gp.solvers.ProxDDP):
    """A restoration whose time is up at once (its time limit 0 whatever the solve's)."""

    def solve(self, *args, time_limit=None, **options):
        return super().solve(*args, time_limit=0.0, **options)


def test_a_time_limit_in_the_restoration_keeps_the_certified_status(monkeypatch):
    """Two contradicting planes: the QP is certified infeasible after 2 iterations; a
    restoration cut short by its time limit hands nothing back, and the solve ends
    "infeasible", at the iterate of the SQP alone (the old code reported "time_limit")."""
    problem = _two_planes()
    monkeypatch.setitem(csqp_module.RESTORATIONS, "proxddp", _HurriedProxDDP)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=100)
    alone = gp.solvers.CSQP(problem, restoration=None).solve(max_iter=100)
    assert solver.restored is not None and solver.restored.status == "time_limit", \
        solver.restored
    assert result.status == alone.status == "infeasible", (result.status, alone.status)
    assert np.array_equal(result.xs, alone.xs) and np.array_equal(result.us, alone.us)


def test_max_iter_after_a_hand_back_reports_max_iter():
    """obstacle (30 knots) without a line search below 1/2: the first line search refuses
    every trial, the restoration hands back a less infeasible point and the iterations
    run out: the status is "max_iter", not the refused line search's (the old code
    reported "no step accepted by the line search" with the violation still falling)."""
    problem = constrained.untuned3("obstacle", 30)
    alone = gp.solvers.CSQP(problem, alphas=[1.0, 0.5], restoration=None,
                            filter_fallback=False, rollout_fallback=False).solve(max_iter=3)
    assert alone.status == "no step accepted by the line search", alone.status
    # the refused line search starts the restoration where the merit judges the linear
    # trials alone (the filter fallback takes full steps here instead: glob29; the
    # rollout fallback a step of 1/2: gl33)
    solver = gp.solvers.CSQP(problem, alphas=[1.0, 0.5], filter_fallback=False,
                             rollout_fallback=False)
    result = solver.solve(max_iter=3)
    assert solver.restored is not None and solver.restored.iterations > 0
    assert result.status == "max_iter" and not result.converged, result.status
    assert result.violation < 0.5 * alone.violation, (result.violation, alone.violation)


def test_full_steps_without_a_line_search_are_no_crawl():
    """``alphas`` [1] (no line search): two full steps at an infeasible iterate are the
    SQP's ordinary progress, not a crawl: untuned3 "start_bound" (30 knots) converges as
    without the restoration, to the bit (the old trigger started the restoration after 2
    iterations and ended at another point)."""
    problem = constrained.untuned3("start_bound", 30)
    alone = gp.solvers.CSQP(problem, alphas=[1.0], restoration=None).solve(max_iter=100)
    assert alone.converged, alone.status
    solver = gp.solvers.CSQP(problem, alphas=[1.0])
    result = solver.solve(max_iter=100)
    assert solver.restored is None and result.restoration_iterations == 0
    assert result.iterations == alone.iterations and result.cost == alone.cost
    assert np.array_equal(result.xs, alone.xs) and np.array_equal(result.us, alone.us)


def test_a_time_limit_after_a_hand_back_reports_the_returned_point(monkeypatch):
    """obstacle (30 knots), a restoration whose time is up after its first iteration: its
    less infeasible point goes back (no certificate: a crawl) and the solve ends
    "time_limit" there, with that point's stationarity (the old code returned the crawling
    iterate's), as a solve from the returned point and multipliers reads it."""
    problem = constrained.untuned3("obstacle", 30)
    monkeypatch.setitem(csqp_module.RESTORATIONS, "proxddp", _HurriedProxDDP)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=100)
    assert solver.restored.status == "time_limit", solver.restored.status
    assert result.status == "time_limit", result.status
    crawling = gp.solvers.CSQP(problem, restoration=None).solve(max_iter=2)
    assert result.violation < crawling.violation, (result.violation, crawling.violation)
    again = gp.solvers.CSQP(problem).solve(result.xs, result.us, result.multipliers,
                                           max_iter=0)
    assert np.isfinite(result.stop) and abs(result.stop - again.stop) <= \
        1e-9 * max(1.0, again.stop), (result.stop, again.stop, crawling.stop)


class _NonFiniteProxDDP(gp.solvers.ProxDDP):
    """A restoration of one iteration whose multipliers come back NaN."""

    def solve(self, *args, max_iter=100, **options):
        result = super().solve(*args, max_iter=min(max_iter, 1), **options)
        result.multipliers = [np.full_like(y, np.nan) for y in result.multipliers]
        return result


def test_non_finite_restoration_multipliers_are_a_failed_restoration(monkeypatch, capsys):
    """obstacle (30 knots): a restoration whose multipliers are NaN hands nothing back and
    the SQP goes on crawling from its own iterate, as without the restoration (the old
    code raised ValueError out of solve); verbose prints the restoration's line."""
    monkeypatch.setitem(csqp_module.RESTORATIONS, "proxddp", _NonFiniteProxDDP)
    problem = constrained.untuned3("obstacle", 30)
    alone = gp.solvers.CSQP(problem, restoration=None).solve(max_iter=20)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=21, verbose=True)
    assert solver.restored is not None and result.restoration_iterations == 1
    assert "restoration (proxddp)" in capsys.readouterr().out
    assert result.status == alone.status and result.iterations == 21, result
    assert np.array_equal(result.xs, alone.xs) and np.array_equal(result.us, alone.us)


def test_the_restoration_reads_the_options_at_each_run():
    """th_constraint changed between two solves: the second restoration uses the new value
    (the old code kept the one of the first restoration's solver); a changed
    ``restoration`` option builds the other solver."""
    problem = constrained.untuned3("obstacle", 30)
    solver = gp.solvers.CSQP(problem)
    solver.solve(max_iter=30)
    first = solver._restorer
    assert first.th_constraint == solver.th_constraint
    solver.th_constraint = 1e-6
    result = solver.solve(max_iter=30)
    assert solver._restorer is first and first.th_constraint == 1e-6
    assert result.converged and result.violation <= 1e-6, result
    solver.restoration = "alddp"
    solver.solve(max_iter=30)
    assert type(solver._restorer) is gp.solvers.ALDDP, type(solver._restorer)


def test_a_converging_run_is_bitwise_the_sqp_alone():
    """untuned3 "start_bound" (30 knots) converges without any trigger: the default solver
    runs no restoration and returns the iterates of restoration=None to the bit."""
    problem = constrained.untuned3("start_bound", 30)
    alone = gp.solvers.CSQP(problem, restoration=None).solve(max_iter=100)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=100)
    assert alone.converged and result.converged, (alone.status, result.status)
    assert solver.restored is None and result.restoration_iterations == 0
    assert (result.iterations, result.status, repr(result.cost)) == \
        (alone.iterations, alone.status, repr(alone.cost))
    assert np.array_equal(result.xs, alone.xs) and np.array_equal(result.us, alone.us)
    assert all(np.array_equal(a, b) for a, b in zip(result.multipliers, alone.multipliers))


def test_a_solve_ending_after_a_hand_back_returns_the_restorations_policy():
    """obstacle (30 knots), max_iter 12: the restoration hands back its point with no
    iteration left, so no QP is solved there; the result's feedback gains are the
    restoration's (its last backward pass), not the last QP's at the point before it
    (MPC's use_feedback applies them; review rev26)."""
    problem = constrained.untuned3("obstacle", 30)
    solver = gp.solvers.CSQP(problem)
    result = solver.solve(max_iter=12)
    assert result.status == "max_iter" and result.restoration_iterations > 0, result
    restored = solver.restored
    assert np.array_equal(result.xs, restored.xs) and np.array_equal(result.us, restored.us)
    assert np.array_equal(result.K, restored.K) and np.array_equal(result.k, restored.k)
    # the last QP's gains, at the point before the restoration, are another policy
    assert not np.array_equal(result.K, solver.K)
