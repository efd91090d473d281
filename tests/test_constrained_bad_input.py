"""Bad input to the constrained solvers (rs35, issue 19: a clear exception at the API
border or a clear status, never a crash or a hang).

- ALDDP and ProxDDP on a constraint whose residual returns NaN (value or Jacobian) or
  +inf end with CSQP's status :data:`~geppetto.solvers.alddp.NOT_FINITE` (one constant,
  one check: :func:`~geppetto.solvers.alddp.derivatives_finite`), where they ended
  "regularization at maximum: Quu not positive definite" (a status that points at the
  costs).  The rows: tests/test_csqp_bad_input.py's user residuals on the damped double
  integrator of tests/test_constrained_solver.py.
- Every numeric option of CSQP, ALDDP and ProxDDP: 0, negative, NaN, inf, a bool or a
  string where they make no sense raise a ValueError naming the option (CSQP took NaN or
  a string for eps_rel, rho_min, rho_max and c1; 0 or -1 for max_qp_iter, rho_interval
  (ADMM's chunk length) and infeasible_after, which at 0 sent every solve to the
  restoration at its first QP)."""
import re

import numpy as np
import pytest

import geppetto as gp
from geppetto import ocp
from geppetto.solvers.alddp import NOT_FINITE
from geppetto.solvers.csqp import NOT_FINITE as CSQP_NOT_FINITE

from test_constrained_solver import _lq_problem
from test_csqp_bad_input import _nan_jacobian_beyond, _nan_value, _plus_inf_value, _problem

AL_SOLVERS = (gp.solvers.ALDDP, gp.solvers.ProxDDP)


def test_one_status_for_every_solver():
    assert NOT_FINITE is CSQP_NOT_FINITE


@pytest.mark.parametrize("solver_class", AL_SOLVERS, ids=lambda s: s.__name__)
@pytest.mark.parametrize("residual, upper", [(_nan_value, 10.0), (_plus_inf_value, np.inf)],
                         ids=["nan", "plus_inf"])
def test_a_row_not_finite_at_the_start_is_named(solver_class, residual, upper):
    result = solver_class(_problem(residual, [0.0], upper=upper)).solve(max_iter=20)
    assert result.status == f"{NOT_FINITE} at the start", result.status
    assert result.iterations == 0 and not result.converged


def _row_problem(threshold, upper):
    """r = x_0 in [-10, upper] on knots 0-5, its Jacobian NaN where x_0 > threshold; the
    guess x_0 = 1 everywhere, the unconstrained solution 1.0107, 1.0142, 1.0127 on knots
    1-3."""
    row = ocp.Constraint(ocp.NumbaResidual(1, _nan_jacobian_beyond, parameters=[threshold]),
                         -10.0, upper)
    return _lq_problem(N=6, stage_constraints=[row], bounded_knots=range(6))


@pytest.mark.parametrize("solver_class", AL_SOLVERS, ids=lambda s: s.__name__)
@pytest.mark.parametrize("upper", [10.0, 1.01], ids=["inactive", "active"])
def test_a_nan_jacobian_met_along_the_solve_is_named(solver_class, upper):
    """The NaN beyond x_0 = 1.005, met after the first step.  Inactive (x_0 <= 10): the
    sweep never reads the NaN and the solve reached "converged"; active at the solution
    (x_0 <= 1.01): every sweep at a point where the row is active fails, and the solve
    ended "regularization at maximum: Quu not positive definite"."""
    result = solver_class(_row_problem(1.005, upper)).solve(max_iter=20)
    assert result.status == NOT_FINITE, result.status
    assert 0 < result.iterations < 20 and not result.converged
    assert np.all(np.isfinite(result.xs)) and np.all(np.isfinite(result.us))


@pytest.mark.parametrize("solver_class", AL_SOLVERS, ids=lambda s: s.__name__)
def test_the_same_row_finite_converges(solver_class):
    """The row of the test above with a finite Jacobian everywhere converges (that test
    fails through the NaN, not through the row)."""
    for upper in (10.0, 1.01):
        result = solver_class(_row_problem(1e9, upper)).solve(max_iter=50)
        assert result.converged, result.status
        assert result.violation <= 1e-8


# per option, values that must raise (each a ValueError that names the option); the
# values the options take are left to the solvers' own tests
_REAL_POSITIVE = (0.0, -1.0, np.nan, np.inf, True, "1e-6", None)
BAD_OPTIONS = {
    gp.solvers.CSQP: dict(
        th_stop=_REAL_POSITIVE, th_constraint=_REAL_POSITIVE, th_gaps=_REAL_POSITIVE,
        eps_abs=_REAL_POSITIVE, rho_init=_REAL_POSITIVE, sigma=_REAL_POSITIVE,
        big=_REAL_POSITIVE, polish_sigma=_REAL_POSITIVE, th_decrease=_REAL_POSITIVE,
        eps_rel=(-1.0, np.nan, np.inf, "0"), rho_min=_REAL_POSITIVE,
        rho_max=(1e-9, -1.0, np.nan, np.inf, "1e6"),          # 1e-9 < rho_min
        alpha=(0.0, 2.0, -1.0, np.nan, "1.6"), c1=(0.0, -1e-4, np.nan, np.inf, "1e-4"),
        eps_prim_inf=(-1.0, np.nan, np.inf),
        max_qp_iter=(0, -1, 2.5, np.inf, True, "10"), rho_interval=(0, -1, 2.5, np.inf),
        polish_iter=(-1, 2.5, np.nan), polish_rounds=(-2, 1.5), infeasible_after=(0, -1, 2.5),
        active_set_rounds=(-1, 2.5, np.nan)),
    gp.solvers.ALDDP: dict(
        th_stop=_REAL_POSITIVE, th_constraint=_REAL_POSITIVE, mu_init=_REAL_POSITIVE,
        mu_min=_REAL_POSITIVE, omega_init=_REAL_POSITIVE, eta_init=_REAL_POSITIVE,
        mu_factor=(0.0, 1.0, -0.1, np.nan, "0.1"), infeasible_ratio=(1.0, 0.5, np.nan, "10"),
        th_reg=(-1.0, np.nan, np.inf, "0"), scale_max=(0.5, np.nan, np.inf)),
}
BAD_OPTIONS[gp.solvers.ProxDDP] = BAD_OPTIONS[gp.solvers.ALDDP]


@pytest.mark.parametrize("solver_class", list(BAD_OPTIONS), ids=lambda s: s.__name__)
def test_bad_numeric_options_are_named(solver_class):
    problem = _row_problem(1e9, 10.0)
    for option, values in BAD_OPTIONS[solver_class].items():
        for value in values:
            with pytest.raises(ValueError, match=re.escape(option)):
                solver_class(problem, **{option: value})
                pytest.fail(f"{solver_class.__name__}({option}={value!r}) accepted")


def _bounded_problem(x0=None, target=None, upper=None, control_lower=None):
    """The double integrator with a box on x - target (its x_0 row, <= 0.72, active along
    the solve from x_0 = 1) on knots 1-7 and control bounds [-2, 2]."""
    from test_constrained_solver import _double_integrator, _double_integrator_diff, TARGET, X0
    dynamics = ocp.CustomDynamics(4, 2, _double_integrator, _double_integrator_diff,
                                  params=[0.3], nq=2)
    state = dynamics.state
    target = TARGET if target is None else target
    costs = [ocp.Cost(ocp.StateResidual(state, target), ocp.WeightedQuadratic([1, 2, .1, .1])),
             ocp.Cost(ocp.ControlResidual(2), weight=0.5)]
    upper = np.full(4, 0.72) if upper is None else upper
    control_lower = np.full(2, -2.0) if control_lower is None else control_lower
    row = ocp.Constraint(ocp.StateResidual(state, target), -1.0, upper)
    plain = ocp.StageModel(dynamics, costs, dt=0.1)
    bounded = ocp.StageModel(dynamics, costs, [row], dt=0.1,
                             control_bounds=(control_lower, np.full(2, 2.0)))
    terminal = ocp.TerminalModel(state, [ocp.Cost(ocp.StateResidual(state, target))])
    return ocp.ShootingProblem(X0 if x0 is None else x0, [plain] + [bounded] * 7, terminal)


def _layouts(a):
    """``a`` as non-native byte order, strided (not contiguous), Fortran order and, where
    its values are integers, an integer array: the same numbers."""
    a = np.asarray(a, dtype=float)
    wide = np.zeros(a.shape + (2,))
    wide[..., 0] = a
    out = {"big_endian": a.astype(a.dtype.newbyteorder(">")), "strided": wide[..., 0],
           "fortran": np.asfortranarray(a)}
    if np.all(a == np.round(a)):
        out["integer"] = a.astype(np.int64)
    return out


@pytest.mark.parametrize("solver_class", (gp.solvers.CSQP, gp.solvers.ProxDDP),
                         ids=lambda s: s.__name__)
def test_arrays_of_any_layout_solve_as_native_float64(solver_class):
    """Warm starts, x0, a residual's target, a Constraint's bound and control bounds given
    in non-native byte order, strided, in Fortran order or as integers solve to the bits
    of native float64 input (rs35, issue 19's item 4; rev34 had found a big-endian
    array read as native on the one-state dynamics paths)."""
    from test_constrained_solver import TARGET, X0
    problem = _bounded_problem()
    start = gp.solvers.FDDP(problem).solve(max_iter=3)
    reference = solver_class(problem).solve(start.xs, start.us, max_iter=50)
    assert reference.converged and reference.violation <= 1e-8, reference.status

    def same(result):
        assert result.status == reference.status
        np.testing.assert_array_equal(result.xs, reference.xs)
        np.testing.assert_array_equal(result.us, reference.us)

    for xs in _layouts(start.xs).values():
        same(solver_class(problem).solve(xs, start.us, max_iter=50))
    for us in _layouts(start.us).values():
        same(solver_class(problem).solve(start.xs, us, max_iter=50))
    for name, values in (("x0", X0), ("target", TARGET), ("upper", np.full(4, 0.72)),
                         ("control_lower", np.full(2, -2.0))):
        for layout in _layouts(values).values():
            other = _bounded_problem(**{name: layout})
            same(solver_class(other).solve(start.xs, start.us, max_iter=50))


@pytest.mark.parametrize("solver_class", AL_SOLVERS, ids=lambda s: s.__name__)
def test_bad_mu_of_a_solve_is_named(solver_class):
    solver = solver_class(_row_problem(1e9, 10.0))
    for mu in (0.0, -1.0, np.nan, np.inf, "0.01", True):
        with pytest.raises(ValueError, match="mu"):
            solver.solve(mu=mu, max_iter=5)
