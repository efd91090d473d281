"""The forward pass of DDP / FDDP / BoxFDDP: one line-search trial of a step alpha.

The trial rolls the problem out phase by phase through the stage models'
``rollout_trial`` (:mod:`geppetto.ocp.trial`: the feedback law
``u - alpha k - K dx`` and one kernel per phase for the multibody dynamics),
then costs the trial trajectory with one batched cost evaluation (a free-dynamics
phase's rollout stores its knots' placements and world Jacobians in the phase
data, and the costs read them: no forward kinematics in the line search; an RK
phase's rollout also stores its stage points and theirs, so that its costs over
the stage points evaluate no dynamics again).  The
predicted states ``xnext`` are kept: after an accepted step they give the new
gaps without a second evaluation of the dynamics.

Where the stages allow it (free dynamics with any scheme, contact and
impulse dynamics with a jitted step, and fused costs everywhere, one thread:
:func:`geppetto.ocp.horizon.horizon_trial`), the whole trial, the rollouts, the
costs of every knot and FDDP's gap term of the expected improvement, is one
compiled call.

A trial allocates no arrays: it writes into one of two preallocated sets of
(xs, us, xnext), the one that does not hold the current iterate (a solver keeps
the accepted trial's arrays as its iterate; the next trial then writes into the
other set).
"""
import math

import numpy as np

from ..ocp.horizon import horizon_trial
from ..ocp.problem import _numba_threads
from .riccati import gap_decrease

# what a Numba kernel raises on a singular state (x / 0.0; SystemError out of prange)
KERNEL_ERRORS = (ZeroDivisionError, FloatingPointError, OverflowError, SystemError)


def _trial_plan(problem):
    """(workspaces, one-call trials by nthreads) of ``problem``: the phases' trial scratch
    and the :class:`~geppetto.ocp.horizon.HorizonTrial` built for them, made once per
    problem and shared by the solvers on it, as its data are (one trial at a time).  Built
    per solver, the one-call trial (the phases' arrays, held) cost the first
    trial of each solve by a new solver 2.4-2.5 ms on the ur5 reaching task (100 knots),
    3.8-4.1 ms on the solo12 trot (CPU time, load 11): on ur5 a fifth of a 13-iteration
    FDDP solve."""
    plans = problem.solver_plans
    if "trial" not in plans:
        plans["trial"] = ([model.trial_workspace(data) for model, _, _, data in problem.phases],
                          {})
    return plans["trial"]


class ForwardPass:
    """Trials on ``problem``: ``__call__`` returns (xs_try, us_try, xnext, cost), or None
    when the rollout diverged (non-finite state or cost, degenerate contacts).  The
    returned arrays are reused by the trial after next that does not start from them:
    copy them to keep them longer than the solver's iterate.  ``one_call=False``: the
    phase-by-phase trial even where the one-call trial applies (for comparisons)."""

    def __init__(self, problem, one_call=True):
        self.problem = problem
        self.workspaces, self._horizons = _trial_plan(problem)
        self.one_call = one_call      # False: the phase-by-phase trial always
        N, nx, nu = problem.N, problem.nx, problem.nu
        self.buffers = [(np.empty((N + 1, nx)), np.empty((N, nu)), np.empty((N, nx)))
                        for _ in range(2)]
        # the phases' windows of each buffer set, sliced once: [(xs, us, xnext) per phase]
        self.windows = [[(xs[start:stop], us[start:stop], xnext[start:stop])
                         for _, start, stop, _ in problem.phases]
                        for xs, us, xnext in self.buffers]
        self.gap_shift = np.empty((1, problem.ndx))
        self.no_Vxx = np.zeros((0, problem.ndx, problem.ndx))
        self.merit = (None, 0.0)      # (xs_try, FDDP's gap term) of the last one-call trial
        # a horizon with RK phases sums its knots' costs as NumPy does (see _one_call)
        self.numpy_total = any(len(model.integrator.weights) > 1
                               for model, _, _, _ in problem.phases)

    @property
    def horizon(self):
        """The one-call trial (built at the first trial, kept by the problem), or None: the
        phase-by-phase trial.  It publishes its rollout knot by knot and its costs phase
        by phase in the problem's ``trial_signal``, for a calc_diff started at the trial
        on several threads
        (:meth:`~geppetto.ocp.ShootingProblem._speculate`).  (A trial over the parts of
        the parallel plan, each its own data, published finer but wrote the data that
        worker's calc_diff then read from the other core: on the solo12 trot, two
        threads over one 1.34-1.35x with it, 1.42-1.43x with the phases' own data.)"""
        if not self.one_call:
            return None
        problem = self.problem
        if 1 not in self._horizons:     # (any thread count)
            with _numba_threads(1):
                self._horizons[1] = horizon_trial(problem, self.workspaces,
                                                  problem.trial_signal)
        return self._horizons[1]

    def _free_set(self, xs):
        """The index of the buffer set that does not hold the iterate ``xs``."""
        return 1 if xs is self.buffers[0][0] else 0

    def free_buffers(self, xs):
        """(xs, us, xnext): the buffer set that does not hold the iterate ``xs`` (the one
        the next trial from ``xs`` writes into), for a caller that builds a new iterate
        in place (the MPC's shifted warm start)."""
        return self.buffers[self._free_set(xs)]

    def _abandon(self):
        """None, the phases' data told that no trial kinematics wait for their costs."""
        for model, _, _, data in self.problem.phases:
            model.discard_trial(data)
        return None

    def __call__(self, xs, us, gains, bounds, alpha, use_gaps, boxed, gaps, Vxx=None):
        """The trial of step ``alpha``: gains = (k, K), bounds = (u_lower, u_upper) (N, nu);
        ``use_gaps``: start each knot (alpha - 1) f_t off the prediction (FDDP while
        infeasible); ``boxed``: clamp the controls to the bounds (BoxFDDP); ``Vxx``
        (N+1, ndx, ndx): FDDP's gap term of the expected improvement is wanted
        (:meth:`gap_decrease`), computed by the one-call trial when there is one."""
        problem = self.problem
        k, K = gains
        u_lower, u_upper = bounds
        which = self._free_set(xs)
        xs_try, us_try, xnext = self.buffers[which]
        horizon = self.horizon
        if horizon is not None:
            inputs = (xs, us, k, K, gaps, u_lower, u_upper, float(alpha), bool(use_gaps),
                      bool(boxed))
            return self._one_call(horizon, inputs, self.buffers[which], Vxx)
        predicted = problem.x0
        with _numba_threads(1):
            for (model, start, stop, _), workspace, outputs in zip(
                    problem.phases, self.workspaces, self.windows[which]):
                inputs = (xs[start:stop], us[start:stop], k[start:stop], K[start:stop],
                          gaps[start:stop], u_lower[start:stop], u_upper[start:stop], alpha,
                          use_gaps, boxed)
                try:
                    failed = model.rollout_trial(inputs, predicted, outputs, workspace)
                except KERNEL_ERRORS:
                    failed = 0           # a diverging rollout reached a singular state
                if failed >= 0:
                    return self._abandon()
                predicted = xnext[stop - 1]
            if use_gaps:
                np.multiply(gaps[-1:], alpha - 1.0, out=self.gap_shift)
                xs_try[-1] = problem.state.integrate(predicted[None], self.gap_shift)[0]
            else:
                xs_try[-1] = predicted
            if not np.isfinite(us_try).all():
                return self._abandon()   # the states are checked knot by knot by the rollout
            cost = problem.calc_costs(xs_try, us_try)
        if not np.isfinite(cost):
            return None
        return xs_try, us_try, xnext, cost

    def _one_call(self, horizon, inputs, outputs, Vxx):
        """The trial by :class:`~geppetto.ocp.horizon.HorizonTrial`; FDDP's gap term kept
        in ``merit`` when ``Vxx`` is given."""
        merit_gaps = Vxx is not None
        self.merit = (None, 0.0)
        try:
            failed, cost, dv = horizon(inputs, outputs, Vxx if merit_gaps else self.no_Vxx,
                                       merit_gaps)
        except KERNEL_ERRORS:
            failed, cost = 0, np.nan
        if failed < 0 and self.numpy_total:
            # the total of the phase-by-phase trial (ShootingProblem.calc_costs, NumPy's
            # pairwise sum) that RK horizons took before their one-call trial: the same
            # bits, so that their line searches decide as before (the kernel adds the
            # knots' costs in order, which rounds differently past 8 knots)
            cost = float(self.problem.costs.sum())
        # math.isfinite on the kernel's float: 0.05 us against numpy's 0.6 us for a scalar
        if failed >= 0 or not math.isfinite(cost):
            return None
        self.merit = (outputs[0] if merit_gaps else None, dv)
        return outputs + (cost,)

    def gap_decrease(self, xs, xs_try, gaps, Vxx):
        """FDDP's -sum_t f_t . Vxx_t (xs_t (-) xs_try_t) of the trial ``xs_try``: the
        value its one-call trial computed, else from the states' difference."""
        if self.merit[0] is xs_try:
            return self.merit[1]
        return gap_decrease(gaps, Vxx, self.problem.state.difference(xs_try, xs))
