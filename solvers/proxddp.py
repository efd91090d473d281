"""ProxDDP: primal-dual augmented-Lagrangian DDP for hard constraints on a ShootingProblem.

Jallet, Bambade, Mansard & Carpentier, "Constrained differential dynamic programming: a
primal-dual augmented Lagrangian approach" (IROS 2022) and Jallet, Bambade, Arlaud,
El-Kazdadi, Mansard & Carpentier, "PROXDDP: Proximal Constrained Trajectory
Optimization" (2023); aligator's ``SolverProxDDP``.  The constraint rows are ALDDP's
(:class:`~.alddp.ALDDP`: stage and terminal ``Constraint`` s, control bounds, state
bounds, each row's penalty scaled to its residual's units by ``scale_rows``).  Unlike
ALDDP, the multipliers lambda are unknowns of the Newton step and of the line search.

For a row r with bounds [l, h], the multiplier estimate lambda_e (fixed within an inner
solve), the multiplier lambda (an iterate) and the row's penalty mu (mu_row, see ALDDP):

    s = r + mu lambda_e,   lambda+ = (s - P(s)) / mu     (P: clip to [l, h]; the
                                                           projection onto the normal
                                                           cone at the shifted estimate),
    M(x, lambda) = cost + sum mu / 2 (|lambda+|^2 - |lambda_e|^2)       (ALDDP's merit)
                        + sum mu / 2 |lambda+ - lambda|^2,               (the dual term)

the primal-dual augmented Lagrangian (PDAL, Gill & Robinson 2012; the papers' eq. for
M_mu).  The Newton step on its stationarity system per knot, rows active at s (D = 1
where s is outside [l, h]) with their dual block -mu I,

    [H      R_A^T] [dz      ]     [grad f + R^T lambda         ]
    [R_A   -mu I ] [dlambda_A] = -[mu (lambda+ - lambda)_A      ],  dlambda_I = -lambda_I,

reduces, eliminating dlambda, to (H + R_A^T R_A / mu) dz = -(grad f + R^T lambda+): the
same primal Riccati sweep as ALDDP's (:func:`.riccati.backward_pass` on the AL terms of
:func:`.alddp._augmented_lagrangian`), whose step does not depend on lambda, and

    dlambda = lambda+ - lambda + D R dz / mu.

In a trial of step alpha the multipliers follow the trial's actual deviations (dx, du)
(FDDP's rollout with its feedback), lambda(alpha) = lambda + alpha (lambda+ - lambda) + D R
(dx, du) / mu (the multipliers' feedback gains of the papers' forward pass), and the
trial is judged on M(x(alpha), lambda(alpha)).  Along the linearization the dual term is
mu / 2 (1 - alpha)^2 |lambda+ - lambda|^2, so the expected decrease of M is FDDP's
(d1, d2) with d1 + mu |lambda+ - lambda|^2 and d2 - mu |lambda+ - lambda|^2, and the
step is a descent direction of M (dM/dalpha = -(d1 + mu |lambda+ - lambda|^2)).

Outer loop: BCL (Conn, Gould & Toint 1991; the papers' Algorithm 1) as ALDDP's, with
the Newton multiplier update lambda_e <- lambda (aligator's default), on the same gate:
the last step accepted from a feasible iterate whose stop value (computed with preg <=
``th_reg``) was below omega, and the dual residual max mu |lambda+ - lambda| below omega
too.  ``take_smallest_step`` (aligator's line search takes its smallest step when none
passes, and raises the regularization): a refused search from a feasible iterate moves
by the smallest alpha anyway, so that rows a full step pushes past their bounds become
active at the next linearization (the semi-smooth Newton step then sees them); a search
that ALDDP's quadratic model shows hopeless (:meth:`~.alddp.ALDDP._hopeless`) goes
straight to that smallest step.

The proximal term rho |x - x_prev|^2 / 2 on the primal variables adds rho I to the
Hessian at the current iterate (x_prev = x: no gradient term); here it is the
regularization preg of FDDP's sweeps (preg_min = ``reg_min``).

Measured (``benchmarks/constrained.py``, 2026-11-27, load 9-11 on the 2 cores, CPU time
of the thread, from the guess / FDDP's optimum; the table and the variants tried in
``benchmarks/constrained_notes.md``): the tasks ALDDP was not tuned on take fewer
iterations, ur5 "vbound" 29 / 20 (ALDDP 122 / 60), "torque" 40 / 14 (94 / 14), panda
"vbound" 106 / 43 (192 / 150), "torque" 312 / 37 (434 / 37), at ALDDP's costs (1e-8);
without ``take_smallest_step`` 47 / 55, 89 / 14, 189 / 167, 344 / 37.  The tuned tasks
take a few more (plane 21 / 16, 19 / 15; stiff 79 / 75, 98 / 58).  CPU time against
IPOPT (Gauss-Newton): ur5 "vbound" 0.07x / 0.19x, panda "vbound" 1.24x / 0.41x; per
iteration 1.2-1.75x FDDP's (2.4x on ur5 "torque" from the guess): more trials per
iteration, and a calc_diff on every one.

Converged, ``infeasible`` and the result: as ALDDP's; ``result.multipliers`` are the
multipliers lambda (warm start: ``solve(..., multipliers=result.multipliers,
mu=result.mu)``).
"""
import time

import numpy as np

from ..dynamics.config import kernel
from ..ocp.fused import CALC, DIFF
from ..ocp.held import typed_list
from .alddp import ALDDP, _row_scales
from .callbacks import CallbackVerbose
from .forward import KERNEL_ERRORS
from .riccati import backward_pass

_HISTORY_KEYS = ("cost", "merit", "stop", "grad", "preg", "step", "gaps", "violation", "mu",
                 "dual", "dV_exp", "dV", "time")


@kernel
def _dual_residual(blocks, duals, mu):
    """At the iterate, after :func:`.alddp._augmented_lagrangian` wrote lambda+
    (``lam_hat``) of every row: plus <- lambda+; returns (sum mu_row / 2 |lambda+ -
    lambda|^2, sum mu_row |lambda+ - lambda|^2, max mu_row |lambda+ - lambda|).

    ``duals``: per block (lambda, plus, trial) (K, nr)."""
    half, full, largest = 0.0, 0.0, 0.0
    for b in range(len(blocks)):
        lam_hat, scale = blocks[b][6], blocks[b][7]
        lam, plus = duals[b][0], duals[b][1]
        for k in range(lam.shape[0]):
            for i in range(lam.shape[1]):
                mu_row = mu * scale[k, i]
                plus[k, i] = lam_hat[k, i]
                e = lam_hat[k, i] - lam[k, i]
                half += 0.5 * mu_row * e * e
                full += mu_row * e * e
                largest = max(largest, mu_row * abs(e))
    return half, full, largest


@kernel
def _trial_duals(blocks, duals, mu, dxs, dus, alpha):
    """The trial's multipliers lambda + alpha (plus - lambda) + D R (dx, du) / mu_row
    (D = 1 where plus != 0: the rows active at the iterate; R its Jacobians, which the
    trial's evaluation (CALC) left) into ``trial``, and the dual term sum mu_row / 2
    |lambda+ - trial|^2 with the trial's lambda+ (``lam_hat``, written before)."""
    total = 0.0
    N = dus.shape[0]
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, lam_e, lam_hat, scale, lower, upper, index, dx_index = \
            blocks[b]
        lam, plus, trial = duals[b]
        for k in range(lam.shape[0]):
            n = start + k
            for i in range(lam.shape[1]):
                mu_row = mu * scale[k, i]
                value = lam[k, i] + alpha * (plus[k, i] - lam[k, i])
                if plus[k, i] != 0.0:
                    if kind == 1:
                        moved = dus[n, i]
                    elif kind == 2:
                        moved = dxs[n, dx_index[i]]
                    else:
                        j = index[i]
                        moved = 0.0
                        for a in range(Rx.shape[2]):
                            moved += Rx[k, j, a] * dxs[n, a]
                        if n < N:
                            for a in range(Ru.shape[2]):
                                moved += Ru[k, j, a] * dus[n, a]
                    value += moved / mu_row
                trial[k, i] = value
                e = lam_hat[k, i] - value
                total += 0.5 * mu_row * e * e
    return total


class ProxDDP(ALDDP):
    """Primal-dual augmented-Lagrangian DDP (see the module docstring) on any
    ShootingProblem.

    Options: ALDDP's (tolerances, the BCL schedule, ``scale_rows``, ``th_reg``,
    ``dual_warm_start``, FDDP's regularization and line search; not ALDDP's
    ``warm_line_search``: every search starts at alpha = 1, measured in
    benchmarks/constrained_notes.md; ``box_controls`` as ALDDP's: ur5 "torque" from the
    guess 30 iterations to IPOPT's optimum instead of 40 to the worse one) and
    ``take_smallest_step`` (default True): a refused line search from a feasible
    iterate takes the smallest step of ``alphas``.
    """

    def __init__(self, problem, take_smallest_step=True, **options):
        super().__init__(problem, **options)
        self.take_smallest_step = bool(take_smallest_step)
        # per block: the multipliers lambda (the iterate), lambda+ at the iterate, and a
        # trial's multipliers
        self.duals = [tuple(np.zeros(b.shape) for _ in range(3)) for b in self.blocks]
        self.typed_duals = None
        if self.blocks:
            self.typed_duals = typed_list(self.duals)

    def _dual_terms(self, mu):
        """(M's dual term, sum mu |lambda+ - lambda|^2, max mu |lambda+ - lambda|) at the
        iterate (plus <- lambda+)."""
        if self.typed_blocks is None:
            return 0.0, 0.0, 0.0
        return _dual_residual(self.typed_blocks, self.typed_duals, mu)

    def _trial_merit(self, xs, us, trial, mu, alpha):
        """M at a trial (xs_try, us_try, xnext, cost) of step alpha, its multipliers into
        the duals' ``trial``; nan when its constraints cannot be evaluated."""
        xs_try, us_try, _, cost = trial
        if self.typed_blocks is None:
            return cost
        try:
            self.constraints.evaluate(xs_try, us_try, CALC)
        except KERNEL_ERRORS:
            return np.nan
        al_value = self._al_terms(xs_try, us_try, mu, False)[0]
        dxs = self.problem.state.difference(xs, xs_try)
        dual = _trial_duals(self.typed_blocks, self.typed_duals, mu, dxs, us_try - us, alpha)
        return cost + al_value + dual

    def solve(self, xs=None, us=None, multipliers=None, mu=None, max_iter=500,
              time_limit=None, verbose=False, callbacks=(), is_feasible=False):
        """Solve from the warm start (xs, us) (defaults as FDDP's) and, optionally, the
        multipliers of a previous result (``result.multipliers``, both lambda and
        lambda_e start there) and its ``mu``.  Returns a :class:`~.alddp.
        ConstrainedResult`; never raises from inside a kernel."""
        problem, inner = self.problem, self.inner
        start_time = time.perf_counter()
        xs, us = inner._initial_guess(xs, us)
        if multipliers is None and self.dual_warm_start and self.multipliers is not None:
            multipliers = [m.copy() for m in self.multipliers]
            if self.dual_warm_start == "shift":
                for m in multipliers:
                    m[:-1] = m[1:].copy()
        for lam_e, (lam, _, _), start in zip(self.lam, self.duals,
                                             self._initial_multipliers(multipliers)):
            lam_e[:] = start
            lam[:] = start
        mu = self.mu_init if mu is None else float(mu)
        if not (np.isfinite(mu) and mu > 0.0):
            raise ValueError(f"mu must be finite and positive, got {mu}")
        mu = max(mu, self.mu_min)
        omega, eta = self._tolerances(mu)
        callbacks = list(callbacks) + ([CallbackVerbose()] if verbose else [])
        history = {key: [] for key in _HISTORY_KEYS}
        feasible = bool(is_feasible)
        preg = inner.reg_init
        status, converged, stop, outer, iteration = "max_iter", False, np.inf, 0, 0
        cost, violation, al_value, dual_value = np.nan, np.inf, 0.0, 0.0
        dual_full, dual_error = 0.0, 0.0
        reference = (np.inf, mu)        # (violation, mu) when the violation last halved
        gaps = np.zeros((problem.N + 1, problem.ndx))
        recalc, last_stop, stepped_from_feasible, stepped = True, np.inf, False, False
        last_preg = preg
        while iteration < max_iter:
            iteration += 1
            t0 = time.perf_counter()
            if recalc:
                try:
                    cost = problem.calc_diff(xs, us, validate=False)    # our own iterates
                    self.constraints.evaluate(xs, us, DIFF)
                except KERNEL_ERRORS as error:
                    status = f"the dynamics failed at the current iterate ({type(error).__name__})"
                    break
                gaps = problem.gaps(xs, inner.gaps)
                if feasible:
                    gaps[:] = 0.0
                if iteration == 1 and self.scale_rows and self.typed_blocks is not None:
                    _row_scales(self.typed_blocks, self.scale_max)      # fixed for this solve
                al_value, violation = self._al_terms(xs, us, mu, True)
                dual_value, dual_full, dual_error = self._dual_terms(mu)
                recalc = False
            # BCL, on ALDDP's gate (see ALDDP.solve) and the dual residual below omega
            if stepped_from_feasible and stepped and last_stop < omega \
                    and last_preg <= self.th_reg and dual_error < max(omega, self.th_constraint):
                if violation <= self.th_constraint and last_stop < self.th_stop:
                    status, converged = "converged", True
                    iteration -= 1
                    break
                outer += 1
                if violation <= 0.5 * reference[0]:        # progress: a new reference
                    reference = (violation, mu)
                elif violation > eta and reference[1] / mu >= self.infeasible_ratio * (
                        1.0 - 1e-12):
                    status = "infeasible"       # penalty x infeasible_ratio, violation kept
                    break
                if violation <= eta or mu <= self.mu_min:
                    for lam_e, (lam, _, _) in zip(self.lam, self.duals):
                        lam_e[:] = lam                      # Newton multipliers
                    eta = max(eta * mu ** 0.9, self.th_constraint)
                    omega = max(omega * mu, self.th_stop)
                else:
                    mu = max(mu * self.mu_factor, self.mu_min)
                    omega, eta = self._tolerances(mu)
                al_value = self._al_terms(xs, us, mu, True)[0]      # the new subproblem
                dual_value, dual_full, dual_error = self._dual_terms(mu)
            box = self._hold_bounds(feasible, us)
            while True:
                failed = backward_pass(problem.Fx, problem.Fu, self.Lx, self.Lu, self.Lxx,
                                       self.Luu, self.Lxu, gaps, feasible, preg, problem.nus,
                                       box, us, inner.u_lower, inner.u_upper, inner.Vx,
                                       inner.Vxx, inner.Qu, inner.Quu, inner.k, inner.K,
                                       inner.Quuk)
                if failed < 0:
                    break
                if preg >= inner.reg_max:
                    status = "regularization at maximum: Quu not positive definite"
                    return self._proximal_result(xs, us, cost, iteration - 1, False, status, mu,
                                                 stop, outer, history)
                preg = inner._increased(preg)
            dg, dq = inner.expected_terms(gaps, feasible)
            stop = abs(dg + 0.5 * dq)
            merit = cost + al_value + dual_value
            accepted, smallest, missed_before = None, None, np.nan
            index, last = 0, len(inner.alphas) - 1
            while index <= last:
                alpha = inner.alphas[index]
                trial = inner.try_step(xs, us, gaps, alpha, feasible)
                trial_merit = self._trial_merit(xs, us, trial, mu, alpha) if trial else np.nan
                if not np.isfinite(trial_merit):
                    index += 1
                    continue
                d1, d2 = inner.expected_improvement(dg, dq, xs, trial[0], gaps, feasible)
                d1, d2 = d1 + dual_full, d2 - dual_full
                dv_exp = alpha * (d1 + 0.5 * alpha * d2)
                dv = merit - trial_merit
                if inner.accepts(d1, dv_exp, dv, feasible):
                    accepted = (alpha, trial, d1, dv_exp, dv)
                    break
                if index == last:
                    smallest = (alpha, trial, d1, dv_exp, dv)
                    break
                missed = (dv_exp - dv) / (alpha * alpha)
                if feasible and self.take_smallest_step and \
                        self._hopeless(d1, d2, dv_exp, dv, missed, missed_before):
                    index = last        # no step of alphas passes: on to the smallest
                    continue
                missed_before = missed
                index += 1
            refused = accepted is None
            if refused and feasible and self.take_smallest_step and smallest is not None:
                accepted = smallest
            gap_norm = 0.0 if feasible else float(np.max(np.abs(gaps)))
            if accepted is not None:
                alpha, (xs, us, xnext, cost), d1, dv_exp, dv = accepted
                problem.xnext[:] = xnext
                for lam, _, trial_lam in self.duals:
                    lam[:] = trial_lam
                stepped_from_feasible, stepped = feasible, not refused
                feasible = inner.feasible_after(feasible, alpha)
                recalc = True
            else:
                alpha, d1, dv_exp, dv = inner.alphas[-1], dg, np.nan, np.nan
                stepped_from_feasible, stepped = feasible, False
            last_stop, last_preg = stop, preg
            if alpha > inner.th_stepdec and not refused:
                preg = max(preg / inner.reg_factor, inner.reg_min)
            if alpha <= inner.th_stepinc or refused:
                preg = inner._increased(preg)
            record = dict(cost=cost, merit=merit, stop=stop, grad=d1, preg=preg, step=alpha,
                          gaps=gap_norm, violation=violation, mu=mu, dual=dual_error,
                          dV_exp=dv_exp, dV=dv, time=time.perf_counter() - t0)
            for key in _HISTORY_KEYS:
                history[key].append(record[key])
            for callback in callbacks:
                callback(self, iteration, record)
            if refused and preg >= inner.reg_max:
                status = "no step accepted at maximum regularization"
                break
            if time_limit is not None and time.perf_counter() - start_time > time_limit:
                status = "time_limit"
                break
        return self._proximal_result(xs, us, cost, iteration, converged, status, mu, stop,
                                     outer, history)

    def _proximal_result(self, xs, us, cost, iterations, converged, status, mu, stop, outer,
                         history):
        """ALDDP's result with the multipliers lambda."""
        return self._result(xs, us, cost, iterations, converged, status,
                            [lam for lam, _, _ in self.duals], mu, stop, outer, history)
