"""Bad options and bad problems at the OCP / solver border: a clean exception
that names the argument, or a SolverResult with a meaningful status in
bounded time, never a hang, a raw TypeError from inside ``solve`` or a NaN cost.

The explicit cases first (each one a misuse seen in a fuzzing run), then
property tests (hypothesis, seeded by the test's name, a bounded number of
examples, ``deadline=None``): random option sets on DDP, FDDP and BoxFDDP,
each ending in ValueError naming an option, or in a result whose cost is
finite and whose status is one of the documented ones.

Problem: a 1-D point mass pushed to p = 2 (user dynamics in NumPy, nothing
to compile) and, for the kernels, the pendulum swing-up.
"""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import geppetto as gp
from geppetto.solvers import DDP, FDDP, BoxFDDP
from test_solvers import _double_integrator, _nan_jacobians

SOLVERS = (DDP, FDDP, BoxFDDP)
STATUSES = ("converged", "max_iter", "time_limit",
            "no step accepted at maximum regularization",
            "regularization at maximum: Quu not positive definite")
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _double_integrator_diff(xs, us, params, f, f_x, f_u):
    _double_integrator(xs, us, params, f)
    f_x[:] = [[0.0, 1.0], [0.0, 0.0]]
    f_u[:] = [[0.0], [1.0]]


def point_mass(calc_diff=_double_integrator_diff, N=10, control_bounds=None):
    """(problem, goal residual) of a point mass driven to p = 2."""
    dynamics = gp.ocp.CustomDynamics(2, 1, _double_integrator, calc_diff, nq=1)
    state = dynamics.state
    goal = gp.ocp.StateResidual(state, np.array([2.0, 0.0]))
    running = gp.ocp.StageModel(dynamics, [
        gp.ocp.Cost(gp.ocp.ControlResidual(1), weight=1e-2), gp.ocp.Cost(goal)], dt=0.1,
        control_bounds=control_bounds)
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(goal, weight=10.0)])
    return gp.ocp.ShootingProblem(np.zeros(2), [running] * N, terminal), goal


def _names(argument):
    return rf"(?<![\w]){re.escape(argument)}(?![\w])"


# --- options, one at a time ------------------------------------------------------------

BAD_OPTIONS = {
    "reg_factor": (1.0, 0.5, 0.0, -10.0, np.nan, np.inf, None, "10"),
    "reg_max": (np.nan, np.inf, -1.0, 1e-12),          # 1e-12 < reg_min
    "reg_min": (-1.0, np.nan),
    "reg_init": (-1e-9, np.nan, 1e12),                  # 1e12 > reg_max
    "th_stop": (-1.0, np.nan, "tight"),
    "th_acceptstep": (-0.1, 1.5, np.nan),
    "th_stepdec": (2.0, -1.0), "th_stepinc": (np.nan,),
    "alphas": ([], [0.0], [1.0, np.nan], [2.0], [-0.5], "half", [None], [0.25, 1.0, 0.5],
               True, [True, False]),
}


@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
@pytest.mark.parametrize("option", sorted(BAD_OPTIONS))
def test_bad_solver_options_raise_at_construction(solver_class, option):
    problem, _ = point_mass()
    for value in BAD_OPTIONS[option]:
        with pytest.raises(ValueError, match=_names(option)):
            solver_class(problem, **{option: value})
            pytest.fail(f"{option}={value!r} accepted")


@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_bad_solve_arguments_raise(solver_class):
    problem, _ = point_mass()
    solver = solver_class(problem)
    for max_iter in (None, -1, 1.5, "3", np.nan, True):
        with pytest.raises(ValueError, match=_names("max_iter")):
            solver.solve(max_iter=max_iter)
    for time_limit in (-1.0, np.nan, "1s"):
        with pytest.raises(ValueError, match=_names("time_limit")):
            solver.solve(time_limit=time_limit)


@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_zero_iterations_return_the_cost_of_the_warm_start(solver_class):
    problem, _ = point_mass()
    us = np.full((problem.N, 1), 0.3)
    xs = problem.rollout(us)
    expected = problem.calc(xs, us)
    result = solver_class(problem).solve(xs, us, max_iter=0)
    assert (result.status, result.iterations, result.converged) == ("max_iter", 0, False)
    assert result.cost == pytest.approx(expected, rel=1e-14) and np.isfinite(result.cost)
    assert result.gaps == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("solver_class", SOLVERS, ids=lambda s: s.__name__)
def test_time_limit_stops_the_backward_retries(solver_class):
    """NaN Jacobians make every backward pass fail; with a regularization that
    climbs by 1e-4 per retry, reaching reg_max would take ~4e5 retries: the
    time limit ends the solve instead, with its status."""
    problem, _ = point_mass(_nan_jacobians)
    solver = solver_class(problem, reg_factor=1.0001)
    result = solver.solve(us=np.zeros((problem.N, 1)), time_limit=0.05)
    assert (result.status, result.iterations, result.converged) == ("time_limit", 0, False)


def test_references_must_be_finite():
    problem, goal = point_mass()
    for bad in (np.array([np.nan, 0.0]), np.array([2.0, np.inf]),
                np.full((problem.N + 1, 2), np.nan), np.array([2.0 + 1j, 0.0])):
        with pytest.raises(ValueError, match=_names("reference")):
            problem.set_reference(goal, bad)
    problem.set_reference(goal, np.array([1.0, 0.0]))
    result = FDDP(problem).solve()
    assert result.converged and 0.8 < result.xs[-1, 0] < 1.0      # 1.8 with the goal at 2


def test_bad_problems_raise_value_error():
    problem, goal = point_mass()
    running, terminal = problem.running_models[0], problem.terminal_model
    for models, label in (([None], "running_models[0]"), ([running, 3], "running_models[1]"),
                          ([terminal], "running_models[0]"), (None, "running_models")):
        with pytest.raises(ValueError, match=re.escape(label)):
            gp.ocp.ShootingProblem(np.zeros(2), models, terminal)
    us = np.zeros((problem.N, 1))
    for bad in (us.astype(complex) + 1j, np.full(us.shape, "0"), us[:-1]):
        with pytest.raises(ValueError, match=_names("us")):
            problem.calc(problem.rollout(us), bad)
        with pytest.raises(ValueError, match=_names("us")):
            problem.rollout(bad)
        with pytest.raises(ValueError, match=_names("us")):
            FDDP(problem).solve(us=bad)


def test_bad_bounds_raise_value_error():
    for bounds in (([np.nan], [1.0]), ([-1.0, -1.0], [1.0, 1.0]), ([1.0], [-1.0]),
                   (["a"], [1.0]), ([-1.0j], [1.0]), (-1.0,), 1.0):
        with pytest.raises(ValueError, match="control_bounds"):
            point_mass(control_bounds=bounds)
            pytest.fail(f"control_bounds={bounds!r} accepted")
    problem, goal = point_mass(control_bounds=(-np.inf, 1.0))      # scalars, +-inf: fine
    assert BoxFDDP(problem).solve().converged
    for lower, upper in ((np.nan, 1.0), (0.0, [1.0, 2.0, 3.0]), (1.0, 0.0), ("x", 1.0)):
        with pytest.raises(ValueError, match="Constraint bounds"):
            gp.ocp.Constraint(goal, lower, upper)
    with pytest.raises(ValueError, match="residual"):
        gp.ocp.Constraint(None, 0.0, 1.0)


# --- property tests --------------------------------------------------------------------

def _option_values(valid, invalid):
    return st.one_of(st.sampled_from(valid), st.sampled_from(invalid))


OPTIONS = st.fixed_dictionaries({}, optional={
    "reg_factor": _option_values([1.5, 10.0, 1e3], [1.0, 0.0, -1.0, np.nan, np.inf]),
    "reg_init": _option_values([0.0, 1e-9, 1.0], [-1.0, np.nan, np.inf]),
    "reg_max": _option_values([1e3, 1e9], [np.nan, np.inf, 0.0]),
    "th_stop": _option_values([0.0, 1e-9, 1.0], [-1.0, np.nan]),
    "th_acceptstep": _option_values([0.0, 0.1, 1.0], [2.0, np.nan]),
    "alphas": _option_values([[1.0], [1.0, 0.5, 0.25], [0.1]],
                             [[], [0.0], [np.nan], [1.5], "a"]),
})
SOLVE_ARGUMENTS = st.fixed_dictionaries({
    "max_iter": _option_values([0, 1, 5], [None, -1, 2.5]),
    "time_limit": _option_values([None, 0.0, 1.0, np.inf], [-1.0, np.nan]),
})
WARM_STARTS = st.sampled_from(["default", "zeros", "large", "nan", "complex", "short"])


def _warm_start(problem, kind):
    us = np.zeros((problem.N, problem.nu))
    return {"default": None, "zeros": us, "large": us + 1e3, "nan": us + np.nan,
            "complex": us + 1j, "short": us[:-1]}[kind]


@FUZZ
@given(solver_index=st.integers(0, 2), options=OPTIONS, arguments=SOLVE_ARGUMENTS,
       warm=WARM_STARTS)
def test_fuzz_solver_options_end_in_an_error_or_a_result(solver_index, options, arguments,
                                                        warm):
    problem, _ = point_mass()
    try:
        solver = SOLVERS[solver_index](problem, **options)
        result = solver.solve(us=_warm_start(problem, warm), **arguments)
    except ValueError as error:
        named = list(options) + list(arguments) + ["us", "xs"]
        assert any(re.search(_names(name), str(error)) for name in named), str(error)
        return
    assert result.status in STATUSES, result.status
    assert np.isfinite(result.cost) and np.all(np.isfinite(result.us))
    assert result.iterations <= arguments["max_iter"]


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(lower=st.floats(allow_nan=True, allow_infinity=True, width=64),
       width=st.floats(-1.0, 5.0), alpha=st.floats(0.0, 1.0))
def test_fuzz_box_fddp_bounds(lower, width, alpha):
    """Any lower bound and width: a clean error, or a BoxFDDP solution inside the box."""
    upper = lower + width
    try:
        problem, _ = point_mass(control_bounds=(lower, upper))
    except ValueError as error:
        assert "control_bounds" in str(error)
        assert not (np.isfinite(lower) and width >= 0.0)
        return
    alphas = [1.0] if alpha == 0.0 else [1.0, alpha]
    result = BoxFDDP(problem, alphas=alphas).solve(max_iter=20)
    assert result.status in STATUSES and np.isfinite(result.cost)
    # Crocoddyl's SolverBoxFDDP clamps the trial controls, never the warm start: inside
    # the box once a step was accepted (dV recorded), the warm start's controls otherwise
    if any(np.isfinite(result.history["dV"])):
        assert np.all(result.us >= lower - 1e-12) and np.all(result.us <= upper + 1e-12)


# --- the NLP on an infeasible problem ------------------------------------------------------

def test_gauss_newton_nlp_reports_contradicting_equalities():
    """Two terminal equalities 10 cm apart on ur5's last frame: the Gauss-Newton
    mode says "infeasible" (IPOPT's infeasibility heuristics on), in 122
    iterations where it took 380 without them."""
    model = gp.robots.load("ur5").model
    dynamics = gp.ocp.FreeDynamics(model)
    state, frame = dynamics.state, model.frames[-1].name
    x0 = state.zero()
    equalities = [gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(model, frame, target),
                                    0.0, 0.0)
                  for target in ([0.4, 0.0, 0.4], [0.4, 0.1, 0.4])]
    running = gp.ocp.StageModel(dynamics, [
        gp.ocp.Cost(gp.ocp.ControlResidual(model.nv), weight=1e-2),
        gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2)], dt=0.05)
    terminal = gp.ocp.TerminalModel(state, [], constraints=equalities)
    problem = gp.ocp.ShootingProblem(x0, [running] * 20, terminal)
    nlp = gp.solvers.NLP(problem)
    result = nlp.solve(max_iter=3000)
    assert (result.status, result.converged) == ("infeasible", False)
    assert result.iterations < 300
    for max_iter in (None, -1, 2.5):
        with pytest.raises(ValueError, match=_names("max_iter")):
            nlp.solve(max_iter=max_iter)
    with pytest.raises(ValueError, match=_names("time_limit")):
        nlp.solve(time_limit=np.nan)
