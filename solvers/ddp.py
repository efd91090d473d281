"""DDP, FDDP and BoxFDDP on a :class:`~geppetto.ocp.ShootingProblem`, in Crocoddyl's hierarchy.

- :class:`DDP` (Crocoddyl's ``SolverDDP``): Gauss-Newton DDP (iLQR, no
  second-order dynamics terms).  From an infeasible warm start its backward
  pass carries the gaps (Vx <- Vx + Vxx f_t) and every trial is a rollout from
  x0, so the first accepted step (any descent step while infeasible) makes
  the iterate feasible.
- :class:`FDDP` (``SolverFDDP``, Mastalli et al., "Crocoddyl", ICRA 2020)
  extends DDP: while infeasible a trial keeps the fraction (1 - alpha) of
  the gaps, the expected improvement counts them, and a step may raise the
  cost a little (``th_acceptnegstep``) to close them.
- :class:`BoxFDDP` (``SolverBoxFDDP``, Mastalli et al. 2022) extends FDDP
  with the stage models' ``control_bounds``: every trial clamps the controls
  to the bounds; while gaps remain the gains are FDDP's (unconstrained), and
  once feasible the knots with bounds take theirs from the box QP
  (:func:`.riccati.box_qp`), whose clamped controls drop out of Qu and so of
  the stopping value.  Its default ``th_stop`` is Crocoddyl's 5e-5.

One iteration = ``problem.calc_diff`` (batched kernels) + the Riccati kernel
(:mod:`.riccati`) + a line search whose trials are each one rollout kernel
per phase (:mod:`.forward`, :mod:`geppetto.ocp.trial`) followed by batched
costs.  The trial control law is ``u - alpha k - K dx`` (Crocoddyl's signs).
Knots may have different numbers of controls (impulses: nu = 0): ``us``, k,
K are padded to the widest knot (see :class:`~geppetto.ocp.ShootingProblem`)
and the Riccati recursion solves each knot's own ``nus[t]`` block, leaving
the padding at zero.

Stopping (Crocoddyl 3's criterion): converged when the iterate an accepted
step started from was feasible and the expected decrease of a full step
``stop = |d1 + d2 / 2| < th_stop``.  The expected improvement of a step
alpha is ``alpha (d1 + alpha d2 / 2)`` (FDDP adds its gap terms); a step is
accepted when the actual decrease exceeds ``th_acceptstep`` times it (DDP:
any descent step while infeasible; FDDP: while infeasible, also a cost
increase below ``th_acceptnegstep`` times a negative expectation).
"""
import time
from dataclasses import dataclass, field

import numpy as np

from .callbacks import CallbackVerbose
from .forward import KERNEL_ERRORS, ForwardPass
from .options import check_options, check_solve_arguments
from ..dynamics.validation import _compiled_entry
from .riccati import backward_pass_expected, backward_range, expected_terms, max_abs


class _BackwardTail:
    """The backward pass run while a parallel calc_diff evaluates the knots below
    (:meth:`~geppetto.ocp.ShootingProblem.calc_diff`'s ``then``): each call with b, on
    the calling thread as soon as the knots b..N are evaluated, runs the recursion down
    to knot s = b + 1 (the gap of row b needs knot b - 1's prediction), on a feasible
    iterate (no gaps) down to s = b, and with b = 0 down to knot 0 (row 0's gap is
    x0's), while the other thread evaluates the knots
    below; the gaps of rows s..N are then in ``gaps`` (:meth:`fill_gaps` writes the
    others); :meth:`rest` runs knots s - 1 .. 0 after them.  The same kernel calls in
    the same order as one :func:`.riccati.backward_pass`: the same gains, to the bit."""

    def __init__(self, solver, xs, us, gaps, feasible, preg):
        self.arrays = solver._riccati_arrays(us, gaps, feasible, preg)
        self.problem, self.xs, self.gaps, self.feasible = solver.problem, xs, gaps, feasible
        self.split, self.failed = solver.problem.N + 1, -1

    def __call__(self, b):
        N, top = self.problem.N, self.split
        # on an infeasible iterate knot b waits for knot b - 1's prediction (its gap); b = N
        # (the last chunk holds the terminal knot alone): nothing yet there, the terminal
        # knot's gap needs knot N - 1's, which another thread evaluates.  On a feasible one
        # the gaps are zero: knot b at once (one knot more before each wait)
        split = b if b == 0 or self.feasible else b + 1
        if self.failed >= 0 or split >= top:
            return
        if self.feasible:
            self.gaps[split:top] = 0.0
        else:
            self.problem.gaps_from(self.xs, self.gaps, split, top)
        self.split = split
        self.failed = backward_range(*self.arrays[:-1], min(top, N), split, self.arrays[-1])

    def fill_gaps(self):
        """The gaps of the rows below the split, after calc_diff (:meth:`.ShootingProblem.gaps`
        for those rows: no row computed twice)."""
        if self.feasible:
            self.gaps[:self.split] = 0.0
        else:
            self.problem.gaps_from(self.xs, self.gaps, 0, self.split)

    def rest(self):
        """The knots below the split (-1, or the knot where Quu is not positive
        definite, as :func:`.riccati.backward_pass`)."""
        if self.failed >= 0 or self.split == 0:
            return self.failed
        return backward_range(*self.arrays[:-1], min(self.split, self.problem.N), 0,
                              self.arrays[-1])


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


_HISTORY_KEYS = ("cost", "stop", "grad", "preg", "step", "gaps", "dV_exp", "dV", "time",
                 "time_calc_diff", "time_backward", "time_forward")


class DDP:
    """Crocoddyl's SolverDDP (see the module docstring).

    Options (Crocoddyl's defaults): ``th_stop`` 1e-9, ``th_grad`` 1e-12,
    ``th_acceptstep`` 0.1, ``reg_init`` 1e-9, ``reg_min`` 1e-9, ``reg_max`` 1e9,
    ``reg_factor`` 10, ``th_stepinc`` 0.01, ``th_stepdec`` 0.5, ``alphas`` 2^-i for
    i < 10.  The iterate counts as feasible (no gap terms) when ``solve`` is told
    so (``is_feasible``) or after a full step, as Crocoddyl's ``is_feasible``;
    Crocoddyl's ``th_gaptol`` is not used by its solvers and is not kept.
    """

    # on problem.nthreads > 1, calc_diff at the first trial of each line search starts
    # while the trial is rolled out (:meth:`iterate`): "auto" where the problem says it
    # pays (most recent first trials taken,
    # :meth:`~geppetto.ocp.ShootingProblem._speculation_pays`), True at every line
    # search, False never (after the trial, for comparisons)
    speculative = "auto"

    def __init__(self, problem, th_stop=1e-9, th_grad=1e-12, th_acceptstep=0.1, reg_init=1e-9,
                 reg_min=1e-9, reg_max=1e9, reg_factor=10.0, th_stepinc=0.01, th_stepdec=0.5,
                 alphas=None):
        if not all(hasattr(problem, name) for name in ("N", "ndx", "nu", "calc", "calc_diff")):
            # a ShootingProblem (or one that behaves as it); None or a stage raised an
            # AttributeError from inside (fz35)
            raise ValueError(f"problem: expected a ShootingProblem, got {type(problem).__name__}")
        self.problem = problem
        self.th_stop, self.th_grad = th_stop, th_grad
        self.th_acceptstep = th_acceptstep
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
        self.has_control_limits = np.zeros(N, dtype=bool)
        for model, start, stop, _ in problem.phases:      # padded entries: bounds [0, 0]
            self.u_lower[start:stop, :model.nu] = model.u_lower
            self.u_upper[start:stop, :model.nu] = model.u_upper
            self.has_control_limits[start:stop] = model.has_control_bounds
        self.forward_pass = ForwardPass(problem)
        self.gaps = np.zeros((N + 1, ndx))
        self.Vf = np.zeros((N + 1, ndx))        # Vxx_t f_t, see _backward
        self._backward_entry = None
        self.no_box = np.zeros(N, dtype=bool)
        self.split = np.zeros(4)        # the last iteration's seconds, see iterate()
        # line searches that took no step after a speculation had begun (the iterate's
        # calc_diff then runs again: the speculation wrote some knots at the trial)
        self.speculation_recalcs = 0
        self._copy_result = True        # solve(copy=...)

    # -- the pieces that differ along the hierarchy ------------------------------
    def box_qp_knots(self, feasible):
        """(N,) bool: the knots whose gains come from the box QP (none for DDP / FDDP)."""
        return self.no_box

    def try_step(self, xs, us, gaps, alpha, feasible):
        """One trial: (xs_try, us_try, xnext, cost) or None.  DDP rolls out from x0."""
        return self.forward_pass(xs, us, (self.k, self.K), (self.u_lower, self.u_upper), alpha,
                                 False, False, gaps)

    def gap_terms(self, feasible):
        """Whether the expected improvement counts the gaps (FDDP while infeasible)."""
        return False

    def expected_terms(self, gaps, feasible):
        """(dg, dq) after a backward pass: Qu k and -k Quu k summed over the knots (and
        the gap terms where :meth:`gap_terms` says so)."""
        return expected_terms(self.Qu, self.k, self.Quuk, self.Vx, self.Vxx, gaps,
                              self.gap_terms(feasible))

    def expected_improvement(self, dg, dq, xs, xs_try, gaps, feasible):
        """(d1, d2) of a trial: dV_exp = alpha (d1 + alpha d2 / 2)."""
        return dg, dq

    def accepts(self, d1, dv_exp, dv, feasible):
        """Whether a trial with expectation dv_exp and actual decrease dv is taken."""
        return dv_exp >= 0.0 and (abs(d1) < self.th_grad or not feasible
                                  or dv > self.th_acceptstep * dv_exp)

    def feasible_after(self, was_feasible, alpha):
        """Whether the iterate is feasible after an accepted step alpha (a rollout)."""
        return True

    # -- the loop -------------------------------------------------------------
    def _initial_guess(self, xs, us, check=True):
        """The warm start, validated (unless ``check`` is False), copied into the trial
        buffer set 0 (the first trial then writes set 1)."""
        problem = self.problem
        if xs is None:
            xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
        if us is None:
            us = problem.quasi_static(xs)
        if check:
            xs, us = problem._validate(xs, us)
        xs_buffer, us_buffer, _ = self.forward_pass.buffers[0]
        xs_buffer[:] = xs
        us_buffer[:] = us
        return xs_buffer, us_buffer

    def solve(self, xs=None, us=None, max_iter=100, time_limit=None, verbose=False,
              callbacks=(), is_feasible=False, copy=True, check=True):
        """Solve from the warm start (xs, us); default xs = x0 repeated and us
        quasi-static.  Returns a :class:`SolverResult`; never raises from inside
        a kernel: a solve that cannot progress ends with a status.  ``copy=False``:
        the result's xs, us, K and k are the solver's own arrays (no allocation),
        valid until its next solve (the MPC's shifted warm start reads them first).
        ``check=False``: (xs, us) are taken as they are, for callers that built them
        (float arrays of the problem's shapes, finite, the padding zero: the MPC's
        shifted solution)."""
        self._copy_result = bool(copy)
        start_time = time.perf_counter()
        max_iter, time_limit = check_solve_arguments(max_iter, time_limit)
        deadline = np.inf if time_limit is None else start_time + time_limit
        xs, us = self._initial_guess(xs, us, check)
        callbacks = list(callbacks) + ([CallbackVerbose()] if verbose else [])
        history = {key: [] for key in _HISTORY_KEYS}
        outcome = self.iterate(xs, us, max_iter, deadline, is_feasible, callbacks, history)
        return self._result(*outcome, history)

    def iterate(self, xs, us, max_iter, deadline=np.inf, is_feasible=False, callbacks=(),
                history=None):
        """The iterations of :meth:`solve` from (xs, us), the solver's trial buffer set
        (:meth:`_initial_guess`), without its checks and without building a result:
        returns (xs, us, cost, iterations, converged, status, stop), xs and us the
        solver's arrays.  ``deadline``: a ``time.perf_counter`` value; ``history``: a dict
        of lists (:data:`_HISTORY_KEYS`) that gets each iteration's record, or None
        (no record is built unless there are ``callbacks``).  ``split`` then holds the
        last iteration's seconds (calc_diff, backward, forward, all): the MPC's path,
        which allocates no arrays.

        On ``problem.nthreads`` > 1 the first trial of a line search starts calc_diff at
        its point while it is rolled out, where ``speculative`` says so
        (:meth:`~geppetto.ocp.ShootingProblem._speculate`):
        taken up by the next calc_diff when the trial is accepted, dropped otherwise (and
        when no trial is accepted calc_diff runs again at the iterate: the speculation
        wrote some knots' derivatives at the trial).  The same kernel calls on the same
        inputs: the same iterates and gains, to the bit.  Where the loop ends after such a
        line search (no step taken, then the maximum regularization or the time limit),
        calc_diff runs at the iterate once more: the problem's arrays (its predicted
        states, for the result's gaps) are then the iterate's, as on one thread.  No
        speculation where there are ``callbacks`` (they may read or write the problem's
        arrays while worker 0 writes them)."""
        problem = self.problem
        if not (self.speculative is True or self.speculative is False or (
                isinstance(self.speculative, str) and self.speculative == "auto")):
            raise ValueError("speculative: expected True, False or 'auto', got "
                             f"{self.speculative!r}")
        self._pending_xnext = None
        self._stale = False
        try:
            outcome = self._iterate(xs, us, max_iter, deadline, is_feasible, callbacks, history)
            if self._stale:         # a dropped speculation wrote some knots at its trial
                problem._discard_speculation()
                problem.calc_diff(outcome[0], outcome[1], validate=False)
            return outcome
        finally:
            problem._discard_speculation()
            if self._pending_xnext is not None:    # no calc_diff took the last trial up
                problem.xnext[:] = self._pending_xnext
                self._pending_xnext = None

    def _iterate(self, xs, us, max_iter, deadline, is_feasible, callbacks, history):
        """:meth:`iterate`'s loop."""
        problem = self.problem
        feasible = bool(is_feasible)
        was_feasible = False        # of the iterate the last accepted step started from
        preg = self.reg_init
        cost = np.nan
        gaps = self.gaps
        gaps[:] = 0.0
        recalc = True
        status, converged, stop, iteration = "max_iter", False, np.inf, 0
        split = self.split
        for iteration in range(1, max_iter + 1):
            t0 = time.perf_counter()
            t_calc = 0.0
            while True:
                tail = None
                if recalc:
                    if problem.nthreads > 1:     # the backward pass starts in calc_diff
                        tail = _BackwardTail(self, xs, us, gaps, feasible, preg)
                    self._pending_xnext = None   # calc_diff writes every row of xnext
                    self._stale = False
                    try:
                        cost = problem.calc_diff(xs, us, validate=False, then=tail)
                    except KERNEL_ERRORS as error:
                        status = ("the dynamics failed at the current iterate "
                                  f"({type(error).__name__})")
                        return xs, us, np.nan, iteration - 1, False, status, stop
                    if tail is not None:
                        tail.fill_gaps()        # the rows the backward pass has not read
                    elif feasible:      # Crocoddyl's is_feasible: given, or after a full step
                        gaps[:] = 0.0
                    else:
                        problem.gaps(xs, gaps)
                    t_calc = time.perf_counter() - t0
                    recalc = False
                tb = time.perf_counter()
                if tail is not None:
                    failed = tail.rest()
                    dg = None
                else:
                    failed, dg, dq = self._backward(us, gaps, feasible, preg)
                t_back = time.perf_counter() - tb
                if failed < 0:
                    break
                if preg >= self.reg_max or time.perf_counter() > deadline:
                    status = ("regularization at maximum: Quu not positive definite"
                              if preg >= self.reg_max else "time_limit")
                    return xs, us, cost, iteration - 1, False, status, stop
                preg = self._increased(preg)
            if dg is None:
                dg, dq = self.expected_terms(gaps, feasible)
            # Crocoddyl 3's criterion: the expected decrease of a full step
            stop = abs(dg + 0.5 * dq)
            tf = time.perf_counter()
            accepted = None
            # on several threads, calc_diff at the first trial starts while it is rolled
            # out, unless no iteration could follow (the last, or a full step that would
            # converge) or callbacks may touch the problem's arrays between iterations
            # (worker 0 writes them): taken up by the next calc_diff if the trial is
            # accepted
            # ("auto": whether the first trial is taken is recorded for the problem's rule)
            eligible = self.speculative is not False and problem.nthreads > 1 and \
                not callbacks and iteration < max_iter and \
                not (feasible and stop < self.th_stop) and \
                self.forward_pass.horizon is not None
            speculate = eligible and (self.speculative is True or problem._speculation_pays())
            first_taken = False
            spoiled = False     # a dropped speculation wrote some knots' derivatives
            for trial_index, alpha in enumerate(self.alphas):
                if trial_index > 0 and time.perf_counter() > deadline:
                    break
                if trial_index == 0 and speculate:
                    speculate = problem._speculate(*self.forward_pass.free_buffers(xs)[:2])
                trial = self.try_step(xs, us, gaps, alpha, feasible)
                if speculate and trial_index == 0:
                    problem._trial_ended(time.perf_counter() - tf)
                if trial is None:
                    spoiled = problem._discard_speculation() or spoiled
                    continue
                d1, d2 = self.expected_improvement(dg, dq, xs, trial[0], gaps, feasible)
                dv_exp = alpha * (d1 + 0.5 * alpha * d2)
                dv = cost - trial[3]
                if self.accepts(d1, dv_exp, dv, feasible):
                    accepted = (alpha, trial, d1, dv_exp, dv)
                    first_taken = trial_index == 0
                    break
                spoiled = problem._discard_speculation() or spoiled
            t_forward = time.perf_counter() - tf
            if eligible and self.speculative is not True:
                problem._first_trial_taken(first_taken)
            gap_feasible = feasible
            if accepted is not None:
                alpha, (xs, us, xnext, cost), d1, dv_exp, dv = accepted
                if problem._speculating(xs, us):
                    # its worker writes xnext's rows: the next calc_diff writes all of them
                    # (the trial's copied at the end of iterate if none comes)
                    problem._accept_speculation()
                    self._pending_xnext = xnext
                else:
                    problem.xnext[:] = xnext     # the trial's dynamics: the new gaps
                was_feasible = feasible
                feasible = self.feasible_after(was_feasible, alpha)
                recalc = True
            else:
                alpha, d1, dv_exp, dv = self.alphas[-1], dg, np.nan, np.nan
                recalc = spoiled    # the iterate's derivatives again
                self._stale = spoiled   # (at the end of iterate if the loop ends first)
                self.speculation_recalcs += spoiled
            if alpha > self.th_stepdec:
                preg = max(preg / self.reg_factor, self.reg_min)
            if alpha <= self.th_stepinc:
                preg = self._increased(preg)
            t_iteration = time.perf_counter() - t0
            split[0], split[1], split[2], split[3] = t_calc, t_back, t_forward, t_iteration
            if history is not None or callbacks:
                record = dict(cost=cost, stop=stop, grad=d1, preg=preg, step=alpha,
                              gaps=0.0 if gap_feasible else max_abs(gaps), dV_exp=dv_exp,
                              dV=dv, time=t_iteration, time_calc_diff=t_calc,
                              time_backward=t_back, time_forward=t_forward)
                if history is not None:
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
        return xs, us, cost, iteration, converged, status, stop

    def _backward(self, us, gaps, feasible, preg):
        """The backward pass and :meth:`expected_terms` in one compiled call
        (:func:`.riccati.backward_pass_expected`): (failed, dg, dq).  Its compiled entry
        is kept after the first call (Numba's dispatch, which types the 25 arguments,
        1.4 us per call on ur5): the arrays are the solver's and the problem's own,
        whose types are fixed when they are made, and the scalars are cast."""
        feasible, preg = bool(feasible), float(preg)
        arguments = self._riccati_arrays(us, gaps, feasible, preg) + (
            self.Vf, bool(self.gap_terms(feasible)))
        entry = self._backward_entry
        if entry is None:
            outcome = backward_pass_expected(*arguments)
            self._backward_entry = _compiled_entry(backward_pass_expected, arguments)
            return outcome
        return entry(*arguments)

    def _riccati_arrays(self, us, gaps, feasible, preg):
        """The arguments of :func:`.riccati.backward_pass` at the current iterate."""
        problem = self.problem
        return (problem.Fx, problem.Fu, problem.Lx, problem.Lu, problem.Lxx, problem.Luu,
                problem.Lxu, gaps, feasible, preg, problem.nus, self.box_qp_knots(feasible),
                us, self.u_lower, self.u_upper, self.Vx, self.Vxx, self.Qu, self.Quu, self.k,
                self.K, self.Quuk, problem.euler_structure)

    def _initial_cost(self, xs, us):
        """The cost of the warm start (and its predicted states, for the gaps), for a
        solve of zero iterations."""
        try:
            return self.problem.calc(xs, us)
        except KERNEL_ERRORS:
            return np.nan

    def _increased(self, preg):
        """preg * reg_factor capped at reg_max, from at least machine epsilon (so that
        reg_init = 0, exact Newton steps, still climbs when Quu is indefinite)."""
        return min(max(preg * self.reg_factor, np.finfo(float).eps), self.reg_max)

    def gap_norm(self, xs, cost):
        """max |f_t| of the iterate xs whose predicted states ``problem.xnext`` hold (inf
        when its cost is not finite)."""
        return max_abs(self.problem.gaps(xs, self.gaps)) if np.isfinite(cost) else np.inf

    def _result(self, xs, us, cost, iterations, converged, status, stop, history):
        gap_norm = self.gap_norm(xs, cost)
        if self._copy_result:
            xs, us, K, k = xs.copy(), us.copy(), self.K.copy(), self.k.copy()
        else:
            K, k = self.K, self.k
        return SolverResult(xs=xs, us=us, K=K, k=k, cost=float(cost), iterations=iterations,
                            converged=converged, status=status, gaps=gap_norm, stop=stop,
                            history=history)


class FDDP(DDP):
    """Crocoddyl's SolverFDDP: DDP that accepts infeasible warm starts (xs, us) and
    closes the gaps f_t gradually (see the module docstring).

    Options: DDP's and ``th_acceptnegstep`` 2 (Crocoddyl's default).
    """

    def __init__(self, problem, th_acceptnegstep=2.0, **options):
        self.th_acceptnegstep = th_acceptnegstep
        super().__init__(problem, **options)

    clamps = False      # BoxFDDP clamps the trial controls to the bounds

    def try_step(self, xs, us, gaps, alpha, feasible):
        """One trial; while infeasible (and alpha < 1) each knot starts (alpha - 1) f_t
        off the prediction."""
        return self.forward_pass(xs, us, (self.k, self.K), (self.u_lower, self.u_upper), alpha,
                                 not feasible and alpha != 1.0, self.clamps, gaps,
                                 None if feasible else self.Vxx)

    def expected_terms(self, gaps, feasible):
        """(dg, dq) with the gap terms (Crocoddyl's updateExpectedImprovement)."""
        return expected_terms(self.Qu, self.k, self.Quuk, self.Vx, self.Vxx, gaps,
                              self.gap_terms(feasible))

    def gap_terms(self, feasible):
        return not feasible

    def expected_improvement(self, dg, dq, xs, xs_try, gaps, feasible):
        dv = 0.0
        if not feasible:
            dv = self.forward_pass.gap_decrease(xs, xs_try, gaps, self.Vxx)
        return dg + dv, dq - 2.0 * dv

    def accepts(self, d1, dv_exp, dv, feasible):
        if dv_exp >= 0.0:
            return abs(d1) < self.th_grad or dv > self.th_acceptstep * dv_exp
        return not feasible and dv > self.th_acceptnegstep * dv_exp

    def feasible_after(self, was_feasible, alpha):
        return was_feasible or alpha == 1.0


class BoxFDDP(FDDP):
    """Crocoddyl's SolverBoxFDDP: FDDP with the stage models' ``control_bounds`` (see the
    module docstring).  Options: FDDP's, with ``th_stop`` 5e-5 by default (Crocoddyl's:
    the gradient of the Lagrangian is not available to the stopping value).

    Measured against Crocoddyl 3.2 (``python -m geppetto.benchmarks.box``: panda
    reaching, torque bounds binding, from the quasi-static guess, with and without
    gaps): the same iterations and costs per iteration to 2e-12 relative.  One
    deliberate departure: a knot whose bounds are all on one side (every upper bound
    infinite, or every lower one) uses the box QP and clamps; Crocoddyl's
    ``has_control_limits`` asks for at least one finite lower and one finite upper
    bound and otherwise ignores them.  Otherwise the two are the same."""

    clamps = True

    def __init__(self, problem, th_stop=5e-5, **options):
        super().__init__(problem, th_stop=th_stop, **options)

    def box_qp_knots(self, feasible):
        """Once feasible, the knots whose stage has control bounds."""
        return self.has_control_limits if feasible else self.no_box
