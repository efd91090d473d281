"""Bad inputs (rob34, issue 19's outside check).  CSQP on a constraint whose residual
returns NaN: the
solve ends at once with the status NOT_FINITE, which names the residual, where it used to
end at its first QP as "the QP's Hessian is not positive definite" (a status that points
at the costs).  The rows: user residuals (:class:`geppetto.ocp.NumbaResidual`) on the
damped double integrator of tests/test_constrained_solver.py."""
import numpy as np
import pytest

import geppetto as gp
from geppetto import ocp
from geppetto.dynamics.config import kernel
from geppetto.solvers.csqp import NOT_FINITE

from test_constrained_solver import _lq_problem


@kernel
def _nan_value(x, u, oR, op, J, reference, parameters, r, Rx, Ru, with_jacobian):
    """r = NaN everywhere (a user residual with a bug)."""
    r[0] = np.nan
    if with_jacobian:
        Rx[0, 0] = 1.0


@kernel
def _nan_jacobian_beyond(x, u, oR, op, J, reference, parameters, r, Rx, Ru, with_jacobian):
    """r = x_0, its Jacobian NaN once x_0 > parameters[0] (the value stays finite: the
    violation alone cannot see it)."""
    r[0] = x[0]
    if with_jacobian:
        Rx[0, 0] = np.nan if x[0] > parameters[0] else 1.0


def _problem(kernel_, parameters):
    row = ocp.Constraint(ocp.NumbaResidual(1, kernel_, parameters=parameters), -10.0, 10.0)
    return _lq_problem(N=6, stage_constraints=[row], bounded_knots=range(6))


def test_nan_residual_at_the_start_is_named():
    result = gp.solvers.CSQP(_problem(_nan_value, [0.0])).solve(max_iter=20)
    assert result.status == f"{NOT_FINITE} at the start", result.status
    assert result.iterations == 0 and not result.converged


def test_nan_jacobian_met_along_the_solve_is_named():
    # the guess: x_0 = X0[0] = 1 on every knot; the first step overshoots to 1.014 on
    # knot 2 before it turns to the target's 0.3
    problem = _problem(_nan_jacobian_beyond, [1.012])
    result = gp.solvers.CSQP(problem).solve(max_iter=20)
    assert result.status == NOT_FINITE, result.status
    assert 0 < result.iterations < 20 and not result.converged
    assert np.all(np.isfinite(result.xs)) and np.all(np.isfinite(result.us))


def test_finite_rows_solve_as_before():
    """The same row with a finite Jacobian everywhere converges (the test above fails
    through the NaN, not through the row)."""
    result = gp.solvers.CSQP(_problem(_nan_jacobian_beyond, [1e9])).solve(max_iter=50)
    assert result.converged, result.status
    assert result.violation <= 1e-8


@pytest.mark.parametrize("bounds, match", [
    ((np.zeros(3), np.ones(4)), r"state_bounds \(lower\): expected a number or shape \(4,\), "
                                r"got shape \(3,\)"),
    ((0.0, np.ones((4, 1))), r"state_bounds \(upper\).*got shape \(4, 1\)"),
    ((0.0,), r"state_bounds: expected \(lower, upper\)"),
    ((np.zeros(4), 1.0), None)])
def test_state_bounds_of_a_wrong_shape_are_named(bounds, match):
    """A StageModel's state bounds of the wrong shape: a ValueError that names the
    argument (numpy's broadcast error did not); a number or shape (nx,) is accepted."""
    dynamics = _lq_problem().running_models[0].dynamics
    if match is None:
        stage = ocp.StageModel(dynamics, state_bounds=bounds)
        assert np.array_equal(stage.x_upper, np.ones(4))
        return
    with pytest.raises(ValueError, match=match):
        ocp.StageModel(dynamics, state_bounds=bounds)
