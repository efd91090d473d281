"""calc_diff started during the line search's first trial on two threads (the solvers'
``speculative``, :meth:`geppetto.ocp.ShootingProblem.speculate`) where the trial is not
taken: a full step refused (a shorter one accepted: the speculation is dropped), and no
step accepted at all (the next backward pass runs on the iterate's derivatives:
calc_diff evaluates the iterate again, the dropped speculation having written some
knots at the trial).  The solve stays one thread's, to the bit."""
import crocoddyl_problems as cp
import numpy as np
import pytest

import geppetto as gp
from geppetto.ocp import problem as ocp_problem


@pytest.fixture(scope="module")
def trot():
    """A short solo12 trot (12 knots: contact, impulse and swing phases) from a seeded
    random point far from the rollout (most full steps are refused there)."""
    problem = cp.build(cp.trot_task(step_knots=4, support_knots=1))
    xs, us = cp.random_point(problem, 1)
    xs[0] = problem.x0
    return problem, xs, us


def _solve(problem, xs, us, nthreads, alphas, max_iter):
    problem.nthreads = nthreads
    problem.speculations[:] = 0, 0
    try:
        solver = gp.solvers.FDDP(problem, th_stop=cp.TH_STOP, alphas=alphas)
        solver.speculative = True           # at every line search (not only where it pays)
        result = solver.solve(xs.copy(), us.copy(), max_iter=max_iter)
    finally:
        problem.nthreads = 1
    return result, list(problem.speculations), solver.speculation_recalcs


def _assert_one_thread(one, two):
    assert two.iterations == one.iterations and two.status == one.status
    for key in ("cost", "step", "preg"):
        np.testing.assert_array_equal(two.history[key], one.history[key], err_msg=key)
    for array in ("xs", "us", "K", "k"):
        np.testing.assert_array_equal(getattr(two, array), getattr(one, array),
                                      err_msg=array)


@pytest.mark.parametrize("linger", [False, True])
def test_refused_full_steps(trot, monkeypatch, linger):
    """Full steps refused (and shorter ones taken) in some iterations: the speculations
    at those trials are dropped, the others taken up; one thread's solve to the bit.
    ``linger``: worker 0 spins for its next task between speculations (as under a
    real-time policy) and takes it from the spin."""
    problem, xs, us = trot
    monkeypatch.setattr(ocp_problem, "_real_time", lambda: linger)
    problem.parallel_plan(2)
    problem._regions[2].linger(0, False)
    problem._regions[2]._workers[0].taken_lingering = 0
    one, _, _ = _solve(problem, xs, us, 1, None, 10)
    two, (started, taken), recalcs = _solve(problem, xs, us, 2, None, 10)
    steps = np.array(one.history["step"])
    assert np.any(steps < 1.0) and np.any(steps == 1.0)
    assert started == one.iterations - 1 and 0 < taken < started   # the last starts none
    assert recalcs == 0                 # a step was accepted in every iteration
    _assert_one_thread(one, two)
    worker = problem._regions[2]._workers[0]
    assert worker.lingers == linger and (worker.taken_lingering > 0 or not linger)


def test_no_step_accepted(trot):
    """Only full steps tried, and refused: no step is accepted, and the next backward
    pass runs on the iterate's derivatives, evaluated again by calc_diff after each
    dropped speculation; one thread's solve to the bit."""
    problem, xs, us = trot
    one, _, _ = _solve(problem, xs, us, 1, [1.0], 6)
    two, (started, taken), recalcs = _solve(problem, xs, us, 2, [1.0], 6)
    assert np.all(np.isnan(one.history["dV"]))          # no step accepted
    _assert_one_thread(one, two)
    assert started == 5 and taken == 0 and recalcs == 5
