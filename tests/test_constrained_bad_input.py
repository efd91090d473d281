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
  a string for eps_rel, rho_min, rho_max and c1; 0 for rho_interval, which made ADMM's
  loop run chunks of no iteration forever)."""
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
        alpha=(0.0, 2.0, -1.0, np.nan, "1.6"), c1=(0.0, 1.0, -1e-4, np.nan, "1e-4"),
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
