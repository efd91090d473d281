"""Multiple-shooting NLP of a :class:`~geppetto.ocp.ShootingProblem`, solved by IPOPT (CasADi).

Transcription (the same in both derivative modes)
-------------------------------------------------
Decision variables, knot by knot, with ``nz = ndx + nu``::

    w = [dx_0; u_0; dx_1; u_1; ...; dx_{N-1}; u_{N-1}; dx_N]        (nw = N nz + ndx)

States live on the state manifold.  They are parameterized around a fixed
reference trajectory ``xbar`` (the warm start) by tangent increments,

    x_k = xbar_k (+) dx_k,

so a free-flyer quaternion stays a unit quaternion whatever step IPOPT takes
and every state has ndx columns in the Jacobians (Crocoddyl's convention).
For revolute and prismatic joints and for velocities (+) is +, and dx_k is
plainly x_k - xbar_k.  xbar is not moved during a solve: warm-start within
a rotation of pi of the solution (the chart of exp is singular beyond).
Constraints, knot by knot::

    g = [c_0; d_0; c_1; d_1; ...; c_{N-1}; d_{N-1}; c_N]
    d_k = F(x_k, u_k) (-) x_{k+1} = 0        defects on the manifold (the problem's gaps)
    lower <= c_k = r(x_k, u_k) <= upper      the Constraint terms of knot k's model
                                             (path: the running models; c_N: the terminal one)

x_0 = x0 is the variable bound dx_0 = x0 (-) xbar_0 (lbx = ubx: IPOPT removes
it).  Knots with fewer controls than the widest (an impulse has nu = 0) keep
the problem's padded layout (see :class:`~geppetto.ocp.ShootingProblem`):
their padding variables are fixed at 0 by their bounds (IPOPT removes them
too) and their Jacobian and Hessian entries are zero.  Control bounds
(``StageModel(control_bounds=...)``) and state bounds (``state_bounds=`` of
the stage and terminal models, knots 1..N) are bounds on w.  A state bound is allowed on the coordinates where (+) is + (revolute,
prismatic and translation joint positions, every velocity); a Lie-group
coordinate (quaternion, unbounded revolute, planar) cannot be bounded so: use a
Constraint on a StateResidual.  The cost is the problem's, unchanged.  The
Jacobian of g is block-banded: the rows of knot k touch z_k = (dx_k, u_k) and
dx_{k+1} only.

Derivatives
-----------
- ``derivatives="analytical"``: f, g, the gradient, the sparse Jacobian and a
  Gauss-Newton Hessian come from the problem's batched kernels
  (``calc``, ``calc_diff``, ``constraints``, ``state.jacobians_*``), wrapped as
  ``casadi.Callback`` functions passed to ``nlpsol`` as its ``grad_f``,
  ``jac_g`` and ``hess_lag``.  One evaluation crosses into Numba a fixed number
  of times per phase, never per knot; f and g (and the gradient, Jacobian and
  Hessian) share one evaluation at a point (a one-point cache).  Chain rule:
  with Ddx = d(xbar (+) dx)/d dx and (D0, D1) the Jacobians of
  difference(x_{k+1}, F)::

      dd_k/dz_k = D1 [Fx Ddx_k, Fu],  dd_k/ddx_{k+1} = D0 Ddx_{k+1},
      dc_k/dz_k = [Rx Ddx_k, Ru],     grad_k = [Ddx_k^T Lx, Lu].

  Hessian ``hessian="gauss_newton"`` (default): the cost's blocks
  [[Ddx^T Lxx Ddx, Ddx^T Lxu], [., Luu]] times IPOPT's objective factor, the
  curvature of the defects and constraints left out (as iLQR/FDDP do); or
  ``"limited_memory"`` (IPOPT's L-BFGS).
- ``derivatives="casadi"``: the whole NLP built from the CasADi twin of the
  dynamics (every :mod:`geppetto.ocp` term rewritten symbolically in
  :mod:`.symbolic_terms`), one SX function per phase mapped over its knots; the
  exact Hessian of the Lagrangian by AD (``hessian="exact"``) or L-BFGS.

Statuses of :class:`~.ddp.SolverResult`: ``converged`` (IPOPT's tol),
``acceptable`` (its acceptable tolerances), ``infeasible`` (locally
infeasible constraints; the Gauss-Newton mode turns on IPOPT's
``expect_infeasible_problem`` heuristics to reach that verdict in bounded
time), ``restoration failed (locally infeasible?)``, ``max_iter``,
``time_limit``, ``stopped by a callback``, else ``failed (<IPOPT status>)``.
IPOPT computes no feedback, so the result's ``K`` and ``k`` are zero.
"""
import sys
import time

import numpy as np

from ..dynamics.model import PRISMATIC, REVOLUTE, TRANSLATION
from ..ocp.state import StateMultibody
from .ddp import SolverResult
from .options import check_solve_arguments

DERIVATIVES = ("analytical", "casadi")
HESSIANS = {"analytical": ("gauss_newton", "limited_memory"),
            "casadi": ("exact", "limited_memory")}

# IPOPT return status -> (status, converged)
IPOPT_STATUS = {
    "Solve_Succeeded": ("converged", True),
    "Solved_To_Acceptable_Level": ("acceptable", True),
    "Infeasible_Problem_Detected": ("infeasible", False),
    "Maximum_Iterations_Exceeded": ("max_iter", False),
    "Maximum_CpuTime_Exceeded": ("time_limit", False),
    "Maximum_WallTime_Exceeded": ("time_limit", False),
    "User_Requested_Stop": ("stopped by a callback", False),
    "Restoration_Failed": ("restoration failed (locally infeasible?)", False),
}

# IPOPT options of the Gauss-Newton mode: without the curvature of the constraints
# the steps on an infeasible problem shrink the violation ever more slowly, and
# IPOPT, which detects infeasibility only in its restoration phase, crawls to
# max_iter.  Its infeasibility heuristics enter the restoration phase as soon as the
# multipliers blow up and demand more reduction of the violation before leaving it.
GAUSS_NEWTON_OPTIONS = {"expect_infeasible_problem": "yes"}

# what an evaluation may raise at a wild trial point (returned to IPOPT as NaN: it backtracks)
_EVALUATION_ERRORS = (ZeroDivisionError, FloatingPointError, OverflowError, SystemError,
                      ValueError)
_LINEAR_JOINTS = (REVOLUTE, PRISMATIC, TRANSLATION)


def _vector_coordinates(state):
    """(x_index, dx_index): the coordinates where x (+) dx adds, x[i] = xbar[i] + dx[j]."""
    if not isinstance(state, StateMultibody):
        return np.arange(state.nx), np.arange(state.nx)
    m = state.model.arrays
    x_index, dx_index = [], []
    for i in range(1, m.njoints):
        if m.jtype[i] in _LINEAR_JOINTS:
            x_index += range(m.idx_q[i], m.idx_q[i] + m.nqs[i])
            dx_index += range(m.idx_v[i], m.idx_v[i] + m.nvs[i])
    x_index += range(m.nq, m.nq + m.nv)
    dx_index += range(m.nv, 2 * m.nv)
    return np.array(x_index, dtype=int), np.array(dx_index, dtype=int)


def _tangent_pattern(state):
    """(ndx, ndx) booleans: where d(x (+) dx)/d dx and d difference/dx may be nonzero:
    one block per joint on the configuration part, the diagonal on the velocities."""
    if not isinstance(state, StateMultibody):
        return np.eye(state.ndx, dtype=bool)
    m = state.model.arrays
    pattern = np.zeros((state.ndx, state.ndx), dtype=bool)
    for i in range(1, m.njoints):
        block = slice(m.idx_v[i], m.idx_v[i] + m.nvs[i])
        pattern[block, block] = True
    pattern[m.nv:, m.nv:] = np.eye(m.nv, dtype=bool)
    return pattern


def _bounds(model, names, size):
    lower = getattr(model, names[0], None)
    upper = getattr(model, names[1], None)
    lower = np.full(size, -np.inf) if lower is None else np.asarray(lower, dtype=float)
    upper = np.full(size, np.inf) if upper is None else np.asarray(upper, dtype=float)
    return lower, upper


class Transcription:
    """Index layout, bounds and sparsity of the multiple-shooting NLP of ``problem``.

    Attributes: ``nz`` (ndx + nu), ``nw``, ``ng``; ``stages`` [(model, start,
    stop, data)]: the phases and the terminal knot; ``defect_rows`` (N, ndx)
    the rows of d_k in g; ``terms`` [(stage index, constraint, rows (K, nr),
    columns (ncols,))]: each Constraint of each stage with its rows in g and
    the columns of z_k it depends on; ``lbg``, ``ubg`` (ng,).
    """

    def __init__(self, problem):
        self.problem = problem
        N, nx, ndx, nu = problem.N, problem.nx, problem.ndx, problem.nu
        self.N, self.nx, self.ndx, self.nu = N, nx, ndx, nu
        self.nz = nz = ndx + nu
        self.nw = N * nz + ndx
        self.stages = list(problem.phases) + [
            (problem.terminal_model, N, N + 1, problem.terminal_data)]
        nc = np.zeros(N + 1, dtype=int)
        for model, start, stop, _ in self.stages:
            nc[start:stop] = sum(c.residual.nr for c in model.constraints)
        block = nc + np.r_[np.full(N, ndx), 0]
        offset = np.concatenate([[0], np.cumsum(block)])
        self.offset = offset
        self.ng = int(offset[-1])
        self.defect_rows = offset[:N, None] + nc[:N, None] + np.arange(ndx)
        self.lbg, self.ubg = np.zeros(self.ng), np.zeros(self.ng)
        self.terms = []
        for index, (model, start, stop, _) in enumerate(self.stages):
            row = 0
            for constraint in model.constraints:
                nr = constraint.residual.nr
                rows = offset[start:stop, None] + row + np.arange(nr)
                self.lbg[rows], self.ubg[rows] = constraint.lower, constraint.upper
                self.terms.append((index, constraint, rows, self._columns(model, constraint)))
                row += nr
        self._state_bounds()
        self.tangent_pattern = _tangent_pattern(problem.state)
        # no Lie-group joint: the Jacobians of integrate and difference are identities
        self.flat = bool(problem.state.flat)

    def _columns(self, model, constraint):
        residual = constraint.residual
        columns = []
        if getattr(residual, "depends_on_state", True):
            columns += range(self.ndx)
        if residual.uses_control and not model.terminal:
            columns += range(self.ndx, self.ndx + model.nu)
        return np.array(columns, dtype=int)

    def _state_bounds(self):
        N, nx, nu = self.N, self.nx, self.nu
        self.x_lower, self.x_upper = np.full((N + 1, nx), -np.inf), np.full((N + 1, nx), np.inf)
        self.u_lower, self.u_upper = np.full((N, nu), -np.inf), np.full((N, nu), np.inf)
        for model, start, stop, _ in self.stages:
            self.x_lower[start:stop], self.x_upper[start:stop] = _bounds(
                model, ("x_lower", "x_upper"), nx)
            if not model.terminal:     # a knot's padding (u beyond its nu) is fixed at 0
                m = model.nu
                self.u_lower[start:stop, :m], self.u_upper[start:stop, :m] = _bounds(
                    model, ("u_lower", "u_upper"), m)
                self.u_lower[start:stop, m:] = self.u_upper[start:stop, m:] = 0.0
        self.x_index, self.dx_index = _vector_coordinates(self.problem.state)
        others = np.setdiff1d(np.arange(nx), self.x_index)
        bounded = np.isfinite(self.x_lower[:, others]) | np.isfinite(self.x_upper[:, others])
        if np.any(bounded):
            raise ValueError(f"state bounds on the Lie-group coordinates {others.tolist()} "
                             "(quaternion, unbounded revolute or planar joints) are not "
                             "supported: bound them with a Constraint on a StateResidual")

    # -- points ---------------------------------------------------------------------
    def unpack(self, w):
        """(dxs (N+1, ndx), us (N, nu)) from w (nw,)."""
        N, ndx, nz = self.N, self.ndx, self.nz
        Z = w[:N * nz].reshape(N, nz)
        dxs = np.empty((N + 1, ndx))
        dxs[:N] = Z[:, :ndx]
        dxs[N] = w[N * nz:]
        return dxs, np.ascontiguousarray(Z[:, ndx:])

    def pack(self, dxs, us):
        """w (nw,) from (dxs (N+1, ndx), us (N, nu))."""
        N, ndx, nz = self.N, self.ndx, self.nz
        w = np.empty(self.nw)
        Z = w[:N * nz].reshape(N, nz)
        Z[:, :ndx], Z[:, ndx:] = dxs[:N], us
        w[N * nz:] = dxs[N]
        return w

    def variable_bounds(self, xbar):
        """(lbx, ubx) (nw,) for the chart at xbar (N+1, nx): x_0 fixed, u and state bounds."""
        state, N = self.problem.state, self.N
        dx0 = state.difference(xbar[:1], self.problem.x0[None])[0]
        lower = np.full((N + 1, self.ndx), -np.inf)
        upper = np.full((N + 1, self.ndx), np.inf)
        lower[:, self.dx_index] = self.x_lower[:, self.x_index] - xbar[:, self.x_index]
        upper[:, self.dx_index] = self.x_upper[:, self.x_index] - xbar[:, self.x_index]
        lower[0] = upper[0] = dx0
        return self.pack(lower, self.u_lower), self.pack(upper, self.u_upper)

    # -- sparsity -------------------------------------------------------------------
    def jacobian_structure(self):
        """(rows, cols) of the Jacobian's nonzeros in the order the analytical
        evaluation fills them: defects vs z_k, defects vs dx_{k+1}, then each term."""
        N, nz = self.N, self.nz
        knots = np.arange(N + 1) * nz
        rows = [np.broadcast_to(self.defect_rows[:, :, None], (N, self.ndx, nz))]
        cols = [np.broadcast_to(knots[:N, None, None] + np.arange(nz), (N, self.ndx, nz))]
        ii, jj = np.nonzero(self.tangent_pattern)
        rows.append(self.defect_rows[:, ii])
        cols.append(knots[1:, None] + jj)
        for index, _, term_rows, columns in self.terms:
            _, start, stop, _ = self.stages[index]
            K, nr = term_rows.shape
            rows.append(np.broadcast_to(term_rows[:, :, None], (K, nr, len(columns))))
            cols.append(np.broadcast_to(knots[start:stop, None, None] + columns,
                                        (K, nr, len(columns))))
        return (np.concatenate([r.ravel() for r in rows]),
                np.concatenate([c.ravel() for c in cols]))

    def hessian_structure(self):
        """(rows, cols) of the upper triangle of the block-diagonal Gauss-Newton Hessian:
        a dense (nz, nz) block per running knot, then (ndx, ndx) for dx_N."""
        N, nz, ndx = self.N, self.nz, self.ndx
        iu, ju = np.triu_indices(nz)
        it, jt = np.triu_indices(ndx)
        knots = np.arange(N)[:, None] * nz
        return (np.concatenate([(knots + iu).ravel(), N * nz + it]),
                np.concatenate([(knots + ju).ravel(), N * nz + jt]))


def compressed_columns(rows, cols, shape):
    """(colind, row, order): CCS arrays of the pattern (rows, cols) and the permutation
    taking values listed in the (rows, cols) order to CCS order.  No duplicates allowed."""
    order = np.lexsort((rows, cols))
    key = cols[order].astype(np.int64) * shape[0] + rows[order]
    if np.any(np.diff(key) == 0):
        raise ValueError("duplicate entries in a sparsity pattern")
    colind = np.searchsorted(cols[order], np.arange(shape[1] + 1))
    return colind, rows[order], order


class AnalyticalOracle:
    """f, g, grad f, the Jacobian of g and the Gauss-Newton Hessian at a point (w, xbar),
    from the problem's batched kernels; the last point's results are kept (f and g,
    then grad f and the Jacobian, are asked for at the same point in turn)."""

    def __init__(self, transcription):
        self.t = t = transcription
        self.problem = t.problem
        N, ndx, nz = t.N, t.ndx, t.nz
        self._point = None
        self._level = 0
        self.f = np.nan
        self.g = np.zeros(t.ng)
        self.grad = np.zeros(t.nw)
        self.jac = np.zeros(len(t.jacobian_structure()[0]))
        self.hess_blocks = np.zeros((N, nz, nz))
        self.hess_terminal = np.zeros((ndx, ndx))
        self._ii, self._jj = np.nonzero(t.tangent_pattern)
        self._iu, self._ju = np.triu_indices(nz)
        self._it, self._jt = np.triu_indices(ndx)

    def evaluate(self, w, p, level):
        """Make the results of ``level`` (1: f and g, 2: also the derivatives) current at w."""
        if self._point is not None and self._level >= level and \
                np.array_equal(self._point[0], w) and np.array_equal(self._point[1], p):
            return
        t = self.t
        dxs, us = t.unpack(w)
        xbar = p.reshape(t.N + 1, t.nx)
        self._point, self._level = (w.copy(), p.copy()), level
        try:
            with np.errstate(all="ignore"):
                xs = t.problem.state.integrate(xbar, dxs)
                if level == 1:
                    self._values(xs, us)
                else:
                    self._derivatives(xs, us, dxs, xbar)
        except _EVALUATION_ERRORS:
            self.f = np.nan
            for array in (self.g, self.grad, self.jac, self.hess_blocks, self.hess_terminal):
                array[...] = np.nan

    def _values(self, xs, us):
        problem, t = self.problem, self.t
        self.f = problem.calc(xs, us)
        self.g[t.defect_rows] = problem.state.difference(xs[1:], problem.xnext)
        for (_, _, rows, _), data in zip(t.terms, self._constraints(xs, us, False)):
            self.g[rows] = data.r

    def _constraints(self, xs, us, with_derivatives):
        """The residual data of every Constraint term, in the order of ``t.terms``."""
        return [data for _, _, _, datas in self.problem.constraints(xs, us, with_derivatives)
                for data in datas]

    def _derivatives(self, xs, us, dxs, xbar):
        problem, t, state = self.problem, self.t, self.problem.state
        N, ndx = t.N, t.ndx
        self.f = problem.calc_diff(xs, us)
        self.g[t.defect_rows] = state.difference(xs[1:], problem.xnext)
        if t.flat:
            Ddx = None
            A = np.concatenate([problem.Fx, problem.Fu], axis=2)
            B = np.broadcast_to(-np.eye(ndx)[self._ii, self._jj], (N, len(self._ii)))
        else:
            Ddx = state.jacobians_integrate(xbar, dxs)[1]
            D0, D1 = state.jacobians_difference(xs[1:], problem.xnext)
            A = D1 @ np.concatenate([problem.Fx @ Ddx[:N], problem.Fu], axis=2)
            B = (D0 @ Ddx[1:])[:, self._ii, self._jj]
        parts = [A.ravel(), B.ravel()]
        for (index, _, rows, columns), data in zip(t.terms, self._constraints(xs, us, True)):
            _, start, stop, _ = t.stages[index]
            self.g[rows] = data.r
            Rx = data.Rx if Ddx is None else data.Rx @ Ddx[start:stop]
            parts.append(np.concatenate([Rx, data.Ru], axis=2)[:, :, columns].ravel())
        np.concatenate(parts, out=self.jac)
        self._gradient_and_hessian(Ddx)

    def _gradient_and_hessian(self, Ddx):
        problem, t = self.problem, self.t
        N, ndx = t.N, t.ndx
        Lx, Lxx, Lxu = problem.Lx, problem.Lxx, problem.Lxu
        if Ddx is not None:
            DdxT = np.swapaxes(Ddx, 1, 2)
            Lx = (DdxT @ Lx[:, :, None])[:, :, 0]
            Lxx = DdxT @ Lxx @ Ddx
            Lxu = DdxT[:N] @ Lxu
        grad = self.grad[:N * t.nz].reshape(N, t.nz)
        grad[:, :ndx], grad[:, ndx:] = Lx[:N], problem.Lu
        self.grad[N * t.nz:] = Lx[N]
        H = self.hess_blocks
        H[:, :ndx, :ndx], H[:, :ndx, ndx:], H[:, ndx:, ndx:] = Lxx[:N], Lxu, problem.Luu
        self.hess_terminal[:] = Lxx[N]

    def hessian_values(self, lam_f):
        """Upper-triangle values in :meth:`Transcription.hessian_structure` order."""
        return lam_f * np.concatenate([self.hess_blocks[:, self._iu, self._ju].ravel(),
                                       self.hess_terminal[self._it, self._jt]])


def _callback_class():
    import casadi as ca

    class PythonFunction(ca.Callback):
        """A casadi.Function evaluated by ``evaluate(inputs, outputs)`` on NumPy views
        of the nonzeros (``eval_buffer``: no copies through DM)."""

        def __init__(self, name, inputs, outputs, evaluate):
            ca.Callback.__init__(self)
            self._inputs, self._outputs, self._evaluate = inputs, outputs, evaluate
            self.construct(name, {})

        def get_n_in(self):
            return len(self._inputs)

        def get_n_out(self):
            return len(self._outputs)

        def get_name_in(self, i):
            return self._inputs[i][0]

        def get_name_out(self, i):
            return self._outputs[i][0]

        def get_sparsity_in(self, i):
            return self._inputs[i][1]

        def get_sparsity_out(self, i):
            return self._outputs[i][1]

        def has_eval_buffer(self):
            return True

        def eval_buffer(self, arg, res):
            inputs = [None if a is None else np.frombuffer(a, dtype=np.float64) for a in arg]
            outputs = [None if r is None or not len(r) else np.frombuffer(r, dtype=np.float64)
                       for r in res]
            self._evaluate(inputs, outputs)
            return 0

    return PythonFunction


def analytical_functions(transcription, hessian):
    """{"nlp": (x, p) -> (f, g), "grad_f": -> (f, grad_f_x), "jac_g": -> (g, jac_g_x),
    "hess_lag": (x, p, lam_f, lam_g) -> triu_hess_gamma_x_x}: casadi Callbacks on the
    problem's kernels; p = xbar (N+1, nx) flattened knot by knot."""
    import casadi as ca
    PythonFunction = _callback_class()
    t = transcription
    oracle = AnalyticalOracle(t)
    dense = ca.Sparsity.dense
    xp = [("x", dense(t.nw, 1)), ("p", dense((t.N + 1) * t.nx, 1))]
    rows, cols = t.jacobian_structure()
    jac_sparsity, jac_order = _sparsity(rows, cols, (t.ng, t.nw), ca)
    rows, cols = t.hessian_structure()
    hess_sparsity, hess_order = _sparsity(rows, cols, (t.nw, t.nw), ca)

    def nlp(inputs, outputs):
        oracle.evaluate(inputs[0], inputs[1], 1)
        _write(outputs, [oracle.f, oracle.g])

    def grad_f(inputs, outputs):
        oracle.evaluate(inputs[0], inputs[1], 2)
        _write(outputs, [oracle.f, oracle.grad])

    def jac_g(inputs, outputs):
        oracle.evaluate(inputs[0], inputs[1], 2)
        _write(outputs, [oracle.g, oracle.jac[jac_order]])

    def hess_lag(inputs, outputs):
        oracle.evaluate(inputs[0], inputs[1], 2)
        _write(outputs, [oracle.hessian_values(inputs[2][0])[hess_order]])

    functions = {
        "nlp": PythonFunction("nlp", xp, [("f", dense(1, 1)), ("g", dense(t.ng, 1))], nlp),
        "grad_f": PythonFunction("grad_f", xp, [("f", dense(1, 1)),
                                                ("grad_f_x", dense(t.nw, 1))], grad_f),
        "jac_g": PythonFunction("jac_g", xp, [("g", dense(t.ng, 1)),
                                              ("jac_g_x", jac_sparsity)], jac_g)}
    if hessian == "gauss_newton":
        functions["hess_lag"] = PythonFunction(
            "hess_lag", xp + [("lam_f", dense(1, 1)), ("lam_g", dense(t.ng, 1))],
            [("triu_hess_gamma_x_x", hess_sparsity)], hess_lag)
    return functions, oracle


def _sparsity(rows, cols, shape, ca):
    colind, row, order = compressed_columns(rows, cols, shape)
    return ca.Sparsity(shape[0], shape[1], colind.tolist(), row.tolist()), order


def _write(outputs, values):
    for out, value in zip(outputs, values):
        if out is not None:
            out[:] = value


class CallbackNLPVerbose:
    """Print one line per IPOPT iteration: cost, max |defect|, max constraint violation."""

    COLUMNS = ("iter", "cost", "||gaps||", "violation", "time")

    def __init__(self, stream=None):
        self.stream = sys.stdout if stream is None else stream

    def __call__(self, solver, iteration, record):
        if iteration % 10 == 0:
            self.stream.write("".join(f"{c:>12}" for c in self.COLUMNS) + "\n")
        values = (record["cost"], record["gaps"], record["violation"], record["time"])
        self.stream.write(f"{iteration:>12d}" + "".join(f"{v:>12.4e}" for v in values) + "\n")
        self.stream.flush()


class NLP:
    """The multiple-shooting NLP of ``problem`` (see the module docstring), solved by IPOPT.

    Parameters
    ----------
    problem : ShootingProblem.
    derivatives : "analytical" (the problem's kernels) or "casadi" (the CasADi twin, AD).
    hessian : "gauss_newton" (analytical only, the default there), "exact" (casadi
        only, the default there) or "limited_memory" (IPOPT's L-BFGS, both modes).
    tol : IPOPT's ``tol`` (scaled KKT error); ``constr_viol_tol`` is set to it too
        and ``bound_relax_factor`` to 0, so that bounds and constraints hold to tol
        at a converged solution (IPOPT relaxes them by 1e-8 by default).
    ipopt_options : other IPOPT options (names without the "ipopt." prefix).
    expand : casadi mode: expand the mapped MX graph into one SX graph (faster
        evaluations, slower and bigger to build for long horizons).

    ``build_time`` is the seconds spent building the functions (CasADi's
    derivative generation in casadi mode).  After a solve: ``stats`` (IPOPT's,
    through CasADi: ``t_wall_nlp_f``, ``n_call_nlp_jac_g``, ...), ``lam_g``,
    ``lam_x`` (multipliers), ``w`` and ``xbar`` (the solution's variables and chart).
    """

    def __init__(self, problem, derivatives="analytical", hessian=None, tol=1e-8,
                 ipopt_options=None, expand=False):
        if derivatives not in DERIVATIVES:
            raise ValueError(f"derivatives must be one of {DERIVATIVES}, got {derivatives!r}")
        hessian = HESSIANS[derivatives][0] if hessian is None else hessian
        if hessian not in HESSIANS[derivatives]:
            raise ValueError(f"hessian must be one of {HESSIANS[derivatives]} with "
                             f"derivatives={derivatives!r}, got {hessian!r}")
        self.problem = problem
        self.derivatives, self.hessian, self.tol = derivatives, hessian, float(tol)
        self.ipopt_options = dict(ipopt_options or {})
        self.transcription = Transcription(problem)
        start = time.perf_counter()
        if derivatives == "analytical":
            self.functions, self.oracle = analytical_functions(self.transcription, hessian)
        else:
            from .nlp_symbolic import symbolic_functions
            self.functions = symbolic_functions(self.transcription, hessian)
        self.build_time = time.perf_counter() - start
        self._solvers = {}
        self._monitor = _IterationMonitor(self)
        self.stats, self.lam_g, self.lam_x, self.w, self.xbar = {}, None, None, None, None

    # -- points -------------------------------------------------------------------------
    def parameters(self, xbar):
        """p: the chart xbar (N+1, nx) flattened, and in casadi mode the references
        of every residual at every knot (read from the problem now)."""
        if self.derivatives == "analytical":
            return np.ascontiguousarray(xbar, dtype=float).ravel()
        from .nlp_symbolic import parameters
        return parameters(self.transcription, xbar)

    def initial_point(self, xs=None, us=None):
        """(w0, xbar) for the warm start (xs, us): xbar = xs, dx = 0 (dx_0 = x0 (-) xs[0]);
        defaults as FDDP's: xs = x0 repeated, us quasi-static."""
        problem, t = self.problem, self.transcription
        if xs is None:
            xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
        if us is None:
            us = problem.quasi_static(xs)
        xbar, us = problem._validate(xs, us)
        dxs = np.zeros((t.N + 1, t.ndx))
        dxs[0] = problem.state.difference(xbar[:1], problem.x0[None])[0]
        return t.pack(dxs, us), xbar.copy()

    def trajectory(self, w, xbar):
        """(xs (N+1, nx), us (N, nu)) of the variables w in the chart xbar."""
        dxs, us = self.transcription.unpack(np.asarray(w, dtype=float).ravel())
        return self.problem.state.integrate(xbar, dxs), us

    # -- solve --------------------------------------------------------------------------
    def _solver(self, max_iter, time_limit, verbose, iteration_callback):
        import casadi as ca
        key = (max_iter, time_limit, verbose)
        if key not in self._solvers:
            options = {"ipopt.tol": self.tol, "ipopt.constr_viol_tol": self.tol,
                       "ipopt.bound_relax_factor": 0.0,
                       "ipopt.max_iter": int(max_iter), "ipopt.sb": "yes",
                       "ipopt.print_level": 5 if verbose == "ipopt" else 0,
                       "print_time": verbose == "ipopt", "no_nlp_grad": True,
                       "calc_lam_p": False, "iteration_callback": iteration_callback,
                       "grad_f": self.functions["grad_f"], "jac_g": self.functions["jac_g"]}
            if time_limit is not None and np.isfinite(time_limit):
                # IPOPT wants a positive limit; 0 stops at its first check, as in DDP
                options["ipopt.max_wall_time"] = max(time_limit, 1e-9)
            if self.hessian == "limited_memory":
                options["ipopt.hessian_approximation"] = "limited-memory"
            else:
                options["hess_lag"] = self.functions["hess_lag"]
            if self.hessian == "gauss_newton":
                options.update({f"ipopt.{k}": v for k, v in GAUSS_NEWTON_OPTIONS.items()})
            options.update({f"ipopt.{k}": v for k, v in self.ipopt_options.items()})
            self._solvers[key] = ca.nlpsol("nlp", "ipopt", self.functions["nlp"], options)
        return self._solvers[key]

    def solve(self, xs=None, us=None, max_iter=1000, time_limit=None, verbose=False,
              callbacks=()):
        """Solve from the warm start (xs, us) (e.g. a DDP solution; defaults as FDDP's).

        ``verbose``: True prints a line per iteration (:class:`CallbackNLPVerbose`),
        "ipopt" IPOPT's own output.  ``callbacks``: callables ``(solver, iteration,
        record)``, record = {cost, gaps, violation, time, ...}, called at every
        IPOPT iteration (iteration 0 is the starting point).  ``time_limit``:
        seconds of wall time (IPOPT's max_wall_time).  Returns a SolverResult.
        """
        max_iter, time_limit = check_solve_arguments(max_iter, time_limit)
        t = self.transcription
        w0, xbar = self.initial_point(xs, us)
        p = self.parameters(xbar)
        lbx, ubx = t.variable_bounds(xbar)
        callbacks = list(callbacks) + ([CallbackNLPVerbose()] if verbose is True else [])
        monitor = self._monitor
        solver = self._solver(max_iter, time_limit, verbose, monitor.function)
        monitor.start(callbacks)
        solution = solver(x0=w0, p=p, lbx=lbx, ubx=ubx, lbg=t.lbg, ubg=t.ubg)
        self.stats = solver.stats()
        self.w = np.asarray(solution["x"]).ravel()
        self.lam_g = np.asarray(solution["lam_g"]).ravel()
        self.lam_x = np.asarray(solution["lam_x"]).ravel()
        self.xbar = xbar
        return self._result(monitor)

    def _result(self, monitor):
        problem, t = self.problem, self.transcription
        xs, us = self.trajectory(self.w, self.xbar)
        cost = problem.calc(xs, us)
        gaps = float(np.max(np.abs(problem.gaps(xs)))) if t.N else 0.0
        raw = self.stats.get("return_status", "unknown")
        status, converged = IPOPT_STATUS.get(raw, (f"failed ({raw})", False))
        iterations = self.stats.get("iterations", {})
        history = dict(monitor.history)
        for key, name in (("obj", "cost"), ("inf_pr", "inf_pr"), ("inf_du", "inf_du"),
                          ("mu", "mu"), ("d_norm", "d_norm"), ("alpha_pr", "step"),
                          ("alpha_du", "alpha_du"), ("regularization_size", "preg")):
            history[name] = list(iterations.get(key, []))
        stop = history["inf_du"][-1] if history["inf_du"] else np.nan
        return SolverResult(xs=xs, us=us, K=np.zeros((t.N, t.nu, t.ndx)),
                            k=np.zeros((t.N, t.nu)), cost=float(cost),
                            iterations=int(self.stats.get("iter_count", 0)),
                            converged=converged, status=status, gaps=gaps, stop=float(stop),
                            history=history)

    def __repr__(self):
        t = self.transcription
        return (f"NLP(N={t.N}, nw={t.nw}, ng={t.ng}, derivatives={self.derivatives!r}, "
                f"hessian={self.hessian!r})")


class _IterationMonitor:
    """IPOPT's iteration callback: a record per iteration for the history and the callbacks."""

    def __init__(self, nlp):
        import casadi as ca
        self.nlp, self.callbacks = nlp, []
        t = nlp.transcription
        self._constraint_rows = np.setdiff1d(np.arange(t.ng), t.defect_rows.ravel())
        sizes = {"x": t.nw, "f": 1, "g": t.ng, "lam_x": t.nw, "lam_g": t.ng, "lam_p": 0}
        names = [ca.nlpsol_out(i) for i in range(ca.nlpsol_n_out())]
        inputs = [(n, ca.Sparsity.dense(sizes[n], 1) if sizes[n] else ca.Sparsity(0, 0))
                  for n in names]
        self._index = {n: i for i, n in enumerate(names)}
        self.function = _callback_class()("iteration", inputs,
                                          [("ret", ca.Sparsity.dense(1, 1))], self)
        self.history = {}

    def start(self, callbacks):
        self.callbacks = callbacks
        self.history = {"gaps": [], "violation": [], "time": []}
        self._iteration, self._clock = 0, time.perf_counter()

    def __call__(self, inputs, outputs):
        t = self.nlp.transcription
        g = inputs[self._index["g"]]
        gaps = float(np.max(np.abs(g[t.defect_rows]))) if t.N else 0.0
        rows = self._constraint_rows
        violation = float(np.max(np.maximum(t.lbg[rows] - g[rows], g[rows] - t.ubg[rows]),
                                 initial=0.0))
        now = time.perf_counter()
        record = dict(cost=float(inputs[self._index["f"]][0]), gaps=gaps, violation=violation,
                      time=now - self._clock)
        self._clock = now
        for key in self.history:
            self.history[key].append(record[key])
        for callback in self.callbacks:
            callback(self.nlp, self._iteration, record)
        self._iteration += 1
        if outputs[0] is not None:
            outputs[0][0] = 0.0
