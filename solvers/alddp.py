"""ALDDP: augmented-Lagrangian DDP for hard constraints on a ShootingProblem.

The problem's constraints (Crocoddyl's vocabulary: ``Constraint(residual,
lower, upper)`` on the stages and the terminal knot, equalities where lower
== upper), its control bounds and its state bounds (on the coordinates
where x (+) dx adds: revolute and prismatic joints, velocities) are moved
into the cost by the Powell-Hestenes-Rockafellar augmented Lagrangian
(Rockafellar 1974; Nocedal & Wright, "Numerical Optimization", 2nd ed.,
eq. 17.65 and Algorithm 17.4; as AL-iLQR in ALTRO, Howell et al. IROS 2019).
For a row r of a constraint with bounds [l, h], its multiplier lambda and
the penalty parameter mu (weight 1/mu):

    s = r + mu lambda,   lambda_hat = (s - P(s)) / mu,   P = clip to [l, h],
    psi(r) = mu / 2 (|lambda_hat|^2 - |lambda|^2),
    d psi / dr = lambda_hat,   d2 psi / dr2 ~ D / mu  (D = 1 where s is outside [l, h]),

so the AL cost adds ``R^T lambda_hat`` to Lx / Lu and the Gauss-Newton
``R^T D R / mu`` to Lxx / Lxu / Luu (R = (Rx, Ru), the residual's
Jacobians).  An equality is l = h: lambda_hat = lambda + r / mu.

Inner iterations are FDDP's (:class:`~.ddp.FDDP`): the same Riccati kernel
(:func:`.riccati.backward_pass`) on a copy of the problem's cost derivatives
with the AL terms added, the same trials (gaps closed gradually from an
infeasible start) and acceptance, on the merit ``cost + sum psi``.  The outer
loop is the bound-constrained Lagrangian method (BCL: Nocedal & Wright Alg.
17.4, Conn, Gould & Toint 1991; mu here is the inverse penalty weight): at
the top of an iteration, when the last step was accepted, started from a
feasible iterate, and its stop value (computed before that step, Crocoddyl's
test, with a regularization preg <= ``th_reg``) was below omega, either the
violation is below eta (lambda <- lambda_hat, eta <- eta mu^0.9, omega <-
omega mu) or mu shrinks by ``mu_factor`` (eta <- eta_init (mu / mu_init)^0.1,
omega <- omega_init mu / mu_init), each floored at the final tolerances; one
Riccati sweep per iteration either way.

Why the outer loop waits for an accepted step at preg <= th_reg: at the edge of an arc
of active bounds, full steps move rows that are inside their bound past it, the line
search refuses them and preg climbs; a stop value computed then measures the
regularization (k ~ Qu / preg), not stationarity, and outer updates on it shrank mu to
1e-9 and stalled (ur5 "vbound").  The measurements, and the variants tried and not kept
(schedules, gates, curvature guesses): ``benchmarks/constrained_notes.md``.

Each row's penalty is scaled to its residual's units (``scale_rows``, default on): row i
of a Constraint at knot k gets mu_ki = mu min(max(1, |(Rx, Ru)_ki|^2), ``scale_max``),
the squared norm of its Jacobian row at the solve's first iterate (fixed for that
solve), so that its penalty curvature |R_ki|^2 / mu_ki is 1 / mu whatever the
residual's units, up to the cap scale_max = 100 (= 1 / mu_init: no row starts softer
than mu_ki = 1); bounds on controls and states (unit rows) keep mu.  As the penalty
on r / sigma with sigma = max(1, |R|), a row equilibration like IPOPT's gradient-based scaling of
constraints (Waechter & Biegler, Math. Prog. 2006, Sec. 3.8, which scales rows whose
gradient exceeds 100).  Measured on the
solo12 / hyq cones and trot: ``benchmarks/constrained_notes.md``.

Converged: feasible dynamics, largest constraint violation <= th_constraint
and the stop value <= th_stop (the stationarity of the Lagrangian at
lambda_hat).  At ``mu_min`` the multipliers are updated whatever the
violation.  ``infeasible``: an inner solve ends above eta, and the violation
has not halved since the penalty weight 1/mu was ``infeasible_ratio`` times
smaller.

Which algorithm.  This is the augmented-Lagrangian DDP of ALTRO's inner loop (Howell,
Jackson & Manchester, "ALTRO", IROS 2019: PHR terms in iLQR's cost, first-order
multiplier updates, a growing penalty), on FDDP's sweeps (so gaps and infeasible starts
are FDDP's) with BCL's tolerances for when to update: the multipliers only move at the
outer updates, the inner problem is an unconstrained one for FDDP, and the merit is the
primal AL.  :class:`~.proxddp.ProxDDP` (same rows, same sweep) makes the multipliers
unknowns of the Newton step and of the line search (the primal-dual AL).  ALTRO's final
active-set projection is left out: the multiplier updates reach the tolerances (1e-8) on
the tasks measured.

Per iteration the constraints cost two compiled calls over the whole horizon: their
residuals (and Jacobians) by the phase interpreter's residual blocks
(:class:`~geppetto.ocp.constraints.HorizonConstraints`, reading the kinematics that
``calc_diff`` or the line search's cost evaluation left), then the AL terms of every
block (:func:`_augmented_lagrangian`); no Python per phase or per constraint (a
stage whose constraints have no fused step, such as a ControlResidual alone or a
contact force, is evaluated from Python after the call).  ``solve`` is ProxDDP's loop
too (what differs is in the methods after ``_line_search``); CSQP shares the rows
(:func:`constraint_blocks`), the block kernels :func:`_bound_residuals` and
:func:`_add_rows`, and :func:`record_iteration`.
"""
import math
import time
from dataclasses import dataclass

import numpy as np

from ..dynamics.borrowed import borrowed_all
from ..dynamics.config import kernel
from ..ocp.constraints import HorizonConstraints
from ..ocp.costs import _nonzero_columns
from ..ocp.fused import CALC, DIFF
from ..ocp.held import typed_list
from .callbacks import CallbackVerbose
from .ddp import FDDP, SolverResult
from .forward import KERNEL_ERRORS
from .nlp import _vector_coordinates
from .options import _integer, _number, check_solve_arguments
from .riccati import backward_pass_expected


# the status of a constrained solve (CSQP, ALDDP, ProxDDP) whose rows or cost are not
# finite: a residual that returns NaN (value or Jacobian), a row of +inf, named as such
# rather than as the failure it leads to (a Quu or QP Hessian not positive definite;
# rob34 for CSQP, rs35 for ALDDP and ProxDDP).  " at the start" is appended where the
# start's values are not finite
NOT_FINITE = "a constraint row or the cost is not finite (NaN or inf)"


def derivatives_finite(problem, items, with_values=True):
    """Whether the cost's derivatives of ``problem`` and the rows' values and Jacobians
    (``items``: the blocks' tuples, (kind, start, r, Rx, Ru, ...)) at the last evaluation
    with derivatives are all finite (a scan: called where a solve fails or ends, not per
    iteration).  The values alone miss a NaN Jacobian (a violation max(l - r, r - h, 0)
    drops a NaN).  ``with_values`` False: the Jacobians only (ALDDP's line search's
    trials overwrite the values r with a refused trial's, which may be NaN where the
    iterate's are not; they evaluate no derivatives)."""
    arrays = [problem.Lx, problem.Lu, problem.Lxx, problem.Luu, problem.Lxu]
    arrays += [a for item in (items or ()) for a in item[2 if with_values else 3:5]]
    return all(np.isfinite(a).all() for a in arrays)


@dataclass
class ConstrainedResult(SolverResult):
    """A :class:`~.ddp.SolverResult` with ``violation`` (largest constraint violation),
    ``multipliers`` (list of (K, nr) arrays, one per constraint block, in the order
    of :attr:`ALDDP.blocks`), the final ``mu`` and the ``outer_iterations``; CSQP's
    ``restoration_iterations``: the iterations of its restoration (:meth:`.csqp.CSQP.
    _restore`), counted in ``iterations`` too (the SQP's and the restoration's together,
    bounded by ``max_iter``; the SQP's own: ``iterations - restoration_iterations``, the
    length of the history, except where the solve stops inside an iteration that records
    nothing: a Hessian not positive definite, the dynamics failing after a step).  CSQP's
    ``K`` and ``k``: those of the last QP solved; where the solve ends right after a
    restoration handed its point back (time_limit, or max_iter with no iteration left),
    the restoration's (its last backward pass, at its augmented Lagrangian), not the QP's
    at the point before the restoration."""

    violation: float = np.nan
    multipliers: list = None
    mu: float = np.nan
    outer_iterations: int = 0
    restoration_iterations: int = 0

    def __repr__(self):
        return (f"ConstrainedResult(status={self.status!r}, converged={self.converged}, "
                f"iterations={self.iterations}, cost={self.cost:.9g}, gaps={self.gaps:.2e}, "
                f"violation={self.violation:.2e})")


# a line search ends after its first trial when the quadratic model of the merit puts
# the largest acceptable step this factor below the smallest alpha (ALDDP._hopeless)
HOPELESS_MARGIN = 256.0
CONFIRMED_MARGIN, CONFIRMED_SPREAD = 2.0, 0.1

_HISTORY_KEYS = ("cost", "merit", "stop", "grad", "preg", "step", "gaps", "violation", "mu",
                 "dV_exp", "dV", "time")


@kernel
def _augmented_lagrangian(blocks, xs, us, mu, with_derivatives, Lx, Lu, Lxx, Luu, Lxu):
    """The AL terms of every constraint block (see the module docstring) over the
    horizon: lam_hat = (s - P(s)) / mu with s = r + mu lam written for each block, and
    with derivatives Lx += Rx^T lam_hat, Lu += Ru^T lam_hat and the Gauss-Newton
    R^T D R / mu on Lxx, Lxu, Luu (D = 1 where lam_hat != 0: s outside the bounds).
    Returns (sum psi = mu / 2 (|lam_hat|^2 - |lam|^2), the largest violation).

    A block: (kind, start, r (K, n), Rx (K, n, ndx), Ru (K, n, m), lam, lam_hat (K,
    nr), lower, upper (nr,), index, dx_index) on knots start:start+K; kind 0 a
    constraint's residual, rows r[:, index] (r, Rx, Ru evaluated), 1 the controls
    us[:, :nr] (control bounds, into r), 2 the states xs[:, index] (state bounds, into
    r; tangent columns dx_index).
    """
    total, violation = 0.0, 0.0
    ndx = Lx.shape[1]
    cx = np.empty(ndx, dtype=np.int64)
    cu = np.empty(Lu.shape[1], dtype=np.int64)
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, lam, lam_hat, scale, lower, upper, index, dx_index = blocks[b]
        _bound_residuals(kind, start, r, index, xs, us)
        curvature = np.empty(lam.shape) if with_derivatives else lam_hat
        for k in range(lam.shape[0]):
            for i in range(lam.shape[1]):
                value = r[k, index[i]] if kind == 0 else r[k, i]
                violation = max(violation, lower[i] - value, value - upper[i])
                mu_row = mu * scale[k, i]
                s = value + mu_row * lam[k, i]
                h = (s - min(max(s, lower[i]), upper[i])) / mu_row
                lam_hat[k, i] = h
                total += 0.5 * mu_row * (h * h - lam[k, i] * lam[k, i])
                if with_derivatives:        # D / mu_row, D = 1 where s is outside
                    curvature[k, i] = 1.0 / mu_row if h != 0.0 else 0.0
        if with_derivatives:
            _add_rows(kind, start, Rx, Ru, index, dx_index, lam_hat, curvature, cx, cu, Lx, Lu,
                      Lxx, Luu, Lxu)
    return total, violation


@kernel
def _bound_residuals(kind, start, r, index, xs, us):
    """The values of a bound block's rows (see :func:`_augmented_lagrangian`) into r:
    the controls u_i (kind 1) or the states x_index[i] (kind 2) at its knots (a
    residual's, kind 0, are evaluated).  One call per block: a per-row helper, even
    inlined, made the AL kernel 4x slower (its arrays' reference counts, measured)."""
    if kind == 0:
        return
    for k in range(r.shape[0]):
        n = start + k
        for i in range(r.shape[1]):
            r[k, i] = us[n, i] if kind == 1 else xs[n, index[i]]


@kernel
def _add_rows(kind, start, Rx, Ru, index, dx_index, h, w, cx, cu, Lx, Lu, Lxx, Luu, Lxu):
    """Over the rows of a block (see :func:`_augmented_lagrangian`) with w[k, i] != 0,
    at knot n = start + k, Jacobian row R_i: L += h R_i and the Hessian's w R_i^T R_i
    (unit rows for the control and state bounds).  Its arrays are borrowed
    (:func:`~geppetto.dynamics.borrowed.borrowed_all`, the caller's): the per-row views
    Rx[k, j], Ru[k, j] and the :func:`_add_row` call with seven arrays counted atomic
    references at every residual row of every knot (cq29, same bits)."""
    Rx, Ru, index, dx_index, h, w, cx, cu, Lx, Lu, Lxx, Luu, Lxu = borrowed_all((
        Rx, Ru, index, dx_index, h, w, cx, cu, Lx, Lu, Lxx, Luu, Lxu))
    for k in range(w.shape[0]):
        n = start + k
        for i in range(w.shape[1]):
            if w[k, i] == 0.0:
                continue
            if kind == 1:
                Lu[n, i] += h[k, i]
                Luu[n, i, i] += w[k, i]
            elif kind == 2:
                Lx[n, dx_index[i]] += h[k, i]
                Lxx[n, dx_index[i], dx_index[i]] += w[k, i]
            else:
                _add_row(Rx[k, index[i]], Ru[k, index[i]], h[k, i], w[k, i], n, cx, cu, Lx,
                         Lu, Lxx, Luu, Lxu)


@kernel
def _inside_bounds(us, lower, upper):
    """Whether lower <= us <= upper everywhere (False at a nan): np.all of both
    comparisons without their four temporary arrays (7 us an iteration on the swing-up's
    controls, prox30)."""
    for n in range(us.shape[0]):
        for i in range(us.shape[1]):
            if not (us[n, i] >= lower[n, i] and us[n, i] <= upper[n, i]):
                return False
    return True


@kernel
def _row_scales(blocks, largest):
    """Each row's penalty scale: max(1, |Rx|^2 + |Ru|^2) of the residual's Jacobian row
    at the iterate whose constraints the last evaluate (DIFF) computed; 1 for the
    control and state bounds (rows of unit Jacobian)."""
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, lam, lam_hat, scale, lower, upper, index, dx_index = blocks[b]
        for k in range(scale.shape[0]):
            for i in range(scale.shape[1]):
                if kind != 0:
                    scale[k, i] = 1.0
                    continue
                j = index[i]
                norm = 0.0
                for a in range(Rx.shape[2]):
                    norm += Rx[k, j, a] * Rx[k, j, a]
                for a in range(Ru.shape[2]):
                    norm += Ru[k, j, a] * Ru[k, j, a]
                scale[k, i] = min(max(1.0, norm), largest)


@kernel
def _add_row(rx, ru, h, w, n, cx, cu, Lx, Lu, Lxx, Luu, Lxu):
    """Knot n: Lx += h rx, Lu += h ru, Lxx += w rx^T rx, Lxu += w rx^T ru, Luu += w ru^T
    ru, over the non-zero columns of the row (rx, ru).  Where those columns are one
    range each in rx and ru (a friction pyramid's row: dx columns 3..35 and du 0..11 on
    go1) :func:`_add_row_range` adds the same products."""
    nx = _nonzero_columns(rx, cx)
    nu = _nonzero_columns(ru, cu)
    if (nx == 0 or cx[nx - 1] - cx[0] == nx - 1) and (nu == 0 or cu[nu - 1] - cu[0] == nu - 1):
        _add_row_range(rx, ru, h, w, n, cx[0] if nx > 0 else 0, nx, cu[0] if nu > 0 else 0,
                       nu, Lx, Lu, Lxx, Luu, Lxu)
        return
    for p in range(nx):
        a = cx[p]
        Lx[n, a] += h * rx[a]
        for q in range(nx):
            Lxx[n, a, cx[q]] += w * rx[a] * rx[cx[q]]
        for q in range(nu):
            Lxu[n, a, cu[q]] += w * rx[a] * ru[cu[q]]
    for p in range(nu):
        a = cu[p]
        Lu[n, a] += h * ru[a]
        for q in range(nu):
            Luu[n, a, cu[q]] += w * ru[a] * ru[cu[q]]


@kernel
def _add_row_range(rx, ru, h, w, n, x0, nx, u0, nu, Lx, Lu, Lxx, Luu, Lxu):
    """:func:`_add_row` for a row whose non-zero columns are x0 .. x0 + nx of rx and u0 ..
    u0 + nu of ru: the same products (w rx_a) rx_b, added in the same order, on slices
    indexed from 0, whose inner loops LLVM vectorizes (an index read from the columns
    array, or a range from x0, keeps Numba's negative-index test in the loop: go1's 91
    active pyramid rows 134 -> 50 us, where a direct range alone gave 12 %, qp19)."""
    vx = rx[x0:x0 + nx]
    vu = ru[u0:u0 + nu]
    for p in range(nx):
        Lx[n, x0 + p] += h * vx[p]
        c = w * vx[p]
        hxx = Lxx[n, x0 + p, x0:x0 + nx]
        for q in range(nx):
            hxx[q] += c * vx[q]
        if nu > 0:          # (the terminal knot has no Lxu[n])
            hxu = Lxu[n, x0 + p, u0:u0 + nu]
            for q in range(nu):
                hxu[q] += c * vu[q]
    for p in range(nu):
        Lu[n, u0 + p] += h * vu[p]
        c = w * vu[p]
        huu = Luu[n, u0 + p, u0:u0 + nu]
        for q in range(nu):
            huu[q] += c * vu[q]


def record_iteration(solver, keys, history, callbacks, iteration, record, t0):
    """An iteration's ``record`` (its entries of ``keys``, and the time since t0) into
    ``history`` and to the callbacks (ALDDP, ProxDDP and CSQP)."""
    record = {key: record[key] for key in keys if key != "time"}
    record["time"] = time.perf_counter() - t0
    for key in keys:
        history[key].append(record[key])
    for callback in callbacks:
        callback(solver, iteration, record)


class _Block:
    """One group of constraint rows on knots start:stop: ``kind`` "residual" (the j-th
    Constraint of that stage, its residual data ``data``), "u" (control bounds, columns
    :m) or "x" (state bounds on x[:, x_index], tangent columns dx_index); lower, upper
    (nr,)."""

    def __init__(self, kind, start, stop, lower, upper, name, m=0, x_index=None,
                 dx_index=None, data=None, uses_control=None):
        self.kind, self.start, self.stop, self.name = kind, start, stop, name
        # whether the rows may depend on u (a residual's own declaration; bounds by kind)
        self.uses_control = (kind != "x") if uses_control is None else bool(uses_control)
        self.lower, self.upper = lower, upper
        self.m, self.x_index, self.dx_index, self.data = m, x_index, dx_index, data

    @property
    def shape(self):
        return (self.stop - self.start, self.lower.shape[0])

    def item(self, lam, lam_hat, scale, sources):
        """The block's tuple for :func:`_augmented_lagrangian`; ``sources``: :attr:`.ocp.
        constraints.HorizonConstraints.sources`."""
        no_index, none = np.zeros(0, dtype=np.int64), np.zeros((0, 0, 0))
        if self.kind == "residual":
            r, Rx, Ru, rows = sources[id(self.data)]
            return (np.int64(0), np.int64(self.start), r, Rx, Ru, lam, lam_hat, scale,
                    self.lower, self.upper, rows, no_index)
        r = np.zeros(self.shape)
        if self.kind == "u":
            return (np.int64(1), np.int64(self.start), r, none, none, lam, lam_hat, scale,
                    self.lower, self.upper, no_index, no_index)
        return (np.int64(2), np.int64(self.start), r, none, none, lam, lam_hat, scale,
                self.lower, self.upper, np.asarray(self.x_index, dtype=np.int64),
                np.asarray(self.dx_index, dtype=np.int64))


def constraint_blocks(problem):
    """The constraint rows of ``problem`` as blocks, stage by stage and then the
    terminal knot: each Constraint's residual rows, the control bounds, the state
    bounds on the coordinates where x (+) dx adds (ALDDP, ProxDDP and CSQP share them)."""
    x_index, dx_index = _vector_coordinates(problem.state)
    stages = list(problem.phases)
    stages.append((problem.terminal_model, problem.N, problem.N + 1, problem.terminal_data))
    blocks = []
    for model, start, stop, data in stages:
        for c, cd in zip(model.constraints, data.constraints):
            blocks.append(_Block("residual", start, stop, c.lower, c.upper, c.name,
                                 data=cd,
                                 uses_control=getattr(c.residual, "uses_control", True)))
        if not model.terminal and model.has_control_bounds:
            blocks.append(_Block("u", start, stop, model.u_lower, model.u_upper,
                                 "control_bounds", m=model.nu))
        lower, upper = model.x_lower[x_index], model.x_upper[x_index]
        rows = np.isfinite(lower) | np.isfinite(upper)
        if np.any(rows):
            blocks.append(_Block("x", start, stop, lower[rows], upper[rows],
                                 "state_bounds", x_index=x_index[rows],
                                 dx_index=dx_index[rows]))
        if np.any(np.isfinite(model.x_lower) | np.isfinite(model.x_upper)) and (
                np.any(np.isfinite(np.delete(model.x_lower, x_index)))
                or np.any(np.isfinite(np.delete(model.x_upper, x_index)))):
            raise ValueError("state_bounds: hard state bounds apply only to the coordinates "
                             "where x (+) dx adds (not a free-flyer's or a spherical joint's)")
    return blocks


class ALDDP:
    """Augmented-Lagrangian DDP (see the module docstring) on any ShootingProblem.

    Options: ``th_stop`` 1e-10 (inner stop value at convergence), ``th_constraint``
    1e-8 (largest violation), ``mu_init`` 1e-2, ``mu_factor`` 0.1, ``mu_min`` 1e-10,
    ``omega_init`` 1e-2, ``eta_init`` 1e-2, ``infeasible_ratio`` 1e4, ``th_reg`` 1e-6
    (converged, and the outer loop's updates, only from a stop value computed with
    preg <= th_reg before an accepted step: with a larger regularization k ~ Qu / preg
    makes the stop value small away from a stationary point; the tuned tasks converge
    at preg = 1e-9); the others are
    FDDP's (regularization, step acceptance, ``alphas``).  ``solve`` accepts
    warm-start multipliers and mu; with ``dual_warm_start`` "keep" a solve given
    none starts from the last solve's multipliers (and mu_init: the last solve's
    small mu made the MPC's next solves slower, measured), "shift" (receding
    horizon, as the MPC shifts the primal warm start) moves them one knot earlier
    within each block.  ``warm_line_search`` (default True): after two steps in a
    row of alpha <= 1/8 (crawling) the next line search starts at 2 alpha instead
    of 1 (back to 1 after an outer update, a longer step or a failed search).  Measured on ur5
    (load 8-11, CPU time of the thread, medians of 3, beside the same solver with
    it off): the same iterations and costs on the plane and the stiff task; on the
    stiff task 11 % less CPU time, 1.28x / 1.43x FDDP's time per iteration
    (cold / FDDP start) instead of 1.51x / 1.60x.  ``scale_rows`` (default True):
    each Constraint row's penalty scaled by its Jacobian row's squared norm (floored
    at 1, capped at ``scale_max``, default 100) at the solve's first iterate (module
    docstring).  ``box_controls`` (default True): while the iterate's controls are
    inside their bounds the trials clamp them to the bounds, and once feasible the
    backward pass holds them by BoxFDDP's box QP (:meth:`_hold_bounds`); the control
    bounds stay AL rows too (inactive while the controls are inside), which bring a
    start outside its bounds in.  Measured on ur5 "torque" from the quasi-static guess
    (inside the bounds): 32 iterations to IPOPT's optimum from the same start,
    0.2453417, instead of 94 to the worse local optimum 0.2568962 (ProxDDP 30 instead
    of 40); the other runs of ``benchmarks/constrained.py`` start outside their bounds
    or have none, and run as without (``benchmarks/constrained_notes.md``).
    """

    history_keys = _HISTORY_KEYS
    # the line search: a refused search from a feasible iterate takes the smallest step
    # (ProxDDP's option), a search shown hopeless (_hopeless) ends there
    take_smallest_step, ends_hopeless_search = False, True

    def __init__(self, problem, th_stop=1e-10, th_constraint=1e-8, mu_init=1e-2,
                 mu_factor=0.1, mu_min=1e-10, omega_init=1e-2, eta_init=1e-2,
                 infeasible_ratio=1e4, dual_warm_start=None, warm_line_search=True,
                 th_reg=1e-6, scale_rows=True, scale_max=100.0, box_controls=True,
                 **fddp_options):
        # every numeric option through options' checkers, a ValueError naming it (rs35:
        # th_reg took NaN, -1 and inf, the others True, mu_factor a string a TypeError)
        th_stop, th_constraint, mu_init, mu_min, omega_init, eta_init = (
            _number(value, name, 0.0, low_open=True) for name, value in (
                ("th_stop", th_stop), ("th_constraint", th_constraint), ("mu_init", mu_init),
                ("mu_min", mu_min), ("omega_init", omega_init), ("eta_init", eta_init)))
        mu_factor = _number(mu_factor, "mu_factor", 0.0, low_open=True)
        if mu_factor >= 1.0:
            raise ValueError(f"mu_factor = {mu_factor!r}: expected a value in (0, 1)")
        infeasible_ratio = _number(infeasible_ratio, "infeasible_ratio", 1.0, low_open=True,
                                   allow_inf=True)
        th_reg = _number(th_reg, "th_reg", 0.0)
        scale_max = _number(scale_max, "scale_max", 1.0)
        self.problem = problem
        self.th_stop, self.th_constraint = float(th_stop), float(th_constraint)
        self.mu_init, self.mu_factor, self.mu_min = float(mu_init), float(mu_factor), float(mu_min)
        self.omega_init, self.eta_init = float(omega_init), float(eta_init)
        self.infeasible_ratio = float(infeasible_ratio)
        self.th_reg = float(th_reg)
        self.scale_rows = bool(scale_rows)
        self.scale_max = float(scale_max)
        if dual_warm_start not in (None, "keep", "shift"):
            raise ValueError("dual_warm_start must be None, 'keep' or 'shift', got "
                             f"{dual_warm_start!r}")
        self.dual_warm_start = dual_warm_start
        self.warm_line_search = bool(warm_line_search)
        self.multipliers, self.mu = None, None          # of the last solve
        self.inner = FDDP(problem, th_stop=th_stop, **fddp_options)
        self.box_controls = bool(box_controls) and bool(self.inner.has_control_limits.any())
        self.blocks = self._blocks()
        self.constraints = HorizonConstraints(problem)
        # the multipliers lambda and lambda_hat of each block, updated in place
        self.lam = [np.zeros(b.shape) for b in self.blocks]
        self.lam_hat = [np.zeros(b.shape) for b in self.blocks]
        # each row's penalty scale (mu_row = mu scale), set at a solve's first iterate
        self.scales = [np.ones(b.shape) for b in self.blocks]
        self.typed_blocks = self._typed_blocks()
        N, ndx, nu = problem.N, problem.ndx, problem.nu
        self.Lx, self.Lxx = np.zeros((N + 1, ndx)), np.zeros((N + 1, ndx, ndx))
        self.Lu, self.Luu = np.zeros((N, nu)), np.zeros((N, nu, nu))
        self.Lxu = np.zeros((N, ndx, nu))
        self.no_box = np.zeros(N, dtype=bool)

    # -- the constraint rows ----------------------------------------------------------
    def _blocks(self):
        return constraint_blocks(self.problem)

    def _typed_blocks(self):
        """The blocks' tuples in a typed List (None without blocks): they hold the
        multipliers ``self.lam`` and ``self.lam_hat`` (updated in place)."""
        if not self.blocks:
            return None
        items = [b.item(lam, lam_hat, scale, self.constraints.sources) for b, lam, lam_hat, scale
                 in zip(self.blocks, self.lam, self.lam_hat, self.scales)]
        return typed_list(items)


    def _start_from_problem_derivatives(self):
        """Lx ... Lxu = the problem's cost derivatives, before the AL terms are added."""
        problem = self.problem
        np.copyto(self.Lx, problem.Lx)
        np.copyto(self.Lxx, problem.Lxx)
        np.copyto(self.Lu, problem.Lu)
        np.copyto(self.Luu, problem.Luu)
        np.copyto(self.Lxu, problem.Lxu)

    def _al_terms(self, xs, us, mu, with_derivatives):
        """(sum psi, the largest violation) at (xs, us), whose constraint residuals the
        last :meth:`_evaluate` computed; lam_hat written; with derivatives, Lx ... Lxu =
        the problem's + the AL terms (one kernel over all blocks)."""
        if with_derivatives:
            self._start_from_problem_derivatives()
        if self.typed_blocks is None:
            return 0.0, 0.0
        return _augmented_lagrangian(self.typed_blocks, xs, us, mu, with_derivatives,
                                     self.Lx, self.Lu, self.Lxx, self.Luu, self.Lxu)

    def _iterate_terms(self, xs, us, mu):
        """(sum psi, the largest violation, :meth:`_dual_terms`) at the iterate, whose
        constraints the last evaluate (DIFF) computed; Lx ... Lxu with the AL terms."""
        al_value, violation = self._al_terms(xs, us, mu, True)
        return al_value, violation, self._dual_terms(mu)

    def max_violation(self, xs, us):
        """The largest violation of the constraints (and bounds) along (xs, us)."""
        xs, us = self.problem._validate(xs, us)
        self.problem.calc(xs, us)
        self.constraints.evaluate(xs, us, CALC)
        return float(self._al_terms(xs, us, self.mu_init, False)[1])

    # -- the loop ---------------------------------------------------------------------
    def solve(self, xs=None, us=None, multipliers=None, mu=None, max_iter=500,
              time_limit=None, verbose=False, callbacks=(), is_feasible=False,
              crawl_limit=None, crawl_above=0.0, stall_window=None, stall_ratio=0.99,
              stall_above=0.0):
        """Solve from the warm start (xs, us) (defaults as FDDP's) and, optionally, the
        multipliers of a previous result (``result.multipliers``) and its ``mu``.
        ``max_iter`` counts Riccati iterations over all outer updates.  ``crawl_limit``
        (default None: no limit): end with status "crawling" once the line search's
        smallest step, below 1 (accepted, or taken or not after a refused search), has
        ended ``crawl_limit`` iterations in a row at iterates whose infeasibility max(max
        |gap|, violation) is above ``crawl_above`` (default 0): the quadratic model valid
        on 1/512 of its step or less (CSQP's restoration stops there:
        :meth:`.csqp.CSQP._restore`).  ``stall_window`` (default None: no test): end
        with status "stalled" once the least infeasibility max(max |gap|, violation) of
        the solve's iterates so far, above ``stall_above``, is above ``stall_ratio``
        (default 0.99) times what it was ``stall_window`` iterations before: the search
        for a feasible point has stopped paying (CSQP's restoration after a QP certified
        infeasible, rs35: ur5 "unreachable" ran its 498 iterations at violations 0.98 ..
        0.977).
        ``time_limit`` (seconds of wall clock from the solve's entry, None: none) is
        tested after each iteration: the solve ends "time_limit" after the iteration in
        which it passed (at least one runs); the clock covers the first call's loading or
        compiling of the kernels (ProxDDP's first solve in a process with
        ``time_limit=0.01`` on ur5 "torque": 2.1 s from the Numba cache, 1 iteration; the
        next 0.02-0.04 s, rs35).
        Returns a :class:`ConstrainedResult`; never raises from inside a kernel.

        The loop is ALDDP's and ProxDDP's: what differs is in the methods
        :meth:`_start_multipliers`, :meth:`_dual_terms`, :meth:`_update_multipliers`,
        :meth:`_trial_merit`, :meth:`_accept_multipliers`, :meth:`_multipliers` and the
        line search's options (``warm_line_search``, ``take_smallest_step``)."""
        problem, inner = self.problem, self.inner
        start_time = time.perf_counter()
        xs, us = inner._initial_guess(xs, us)
        if multipliers is None and self.dual_warm_start and self.multipliers is not None:
            multipliers = [m.copy() for m in self.multipliers]
            if self.dual_warm_start == "shift":
                for m in multipliers:
                    m[:-1] = m[1:].copy()
        self._start_multipliers(self._initial_multipliers(multipliers))
        # (a string raised float()'s "could not convert", which named nothing)
        mu = self.mu_init if mu is None else _number(mu, "mu", 0.0, low_open=True)
        max_iter, time_limit = check_solve_arguments(max_iter, time_limit)
        if crawl_limit is not None and (isinstance(crawl_limit, (bool, np.bool_)) or not (
                isinstance(crawl_limit, (int, np.integer)) and crawl_limit >= 1)):
            raise ValueError(f"crawl_limit must be None or an integer >= 1, got {crawl_limit!r}")
        crawl_above = _number(crawl_above, "crawl_above", 0.0, allow_inf=True)
        if stall_window is not None:
            stall_window = _integer(stall_window, "stall_window", 1)
            stall_ratio = _number(stall_ratio, "stall_ratio", 0.0, 1.0)
            stall_above = _number(stall_above, "stall_above", 0.0)
        least = []                      # per iteration, the least infeasibility so far
        mu = max(mu, self.mu_min)
        omega, eta = self._tolerances(mu)
        callbacks = list(callbacks) + ([CallbackVerbose()] if verbose else [])
        history = {key: [] for key in self.history_keys}
        feasible = bool(is_feasible)
        preg = inner.reg_init
        status, converged, stop, outer, iteration = "max_iter", False, np.inf, 0, 0
        cost, violation, al_value = np.nan, np.inf, 0.0
        # the dual terms at the iterate: (merit's dual term, sum mu |lambda+ - lambda|^2,
        # max mu |lambda+ - lambda|), zeros in ALDDP
        dual = (0.0, 0.0, 0.0)
        reference = (np.inf, mu)        # (violation, mu) when the violation last halved
        gaps = np.zeros((problem.N + 1, problem.ndx))
        recalc, last_stop, stepped_from_feasible, stepped = True, np.inf, False, False
        last_preg = preg
        first_trial, last_index = 0, 0
        crawled = 0                     # iterations in a row ended at the smallest step
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
                al_value, violation, dual = self._iterate_terms(xs, us, mu)
                recalc = False
                if iteration == 1 and not math.isfinite(cost + al_value):
                    # a row or the cost not finite at the start (a row of NaN makes its
                    # psi NaN, a row of +inf on a one-sided bound too: inf - P(inf));
                    # the accepted trials' merits are finite after that (rs35)
                    status, iteration = f"{NOT_FINITE} at the start", 0
                    break
            # the inner solve is done when the last step, accepted, started from a
            # feasible iterate whose stop value was below omega (Crocoddyl's test, at the
            # AL's tolerance) computed with preg <= th_reg: a stop value computed with a
            # larger preg, or whose step the line search refused, measures the
            # regularization (k ~ 1 / preg), not stationarity.  Measured on ur5 "vbound":
            # converged only from such a stop value, but updated on any, the outer loop
            # shrank mu to 1e-9 on inner solves that had not converged and stalled 2e-4
            # above IPOPT's cost; updated on these only, it converges (module docstring).
            # ProxDDP also waits for its dual residual below omega (BCL's test on the
            # primal-dual iterate).
            if stepped_from_feasible and stepped and last_stop < omega \
                    and last_preg <= self.th_reg and dual[2] < max(omega, self.th_constraint):
                if violation <= self.th_constraint and last_stop < self.th_stop:
                    # a NaN Jacobian of a row inactive here leaves the sweep finite (its
                    # terms are skipped): not a solution of the problem as posed (CSQP's
                    # stationarity test, rob34)
                    status, converged = ("converged", True) if derivatives_finite(
                        problem, self.typed_blocks, False) else (NOT_FINITE, False)
                    iteration -= 1
                    break
                outer += 1
                first_trial = 0                 # a new subproblem: full steps first
                if violation <= 0.5 * reference[0]:        # progress: a new reference
                    reference = (violation, mu)
                elif violation > eta and reference[1] / mu >= self.infeasible_ratio * (
                        1.0 - 1e-12):
                    status = "infeasible"       # penalty x infeasible_ratio, violation kept
                    break
                if violation <= eta or mu <= self.mu_min:
                    self._update_multipliers()
                    eta = max(eta * mu ** 0.9, self.th_constraint)
                    omega = max(omega * mu, self.th_stop)
                else:
                    mu = max(mu * self.mu_factor, self.mu_min)
                    omega, eta = self._tolerances(mu)
                al_value, _, dual = self._iterate_terms(xs, us, mu)     # the new subproblem
            box = self._hold_bounds(feasible, us)
            while True:
                # the sweep and the inner solver's expected_terms in one call (its gap
                # products kept in inner.Vf: the same bits as the two calls)
                failed, dg, dq = backward_pass_expected(
                    problem.Fx, problem.Fu, self.Lx, self.Lu, self.Lxx, self.Luu, self.Lxu,
                    gaps, bool(feasible), float(preg), problem.nus, box, us, inner.u_lower,
                    inner.u_upper, inner.Vx, inner.Vxx, inner.Qu, inner.Quu, inner.k, inner.K,
                    inner.Quuk, problem.euler_structure, inner.Vf,
                    bool(inner.gap_terms(feasible)))
                if failed < 0:
                    break
                if preg >= inner.reg_max:
                    # a Jacobian of NaN (met at an accepted point) fails every sweep
                    status = "regularization at maximum: Quu not positive definite" if \
                        derivatives_finite(problem, self.typed_blocks, False) else NOT_FINITE
                    return self._result(xs, us, cost, iteration - 1, False, status, mu, stop,
                                        outer, history)
                preg = inner._increased(preg)
            stop = abs(dg + 0.5 * dq)
            merit = cost + al_value + dual[0]
            accepted, refused, hopeless = self._line_search(xs, us, gaps, feasible, dg, dq,
                                                            merit, mu, first_trial, dual[1])
            gap_norm = 0.0 if feasible else float(np.max(np.abs(gaps)))
            if accepted is not None:
                alpha, (xs, us, xnext, cost), d1, dv_exp, dv, index = accepted
                problem.xnext[:] = xnext
                self._accept_multipliers()
                stepped_from_feasible, stepped = feasible, not refused
                feasible = inner.feasible_after(feasible, alpha)
                recalc = True
                # crawling (alpha <= 1/8 twice in a row): the next line search starts a
                # step above this one
                crawling = index >= 3 and last_index >= 3
                first_trial = index - 1 if self.warm_line_search and crawling else 0
                last_index = index
            else:
                alpha, d1, dv_exp, dv = inner.alphas[-1], dg, np.nan, np.nan
                first_trial = 0
                stepped_from_feasible, stepped = feasible, False
                # the iterate's derivatives (problem's and self.Lx ... with the AL terms)
                # are still those of xs: the trials wrote only the constraints' values,
                # lam_hat and the kinematics, which the next recalc (after an accepted
                # step) and the outer updates (only then) read again
            last_stop, last_preg = stop, preg
            if alpha > inner.th_stepdec and not refused:
                preg = max(preg / inner.reg_factor, inner.reg_min)
            if alpha <= inner.th_stepinc or refused:
                preg = inner._increased(preg)
            if hopeless:        # one more reg_factor (measured: see _hopeless)
                preg = inner._increased(preg)
            self._record(history, callbacks, iteration, dict(
                cost=cost, merit=merit, stop=stop, grad=d1, preg=preg, step=alpha,
                gaps=gap_norm, violation=violation, mu=mu, dual=dual[2], dV_exp=dv_exp,
                dV=dv), t0)
            if refused and preg >= inner.reg_max:
                status = "no step accepted at maximum regularization"
                break
            if time_limit is not None and time.perf_counter() - start_time > time_limit:
                status = "time_limit"
                break
            # a crawl needs a line search below the full step (with alphas [1] every
            # step is the smallest; review rev26)
            crawled = crawled + 1 if alpha == inner.alphas[-1] < 1.0 and max(
                gap_norm, violation) > crawl_above else 0
            if crawl_limit is not None and crawled >= crawl_limit:
                status = "crawling"
                break
            if stall_window is not None:
                least.append(min(max(gap_norm, violation), least[-1] if least else np.inf))
                if len(least) > stall_window and least[-1] > stall_above and \
                        least[-1] > stall_ratio * least[-1 - stall_window]:
                    status = "stalled"
                    break
        return self._result(xs, us, cost, iteration, converged, status, mu, stop, outer,
                            history)

    def _line_search(self, xs, us, gaps, feasible, dg, dq, merit, mu, first, dual_full):
        """FDDP's trials of ``alphas`` from index ``first``, judged on the merit
        (:meth:`_trial_merit`), FDDP's expected decrease with the dual term's
        (``dual_full`` = sum mu |lambda+ - lambda|^2: d1 + it, d2 - it; 0 in ALDDP).
        A search that :meth:`_hopeless` shows hopeless ends there (ALDDP: ``hopeless``,
        preg grows by one more factor) or goes on to the smallest step (ProxDDP with
        ``take_smallest_step``), which a refused search from a feasible iterate takes.
        Returns (accepted: (alpha, trial, d1, dv_exp, dv, index) or None, refused:
        whether no trial passed the test, hopeless)."""
        inner = self.inner
        alphas = inner.alphas
        last = len(alphas) - 1
        jump = self.take_smallest_step
        accepted, smallest, hopeless, missed_before = None, None, False, np.nan
        index = first
        while index <= last:
            alpha = alphas[index]
            trial = inner.try_step(xs, us, gaps, alpha, feasible)
            trial_merit = np.nan if trial is None else \
                self._trial_merit(xs, us, trial, mu, alpha)
            if not math.isfinite(trial_merit):     # a float: not numpy's ufunc (~1 us)
                index += 1
                continue
            d1, d2 = inner.expected_improvement(dg, dq, xs, trial[0], gaps, feasible)
            d1, d2 = d1 + dual_full, d2 - dual_full
            dv_exp = alpha * (d1 + 0.5 * alpha * d2)
            dv = merit - trial_merit
            if inner.accepts(d1, dv_exp, dv, feasible):
                accepted = (alpha, trial, d1, dv_exp, dv, index)
                break
            if index == last:
                smallest = (alpha, trial, d1, dv_exp, dv, index)
                if jump:
                    break
            missed = (dv_exp - dv) / (alpha * alpha)
            if feasible and (jump or self.ends_hopeless_search) and \
                    self._hopeless(d1, d2, dv_exp, dv, missed, missed_before):
                if not jump:
                    hopeless = True
                    break
                index = last        # no step of alphas passes: on to the smallest
                continue
            missed_before = missed
            index = self._next_trial(index, alpha, d1, d2, dv, feasible, mu)
        refused = accepted is None
        if refused and feasible and self.take_smallest_step and smallest is not None:
            accepted = smallest
        return accepted, refused, hopeless

    # -- what ProxDDP changes ----------------------------------------------------------
    def _start_multipliers(self, starts):
        """The multipliers of the solve's start (lambda)."""
        for lam, start in zip(self.lam, starts):
            lam[:] = start

    def _dual_terms(self, mu):
        """ProxDDP's dual terms at the iterate (ALDDP's multipliers are no iterates)."""
        return 0.0, 0.0, 0.0

    def _update_multipliers(self):
        """The outer loop's multiplier update: lambda <- lambda_hat (first order)."""
        for lam, lam_hat in zip(self.lam, self.lam_hat):
            lam[:] = lam_hat

    def _trial_merit(self, xs, us, trial, mu, alpha):
        """The merit at a trial (xs_try, us_try, xnext, cost) of step alpha: cost + sum
        psi; nan when its constraints cannot be evaluated."""
        xs_try, us_try, _, cost = trial
        try:
            self.constraints.evaluate(xs_try, us_try, CALC)
        except KERNEL_ERRORS:
            return np.nan
        return cost + self._al_terms(xs_try, us_try, mu, False)[0]

    def _accept_multipliers(self):
        """After an accepted step (ProxDDP: the trial's multipliers)."""

    def _multipliers(self):
        """The multipliers a result returns (and the next solve's warm start)."""
        return self.lam

    def _next_trial(self, index, alpha, d1, d2, dv, feasible, mu):
        """The index in ``alphas`` of the trial after a refused trial of step alpha (with
        its d1, d2, actual decrease dv and the search's penalty mu): the next one
        (ProxDDP: from a model of the merit along the step)."""
        return index + 1

    def _hopeless(self, d1, d2, dv_exp, dv, missed, missed_before):
        """Whether a refused trial of a line search (from a feasible iterate) shows that
        no step of ``alphas`` will pass the acceptance test, so that the search ends
        there (and preg grows, as after a refused search).

        The merit along the step is modelled by the quadratic through its value and
        slope at 0 and the trial of step a_t (Nocedal & Wright, 2nd ed., Sec. 3.5,
        eq. 3.57): dv(a) = a d1 + a^2 (d2 / 2 - e), e = ``missed`` = (dv_exp - dv) /
        a_t^2 the curvature the Riccati model misses (the AL terms of rows that the
        step pushes past their bounds: e ~ |R dx|^2 / (2 mu)).  The test dv >
        th_acceptstep dv_exp then holds for a < a_max = (1 - th) d1 / (e - (1 - th)
        d2 / 2).  The search ends when a_max is below the smallest alpha by a margin:
        rows off their bounds by some distance cross later than the model says, so
        a_max errs low; the margin is HOPELESS_MARGIN, or CONFIRMED_MARGIN when the
        last two trials gave the same e within CONFIRMED_SPREAD (the quadratic regime
        confirmed: the crossing rows sit at their bounds).  Measured on panda "vbound"
        from the guess (2026-11-26): 59 of 221 line searches refused all 10 steps,
        their merit falling as a^2 to the last, with a_max 1e-4 .. 1e-12; refused
        searches came in runs that raised preg one decade at a time (1e-7 .. 1e-1).
        After a search ended here preg grows by reg_factor^2 instead of reg_factor
        (measured, iterations / line-search trials from the guess and from FDDP's
        optimum, same costs: panda "vbound" 218 / 173 -> 192 / 150, ur5 "vbound" 128 /
        63 -> 122 / 60, ur5 "torque" 113 -> 94, panda "torque" 440 -> 434; with
        reg_factor^3 mixed: 177 / 143, 123 / 57, 101, 470)."""
        if not (d1 >= self.inner.th_grad and dv_exp >= 0.0 and dv < 0.0):
            return False
        th = self.inner.th_acceptstep
        curvature = missed - 0.5 * (1.0 - th) * d2
        if curvature <= 0.0:
            return False
        margin = HOPELESS_MARGIN
        if abs(missed - missed_before) <= CONFIRMED_SPREAD * missed:
            margin = CONFIRMED_MARGIN
        return (1.0 - th) * d1 / curvature * margin < self.inner.alphas[-1]

    def _hold_bounds(self, feasible, us):
        """With ``box_controls``, while the iterate's controls are inside their bounds:
        the trials clamp (set here, on the inner solver), and once feasible the backward
        pass's box QP holds the bounds (BoxFDDP's); else neither.  Returns the knots of
        the box QP."""
        inner = self.inner
        inside = self.box_controls and _inside_bounds(us, inner.u_lower, inner.u_upper)
        inner.clamps = inside
        return inner.has_control_limits if inside and feasible else self.no_box

    def _tolerances(self, mu):
        """(omega, eta) after a penalty update (Nocedal & Wright Alg. 17.4)."""
        return (max(self.omega_init * mu / self.mu_init, self.th_stop),
                max(self.eta_init * (mu / self.mu_init) ** 0.1, self.th_constraint))

    def _initial_multipliers(self, multipliers):
        if multipliers is None:
            return [np.zeros(b.shape) for b in self.blocks]
        multipliers = list(multipliers)
        if len(multipliers) != len(self.blocks):
            raise ValueError(f"multipliers: expected {len(self.blocks)} arrays (one per "
                             f"constraint block), got {len(multipliers)}")
        out = []
        for b, lam in zip(self.blocks, multipliers):
            lam = np.array(lam, dtype=float)
            if lam.shape != b.shape or not np.all(np.isfinite(lam)):
                raise ValueError(f"multipliers of {b.name} (knots {b.start}:{b.stop}): expected "
                                 f"finite values of shape {b.shape}, got {lam.shape}")
            out.append(lam)
        return out

    def _record(self, history, callbacks, iteration, record, t0):
        record_iteration(self, self.history_keys, history, callbacks, iteration, record, t0)

    def _result(self, xs, us, cost, iterations, converged, status, mu, stop, outer, history):
        problem = self.problem
        if np.isfinite(cost):
            problem.calc(xs, us)
            gaps = float(np.max(np.abs(problem.gaps(xs))))
            self.constraints.evaluate(xs, us, CALC)
            violation = float(self._al_terms(xs, us, mu, False)[1])
        else:
            gaps = violation = np.inf
        lam = self._multipliers()
        self.multipliers, self.mu = [m.copy() for m in lam], mu
        return ConstrainedResult(xs=xs.copy(), us=us.copy(), K=self.inner.K.copy(),
                                 k=self.inner.k.copy(), cost=float(cost), iterations=iterations,
                                 converged=converged, status=status, gaps=gaps, stop=stop,
                                 history=history, violation=violation,
                                 multipliers=[m.copy() for m in lam], mu=mu,
                                 outer_iterations=outer)
