"""The shooting problem as a whole: the gradient of the total cost assembled from
``calc_diff`` against finite differences of ``calc`` (two phases with
different stage models, every residual kind, per-knot references), rollouts
against repeated integrator steps, results independent of the number of
threads, quasi-static controls, and clear errors for bad input.

Small horizons (N = 5 or 8 knots) keep the finite differences cheap: one
``calc`` per perturbed coordinate of every knot.
"""
import numpy as np
import pytest

from geppetto import ocp
from geppetto.ocp.parallel import ParallelRegion, Progress, wait_below
from geppetto.ocp.problem import (PIECES, REBALANCE_DEFERRAL, _balanced_bounds, _chunk_starts,
                                   _pieces_next_to_last)
from ocp_cases import ROBOTS, free_dynamics, frame_placements, rng_for, robot, rotations, states

RTOL_FD = 1e-6


def _two_phase_problem(name, N1=2, N2=3, schemes=("euler", "rk4")):
    """Phase 1: the plain robot, phase 2: ``free_dynamics(name)`` (armature, damping or a
    floating base), different integrators, steps and costs; references per knot."""
    rob = robot(name)
    model = rob.model
    frame = ROBOTS[name]
    rng = rng_for(name, 20)
    second = free_dynamics(name)
    actuation = second.actuation
    first = ocp.FreeDynamics(model, actuation)
    state, nu = second.state, second.nu
    N = N1 + N2
    xs = states(model, N + 1, seed=21, velocity=0.5)
    R, p = frame_placements(model, xs, frame)
    x_ref = np.concatenate([rob.q0, np.zeros(model.nv)])
    lower = np.r_[-np.ones(model.nv), -0.3 * np.ones(model.nv)]

    reach = ocp.Cost(ocp.FrameTranslationResidual(model, frame, p[:N1] + 0.1), weight=10.0)
    x_reg = ocp.Cost(ocp.StateResidual(state, x_ref), weight=1e-2)
    u_reg = ocp.Cost(ocp.ControlResidual(nu, rng.standard_normal((N1, nu))),
                     ocp.WeightedQuadratic(rng.uniform(0.5, 1.5, nu)), weight=1e-3)
    speed = ocp.Cost(ocp.FrameVelocityResidual(model, frame, rng.standard_normal((N1, 6))),
                     ocp.Smooth1Norm(1e-2))
    phase1 = ocp.StageModel(first, [reach, x_reg, u_reg, speed], dt=0.01, integrator=schemes[0])

    place = ocp.Cost(ocp.FramePlacementResidual(model, frame, R[N1:N] @ rotations(rng, N2),
                                                p[N1:N] - 0.05), weight=5.0)
    turn = ocp.Cost(ocp.FrameRotationResidual(model, frame, R[N1:N] @ rotations(rng, N2)),
                    ocp.Smooth2Norm(1e-2))
    com = ocp.Cost(ocp.CenterOfMassResidual(model, rng.standard_normal((N2, 3))),
                   ocp.QuadraticBarrier(-0.2, 0.2))
    limits = ocp.Cost(ocp.StateResidual(state, xs[N1:N]), ocp.QuadraticBarrier(lower, -lower))
    u_reg2 = ocp.Cost(ocp.ControlResidual(nu), weight=1e-4)
    terms = [place, turn, com, limits, u_reg2]
    if nu == model.nv:          # controls as accelerations: an inverse-dynamics cost
        terms.append(ocp.Cost(ocp.JointTorqueResidual(model, rng.standard_normal(model.nv)),
                              weight=1e-4))
    phase2 = ocp.StageModel(second, terms, dt=0.02, integrator=schemes[1])

    terminal = ocp.TerminalModel(state, [
        ocp.Cost(ocp.FramePlacementResidual(model, frame, R[N] @ rotations(rng, 1)[0], p[N]),
                 weight=100.0),
        ocp.Cost(ocp.FrameVelocityResidual(model, frame, None, "LOCAL_WORLD_ALIGNED")),
        ocp.Cost(ocp.CenterOfMassResidual(model, p[N])),
        ocp.Cost(ocp.StateResidual(state, x_ref), ocp.QuadraticBarrier(lower, -lower))])
    problem = ocp.ShootingProblem(x_ref, [phase1] * N1 + [phase2] * N2, terminal)
    us = 3.0 * rng.standard_normal((N, nu))
    return problem, xs, us


@pytest.mark.parametrize("name, schemes, knots", [
    ("ur5", ("explicit_euler", "rk4"), None),
    ("panda", ("euler", "rk2"), None),
    ("ur5", ("rk3", "euler"), None),
    ("talos", ("explicit_euler", "euler"), (0, 3, 5)),
])
def test_gradient_of_the_total_cost(name, schemes, knots):
    problem, xs, us = _two_phase_problem(name, schemes=schemes)
    assert len(problem.phases) == 2
    errors = ocp.check_problem_gradient(problem, xs, us, knots=knots)
    assert max(errors) < RTOL_FD, errors
    # the total is the sum of the stage costs
    total = problem.calc(xs, us)
    assert total == pytest.approx(problem.costs.sum(), rel=1e-14)
    assert problem.calc_diff(xs, us) == pytest.approx(total, rel=1e-14)


@pytest.mark.parametrize("scheme", ocp.INTEGRATORS)
@pytest.mark.parametrize("name", ["ur5", "talos"])
def test_rollout_equals_repeated_integrator_steps(name, scheme):
    problem, _, us = _two_phase_problem(name, schemes=(scheme, "rk4"))
    xs = problem.rollout(us)
    assert xs.shape == (problem.N + 1, problem.nx)
    np.testing.assert_array_equal(xs[0], problem.x0)
    for k, model in enumerate(problem.running_models):
        step = model.integrator.calc(model.integrator.create_data(1), xs[k:k + 1], us[k:k + 1])
        np.testing.assert_allclose(xs[k + 1], step[0], rtol=0, atol=1e-12,
                                   err_msg=f"knot {k}")
    # calc evaluates the phase on the SIMD lanes' ABA, the rollout on the one-state
    # ABA: the same dynamics to round-off of the states' size (talos: velocities ~15)
    problem.calc(xs, us)
    assert np.abs(problem.gaps(xs)).max() < 1e-12 * max(1.0, np.abs(xs).max())


def test_rollout_is_nan_after_the_first_non_finite_state():
    """problem.rollout of a free phase (the trial kernel with zero gains) stops at the
    first non-finite state; the states after it are NaN, through the next phase."""
    problem, _, us = _two_phase_problem("ur5", N1=4, N2=3)
    xs = problem.rollout(np.full_like(us, 1e300))
    bad = ~np.isfinite(xs).all(axis=1)
    first = int(np.argmax(bad))
    assert 1 < first < problem.N and bad[first:].all() and np.isfinite(xs[:first]).all()
    assert np.isnan(xs[first + 1:]).all()


def test_rollout_from_another_initial_state():
    problem, xs, us = _two_phase_problem("panda")
    rolled = problem.rollout(us, x0=xs[0])
    np.testing.assert_array_equal(rolled[0], xs[0])
    assert not np.allclose(rolled[1], problem.rollout(us)[1])


def _panda_reaching(N1=3, N2=5):
    """Panda reaching, one FreeDynamics: N1 knots of regularization, N2 with a target;
    (problem, its target residual, xs, us)."""
    rob = robot("panda")
    model = rob.model
    dynamics = ocp.FreeDynamics(model)
    state, nu = dynamics.state, dynamics.nu
    x_ref = np.concatenate([rob.q0, np.zeros(model.nv)])
    target = ocp.FrameTranslationResidual(model, ROBOTS["panda"], np.array([0.4, 0.2, 0.5]))
    regularization = [ocp.Cost(ocp.StateResidual(state, x_ref), weight=1e-2),
                      ocp.Cost(ocp.ControlResidual(nu), weight=1e-3)]
    first = ocp.StageModel(dynamics, regularization, dt=0.01)
    second = ocp.StageModel(dynamics, [ocp.Cost(target, weight=10.0)] + regularization, dt=0.02)
    problem = ocp.ShootingProblem(x_ref, [first] * N1 + [second] * N2,
                                  ocp.TerminalModel(state, [ocp.Cost(target, weight=100.0)]))
    xs = states(model, N1 + N2 + 1, seed=21, velocity=0.5)
    us = 3.0 * rng_for("panda", 22).standard_normal((N1 + N2, nu))
    return problem, target, xs, us


def test_threads_give_the_same_arrays():
    """nthreads = 2: one parallel region per calc_diff, the knots in two chunks, the
    phases across the boundaries cut in parts with their own data, each thread running
    the serial kernels of one thread: the arrays are those of one thread, to the bit, and
    set_reference (per knot) reaches the parts."""
    problem, target, xs, us = _panda_reaching()
    names = ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu", "costs", "xnext")
    results, knots = [], None
    try:
        for threads in (1, 2, 2, 1):
            problem.nthreads = threads
            if len(results) == 2:     # a new reference, after the plan cut the phase
                knots = [[(start, stop) for _, start, stop, _ in phases]
                         + (["terminal"] if last else [])
                         for phases, last in problem.parallel_plan(2)]
                problem.set_reference(target, np.linspace(0.1, 0.5, 27).reshape(9, 3))
            problem.calc_diff(xs, us)
            results.append({n: getattr(problem, n).copy() for n in names})
    finally:
        problem.nthreads = 1
    # knots 0-3 in PIECES = 4 parts (for the backward pass that follows them down)
    assert knots == [[(0, 1), (1, 2), (2, 3), (3, 4)], [(4, 8), "terminal"]]
    assert not np.array_equal(results[1]["Lx"], results[2]["Lx"])
    for n in names:
        np.testing.assert_array_equal(results[1][n], results[0][n], err_msg=n)
        np.testing.assert_array_equal(results[2][n], results[3][n], err_msg=n)


def test_set_reference_reaches_the_parts_of_a_plan_built_after_it():
    """set_reference keeps where its residual's references live (looked up at its first
    call): a plan built later (threads) cuts the phase into parts with their own data,
    which the next call reaches too (the arrays of one thread, to
    the bit); a residual of no cost is refused at every call."""
    problem, target, xs, us = _panda_reaching()
    problem.set_reference(target, np.array([0.3, 0.1, 0.6]))      # before any plan
    values = np.linspace(0.1, 0.5, 27).reshape(9, 3)
    names = ("Lx", "Lxx", "costs")
    try:
        problem.nthreads = 2
        problem.calc_diff(xs, us)       # the plan: the target's phase cut at knot 4
        assert [[(start, stop) for _, start, stop, _ in phases]
                for phases, _ in problem.parallel_plan(2)] == [
                    [(0, 1), (1, 2), (2, 3), (3, 4)], [(4, 8)]]
        problem.set_reference(target, values)
        problem.calc_diff(xs, us)
        threads = {n: getattr(problem, n).copy() for n in names}
    finally:
        problem.nthreads = 1
    problem.calc_diff(xs, us)
    for n in names:
        np.testing.assert_array_equal(threads[n], getattr(problem, n), err_msg=n)
    # the terminal knot reads values[8]: its cost is 100 / 2 |p - values[8]|^2
    other, other_target, _, _ = _panda_reaching()
    other.set_reference(other_target, values[8])
    other.calc(xs, us)
    assert problem.costs[-1] == pytest.approx(other.costs[-1], rel=1e-12)
    unused = ocp.ControlResidual(problem.nu)
    for _ in range(2):
        with pytest.raises(ValueError, match="not used by any cost"):
            problem.set_reference(unused, np.zeros(problem.nu))


def test_gaps_of_a_flat_state_are_the_kernel_differences():
    """On a state with nq = nv the gaps are numpy's subtractions: the bits of the
    multibody gaps kernel, into a given array or a new one."""
    from geppetto.dynamics.model_ref import model_ref
    from geppetto.ocp.problem import _multibody_gaps
    problem, _, xs, us = _panda_reaching()
    problem.calc(xs, us)
    expected = np.empty((problem.N + 1, problem.ndx))
    _multibody_gaps(model_ref(problem.state.model), problem.x0, problem.xnext, xs, expected,
                    (np.empty(4), np.empty(4), np.empty(3)))
    out = np.full_like(expected, np.nan)
    assert problem.gaps(xs, out) is out
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(problem.gaps(xs), expected)
    assert np.abs(expected).max() > 0.1        # a warm start with gaps


def test_speculated_calc_diff_is_calc_diff():
    """A calc_diff started at a trial (``_speculate``: worker 0 evaluates the first chunk's
    parts as the trial publishes its progress, here all at once) and taken up by
    calc_diff at that point gives one thread's arrays to the bit; one dropped before the
    trial published anything stops, and calc_diff elsewhere is still one thread's."""
    problem, _, xs, us = _panda_reaching()
    names = ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu", "costs", "xnext")
    other = xs + 0.01
    try:
        problem.calc_diff(other, us)
        one = {n: getattr(problem, n).copy() for n in names}
        problem.calc_diff(xs, us)
        expected = {n: getattr(problem, n).copy() for n in names}
        problem.nthreads = 2
        problem.calc_diff(xs, us)                # builds the plan and its programs
        problem.speculations[:] = 0, 0
        assert problem._speculate(other, us)      # dropped: no calc_diff takes it
        assert problem._discard_speculation() and not problem._discard_speculation()
        problem.calc_diff(other, us)
        np.testing.assert_array_equal(problem.Lx, one["Lx"])
        problem.Lxx[:] = np.nan
        assert problem._speculate(xs, us)
        problem.trial_signal[0] = problem.N + 1  # the trial done (TRIAL_PROGRESS)
        problem.calc_diff(xs, us, validate=False)
        assert problem.speculations == [2, 1]
        for n in names:
            np.testing.assert_array_equal(getattr(problem, n), expected[n], err_msg=n)
    finally:
        problem._discard_speculation()
        problem.nthreads = 1


def test_threads_run_phases_at_once():
    """Phases with references per knot (placements, rotations, velocities, controls) are
    cut as the others, each part with its knots' references; on two threads the Euler
    phase and the RK4 one (its per-term path) run at once, each part on its own data:
    the arrays of one thread, to the bit."""
    problem, xs, us = _two_phase_problem("panda", N1=3, N2=5)
    names = ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu", "costs", "xnext")
    results = []
    try:
        for threads in (1, 2):
            problem.nthreads = threads
            problem.calc_diff(xs, us)
            results.append({n: getattr(problem, n).copy() for n in names})
    finally:
        problem.nthreads = 1
    knots = [[(start, stop) for _, start, stop, _ in phases]
             for phases, _ in problem.parallel_plan(2)]
    # knots 0-3 in PIECES = 4 parts, the RK4 phase cut at the chunk boundary (knot 4)
    assert knots == [[(0, 1), (1, 2), (2, 3), (3, 4)], [(4, 8)]]
    for n in names:
        np.testing.assert_array_equal(results[1][n], results[0][n], err_msg=n)


def test_parts_next_to_a_short_last_chunk_are_no_longer_than_it():
    """The chunk next to the calling thread's is cut in parts no longer than the calling
    thread's chunk where PIECES parts would be longer (the worker's head start over the
    backward pass that follows its parts down, thr32), two knots at least: knots 0-13
    below a last chunk of 3 knots in parts of at most 3 ((0, 3), (3, 7), (7, 10),
    (10, 13), (13, 14) in PIECES parts); the arrays are those of one thread, to the bit."""
    assert PIECES == 4
    assert _pieces_next_to_last(28, 3) == 10        # the talos squat's settled plan
    assert _pieces_next_to_last(17, 10) == PIECES   # the solo12 trot's
    assert _pieces_next_to_last(4, 5) == PIECES
    assert _pieces_next_to_last(30, 1) == 15        # parts of two knots, not one
    assert _pieces_next_to_last(8, 0) == PIECES
    problem, _, xs, us = _panda_reaching(N1=3, N2=13)
    names = ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu", "costs", "xnext")
    results = []
    try:
        for threads in (1, 2):
            problem.nthreads = threads
            if threads == 2:
                problem.parallel_plan(2)
                problem._build_plan(2, [0, 14, 17])
            problem.calc_diff(xs, us)
            results.append({n: getattr(problem, n).copy() for n in names})
        knots = [[(start, stop) for _, start, stop, _ in phases]
                 for phases, _ in problem.parallel_plan(2)]
    finally:
        problem.nthreads = 1
    assert knots == [[(0, 2), (2, 3), (3, 5), (5, 8), (8, 11), (11, 13), (13, 14)],
                     [(14, 16)]]
    for n in names:
        np.testing.assert_array_equal(results[1][n], results[0][n], err_msg=n)


def test_rebalance_waits_for_a_region_without_speculation():
    """A rebalance due (the 2nd, 4th ... parallel calc_diff) waits for a region that took up
    no speculation, REBALANCE_DEFERRAL calls at most (the plan is the one without
    speculation, whether the solver speculates or not)."""
    problem, _, xs, us = _panda_reaching(N1=3, N2=13)
    problem.parallel_plan(2)
    region = problem._regions[2]
    first = list(problem._bounds[2])
    # the calling thread's chunk measured 3 times the worker's: its knots move to worker 0
    region.cpu[:] = [3.0, 1.0]
    problem._parallel_calls[2] = 1
    problem._rebalance(2, speculated=True)              # the 2nd call: due, deferred
    assert problem._bounds[2] == first
    problem._rebalance(2, speculated=False)             # the 3rd: the rebalance
    moved = problem._bounds[2]
    assert moved[1] > first[1]
    region.cpu[:] = [1.0, 3.0]
    for _ in range(REBALANCE_DEFERRAL):     # the 4th due, then speculating at every call
        problem._rebalance(2, speculated=True)
        assert problem._bounds[2] == moved
    problem._rebalance(2, speculated=True)              # deferred REBALANCE_DEFERRAL calls
    assert problem._bounds[2][1] < moved[1]


def test_balanced_bounds_share_the_measured_work():
    """Chunk boundaries from each chunk's CPU time: knots 0-4 at 0.2 s each and 5-9 at
    0.6 s (4 s in all) are shared 2 s / 2 s at knot 7 (1.0 + 0.6 + 0.6 = 2.2 s, the
    nearest); three chunks of equal work keep their boundaries."""
    assert _balanced_bounds([(0, 5), (5, 10)], [1.0, 3.0]) == [0, 7, 10]
    assert _balanced_bounds([(0, 3), (3, 6), (6, 9)], [0.3, 0.3, 0.3]) == [0, 3, 6, 9]


def test_progress_reports_the_knots_ready_from_the_top():
    """Chunks of knots 0-3 and 4-7 below a last chunk from knot 8: the frontier goes down
    as the chunk next to the last reports its parts, then the one below (a part of the
    lower chunk done early does not count until the knots above it are); a failed chunk
    ends the wait."""
    progress = Progress([0, 4, 8])
    progress.done(1, 6)
    assert progress.wait_below(8) == 6
    progress.done(0, 2)
    progress.done(1, 4)
    assert progress.wait_below(6) == 2
    progress.done(0, 0)
    assert progress.wait_below(2) == 0
    failed = Progress([0, 4])
    failed.abort()
    assert failed.wait_below(4) == 4


def test_compiled_wait_reads_the_published_parts():
    """The calling thread's compiled wait on the chunk programs' progress (chunks 0-3 and
    4-7 below a last chunk from knot 8, ``signal[i]`` the first knot chunk i has done):
    the same frontier as :class:`Progress`, -1 after its rounds when it did not move
    below the knot, the knot itself once a chunk failed."""
    starts = np.array([0, 4], dtype=np.int64)
    signal = np.array([4, 8, 0], dtype=np.int64)
    assert wait_below(signal, starts, 8, 10) == -1
    signal[1] = 6
    assert wait_below(signal, starts, 8, 10) == 6
    signal[0] = 2                      # below chunk 1's frontier: not yet counted
    assert wait_below(signal, starts, 6, 10) == -1
    signal[1] = 4
    assert wait_below(signal, starts, 6, 10) == 2
    signal[0] = 0
    assert wait_below(signal, starts, 2, 10) == 0
    signal[:] = (4, 8, 1)
    assert wait_below(signal, starts, 8, 10) == 8


def test_an_empty_first_chunk_reads_as_done():
    """Three chunks of 30 knots whose one uncut phase sits in the middle chunk: the empty
    chunks start where the next one does, so once the middle chunk is done the frontier
    reaches knot 0 (an empty chunk 0 starting at N kept the waiting thread waiting)."""
    plan = [([], False), ([(None, 0, 30, None)], False), ([], True)]
    starts = _chunk_starts(plan, 30)
    assert starts == [0, 0, 30]
    progress = Progress(starts)
    assert progress._frontier() == 30
    progress.done(1, 0)
    assert progress.wait_below(30) == 0
    below = np.array(starts[:2], dtype=np.int64)
    signal = np.array(starts[1:] + [0], dtype=np.int64)
    assert wait_below(signal, below, 30, 10) == -1
    signal[1] = 0
    assert wait_below(signal, below, 30, 10) == 0


def test_parallel_region_raises_a_task_error():
    """An exception in a worker's chunk reaches the caller, after every chunk ended; the
    region runs again afterwards."""
    region = ParallelRegion(2)
    ran = []

    def fails():
        raise ZeroDivisionError("chunk 2")

    with pytest.raises(ZeroDivisionError, match="chunk 2"):
        region([lambda: ran.append(0), fails])
    region([lambda: ran.append(1), lambda: ran.append(2)])
    assert sorted(ran) == [0, 1, 2]
    with pytest.raises(ValueError, match="tasks"):
        region([lambda: None])


def test_quasi_static_controls_hold_the_robot():
    name = "panda"
    model = robot(name).model
    dynamics = ocp.FreeDynamics(model)
    xs = states(model, 6, seed=30)
    xs[:, model.nq:] = 0.0
    running = ocp.StageModel(dynamics, [], dt=0.01)
    problem = ocp.ShootingProblem(xs[0], [running] * 5, ocp.TerminalModel(dynamics.state))
    us = problem.quasi_static(xs)
    f = dynamics.calc(dynamics.create_data(5), xs[:5], us)
    np.testing.assert_allclose(f, 0.0, atol=1e-9)


# --- bad input ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ur5_problem():
    return _two_phase_problem("ur5")


def test_bad_shapes_of_x0_xs_us(ur5_problem):
    problem, xs, us = ur5_problem
    running, terminal = problem.running_models, problem.terminal_model
    with pytest.raises(ValueError, match="x0"):
        ocp.ShootingProblem(xs[0, :-1], running, terminal)
    with pytest.raises(ValueError, match="x0"):
        ocp.ShootingProblem(xs[:2], running, terminal)
    with pytest.raises(ValueError, match="xs"):
        problem.calc(xs[:-1], us)
    with pytest.raises(ValueError, match="xs"):
        problem.calc_diff(xs[:, :-1], us)
    with pytest.raises(ValueError, match="us"):
        problem.calc(xs, us[:-1])
    with pytest.raises(ValueError, match="us"):
        problem.calc_diff(xs, us[:, :-1])
    with pytest.raises(ValueError, match="us"):
        problem.rollout(us[1:])
    with pytest.raises(ValueError):
        ocp.check_dynamics(running[0].dynamics, xs, us)       # N + 1 states, N controls


def test_nan_is_rejected(ur5_problem):
    problem, xs, us = ur5_problem
    bad_xs, bad_us = xs.copy(), us.copy()
    bad_xs[2, -1] = np.nan
    bad_us[1, 0] = np.inf
    with pytest.raises(ValueError, match="NaN"):
        problem.calc(bad_xs, us)
    with pytest.raises(ValueError, match="NaN"):
        problem.calc_diff(xs, bad_us)
    with pytest.raises(ValueError):
        problem.rollout(bad_us)
    with pytest.raises(ValueError, match="NaN"):
        ocp.ShootingProblem(bad_xs[2], problem.running_models, problem.terminal_model)
    model = robot("ur5").model
    residual = ocp.FrameTranslationResidual(model, "tool0", [np.nan, 0.0, 0.0])
    with pytest.raises(ValueError, match="NaN"):
        _problem_with(model, [ocp.Cost(residual)])


def test_unnormalized_quaternion_is_rejected():
    problem, xs, us = _two_phase_problem("talos")
    xs = xs.copy()
    xs[1, 3:7] *= 1.1
    with pytest.raises(ValueError, match="quaternion"):
        problem.calc(xs, us)


def test_unknown_frame():
    model = robot("ur5").model
    with pytest.raises(KeyError, match="no_such_frame"):
        ocp.FrameTranslationResidual(model, "no_such_frame", np.zeros(3))
    with pytest.raises(ValueError, match="out of range"):
        ocp.FrameVelocityResidual(model, model.nframes + 3)
    with pytest.raises(ValueError, match="reference frame"):
        ocp.FrameVelocityResidual(model, "tool0", None, "BODY")


def test_terminal_model_with_a_control_cost():
    dynamics = free_dynamics("ur5")
    with pytest.raises(ValueError, match="terminal model has no controls"):
        ocp.TerminalModel(dynamics.state, [ocp.Cost(ocp.ControlResidual(dynamics.nu))])
    with pytest.raises(ValueError, match="terminal"):
        running = ocp.StageModel(dynamics, [])
        ocp.ShootingProblem(np.zeros(dynamics.state.nx), [running], running)


def _problem_with(model, costs, N=4):
    dynamics = ocp.FreeDynamics(model)
    running = ocp.StageModel(dynamics, costs, dt=0.01)
    x0 = dynamics.state.zero()
    return ocp.ShootingProblem(x0, [running] * N, ocp.TerminalModel(dynamics.state))


@pytest.mark.parametrize("make, match", [
    (lambda m: ocp.FrameTranslationResidual(m, "tool0", [0.1, 0.2]), r"\(3,\)"),
    (lambda m: ocp.FrameTranslationResidual(m, "tool0", np.zeros((3, 3))), r"\(4, 3\)"),
    (lambda m: ocp.FrameVelocityResidual(m, "tool0", np.zeros(3)), r"\(6,\)"),
    (lambda m: ocp.FrameRotationResidual(m, "tool0", np.eye(2)), r"\(3, 3\)"),
    (lambda m: ocp.FramePlacementResidual(m, "tool0", np.eye(3), np.zeros(4)), r"\(3,\)"),
    (lambda m: ocp.StateResidual(ocp.StateMultibody(m), np.zeros(m.nq)), r"\(12,\)"),
    (lambda m: ocp.ControlResidual(m.nv, np.zeros(m.nv + 1)), r"\(6,\)"),
    (lambda m: ocp.CenterOfMassResidual(m, np.zeros((5, 3))), "one per knot"),
    (lambda m: ocp.ControlResidual(m.nv + 1), "nu"),
])
def test_references_of_the_wrong_length(make, match):
    model = robot("ur5").model
    with pytest.raises(ValueError, match=match):
        _problem_with(model, [ocp.Cost(make(model))])


def test_kinematic_residual_needs_a_multibody_stage():
    unicycle = ocp.unicycle()
    model = robot("ur5").model
    with pytest.raises(ValueError, match="multibody"):
        ocp.StageModel(unicycle, [ocp.Cost(ocp.FrameTranslationResidual(model, "tool0",
                                                                          np.zeros(3)))])


def test_references_that_are_not_on_the_manifold():
    model = robot("ur5").model
    sheared = np.eye(3)
    sheared[0, 1] = 0.1
    with pytest.raises(ValueError, match="not a rotation"):
        _problem_with(model, [ocp.Cost(ocp.FrameRotationResidual(model, "tool0", sheared))])
    with pytest.raises(ValueError, match="not a rotation"):
        _problem_with(model, [ocp.Cost(ocp.FramePlacementResidual(model, "tool0",
                                                                  -np.eye(3), np.zeros(3)))])
    talos = robot("talos").model
    dynamics = free_dynamics("talos")
    x_ref = np.concatenate([robot("talos").q0, np.zeros(talos.nv)])
    x_ref[3:7] *= 2.0
    running = ocp.StageModel(dynamics, [ocp.Cost(ocp.StateResidual(dynamics.state, x_ref))])
    with pytest.raises(ValueError, match="quaternion"):
        ocp.ShootingProblem(dynamics.state.zero(), [running] * 2,
                            ocp.TerminalModel(dynamics.state))


def test_threaded_kernel_runs_a_batch_of_one_item_on_its_serial_copy(monkeypatch):
    """A ``prange`` kernel called from Python with more than one Numba thread runs its
    serial copy for one item (one knot cannot be split, and starting the thread pool for
    it cost 8-12 ms a call on a loaded machine: cq30) and its parallel copy from two items
    on; the values are the activation's either way."""
    import numba
    from geppetto.ocp import costs
    from geppetto.ocp.problem import _numba_threads
    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    kernel, calls = costs._activate, []
    for copy in ("serial", "parallel"):
        def spy(*args, _run=getattr(kernel, copy), _copy=copy):
            calls.append((_copy, args[2].shape[0]))
            return _run(*args)
        monkeypatch.setattr(kernel, copy, spy)
    rng = np.random.default_rng(3)
    with _numba_threads(threads):
        for K in (1, 3):
            r = rng.standard_normal((K, 4))
            value, a_r, A_rr = np.zeros(K), np.zeros((K, 4)), np.zeros((K, 4, 4))
            kernel(costs.QUADRATIC, np.zeros((1, 1)), r, value, a_r, A_rr)
            np.testing.assert_allclose(value, 0.5 * np.sum(r * r, axis=1), rtol=1e-14)
            np.testing.assert_array_equal(a_r, r)
    assert calls == [("serial", 1), ("parallel" if threads > 1 else "serial", 3)]
