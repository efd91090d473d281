"""DDP (iLQR), FDDP and BoxFDDP on a :class:`~geppetto.ocp.ShootingProblem`.

- :class:`DDP`: Gauss-Newton DDP (iLQR, no second-order dynamics terms) from
  a feasible rollout of the initial controls.
- :class:`FDDP`: feasibility-driven DDP (Mastalli et al., "Crocoddyl", ICRA
  2020): accepts infeasible warm starts (xs, us) and closes the gaps f_t.
- :class:`BoxFDDP`: FDDP with control bounds handled in the backward pass by
  a projected-Newton box QP (Tassa et al. 2014; Mastalli et al. 2022) and
  the rollout clamped to the bounds.

One iteration = ``problem.calc_diff`` (batched kernels) + the Riccati kernel
(:mod:`.riccati`) + a line search whose trials are each one rollout kernel
per phase (:mod:`.forward`) followed by batched costs.

Stopping: converged when the iterate is feasible and the expected decrease
of a full step ``stop = |d1 + d2 / 2| < th_stop`` (Crocoddyl 3's criterion:
the same iterates stop at the same iteration).  The expected
improvement of a step alpha is ``alpha (d1 + alpha d2 / 2)`` with FDDP's gap
terms; a step is accepted when the actual decrease exceeds ``th_acceptstep``
times it (or, while infeasible, when the cost increases less than
``th_acceptnegstep`` times a negative expectation).
"""
import time
from dataclasses import dataclass, field

import numpy as np

from ..ocp.contact_step import CONTACT_SCHEMES, contact_step_workspace
from ..ocp.contacts import ContactDynamics, ImpulseDynamics
from ..ocp.dynamics import FreeDynamics
from ..ocp.problem import _numba_threads
from ..ocp.step import SCHEME_CODES, step_workspace
from .callbacks import CallbackVerbose
from .forward import forward_pass_free
from .forward_contact import IMPULSE, forward_pass_contact
from .options import check_options, check_solve_arguments
from .riccati import backward_pass


@dataclass
class SolverResult:
    """What a solve returns.  ``history`` holds one entry per iteration for each
    key (cost, stop, grad, preg, step, gaps, dV_exp, dV, time and its
    calc_diff / backward / forward split, in seconds)."""

    xs: np.ndarray
    us: np.ndarray
    K: np.ndarray
    k: np.ndarray
    cost: float
    iterations: int
    converged: bool
    status: str
    gaps: float
    stop: float
    history: dict = field(default_factory=dict)

    def __repr__(self):
        return (f"SolverResult(status={self.status!r}, converged={self.converged}, "
                f"iterations={self.iterations}, cost={self.cost:.9g}, gaps={self.gaps:.2e})")


# what a Numba kernel raises on a singular state (x / 0.0; SystemError out of prange)
_KERNEL_ERRORS = (ZeroDivisionError, FloatingPointError, OverflowError, SystemError)

_HISTORY_KEYS = ("cost", "stop", "grad", "preg", "step", "gaps", "dV_exp", "dV", "time",
                 "time_calc_diff", "time_backward", "time_forward")


class FDDP:
    """Feasibility-driven DDP.

    Options (Crocoddyl's defaults): ``th_stop`` 1e-9, ``th_grad`` 1e-12,
    ``th_gaptol`` 1e-16, ``th_acceptstep`` 0.1, ``th_acceptnegstep`` 2,
    ``reg_init`` 1e-9, ``reg_min`` 1e-9, ``reg_max`` 1e9, ``reg_factor`` 10,
    ``th_stepinc`` 0.01, ``th_stepdec`` 0.5, ``alphas`` 2^-i for i < 10.
    """

    boxed = False
    uses_gaps = True

    def __init__(self, problem, th_stop=1e-9, th_grad=1e-12, th_gaptol=1e-16,
                 th_acceptstep=0.1, th_acceptnegstep=2.0, reg_init=1e-9, reg_min=1e-9,
                 reg_max=1e9, reg_factor=10.0, th_stepinc=0.01, th_stepdec=0.5, alphas=None):
        self.problem = problem
        self.th_stop, self.th_grad, self.th_gaptol = th_stop, th_grad, th_gaptol
        self.th_acceptstep, self.th_acceptnegstep = th_acceptstep, th_acceptnegstep
        self.reg_init, self.reg_min, self.reg_max = reg_init, reg_min, reg_max
        self.reg_factor, self.th_stepinc, self.th_stepdec = reg_factor, th_stepinc, th_stepdec
        self.alphas = [2.0 ** -i for i in range(10)] if alphas is None else alphas
        check_options(self)
        N, ndx, nu = problem.N, problem.ndx, problem.nu
        self.Vx = np.zeros((N + 1, ndx))
        self.Vxx = np.zeros((N + 1, ndx, ndx))
        self.Qu = np.zeros((N, nu))
        self.Quu = np.zeros((N, nu, nu))
        self.k = np.zeros((N, nu))
        self.K = np.zeros((N, nu, ndx))
        self.Quuk = np.zeros((N, nu))
        self.u_lower = np.zeros((N, nu))
        self.u_upper = np.zeros((N, nu))
        for model, start, stop, _ in problem.phases:
            self.u_lower[start:stop] = model.u_lower
            self.u_upper[start:stop] = model.u_upper
        self._workspaces = {}

    # -- initial guess --------------------------------------------------------
    def _initial_guess(self, xs, us):
        problem = self.problem
        if xs is None:
            xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
        if us is None:
            us = problem.quasi_static(xs)
        xs, us = problem._validate(xs, us)
        if self.boxed:
            us = np.clip(us, self.u_lower, self.u_upper)
        return xs.copy(), us.copy()

    # -- one trial step ---------------------------------------------------------
    def _workspace(self, dynamics):
        key = id(dynamics)
        if key not in self._workspaces:
            if isinstance(dynamics, FreeDynamics):
                ws = step_workspace(dynamics.arrays, dynamics.state.nx)
            else:
                ws = contact_step_workspace(dynamics.arrays, dynamics.constraints.arrays,
                                            dynamics.state.nx)
            self._workspaces[key] = ws
        return self._workspaces[key]

    @staticmethod
    def _contact_stage(model):
        """The ``stage`` tuple of :func:`.forward_contact.forward_pass_contact` for a
        stage of contact dynamics or an impact, or None (stepped in Python)."""
        dynamics = model.dynamics
        if not isinstance(dynamics, ContactDynamics):
            return None
        settings = (dynamics.mu, dynamics.max_iterations, dynamics.accuracy)
        if isinstance(dynamics, ImpulseDynamics):
            if model.integrator.scheme != "explicit_euler" or model.dt != 1.0:
                return None
            return (dynamics.actuation.B, dynamics.damping, settings, IMPULSE, 1.0,
                    dynamics.restitution)
        if model.integrator.scheme in CONTACT_SCHEMES:
            return (dynamics.actuation.B, dynamics.damping, settings,
                    CONTACT_SCHEMES[model.integrator.scheme], model.dt, 0.0)
        return None

    def _try_step(self, xs, us, gaps, alpha, feasible):
        """(xs_try, us_try, xnext, cost_try) or None when the rollout diverged."""
        problem = self.problem
        use_gaps = self.uses_gaps and not feasible and alpha != 1.0
        xs_try = np.empty_like(xs)
        us_try = np.empty_like(us)
        xnext = np.empty((problem.N, problem.nx))
        predicted = problem.x0
        with _numba_threads(problem.nthreads):
            xnext_or_none = self._rollout_phases(xs, us, gaps, alpha, use_gaps, xs_try, us_try,
                                                 xnext, predicted)
        if xnext_or_none is None:
            return None
        predicted = xnext_or_none
        state = problem.state
        if use_gaps:
            xs_try[-1] = state.integrate(predicted[None], (alpha - 1.0) * gaps[-1:])[0]
        else:
            xs_try[-1] = predicted
        if not (np.all(np.isfinite(xs_try)) and np.all(np.isfinite(us_try))):
            return None
        cost = problem.calc_costs(xs_try, us_try)
        if not np.isfinite(cost):
            return None
        return xs_try, us_try, xnext, cost

    def _rollout_phases(self, xs, us, gaps, alpha, use_gaps, xs_try, us_try, xnext, predicted):
        """The trial rollout phase by phase, one kernel per phase (multibody and contact
        phases, impacts); returns the last predicted state or None."""
        problem = self.problem
        for model, start, stop, _ in problem.phases:
            dynamics = model.dynamics
            window = slice(start, stop)
            trial = (xs[window], us[window], self.k[window], self.K[window], gaps[window],
                     alpha, use_gaps, self.boxed, self.u_lower[window], self.u_upper[window],
                     predicted, xs_try[window], us_try[window], xnext[window])
            try:
                if isinstance(dynamics, FreeDynamics):
                    failed = forward_pass_free(
                        dynamics.arrays, dynamics.actuation.B, dynamics.damping,
                        SCHEME_CODES[model.integrator.scheme], model.dt, *trial,
                        self._workspace(dynamics))
                elif self._contact_stage(model) is not None:
                    failed = forward_pass_contact(
                        dynamics.arrays, dynamics.constraints.arrays, self._contact_stage(model),
                        *trial, self._workspace(dynamics))
                else:
                    failed = self._python_rollout(model, start, stop, xs, us, gaps, alpha,
                                                  use_gaps, predicted, xs_try, us_try, xnext)
            except (ZeroDivisionError, FloatingPointError, OverflowError):
                # a diverging rollout reached a singular state (Numba raises on x / 0.0)
                return None
            if failed >= 0:
                return None
            predicted = xnext[stop - 1]
        return predicted

    def _python_rollout(self, model, start, stop, xs, us, gaps, alpha, use_gaps, predicted,
                        xs_try, us_try, xnext):
        """The same trial for knots whose dynamics are not a multibody (CustomDynamics)."""
        state = model.state
        idata = model.integrator.create_data(1)
        for t in range(start, stop):
            x = predicted[None]
            if use_gaps:
                x = state.integrate(x, (alpha - 1.0) * gaps[t:t + 1])
            xs_try[t] = x[0]
            dx = state.difference(xs[t:t + 1], x)[0]
            u = us[t] - alpha * self.k[t] - self.K[t] @ dx
            if self.boxed:
                u = np.clip(u, self.u_lower[t], self.u_upper[t])
            us_try[t] = u
            xnext[t] = model.integrator.calc(idata, x, u[None])[0]
            predicted = xnext[t]
        return -1

    # -- expected improvement -----------------------------------------------------
    def _expected_terms(self, gaps, feasible):
        """(dg, dq) after a backward pass (Crocoddyl's updateExpectedImprovement)."""
        dg = float(np.vdot(self.Qu, self.k))
        dq = -float(np.vdot(self.k, self.Quuk))
        if self.uses_gaps and not feasible:
            dg -= float(np.vdot(self.Vx, gaps))
            dq += float(np.vdot(gaps, (self.Vxx @ gaps[:, :, None])[:, :, 0]))
        return dg, dq

    def _expected_improvement(self, dg, dq, xs, xs_try, gaps, feasible):
        dv = 0.0
        if self.uses_gaps and not feasible:
            dx = self.problem.state.difference(xs_try, xs)
            dv = -float(np.vdot(gaps, (self.Vxx @ dx[:, :, None])[:, :, 0]))
        return dg + dv, dq - 2.0 * dv

    # -- the loop -------------------------------------------------------------
    def solve(self, xs=None, us=None, max_iter=100, time_limit=None, verbose=False,
              callbacks=(), is_feasible=False):
        """Solve from the warm start (xs, us); default xs = x0 repeated and us
        quasi-static.  Returns a :class:`SolverResult`; never raises from inside
        a kernel: a solve that cannot progress ends with a status."""
        problem = self.problem
        start_time = time.perf_counter()
        max_iter, time_limit = check_solve_arguments(max_iter, time_limit)
        deadline = np.inf if time_limit is None else start_time + time_limit
        xs, us = self._initial_guess(xs, us)
        feasible = bool(is_feasible) or not self.uses_gaps
        callbacks = list(callbacks) + ([CallbackVerbose()] if verbose else [])
        history = {key: [] for key in _HISTORY_KEYS}
        if not self.uses_gaps:
            try:
                xs_rollout = problem.rollout(us)
            except _KERNEL_ERRORS:
                xs_rollout = np.array(np.nan)
            if not np.all(np.isfinite(xs_rollout)):
                status = "the rollout of the initial controls diverged (non-finite states)"
                return self._result(xs, us, np.nan, 0, False, status, None, np.inf, history)
            xs = xs_rollout
        preg = self.reg_init
        cost = np.nan
        gaps = np.zeros((problem.N + 1, problem.ndx))
        recalc = True
        status, converged, stop, iteration = "max_iter", False, np.inf, 0
        for iteration in range(1, max_iter + 1):
            t0 = time.perf_counter()
            t_calc = 0.0
            while True:
                if recalc:
                    try:
                        cost = problem.calc_diff(xs, us)
                    except _KERNEL_ERRORS as error:
                        status = ("the dynamics failed at the current iterate "
                                  f"({type(error).__name__})")
                        return self._result(xs, us, np.nan, iteration - 1, False, status,
                                            None, stop, history)
                    gaps = problem.gaps(xs)
                    if feasible or np.max(np.abs(gaps)) <= self.th_gaptol:
                        gaps[:] = 0.0
                        feasible = True
                    t_calc = time.perf_counter() - t0
                    recalc = False
                tb = time.perf_counter()
                failed = backward_pass(problem.Fx, problem.Fu, problem.Lx, problem.Lu,
                                       problem.Lxx, problem.Luu, problem.Lxu, gaps, feasible,
                                       preg, self.boxed, us, self.u_lower, self.u_upper,
                                       self.Vx, self.Vxx, self.Qu, self.Quu, self.k, self.K,
                                       self.Quuk)
                t_back = time.perf_counter() - tb
                if failed < 0:
                    break
                if preg >= self.reg_max or time.perf_counter() > deadline:
                    status = ("regularization at maximum: Quu not positive definite"
                              if preg >= self.reg_max else "time_limit")
                    return self._result(xs, us, cost, iteration - 1, False, status, gaps,
                                        stop, history)
                preg = self._increased(preg)
            was_feasible = feasible                      # of the iterate stop measures
            gap_norm = 0.0 if feasible else float(np.max(np.abs(gaps)))
            dg, dq = self._expected_terms(gaps, feasible)
            # Crocoddyl 3's criterion: the expected decrease of a full step
            stop = abs(dg + 0.5 * dq)
            tf = time.perf_counter()
            accepted = None
            for trial_index, alpha in enumerate(self.alphas):
                if trial_index > 0 and time.perf_counter() > deadline:
                    break
                trial = self._try_step(xs, us, gaps, alpha, feasible)
                if trial is None:
                    continue
                d1, d2 = self._expected_improvement(dg, dq, xs, trial[0], gaps, feasible)
                dv_exp = alpha * (d1 + 0.5 * alpha * d2)
                dv = cost - trial[3]
                if dv_exp >= 0.0:
                    ok = abs(d1) < self.th_grad or dv > self.th_acceptstep * dv_exp
                    ok = ok or (not self.uses_gaps and not feasible)
                else:
                    ok = self.uses_gaps and not feasible and dv > self.th_acceptnegstep * dv_exp
                if ok:
                    accepted = (alpha, trial, d1, dv_exp, dv)
                    break
            t_forward = time.perf_counter() - tf
            if accepted is not None:
                alpha, (xs, us, xnext, cost), d1, dv_exp, dv = accepted
                problem.xnext[:] = xnext     # the trial's dynamics: the gaps of the new iterate
                feasible = feasible or alpha == 1.0
                recalc = True
            else:
                alpha, d1, dv_exp, dv = self.alphas[-1], dg, np.nan, np.nan
            if alpha > self.th_stepdec:
                preg = max(preg / self.reg_factor, self.reg_min)
            if alpha <= self.th_stepinc:
                preg = self._increased(preg)
            record = dict(cost=cost, stop=stop, grad=d1, preg=preg, step=alpha, gaps=gap_norm,
                          dV_exp=dv_exp, dV=dv, time=time.perf_counter() - t0,
                          time_calc_diff=t_calc, time_backward=t_back, time_forward=t_forward)
            for key in _HISTORY_KEYS:
                history[key].append(record[key])
            for callback in callbacks:
                callback(self, iteration, record)
            if was_feasible and stop < self.th_stop:
                status, converged = "converged", True
                break
            if accepted is None and preg >= self.reg_max:
                status = "no step accepted at maximum regularization"
                break
            if time.perf_counter() > deadline:
                status = "time_limit"
                break
        if max_iter == 0:
            cost = self._initial_cost(xs, us)
        return self._result(xs, us, cost, iteration, converged, status, gaps, stop, history)

    def _initial_cost(self, xs, us):
        """The cost of the warm start (and its predicted states, for the gaps), for a
        solve of zero iterations."""
        try:
            return self.problem.calc(xs, us)
        except _KERNEL_ERRORS:
            return np.nan

    def _increased(self, preg):
        """preg * reg_factor capped at reg_max, from at least machine epsilon (so that
        reg_init = 0, exact Newton steps, still climbs when Quu is indefinite)."""
        return min(max(preg * self.reg_factor, np.finfo(float).eps), self.reg_max)

    def _result(self, xs, us, cost, iterations, converged, status, gaps, stop, history):
        gap_norm = float(np.max(np.abs(self.problem.gaps(xs)))) if np.isfinite(cost) else np.inf
        return SolverResult(xs=xs.copy(), us=us.copy(), K=self.K.copy(), k=self.k.copy(),
                            cost=float(cost), iterations=iterations, converged=converged,
                            status=status, gaps=gap_norm, stop=stop, history=history)


class DDP(FDDP):
    """Gauss-Newton DDP (iLQR): every iterate is a rollout of its controls."""

    uses_gaps = False


class BoxFDDP(FDDP):
    """FDDP with the stage models' ``control_bounds`` enforced in the backward pass
    (projected-Newton box QP) and in the rollout (clamping)."""

    boxed = True
