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
IPOPT (Gauss-Newton): ur5 "vbound" 0.07x / 0.19x, panda "vbound" 1.24x / 0.41x.  Per
iteration, against FDDP on the same problem without the constraints (2026-11-27, medians
of 6 interleaved rounds in one process, load 9-11): 1.08-1.70x, above 1.5x only where the
line search crawls (ur5 stiff from the guess 1.55x, ur5 / panda "torque" from the guess
1.65x / 1.70x: about 3 trials per iteration, and a calc_diff after every smallest step);
a trial's constraint terms are 2 compiled calls (the rows, then the AL terms and the
trial's multipliers in :func:`_trial_terms`; :func:`_trial_duals` reads dx = xs_try - xs
itself where the whole state adds, else the state difference on the knots of residual
rows only).  prox30 (2026-11-28, same bits): per iteration / FDDP's is set by the line
search's trials, 1.6-4.8 per iteration against FDDP's 1.0-1.15 (swing-up from rest
4.81, panda "torque" 3.95), each a rollout as FDDP's (70-220 us) plus 6-35 us of
constraint terms; the compiled-call cuts gave 0.95-0.99x.

ls31 (2026-11-28): after a refused trial from a feasible iterate the search skips the
steps of ``alphas`` above the largest step the quadratic interpolation of the merit
accepts (:meth:`ProxDDP._next_trial`, ``interpolated_search``): over the 40 runs of
``benchmarks/constrained.py`` (20 tasks, from the guess and from FDDP's optimum) 2.98 ->
2.21 trials an iteration, iterations 3409 -> 3647, the same optima; per iteration against
FDDP (one process, interleaved) swing-up from rest 2.01 -> 1.57x, pose from FDDP's optimum
1.38 -> 1.14x, panda "torque" from the guess 1.51 -> 1.32x (but 312 -> 463 iterations:
1.36x in total; the figures in benchmarks/constrained_notes.md, ls31).
pw31 (2026-11-28): the next trial is the larger of that quadratic's step and the step
of a model of the constraint terms row by row (each row linear along the step through
the iterate and the refused trial: the excess starts where the row crosses its bound;
:func:`_constraint_model`), which ls31's quadratic puts decades too low where rows far
off their bounds cross late: over the 40 runs iterations 3647 -> 3349 (halving's 3409),
trials 8076 -> 7267; panda "torque" from the guess 463 -> 288 iterations (0.63x in
time), panda "vbound" 149 -> 100 (0.69x), ur10 "orient" 162 -> 110 (0.68x), 27 runs the
same iterates (benchmarks/constrained_notes.md, pw31).

The loop is :meth:`.alddp.ALDDP.solve`'s; ProxDDP changes the multipliers' start, the
outer update, the trial merit, the accepted step's multipliers and the line search's
options (``take_smallest_step``, no ``warm_line_search``, the next trial after a refused
one: :meth:`ProxDDP._next_trial`).

Converged, ``infeasible`` and the result: as ALDDP's; ``result.multipliers`` are the
multipliers lambda (warm start: ``solve(..., multipliers=result.multipliers,
mu=result.mu)``).
"""
import numpy as np

from ..dynamics.config import kernel
from ..ocp.fused import CALC
from ..ocp.held import typed_list
from .alddp import ALDDP, _augmented_lagrangian
from .forward import KERNEL_ERRORS
from .nlp import _vector_coordinates

# the safeguard of the interpolated backtracking (ProxDDP._next_trial; Nocedal & Wright,
# Sec. 3.5): the next trial at least this fraction of the refused one
INTERPOLATION_SAFEGUARD = 0.1

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
def _iterate_duals(blocks, duals, xs, us, mu, with_derivatives, Lx, Lu, Lxx, Luu, Lxu):
    """At the iterate, in one call: :func:`.alddp._augmented_lagrangian` with derivatives
    (Lx ... Lxu hold the problem's derivatives: the AL terms are added) and
    :func:`_dual_residual`.  Returns (sum psi, the largest violation, M's dual term, sum
    mu_row |lambda+ - lambda|^2, max mu_row |lambda+ - lambda|): the same arithmetic as
    the two calls from Python (prox30).  ``with_derivatives`` (True) is an argument: a
    constant here would compile the AL kernel again for its literal type."""
    al_value, violation = _augmented_lagrangian(blocks, xs, us, mu, with_derivatives, Lx, Lu,
                                                Lxx, Luu, Lxu)
    half, full, largest = _dual_residual(blocks, duals, mu)
    return al_value, violation, half, full, largest


@kernel
def _trial_duals(blocks, duals, mu, xs, xs_try, dxs, us, us_try, alpha):
    """The trial's multipliers lambda + alpha (plus - lambda) + D R (dx, du) / mu_row
    (D = 1 where plus != 0: the rows active at the iterate; R its Jacobians, which the
    trial's evaluation (CALC) left) into ``trial``, and the dual term sum mu_row / 2
    |lambda+ - trial|^2 with the trial's lambda+ (``lam_hat``, written before).

    (dx, du) = (xs_try (-) xs, us_try - us): dx from ``dxs`` (N+1, ndx), or, where the
    whole state adds (``dxs`` of no rows), xs_try - xs read on the rows' knots (the
    difference of the whole horizon cost a third of this trial's constraint terms)."""
    total = 0.0
    N = us.shape[0]
    additive = dxs.shape[0] == 0
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
                        moved = us_try[n, i] - us[n, i]
                    elif kind == 2:     # a coordinate where x (+) dx adds
                        moved = xs_try[n, index[i]] - xs[n, index[i]]
                    else:
                        j = index[i]
                        moved = 0.0
                        for a in range(Rx.shape[2]):
                            dx = xs_try[n, a] - xs[n, a] if additive else dxs[n, a]
                            moved += Rx[k, j, a] * dx
                        if n < N:
                            for a in range(Ru.shape[2]):
                                moved += Ru[k, j, a] * (us_try[n, a] - us[n, a])
                    value += moved / mu_row
                trial[k, i] = value
                e = lam_hat[k, i] - value
                total += 0.5 * mu_row * e * e
    return total


@kernel
def _trial_terms(blocks, duals, mu, xs, xs_try, dxs, us, us_try, alpha, with_derivatives, Lx,
                 Lu, Lxx, Luu, Lxu):
    """A trial's constraint terms of M in one call: (sum psi, the dual term) of
    :func:`.alddp._augmented_lagrangian` (no derivatives: lam_hat at the trial) and
    :func:`_trial_duals` (the trial's multipliers), whose constraint residuals the trial's
    evaluate (CALC) computed.  The same arithmetic as the two calls from Python, without
    the Python between them (prox30: per trial 3 compiled calls -> 1).
    ``with_derivatives`` (False) as in :func:`_iterate_duals`."""
    al_value = _augmented_lagrangian(blocks, xs_try, us_try, mu, with_derivatives, Lx, Lu,
                                     Lxx, Luu, Lxu)[0]
    dual = _trial_duals(blocks, duals, mu, xs, xs_try, dxs, us, us_try, alpha)
    return al_value, dual


@kernel
def _row_values(blocks, values):
    """Each row's value at the iterate into ``values`` (per block (K, nr)): a residual's
    rows r[:, index], the bounds' r (written by :func:`.alddp._augmented_lagrangian` at
    the iterate), for :func:`_constraint_model` (the trials overwrite r)."""
    for b in range(len(blocks)):
        kind, r, index, out = blocks[b][0], blocks[b][2], blocks[b][10], values[b]
        for k in range(out.shape[0]):
            for i in range(out.shape[1]):
                out[k, i] = r[k, index[i]] if kind == 0 else r[k, i]


@kernel
def _constraint_model(blocks, duals, values, mu, alpha, steps, model):
    """The constraint part C(a) = sum psi + the dual term of the merit M along a step,
    each row modelled as linear in a through its value at the iterate (``values``) and
    at the last trial of step ``alpha`` (r, written by that trial's evaluate): value(a)
    = v0 + a dr, dr = (r(alpha) - v0) / alpha.  Per row, as the trial's merit
    (:func:`.alddp._augmented_lagrangian`, :func:`_trial_duals`): s = value + mu_row
    lambda_e, lambda+ = (s - P(s)) / mu_row, psi = mu_row / 2 (|lambda+|^2 -
    |lambda_e|^2), lambda(a) = lambda + a (plus - lambda) + D a dr / mu_row (D = 1 where
    plus != 0), dual = mu_row / 2 |lambda+ - lambda(a)|^2: exact for rows linear along
    the step, piecewise quadratic in a, each row's kink where it crosses a bound.
    Writes C(a) - C(0) for a = steps[j] into model[j], C(alpha) - C(0) into
    model[len(steps)]; returns C's slope at 0, sum plus dr - mu_row |plus - lambda|^2
    (the active set at 0 held)."""
    n_steps = steps.shape[0]
    for j in range(n_steps + 1):
        model[j] = 0.0
    slope = 0.0
    for b in range(len(blocks)):
        lam_e, scale, lower, upper = blocks[b][5], blocks[b][7], blocks[b][8], blocks[b][9]
        kind, r, index = blocks[b][0], blocks[b][2], blocks[b][10]
        lam, plus = duals[b][0], duals[b][1]
        v0 = values[b]
        for k in range(lam.shape[0]):
            for i in range(lam.shape[1]):
                mu_row = mu * scale[k, i]
                value_t = r[k, index[i]] if kind == 0 else r[k, i]
                dr = (value_t - v0[k, i]) / alpha
                active = plus[k, i] != 0.0
                e0 = plus[k, i] - lam[k, i]
                slope += plus[k, i] * dr - mu_row * e0 * e0
                at_zero = 0.5 * mu_row * (plus[k, i] * plus[k, i] + e0 * e0)
                for j in range(n_steps + 1):
                    a = steps[j] if j < n_steps else alpha
                    s = v0[k, i] + a * dr + mu_row * lam_e[k, i]
                    h = (s - min(max(s, lower[i]), upper[i])) / mu_row
                    moved = lam[k, i] + a * e0
                    if active:
                        moved += a * dr / mu_row
                    e = h - moved
                    model[j] += 0.5 * mu_row * (h * h + e * e) - at_zero
    return slope


@kernel
def _take_trial(duals):
    """lambda <- the accepted trial's multipliers, every block (one call: no Python per
    block in the iteration)."""
    for b in range(len(duals)):
        lam, plus, trial = duals[b]
        for k in range(lam.shape[0]):       # not lam[:] = trial: its shape check's
            for i in range(lam.shape[1]):   # message compiled 10 s (measured)
                lam[k, i] = trial[k, i]


class ProxDDP(ALDDP):
    """Primal-dual augmented-Lagrangian DDP (see the module docstring) on any
    ShootingProblem.

    Options: ALDDP's (tolerances, the BCL schedule, ``scale_rows``, ``th_reg``,
    ``dual_warm_start``, FDDP's regularization and line search; not ALDDP's
    ``warm_line_search``: every search starts at alpha = 1, measured in
    benchmarks/constrained_notes.md; ``box_controls`` as ALDDP's: ur5 "torque" from the
    guess 30 iterations to IPOPT's optimum instead of 40 to the worse one) and
    ``take_smallest_step`` (default True): a refused line search from a feasible
    iterate takes the smallest step of ``alphas``; ``interpolated_search`` (default
    True): after a refused trial from a feasible iterate the search skips the steps of
    ``alphas`` that the quadratic interpolation of the merit says fail
    (:meth:`_next_trial`); ``interpolated_with_gaps`` (default False; CSQP's restoration
    sets it): from infeasible iterates too (measured in benchmarks/constrained_notes.md,
    pw31: CSQP's kinova "pose" restoration from FDDP's optimum 111 -> 57 trials, the same
    iterates' count and cost; ProxDDP's own panda "torque" from FDDP's optimum took 161
    iterations instead of 37 with ls31's quadratic so).
    """

    history_keys = _HISTORY_KEYS
    ends_hopeless_search = False        # a hopeless search goes on to the smallest step

    def __init__(self, problem, take_smallest_step=True, interpolated_search=True,
                 interpolated_with_gaps=False, **options):
        super().__init__(problem, **options)
        self.take_smallest_step = bool(take_smallest_step)
        self.interpolated_search = bool(interpolated_search)
        self.interpolated_with_gaps = bool(interpolated_with_gaps)
        self.warm_line_search = False   # every search starts at alpha = 1 (measured)
        # per block: the multipliers lambda (the iterate), lambda+ at the iterate, and a
        # trial's multipliers
        self.duals = [tuple(np.zeros(b.shape) for _ in range(3)) for b in self.blocks]
        self.typed_duals = None
        if self.blocks:
            self.typed_duals = typed_list(self.duals)
        # whether x (+) dx = x + dx on every coordinate (no Lie group: revolute and
        # prismatic joints): a trial's dx is then read by _trial_duals
        x_index, dx_index = _vector_coordinates(problem.state)
        self.additive = problem.nx == problem.ndx == len(x_index) and bool(
            np.all(x_index == np.arange(problem.nx)) and np.all(dx_index == x_index))
        self.no_dxs = np.zeros((0, problem.ndx))
        # elsewhere a trial's dx = xs_try (-) xs is read only on the knots of residual
        # rows (through their Jacobian; bounds read xs, us): the difference on those
        # knots' ranges, not the horizon (kinova "pose": 1 knot of 101, 23 -> 2 us a
        # trial, prox30); the other rows of ``dxs`` are never read
        on = np.zeros(problem.N + 2, dtype=bool)
        for block in self.blocks:
            if block.kind == "residual":
                on[block.start:block.stop] = True
        edges = np.flatnonzero(np.diff(np.concatenate([[False], on])))
        self.dx_ranges = [(int(edges[i]), int(edges[i + 1])) for i in range(0, len(edges), 2)]
        self.dxs = np.zeros((problem.N + 1, problem.ndx))
        # the rows' values at the iterate and the merit model's buffers (_next_trial)
        self.row_values = [np.zeros(b.shape) for b in self.blocks]
        self.typed_values = typed_list(self.row_values) if self.blocks else None
        self.model = np.zeros(len(self.inner.alphas) + 1)   # per step of alphas, and one

    # ALDDP.solve's loop, with the multipliers lambda as iterates: both lambda and the
    # estimate lambda_e start at the given multipliers; the outer update is the Newton
    # one (lambda_e <- lambda), the merit has the dual term, an accepted trial's
    # multipliers are the next lambda, and a result returns lambda
    def _start_multipliers(self, starts):
        for lam_e, (lam, _, _), start in zip(self.lam, self.duals, starts):
            lam_e[:] = start
            lam[:] = start

    def _update_multipliers(self):
        for lam_e, (lam, _, _) in zip(self.lam, self.duals):
            lam_e[:] = lam                      # Newton multipliers

    def _accept_multipliers(self):
        if self.typed_duals is not None:
            _take_trial(self.typed_duals)

    def _multipliers(self):
        return [lam for lam, _, _ in self.duals]

    def _dual_terms(self, mu):
        """(M's dual term, sum mu |lambda+ - lambda|^2, max mu |lambda+ - lambda|) at the
        iterate (plus <- lambda+)."""
        if self.typed_blocks is None:
            return 0.0, 0.0, 0.0
        return _dual_residual(self.typed_blocks, self.typed_duals, mu)

    def _iterate_terms(self, xs, us, mu):
        """ALDDP's, the AL terms and the dual terms in one compiled call."""
        if self.typed_blocks is None:
            return super()._iterate_terms(xs, us, mu)
        self._start_from_problem_derivatives()
        al_value, violation, half, full, largest = _iterate_duals(
            self.typed_blocks, self.typed_duals, xs, us, mu, True, self.Lx, self.Lu, self.Lxx,
            self.Luu, self.Lxu)
        _row_values(self.typed_blocks, self.typed_values)
        return al_value, violation, (half, full, largest)

    def _trial_deviations(self, xs, xs_try):
        """xs_try (-) xs on the knots of residual rows (``dx_ranges``), into ``dxs``."""
        difference = self.problem.state.difference
        for start, stop in self.dx_ranges:
            self.dxs[start:stop] = difference(xs[start:stop], xs_try[start:stop])
        return self.dxs

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
        dxs = self.no_dxs if self.additive else self._trial_deviations(xs, xs_try)
        al_value, dual = _trial_terms(self.typed_blocks, self.typed_duals, mu, xs, xs_try, dxs,
                                      us, us_try, alpha, False, self.Lx, self.Lu, self.Lxx,
                                      self.Luu, self.Lxu)
        return cost + al_value + dual

    def _next_trial(self, index, alpha, d1, d2, dv, feasible, mu):
        """The index in ``alphas`` of the trial after a refused trial of step alpha
        (``interpolated_search``; ALDDP's next one without it, or from an infeasible
        iterate without ``interpolated_with_gaps``): the larger of the steps two models of the merit along the step pick
        (each errs low where the other sees more), both at or above
        INTERPOLATION_SAFEGUARD alpha (Nocedal & Wright's lower safeguard) and below alpha:

        - the quadratic through the merit's value and slope at 0 and the refused trial's
          value (N&W, 2nd ed., Sec. 3.5, eq. 3.57), dv(a) = a d1 - c a^2 with c = (alpha
          d1 - dv) / alpha^2; FDDP's test dv(a) > th a (d1 + a d2 / 2) holds for a <
          a_max = (1 - th) d1 / (c + th d2 / 2) (:meth:`.alddp.ALDDP._hopeless`'s bound):
          the smallest of ``alphas`` at or above a_max (ls31).  It errs low by decades
          where rows far off their bounds cross late (the excess starts at their
          crossing, not at 0);
        - the constraint terms modelled row by row, M(a) - M(0) = F(a) + C(a)
          (:func:`_constraint_model`: each row linear in a through its values at the
          iterate and at the refused trial, so C is piecewise quadratic, exact for
          linear rows, each row's excess from where it crosses a bound), F the rest (the
          cost) the quadratic through F(0) = 0, its slope -d1 - C'(0) and the trial's
          F(alpha) = -dv - C(alpha): the largest of ``alphas`` that passes FDDP's test
          on the model (if none does, the smallest at or above the safeguard).  It errs
          low where rows curve along the step (the secant through the trial).

        The steps stay those of ``alphas`` (the regularization's thresholds, the smallest
        step and the crawl count read them).  From an infeasible iterate d1 and d2 are
        the trial's (the gaps' terms of its rollout): the next of ``alphas`` unless
        ``interpolated_with_gaps`` (measured: ls31's quadratic there made panda "torque"
        from FDDP's optimum take 161 iterations instead of 37; CSQP's restoration sets
        it).  Measured (benchmarks/constrained_notes.md, pw31; 40 ProxDDP
        runs, iterations / trials): halving 3409 / 10169, the quadratic alone 3647 /
        8076, the rows' model alone 3337 / 7011 (effort from the guess 45 -> 74, CSQP's
        swing-up restoration 231 -> 401), the larger of both 3349 / 7267."""
        if not (self.interpolated_search and (feasible or self.interpolated_with_gaps)
                and d1 > 0.0):
            return index + 1
        steps = np.asarray(self.inner.alphas, dtype=float)    # no copy: check_options'
        if len(self.model) != len(steps) + 1:                 # alphas set after construction
            self.model = np.zeros(len(steps) + 1)
        last = len(steps) - 1
        floor = INTERPOLATION_SAFEGUARD * alpha
        th = self.inner.th_acceptstep
        # the quadratic through the trial
        curvature = (alpha * d1 - dv) / (alpha * alpha)
        bend = curvature + 0.5 * th * d2
        if not (curvature > 0.0 and bend > 0.0):
            return index + 1
        target = max((1.0 - th) * d1 / bend, floor)
        quadratic = index + 1
        while quadratic < last and steps[quadratic + 1] >= target:
            quadratic += 1
        if quadratic == index + 1:
            return quadratic            # the next step already: no model can go above it
        # the rows' model, at the steps of alphas from the next one down to the safeguard
        # (both bounds hold there: the model's cost is a few loops over the rows)
        first, stop = index + 1, index + 1
        while stop <= last and steps[stop] >= floor:
            stop += 1
        candidates = steps[first:stop]
        model = self.model
        if self.typed_blocks is None:
            model[:] = 0.0
            constraint_slope = 0.0
        else:
            constraint_slope = _constraint_model(self.typed_blocks, self.typed_duals,
                                                 self.typed_values, mu, alpha, candidates,
                                                 model)
        n = len(candidates)
        slope = -d1 - constraint_slope
        rest = (-dv - model[n] - slope * alpha) / (alpha * alpha)
        rows = index + 1
        for j in range(n):
            a = candidates[j]
            rows = first + j
            if self.inner.accepts(d1, a * (d1 + 0.5 * a * d2),
                                  -(slope * a + rest * a * a) - model[j], True):
                break
        return min(quadratic, rows)
