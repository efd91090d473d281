"""The forward pass of DDP / FDDP / BoxFDDP: one line-search trial of a step alpha.

The trial rolls the problem out phase by phase through the stage models'
``rollout_trial`` (:mod:`geppetto.ocp.trial`: the feedback law
``u - alpha k - K dx`` and one kernel per phase for the multibody dynamics),
then costs the trial trajectory with one batched cost evaluation.  The
predicted states ``xnext`` are kept: after an accepted step they give the new
gaps without a second evaluation of the dynamics.
"""
import numpy as np

from ..ocp.problem import _numba_threads

# what a Numba kernel raises on a singular state (x / 0.0; SystemError out of prange)
KERNEL_ERRORS = (ZeroDivisionError, FloatingPointError, OverflowError, SystemError)


class ForwardPass:
    """Trials on ``problem``: ``__call__`` returns (xs_try, us_try, xnext, cost), or None
    when the rollout diverged (non-finite state or cost, degenerate contacts)."""

    def __init__(self, problem):
        self.problem = problem
        self.workspaces = [None] * len(problem.phases)

    def _workspace(self, index, model):
        if self.workspaces[index] is None:
            self.workspaces[index] = model.trial_workspace()
        return self.workspaces[index]

    def __call__(self, xs, us, gains, bounds, alpha, use_gaps, boxed, gaps):
        """The trial of step ``alpha``: gains = (k, K), bounds = (u_lower, u_upper) (N, nu);
        ``use_gaps``: start each knot (alpha - 1) f_t off the prediction (FDDP while
        infeasible); ``boxed``: clamp the controls to the bounds (BoxFDDP)."""
        problem = self.problem
        k, K = gains
        u_lower, u_upper = bounds
        xs_try = np.empty_like(xs)
        us_try = np.empty_like(us)
        xnext = np.empty((problem.N, problem.nx))
        predicted = problem.x0
        with _numba_threads(problem.nthreads):
            for index, (model, start, stop, _) in enumerate(problem.phases):
                window = slice(start, stop)
                inputs = (xs[window], us[window], k[window], K[window], gaps[window],
                          u_lower[window], u_upper[window], alpha, use_gaps, boxed)
                outputs = (xs_try[window], us_try[window], xnext[window])
                try:
                    failed = model.rollout_trial(inputs, predicted, outputs,
                                                 self._workspace(index, model))
                except KERNEL_ERRORS:
                    return None          # a diverging rollout reached a singular state
                if failed >= 0:
                    return None
                predicted = xnext[stop - 1]
        if use_gaps:
            xs_try[-1] = problem.state.integrate(predicted[None], (alpha - 1.0) * gaps[-1:])[0]
        else:
            xs_try[-1] = predicted
        if not (np.all(np.isfinite(xs_try)) and np.all(np.isfinite(us_try))):
            return None
        cost = problem.calc_costs(xs_try, us_try)
        if not np.isfinite(cost):
            return None
        return xs_try, us_try, xnext, cost
