"""calc_diff started during the line search's first trial on two threads (the solvers'
``speculative``, :meth:`geppetto.ocp.ShootingProblem._speculate`) where the trial is not
taken: a full step refused (a shorter one accepted: the speculation is dropped), and no
step accepted at all (the next backward pass runs on the iterate's derivatives:
calc_diff evaluates the iterate again, the dropped speculation having written some
knots at the trial).  The solve stays one thread's, to the bit."""
import threading
import time

import crocoddyl_problems as cp
import numpy as np
import pytest

import geppetto as gp
from geppetto.ocp import horizon as ocp_horizon
from geppetto.ocp import parallel as ocp_parallel
from geppetto.ocp import problem as ocp_problem


@pytest.fixture(scope="module")
def trot():
    """A short solo12 trot (12 knots: contact, impulse and swing phases) from a seeded
    random point far from the rollout (most full steps are refused there)."""
    problem = cp.build(cp.trot_task(step_knots=4, support_knots=1))
    xs, us = cp.random_point(problem, 1)
    xs[0] = problem.x0
    return problem, xs, us


def _solve(problem, xs, us, nthreads, alphas, max_iter, callbacks=(), **options):
    problem.nthreads = nthreads
    problem.speculations[:] = 0, 0
    try:
        solver = gp.solvers.FDDP(problem, th_stop=cp.TH_STOP, alphas=alphas, **options)
        solver.speculative = True           # at every line search (not only where it pays)
        result = solver.solve(xs.copy(), us.copy(), max_iter=max_iter, callbacks=callbacks)
    finally:
        problem.nthreads = 1
    return result, list(problem.speculations), solver.speculation_recalcs


def _assert_one_thread(one, two):
    assert two.iterations == one.iterations and two.status == one.status
    assert two.gaps == one.gaps and two.cost == one.cost
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
    if not linger:          # nor off a real-time policy with the workers on their cores
        monkeypatch.setattr(ocp_problem, "LINGER_MAX_OFF_CORE", -1.0)
    # spins counted only while the worker runs: ~12 ms of them outlast a loaded
    # machine's gap between two speculations (~0.5 ms by default)
    monkeypatch.setattr(ocp_parallel, "LINGER_SPINS", 50_000_000)
    problem.parallel_plan(2)
    problem._regions[2].set_lingering(0, False)
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


def test_no_step_accepted_then_maximum_regularization(trot):
    """The loop ends right after a line search whose speculation was dropped (no step
    taken, the regularization at its maximum): the problem's predicted states are the
    iterate's again (calc_diff at the iterate), so the result's gaps are one thread's
    (the refused trial's otherwise, on the knots worker 0 evaluated)."""
    problem, xs, us = trot
    options = dict(reg_init=1e-9, reg_min=1e-9, reg_max=1e-9)
    one, _, _ = _solve(problem, xs, us, 1, [1.0], 6, **options)
    two, (started, taken), recalcs = _solve(problem, xs, us, 2, [1.0], 6, **options)
    assert one.status == "no step accepted at maximum regularization"
    assert one.iterations == 1 and started == 1 and taken == 0 and recalcs == 1
    _assert_one_thread(one, two)


def test_no_speculation_with_callbacks(trot):
    """Callbacks may read or write the problem's arrays between iterations, while worker
    0 would write them: no speculation then."""
    problem, xs, us = trot
    seen = []

    def callback(solver, iteration, record):
        seen.append(solver.problem.costs.sum())

    one, _, _ = _solve(problem, xs, us, 1, None, 4, callbacks=[callback])
    two, (started, taken), _ = _solve(problem, xs, us, 2, None, 4, callbacks=[callback])
    assert started == 0 and taken == 0
    _assert_one_thread(one, two)
    assert seen[:4] == seen[4:]


def test_thread_count_change_drops_speculation(trot):
    """A running speculation is dropped when the problem's thread count changes (worker
    0 stopped and waited for on its own region), and calc_diff on either count is one
    thread's afterwards."""
    problem, xs, us = trot
    xs, us = xs.copy(), us.copy()
    names = ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu", "costs", "xnext")
    try:
        problem.calc_diff(xs, us, validate=False)
        expected = {n: getattr(problem, n).copy() for n in names}
        problem.nthreads = 2
        problem.calc_diff(xs, us, validate=False)     # builds the plan and its programs
        region = problem._regions[2]
        assert problem._speculate(xs, us)
        problem.nthreads = 1
        assert not problem._speculating(xs, us) and not region._started[0]
        problem.calc_diff(xs, us, validate=False)
        problem.nthreads = 2
        assert problem._speculate(xs, us)
        problem.trial_signal[0] = problem.N + 1      # the trial done (TRIAL_PROGRESS)
        problem.calc_diff(xs, us, validate=False)    # takes it up
        assert not region._started[0]
        for n in names:
            np.testing.assert_array_equal(getattr(problem, n), expected[n], err_msg=n)
    finally:
        problem._discard_speculation()
        problem.nthreads = 1


def test_last_chunk_with_the_terminal_knot_alone(trot):
    """A plan whose last chunk holds the terminal knot alone (the chunk boundaries at
    [0, N, N + 1], where the rebalance may put them): the terminal knot's gap needs knot
    N - 1's prediction, which worker 0 evaluates, so the backward pass waits for it.  The
    predicted states left stale from another point (zero here): the solve from a fresh
    point is one thread's, to the bit (on the old code it read the stale prediction and
    ended at the maximum regularization)."""
    problem, xs, us = trot
    N = problem.N
    problem.parallel_plan(2)
    try:
        problem.xnext[:] = 0.0
        one, _, _ = _solve(problem, xs, us, 1, None, 4)
        problem._build_plan(2, [0, N, N + 1])
        problem._parallel_calls[2] = 257             # no rebalance: the plan kept
        problem.xnext[:] = 0.0
        two, _, _ = _solve(problem, xs, us, 2, None, 4)
        assert problem._bounds[2] == [0, N, N + 1] and problem._starts[2][-1] == N
        _assert_one_thread(one, two)
    finally:
        problem._build_plan(2, [round(i * (N + 1) / 2) for i in range(3)])
        problem._parallel_calls[2] = 0


def test_blocks_follow_the_rollout_and_costs_the_trial_costs(trot):
    """The one-call trial's rollouts publish each knot (``trial_signal[TRIAL_ROLLED]``,
    N after a trial); a chunk following a trial runs a part's dynamics block once the
    rollout has passed its knots, its costs only once the trial's costs have: with the
    rollout published past two parts and no costs, worker 0's program runs those two
    blocks (their rows of the problem's arrays untouched: the costs and the integrator
    step are the program's) and gives up its core; taken (costs published, ACCEPTED), it
    ends from there with one thread's calc_diff of its rows, to the bit.  (Before, the
    rollout published nothing and the blocks waited for the trial's costs: no part ran.)"""
    problem, xs, us = trot
    arrays = ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu", "costs", "xnext")
    problem.nthreads = 1
    solver = gp.solvers.FDDP(problem, th_stop=cp.TH_STOP)
    result = solver.solve(xs.copy(), us.copy(), max_iter=1)     # its last trial taken
    trial = problem.trial_signal
    assert trial[ocp_parallel.TRIAL_ROLLED] == problem.N
    point = (result.xs, result.us)      # the trial's solves are kept for this point
    problem.calc_diff(*point, validate=False)
    expected = {name: getattr(problem, name).copy() for name in arrays}
    try:
        problem.nthreads = 2
        problem.parallel_plan(2)
        program, signal = problem._programs[2][0], problem._signals[2]
        n, top = program.order.shape[0], int(problem._starts[2][1])
        assert n >= 3
        problem._reset_signal(2, problem._starts[2])
        for name in arrays:
            getattr(problem, name)[:] = 0.0
        trial[:] = 0
        trial[ocp_parallel.TRIAL_ROLLED] = program.order[1, 2]
        waited = program.follow(*point, signal, 0, trial, 0, 1000)
        assert waited == ocp_horizon.FOLLOW_WAITED - 2 * (n + 1)     # two blocks, no costs
        for name in arrays:
            assert not getattr(problem, name)[:top].any(), name
        trial[ocp_parallel.TRIAL_PROGRESS] = problem.N
        trial[ocp_parallel.TRIAL_DECISION] = ocp_parallel.ACCEPTED
        assert program.follow(*point, signal, 0, trial, ocp_horizon.FOLLOW_WAITED - waited,
                              1000) == -1
        assert signal[0] == 0
        for name in arrays:
            np.testing.assert_array_equal(getattr(problem, name)[:top], expected[name][:top],
                                          err_msg=name)
    finally:
        trial[:] = 0
        problem.nthreads = 1


def test_entry_points_drop_speculation(trot):
    """calc, calc_costs and rollout write or read what worker 0 does: they drop a
    running speculation first (worker 0 stopped and waited for); ``speculative`` other
    than True, False and "auto" is refused."""
    problem, xs, us = trot
    xs, us = xs.copy(), us.copy()
    problem.nthreads = 2
    try:
        problem.calc_diff(xs, us, validate=False)     # builds the plan and its programs
        region = problem._regions[2]
        for call in (lambda: problem.calc(xs, us), lambda: problem.calc_costs(xs, us),
                     lambda: problem.rollout(np.zeros_like(us))):
            assert problem._speculate(xs, us) and problem._speculating(xs, us)
            call()
            assert not problem._speculating(xs, us) and not region._started[0]
    finally:
        problem._discard_speculation()
        problem.nthreads = 1
    solver = gp.solvers.FDDP(problem)
    solver.speculative = 1
    with pytest.raises(ValueError, match="speculative"):
        solver.solve(xs, us, max_iter=1)


class _Interrupted:
    """A worker's lock whose next ``interrupts`` acquires raise KeyboardInterrupt (a
    Ctrl-C landing in the wait), then acquire it."""

    def __init__(self, lock, interrupts):
        self.lock, self.interrupts = lock, interrupts

    def acquire(self):
        if self.interrupts:
            self.interrupts -= 1
            raise KeyboardInterrupt
        return self.lock.acquire()

    def release(self):
        self.lock.release()


def _region_with_interrupted_waits(interrupts):
    """(region, event, list): a two-thread region whose worker runs a task that ends when
    the event is set, its lock's next ``interrupts`` acquires interrupted; the list for
    the tasks that ran."""
    region = ocp_parallel.ParallelRegion(2)
    first_may_end = threading.Event()
    region.start(0, first_may_end.wait)
    worker = region._workers[0]
    worker._done = _Interrupted(worker._done, interrupts)
    return region, first_may_end, []


def test_interrupted_wait_is_owed():
    """A wait for a worker's task interrupted (KeyboardInterrupt) leaves that task's end
    owed: the worker's next task starts after it, and the next wait is for the next
    task (not the interrupted one's end, taken for it)."""
    region, first_may_end, ran = _region_with_interrupted_waits(1)
    with pytest.raises(KeyboardInterrupt):
        region.wait(0)
    first_may_end.set()
    time.sleep(0.05)                    # the first task's end released
    region([lambda: None, lambda: (time.sleep(0.05), ran.append(1))])
    assert ran == [1]


def test_second_interrupt_in_the_owed_start_does_not_hang():
    """A wait interrupted, then the next region's start interrupted while it takes the
    owed end (two Ctrl-C): the region after them consumes the old end in its wait and
    runs its task (rev18: the owed flag stayed set and that region's start waited
    forever for an end nothing would release)."""
    region, first_may_end, ran = _region_with_interrupted_waits(2)
    with pytest.raises(KeyboardInterrupt):
        region.wait(0)
    with pytest.raises(KeyboardInterrupt):
        region([lambda: None, lambda: ran.append("never posted")])
    first_may_end.set()
    caller = threading.Thread(
        target=lambda: region([lambda: None, lambda: ran.append("third")]), daemon=True)
    caller.start()
    caller.join(5.0)
    assert not caller.is_alive(), "the third region waits for an end nothing releases"
    assert ran == ["third"]



def test_speculation_rule_follows_the_first_trials_taken(trot, monkeypatch):
    """``_speculation_pays``: speculate while the first trial was taken in at least
    SPECULATE_MIN_TAKEN of the recent line searches (a moving average, weight
    SPECULATION_SMOOTHING; 1 before any), the workers on their cores: refused first
    trials (talos_arm_se3's 97 %) stop it, taken ones start it again."""
    problem, _, _ = trot
    problem.parallel_plan(2)
    monkeypatch.setattr(ocp_parallel.ParallelRegion, "off_core", lambda self: 0.0)
    monkeypatch.setattr(problem, "nthreads", 2)
    monkeypatch.setattr(problem, "_taken", 1.0)
    assert ocp_problem.SPECULATE_MIN_TAKEN == 0.5 and ocp_problem.SPECULATION_SMOOTHING == 0.25
    decisions = []
    for taken in (False, False, True, False, False, True, True, True):
        problem._first_trial_taken(taken)
        decisions.append(problem._speculation_pays())
    # 0.75, 0.5625, 0.672, 0.504, 0.378, 0.533, 0.650, 0.738 taken
    assert decisions == [True, True, True, True, False, True, True, True]
    np.testing.assert_allclose(problem._taken, 0.7375640869140625, rtol=1e-12)
    monkeypatch.setattr(ocp_parallel.ParallelRegion, "off_core",
                        lambda self: 2 * ocp_problem.SPECULATE_MAX_OFF_CORE)
    assert not problem._speculation_pays()


def test_auto_records_the_first_trials(trot, monkeypatch):
    """``speculative`` "auto" on two threads: each line search that could speculate
    records whether its first trial was taken, and speculates while most were; the
    solve stays one thread's to the bit.  From the random point many full steps are
    refused: speculation stops and starts again."""
    problem, xs, us = trot
    monkeypatch.setattr(ocp_parallel.ParallelRegion, "off_core", lambda self: 0.0)
    problem.parallel_plan(2)
    one = gp.solvers.FDDP(problem, th_stop=cp.TH_STOP).solve(xs.copy(), us.copy(),
                                                              max_iter=10)
    steps = np.array(one.history["step"])
    records = []
    original = ocp_problem.ShootingProblem._first_trial_taken
    monkeypatch.setattr(ocp_problem.ShootingProblem, "_first_trial_taken",
                        lambda self, taken: (records.append(taken), original(self, taken)))
    problem.nthreads = 2
    problem.speculations[:] = 0, 0
    problem._taken = 0.5        # at the threshold: speculate at the first line search
    try:
        solver = gp.solvers.FDDP(problem, th_stop=cp.TH_STOP)
        assert solver.speculative == "auto"
        two = solver.solve(xs.copy(), us.copy(), max_iter=10)
    finally:
        problem.nthreads = 1
    _assert_one_thread(one, two)
    # every iteration but the last (no iteration follows it) could speculate
    assert records == list(steps[:-1] == 1.0)
    taken, expected = 0.5, 0
    for record in records:
        expected += taken >= 0.5
        taken += 0.25 * (record - taken)
    assert problem.speculations[0] == expected and 0 < expected < len(records)


@pytest.mark.parametrize("off_core", [0.0, 0.5])
def test_lingers_off_a_real_time_policy_where_the_workers_keep_their_cores(trot, monkeypatch,
                                                                          off_core):
    """Off a real-time policy worker 0 lingers after a calc_diff that took up a
    speculation where the workers spent at most LINGER_MAX_OFF_CORE of their tasks' time
    off their core (as on an idle machine), and not where another process takes their
    cores (the share 0.5 here); under a real-time policy it lingers whatever the share.
    The solve is one thread's to the bit.  (On thr32b's code it lingered only under a
    real-time policy.)"""
    problem, xs, us = trot
    problem.parallel_plan(2)
    region = problem._regions[2]
    monkeypatch.setattr(ocp_problem, "_real_time", lambda: False)
    monkeypatch.setattr(type(region), "off_core", lambda self: off_core)
    settings = []
    set_lingering = type(region).set_lingering
    monkeypatch.setattr(type(region), "set_lingering",
                        lambda self, i, lingers: (settings.append(lingers),
                                                  set_lingering(self, i, lingers))[1])
    one, _, _ = _solve(problem, xs, us, 1, None, 10)
    two, (started, taken), _ = _solve(problem, xs, us, 2, None, 10)
    _assert_one_thread(one, two)
    assert taken > 0 and sum(settings) == (taken if off_core <= ocp_problem.LINGER_MAX_OFF_CORE
                                           else 0)
    settings.clear()
    monkeypatch.setattr(ocp_problem, "_real_time", lambda: True)
    _solve(problem, xs, us, 2, None, 10)
    assert sum(settings) > 0
    region.set_lingering(0, False)
