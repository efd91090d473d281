"""One compiled call per phase (geppetto.ocp.fused) and user residuals as Numba kernels
(geppetto.ocp.NumbaResidual).

The fused path must give what the per-term path gives (every built-in residual and
activation, both Euler schemes, flat and Lie-group states, the terminal knot, the line
search's calc_costs); a user kernel equivalent to a built-in residual must give the same
problem, and its Jacobian must pass the finite-difference check.
"""
import numpy as np
import pytest

import geppetto as gp
from geppetto.examples import custom_residual, reaching
from geppetto.ocp import fused
from geppetto.solvers.forward import ForwardPass

TARGET = (0.4, 0.2, 0.4)
OUTPUTS = ("costs", "Lx", "Lu", "Lxx", "Luu", "Lxu", "Fx", "Fu", "xnext")


def _per_term(problem):
    """The problem's phases evaluated term by term (the path without the fused call)."""
    for *_, data in problem.phases:
        data.fused = False
    problem.terminal_data.fused = False
    return problem


def _point(problem, model, seed):
    rng = np.random.default_rng(seed)
    xs = np.tile(problem.x0, (problem.N + 1, 1))
    xs[:, :model.nq] = [gp.dynamics.random_configuration(model, rng)
                        for _ in range(problem.N + 1)]
    xs[:, model.nq:] = 0.3 * rng.standard_normal((problem.N + 1, model.nv))
    return xs, rng.standard_normal((problem.N, problem.nu))


def _evaluate(problem, xs, us):
    """{mode: outputs} after calc, calc_diff and calc_costs at (xs, us)."""
    out = {}
    for mode, names in (("calc", ("costs", "xnext")), ("calc_diff", OUTPUTS),
                        ("calc_costs", ("costs",))):
        getattr(problem, mode)(xs, us)
        out[mode] = {n: getattr(problem, n).copy() for n in names}
    return out


def _assert_same(ours, reference, tolerance):
    for mode in reference:
        for name, value in reference[mode].items():
            scale = max(1.0, np.abs(value).max())
            error = np.abs(ours[mode][name] - value).max() / scale
            assert error <= tolerance, f"{mode} {name}: {error:.3g}"


def _every_term_problem(model, frame, integrator):
    """A stage with every built-in residual and activation on ``frame``."""
    dynamics = gp.ocp.FreeDynamics(model, damping=np.full(model.nv, 0.05))
    state, nu = dynamics.state, dynamics.nu
    rng = np.random.default_rng(1)
    R, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    R *= np.linalg.det(R)                   # a rotation (det +1)
    x_ref = state.zero()
    x_ref[:model.nq] = gp.dynamics.random_configuration(model, rng)
    costs = [
        gp.ocp.Cost(gp.ocp.FrameTranslationResidual(model, frame, TARGET)),
        gp.ocp.Cost(gp.ocp.FrameRotationResidual(model, frame, R), gp.ocp.Smooth2Norm(1e-3),
                    weight=0.3),
        gp.ocp.Cost(gp.ocp.FramePlacementResidual(model, frame, R, TARGET),
                    gp.ocp.WeightedQuadratic(np.linspace(0.5, 2.0, 6)), weight=0.7),
        gp.ocp.Cost(gp.ocp.FrameVelocityResidual(model, frame, reference_frame=
                                                 gp.dynamics.LOCAL), weight=0.1),
        gp.ocp.Cost(gp.ocp.FrameVelocityResidual(model, frame, reference=np.ones(6),
                                                 reference_frame=gp.dynamics.WORLD),
                    gp.ocp.Smooth1Norm(1e-4), weight=0.05),
        gp.ocp.Cost(gp.ocp.FrameVelocityResidual(
            model, frame, reference_frame=gp.dynamics.LOCAL_WORLD_ALIGNED), weight=0.2),
        gp.ocp.Cost(gp.ocp.CenterOfMassResidual(model, [0.1, 0.0, 0.3]), weight=2.0),
        gp.ocp.Cost(gp.ocp.StateResidual(state, x_ref),
                    gp.ocp.QuadraticBarrier(-0.2 * np.ones(state.ndx), 0.2 * np.ones(state.ndx)),
                    weight=1.5),
        gp.ocp.Cost(gp.ocp.StateResidual(state, x_ref), weight=1e-2),
        gp.ocp.Cost(gp.ocp.ControlResidual(nu, np.linspace(-1, 1, nu)), weight=1e-3),
    ]
    running = gp.ocp.StageModel(dynamics, costs, dt=0.02, integrator=integrator)
    terminal = gp.ocp.TerminalModel(state, costs[:3] + costs[6:9])
    return gp.ocp.ShootingProblem(state.zero(), [running] * 6, terminal)


@pytest.mark.parametrize("name, frame, integrator", [
    ("ur5", "tool0", "euler"), ("ur5", "tool0", "explicit_euler"),
    ("solo12", "FL_FOOT", "euler"), ("solo12", "HR_FOOT", "explicit_euler")])
def test_fused_equals_per_term(name, frame, integrator):
    """Every built-in residual and activation, flat (ur5) and free-flyer (solo12) states,
    both Euler schemes, damping: the fused phase gives the per-term results."""
    model = gp.robots.load(name).model
    problem = _every_term_problem(model, frame, integrator)
    xs, us = _point(problem, model, 3)
    ours = _evaluate(problem, xs, us)
    assert all(isinstance(d.fused, fused.FusedPhase) for *_, d in problem.phases)
    assert isinstance(problem.terminal_data.fused, fused.FusedPhase)
    reference = _evaluate(_per_term(_every_term_problem(model, frame, integrator)), xs, us)
    # The fused phase differentiates ABA across SIMD lanes in the world frame, the per-term
    # path with the stack kernel in local frames: two round-off paths through M^-1, so the
    # bound is the one the loaders' ABA test uses, max(1e-12, 1e-15 cond(M)) (solo12 at
    # these random states: cond(M) 2.3e4, the two agree to 1.1e-12 relative).
    data = model.create_data()
    condition = max(np.linalg.cond(gp.dynamics.crba(model, data, x[:model.nq])) for x in xs)
    _assert_same(ours, reference, max(1e-12, 1e-15 * condition))


def test_fused_phase_interpreted_with_user_kernels():
    """Built-in terms and user kernels run in the interpreter (compiled once for every
    composition): a user kernel's knot loop is generated once to the cache folder and
    called by address, one loop for the problems of the same kernel (other targets and
    knots); a terminal knot whose only cost is a user residual is a program too."""
    robot = gp.robots.load("ur5")
    a, _ = reaching.reaching_problem(robot.model, "tool0", TARGET, robot.q0, knots=5)
    xs, us = _point(a, robot.model, 0)
    a.calc(xs, us)
    assert a.phases[0][3].fused.program is not None
    assert a.terminal_data.fused.program is not None
    programs = []
    for target, knots in ((TARGET, 5), ((0.1, 0.3, 0.5), 7)):
        user = custom_residual.user_frame_translation(robot.model, "tool0", target)
        problem, _ = reaching.reaching_problem(robot.model, "tool0", target, robot.q0,
                                               knots=knots, reach=user)
        xs, us = _point(problem, robot.model, 0)
        problem.calc(xs, us)
        assert problem.terminal_data.fused.program is not None
        programs.append(problem.phases[0][3].fused.items)
    code = 1 + fused._BLOCKS.index("_user")
    addresses = [rows[rows[:, 0] == code, 1] for _, rows, *_ in programs]
    assert len(addresses[0]) == 1 and addresses[0][0] == addresses[1][0] != 0
    loop = fused.knot_loop(custom_residual.frame_translation)
    path = loop.py_func.__code__.co_filename
    assert path.startswith(fused.cache_folder())
    with open(path) as handle:
        assert "_user0(xs[k], us[k], oR[k]" in handle.read()
    terminals = [gp.ocp.TerminalModel(a.terminal_model.state, [gp.ocp.Cost(reach)])
                 for reach in (user, gp.ocp.FrameTranslationResidual(robot.model, "tool0",
                                                                     target))]
    alone, reference = [gp.ocp.ShootingProblem(a.x0, a.running_models[:2], terminal)
                        for terminal in terminals]
    assert alone.calc(xs[:3], us[:2]) == pytest.approx(reference.calc(xs[:3], us[:2]),
                                                       rel=1e-12)
    assert alone.terminal_data.fused.program is not None
    assert alone.horizon_evaluation is not None


def _one_call_equals_phase_by_phase(problem, xs, us):
    """``problem``'s calc and calc_diff took the one-call horizon evaluation
    (:mod:`geppetto.ocp.horizon`) and equal a twin's evaluated phase by phase, to the bit."""
    twin = gp.ocp.ShootingProblem(problem.x0, problem.running_models, problem.terminal_model)
    twin.one_call = False                          # phase by phase
    for evaluate, names in (("calc", ("costs", "xnext")), ("calc_diff", OUTPUTS)):
        values = [getattr(p, evaluate)(xs, us) for p in (problem, twin)]
        assert values[0] == values[1]
        for name in names:
            np.testing.assert_array_equal(getattr(problem, name), getattr(twin, name))
    assert problem.horizon_evaluation is not None


@pytest.mark.parametrize("name, frame", [("ur5", "tool0"), ("panda", "panda_hand")])
def test_numba_residual_equals_built_in(name, frame):
    """The reaching problem with the user kernel of examples/custom_residual equals the
    built-in one (calc, calc_diff, calc_costs), fused and term by term; its calc and
    calc_diff are one compiled call over the horizon, equal to the phase-by-phase path
    to the bit, and its line-search trial is one call too."""
    robot = gp.robots.load(name)
    user = custom_residual.user_frame_translation(robot.model, frame, TARGET)
    built_in, _ = reaching.reaching_problem(robot.model, frame, TARGET, robot.q0, knots=8)
    ours, _ = reaching.reaching_problem(robot.model, frame, TARGET, robot.q0, knots=8,
                                        reach=user)
    xs, us = _point(built_in, robot.model, 5)
    reference = _evaluate(built_in, xs, us)
    _assert_same(_evaluate(ours, xs, us), reference, 1e-12)
    assert isinstance(ours.phases[0][3].fused, fused.FusedPhase)
    _one_call_equals_phase_by_phase(ours, xs, us)
    assert ForwardPass(ours).horizon is not None      # the line-search trial: one call
    _assert_same(_evaluate(_per_term(ours), xs, us), reference, 1e-12)


def test_fused_callees_of_other_types_raise():
    """A fused phase calls the lanes' ABA block and a user kernel's knot loop by
    (address, key) (geppetto.dynamics.native.call_checked): each given the other's
    callee, compiled for other argument types, raises TypeError naming the types
    before calling it, phase by phase and in the one-call horizon; with their own
    callees back, the same cost to the bit."""
    robot = gp.robots.load("ur5")
    user = custom_residual.user_frame_translation(robot.model, "tool0", TARGET)
    problem, _ = reaching.reaching_problem(robot.model, "tool0", TARGET, robot.q0, knots=4,
                                           reach=user)
    xs, us = _point(problem, robot.model, 0)
    cost = problem.calc(xs, us)
    phase = problem.phases[0][3].fused
    lanes = phase.first[0][2][-1][-1]              # _free_field's callee: aba_tiles
    rows = phase.items[1]
    knot_loop = rows[np.flatnonzero(rows[:, 0] == 1 + fused._BLOCKS.index("_user"))[0], 1:3]
    saved = lanes.copy(), knot_loop.copy()
    for one_call in (True, False):
        problem.one_call = one_call
        for target, source, callee in ((lanes, saved[1], r"Tuple\(ModelArrays"),
                                       (knot_loop, saved[0], r"Tuple\(array\(float64")):
            target[:] = source
            try:
                with pytest.raises(TypeError, match="compiled for other argument types than "
                                                    "this call passes, " + callee):
                    problem.calc(xs, us)
            finally:
                lanes[:], knot_loop[:] = saved
        assert problem.calc(xs, us) == cost


def test_numba_residual_finite_differences():
    model = gp.robots.load("panda").model
    user = custom_residual.user_frame_translation(model, "panda_hand", TARGET)
    state = gp.ocp.StateMultibody(model)
    rng = np.random.default_rng(2)
    xs = np.array([state.zero() for _ in range(6)])
    xs[:, :model.nq] = [gp.dynamics.random_configuration(model, rng) for _ in range(6)]
    check = gp.ocp.check_residual(user, state, xs)
    assert check.Rx < 1e-7 and check.Ru == 0.0


def test_numba_residual_set_reference():
    """ShootingProblem.set_reference moves a user residual's target like a built-in one's."""
    robot = gp.robots.load("ur5")
    user = custom_residual.user_frame_translation(robot.model, "tool0", TARGET)
    built_in, reach = reaching.reaching_problem(robot.model, "tool0", TARGET, robot.q0, knots=4)
    ours, _ = reaching.reaching_problem(robot.model, "tool0", TARGET, robot.q0, knots=4,
                                        reach=user)
    built_in.set_reference(reach, np.array([0.2, -0.1, 0.6]))
    ours.set_reference(user, np.array([0.2, -0.1, 0.6]))
    xs, us = _point(built_in, robot.model, 7)
    assert ours.calc(xs, us) == pytest.approx(built_in.calc(xs, us), rel=1e-12)


def test_numba_residual_bad_input():
    with pytest.raises(ValueError, match="kernel"):
        gp.ocp.NumbaResidual(3, lambda *args: None)
    with pytest.raises(ValueError, match="nr"):
        gp.ocp.NumbaResidual(0, custom_residual.frame_translation)
    with pytest.raises(ValueError, match="parameters"):
        gp.ocp.NumbaResidual(3, custom_residual.frame_translation, [np.nan])


def _near(problem, model, seed, scale=0.05):
    """States near x0 (a legged robot on its feet) and quasi-static controls plus noise."""
    rng = np.random.default_rng(seed)
    x0 = problem.x0
    dx = scale * rng.standard_normal((problem.N + 1, problem.ndx))
    xs = problem.state.integrate(np.repeat(x0[None], problem.N + 1, axis=0), dx)
    us = problem.quasi_static(np.repeat(x0[None], problem.N + 1, axis=0))
    return xs, us + scale * rng.standard_normal(us.shape) * (problem.nus[:, None] > 0)


def _fused_kinds(problem):
    return [type(d.fused).__name__ for *_, d in problem.phases]


def test_fused_contacts_trot():
    """The solo12 trot of examples/solo12_trot.py (contact and impulse dynamics in the
    phase's compiled blocks, friction cones, CoM and swing-foot costs): fused = per term."""
    from geppetto.examples import solo12_trot
    robot = gp.robots.load("solo12")
    x0 = np.r_[robot.q0, np.zeros(robot.model.nv)]

    def build():
        return solo12_trot.trotting_problem(robot.model, x0, 2, 4, 2, 0.02)

    problem = build()
    xs, us = _near(problem, robot.model, 4)
    ours = _evaluate(problem, xs, us)
    assert set(_fused_kinds(problem)) == {"FusedPhase"}
    _assert_same(ours, _evaluate(_per_term(build()), xs, us), 1e-11)


@pytest.mark.parametrize("reference", [gp.dynamics.LOCAL, gp.dynamics.LOCAL_WORLD_ALIGNED])
def test_fused_contact_residuals(reference):
    """talos on 6D soles: centre of pressure, friction cone, contact force in both frames
    of the constraint (the force rotated to the world, to the sole, or not at all)."""
    model = gp.robots.load("talos").model
    q0 = gp.robots.load("talos").q0
    soles = ("left_sole_link", "right_sole_link")

    def build():
        contacts = [gp.dynamics.contact_6d(model, sole, reference=reference, Kp=5.0, Kd=2.0)
                    for sole in soles]
        dynamics = gp.ocp.ContactDynamics(model, contacts)
        state = dynamics.state
        x0 = np.r_[q0, np.zeros(model.nv)]
        costs = [gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1.0),
                 gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=1e-3),
                 gp.ocp.Cost(gp.ocp.CenterOfMassResidual(model, [0.0, 0.0, 0.8]), weight=10.0)]
        for sole in soles:
            cop = gp.ocp.CenterOfPressureResidual(dynamics, sole, 0.2, 0.1)
            cone = gp.ocp.FrictionConeResidual(dynamics, sole, 0.7, normal=(0.1, 0.0, 1.0))
            costs += [gp.ocp.Cost(cop, gp.ocp.QuadraticBarrier(*cop.bounds), weight=10.0),
                      gp.ocp.Cost(cone, gp.ocp.QuadraticBarrier(*cone.bounds), weight=3.0),
                      gp.ocp.Cost(gp.ocp.ContactForceResidual(dynamics, sole, np.arange(6.0)),
                                  weight=1e-4)]
        running = gp.ocp.StageModel(dynamics, costs, dt=0.02)
        terminal = gp.ocp.TerminalModel(state, costs[:1])
        return gp.ocp.ShootingProblem(x0, [running] * 3, terminal)

    problem = build()
    xs, us = _near(problem, model, 6, 0.02)
    ours = _evaluate(problem, xs, us)
    assert _fused_kinds(problem) == ["FusedPhase"]
    _assert_same(ours, _evaluate(_per_term(build()), xs, us), 1e-11)


def test_custom_residual_example():
    """examples/custom_residual.py (reduced): FDDP solves the task the same way with the
    user kernel as with the built-in residual."""
    results = custom_residual.main(reduced=True)
    built_in, user = results["built-in"], results["user kernel"]
    assert user.iterations == built_in.iterations
    assert user.cost == pytest.approx(built_in.cost, rel=1e-10)
    np.testing.assert_allclose(user.xs, built_in.xs, atol=1e-10)


def _allocations_per_call(evaluate, calls=20):
    """NRT allocations per call of ``evaluate()`` (Numba's statistics switched on for
    the measurement, restored after)."""
    from numba.core.runtime import _nrt_python as nrt
    was_on = nrt.memsys_stats_enabled()
    nrt.memsys_enable_stats()
    try:
        evaluate()
        before = nrt.memsys_get_stats_alloc()
        for _ in range(calls):
            evaluate()
        return (nrt.memsys_get_stats_alloc() - before) / calls
    finally:
        if not was_on:
            nrt.memsys_disable_stats()


def test_horizon_evaluation_allocations_do_not_grow_with_knots():
    """The one-call calc / calc_diff of a reaching problem (frame translation, state and
    control costs) makes the same few NRT allocations at 4 and at 40 knots: the kernels'
    fixed scratch lives in their stack frames (dynamics.borrowed.frame_empty), the
    per-chunk scratch is one allocation per call (the code before took 11 more per chunk
    of 8 knots in the frame residual, 2 per cost: 58 per CALC at 40 knots)."""
    robot = gp.robots.load("ur5")
    counts = {}
    for knots in (4, 40):
        problem, _ = reaching.reaching_problem(robot.model, "tool0", TARGET, robot.q0,
                                               knots=knots)
        xs, us = _point(problem, robot.model, 3)
        problem.calc_diff(xs, us)         # builds the one-call evaluation (one thread)
        evaluation = problem.horizon_evaluation
        assert evaluation is not None
        for mode in (fused.CALC, fused.DIFF):
            counts[knots, mode] = _allocations_per_call(lambda: evaluation(xs, us, mode))
    for mode in (fused.CALC, fused.DIFF):
        assert counts[40, mode] == counts[4, mode], counts
        assert counts[40, mode] <= 16, counts
