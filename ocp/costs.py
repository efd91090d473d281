"""Activations, costs and constraints.

A cost is ``weight * a(r(x, u))`` for a residual r and an activation a; with
the Gauss-Newton approximation its derivatives are

    Lx = w Rx^T a_r,  Lu = w Ru^T a_r,
    Lxx = w Rx^T A_rr Rx,  Luu = w Ru^T A_rr Ru,  Lxu = w Rx^T A_rr Ru,

accumulated for all knots of a phase by one kernel (:func:`_accumulate`).

Activations (value a, gradient a_r (K, nr), Hessian A_rr (K, nr, nr)):

- :class:`Quadratic`:          a = 1/2 |r|^2
- :class:`WeightedQuadratic`:  a = 1/2 sum w_i r_i^2
- :class:`QuadraticBarrier`:   a = 1/2 |max(r - ub, 0)|^2 + 1/2 |min(r - lb, 0)|^2
  (zero inside the bounds: soft joint and velocity limits)
- :class:`Smooth1Norm`:        a = sum sqrt(r_i^2 + eps)
- :class:`Smooth2Norm`:        a = sqrt(|r|^2 + eps)

A :class:`Constraint` is a residual with bounds lower <= r <= upper (an
equality where they are equal); the solvers consume them (box limits on u by
BoxFDDP, the rest by the NLP).
"""
import weakref

import numpy as np
from numba import prange

from ..dynamics.config import inline_kernel, kernel, num_threads, parallel_kernel
from ..dynamics.validation import as_bounds, as_real
from .residuals import structure_key

QUADRATIC, WEIGHTED, BARRIER, SMOOTH1, SMOOTH2 = range(5)


class Activation:
    """Base: ``code`` selects the branch of :func:`_activate`; ``parameters``
    (3, nr) are weights / lower / upper or eps, as the code needs."""

    code = QUADRATIC

    def parameters(self, nr):
        return np.zeros((3, nr))


class Quadratic(Activation):
    code = QUADRATIC


class WeightedQuadratic(Activation):
    code = WEIGHTED

    def __init__(self, weights):
        self.weights = np.asarray(weights, dtype=float)
        if np.any(self.weights < 0) or not np.all(np.isfinite(self.weights)):
            raise ValueError("WeightedQuadratic: weights must be finite and non-negative")

    def parameters(self, nr):
        if self.weights.shape not in ((), (nr,)):
            raise ValueError(f"WeightedQuadratic: expected {nr} weights, got {self.weights.shape}")
        out = np.zeros((3, nr))
        out[0] = self.weights
        return out


class QuadraticBarrier(Activation):
    code = BARRIER

    def __init__(self, lower, upper):
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)
        if np.any(self.lower > self.upper):
            raise ValueError("QuadraticBarrier: lower bound above upper bound")

    def parameters(self, nr):
        out = np.zeros((3, nr))
        out[1] = np.broadcast_to(self.lower, (nr,))
        out[2] = np.broadcast_to(self.upper, (nr,))
        return out


class Smooth1Norm(Activation):
    code = SMOOTH1

    def __init__(self, eps=1e-6):
        self.eps = as_real(eps, "eps", 0.0, low_open=True)

    def parameters(self, nr):
        out = np.zeros((3, nr))
        out[0] = self.eps
        return out


class Smooth2Norm(Smooth1Norm):
    code = SMOOTH2


@parallel_kernel("r")
def _activate(code, params, r, value, a_r, A_rr):
    """value, a_r and A_rr of the activation ``code`` at the residuals r (K, nr).  A_rr
    must be zero off its diagonal on entry (:class:`CostData` allocates it with zeros):
    the diagonal activations write the diagonal only (zeroing the whole block, 36 x 36
    per knot for a state cost of solo12, was 10 kB of stores per knot and cost); Smooth2Norm
    writes every entry."""
    K, nr = r.shape
    for k in prange(K):
        value[k] = 0.0
        if code == SMOOTH2:
            s = params[0, 0]
            for i in range(nr):
                s += r[k, i] * r[k, i]
            a = np.sqrt(s)
            value[k] = a
            for i in range(nr):
                a_r[k, i] = r[k, i] / a
            for i in range(nr):
                for j in range(nr):
                    A_rr[k, i, j] = ((1.0 if i == j else 0.0) - a_r[k, i] * a_r[k, j]) / a
            continue
        for i in range(nr):
            x = r[k, i]
            if code == QUADRATIC:
                value[k] += 0.5 * x * x
                a_r[k, i] = x
                A_rr[k, i, i] = 1.0
            elif code == WEIGHTED:
                value[k] += 0.5 * params[0, i] * x * x
                a_r[k, i] = params[0, i] * x
                A_rr[k, i, i] = params[0, i]
            elif code == BARRIER:
                if x < params[1, i]:
                    d = x - params[1, i]
                elif x > params[2, i]:
                    d = x - params[2, i]
                else:
                    d = 0.0
                value[k] += 0.5 * d * d
                a_r[k, i] = d
                A_rr[k, i, i] = 1.0 if d != 0.0 else 0.0
            else:
                s = np.sqrt(x * x + params[0, i])
                value[k] += s
                a_r[k, i] = x / s
                A_rr[k, i, i] = params[0, i] / (s * s * s)


@parallel_kernel("a_r")
def _accumulate(weight, a, a_r, A_rr, Rx, Ru, cost, Lx, Lu, Lxx, Luu, Lxu, with_u,
                with_derivatives, diagonal, with_x):
    """cost += w a; Lx += w Rx^T a_r; Lxx += w Rx^T A Rx ... for every knot, w = weight[k].

    ``diagonal``: A_rr is diagonal (every activation but Smooth2Norm), so A Rx
    is a row scaling; ``with_x`` False skips the x blocks (a residual of u only).
    """
    K, nr = a_r.shape
    ndx = Rx.shape[2]
    nu = Ru.shape[2]
    for k in prange(K):
        w = weight[k]
        cost[k] += w * a[k]
        if not with_derivatives:
            continue
        ARx = np.empty((nr, ndx))
        ARu = np.empty((nr, nu))
        if with_x:
            _accumulate_block(w, k, a_r, A_rr, Rx, diagonal, ARx, Lx, Lxx)
        if not with_u:
            continue
        _accumulate_block(w, k, a_r, A_rr, Ru, diagonal, ARu, Lu, Luu)
        if with_x:
            for c in range(ndx):
                for d in range(nu):
                    s = 0.0
                    for i in range(nr):
                        s += Rx[k, i, c] * ARu[i, d]
                    Lxu[k, c, d] += w * s


@inline_kernel
def _accumulate_block(weight, k, a_r, A_rr, R, diagonal, AR, L, LL):
    """The gradient and Hessian of knot k in one argument z (x or u), R = dr/dz
    (K, nr, n): AR = A_rr R, L[k] += w R^T a_r, LL[k] += w R^T A_rr R (symmetric)."""
    nr = a_r.shape[1]
    n = R.shape[2]
    for i in range(nr):
        if diagonal:
            d = A_rr[k, i, i]
            for c in range(n):
                AR[i, c] = d * R[k, i, c]
        else:
            for c in range(n):
                s = 0.0
                for j in range(nr):
                    s += A_rr[k, i, j] * R[k, j, c]
                AR[i, c] = s
    for c in range(n):
        s = 0.0
        for i in range(nr):
            s += R[k, i, c] * a_r[k, i]
        L[k, c] += weight * s
        for d in range(c, n):
            s = 0.0
            for i in range(nr):
                s += R[k, i, c] * AR[i, d]
            LL[k, c, d] += weight * s
            if d != c:
                LL[k, d, c] += weight * s


class CostData:
    """Outputs of one cost for K knots: the activation's value (K,), a_r (K, nr), A_rr
    (K, nr, nr), the weight of each knot ``weights`` (K,) (knots grouped from several
    cost objects keep each its own)."""

    def __init__(self, residual_data, nr, params, weight):
        K = residual_data.r.shape[0]
        self.residual = residual_data
        self.value = np.zeros(K)
        self.a_r = np.zeros((K, nr))
        self.A_rr = np.zeros((K, nr, nr))
        self.params = params
        self.weights = np.full(K, weight)
        self.scaled = np.empty(K)


class Cost:
    """weight * activation(residual(x, u)); the activation defaults to :class:`Quadratic`.

    ``name`` labels the term in logs (default: the residual's class name).
    Setting ``weight`` after the problem is built changes it at the knots of this
    cost object (the knots' data hold the weights).
    """

    def __init__(self, residual, activation=None, weight=1.0, name=None):
        self.residual = residual
        self.activation = Quadratic() if activation is None else activation
        self._bound = []
        self.weight = weight
        self.name = name or type(residual).__name__

    @property
    def weight(self):
        return self._weight

    @weight.setter
    def weight(self, value):
        value = as_real(value, "weight", 0.0)
        self._weight = value
        live = []
        for ref, start, stop in self._bound:
            data = ref()
            if data is not None:
                data.weights[start:stop] = value
                live.append((ref, start, stop))
        self._bound = live

    def bind(self, data, start, stop):
        """Knots start:stop of the CostData ``data`` carry this cost's weight (now and
        whenever it is set)."""
        data.weights[start:stop] = self._weight
        self._bound.append((weakref.ref(data), start, stop))

    def structure_key(self):
        """Equal for costs that differ only by weight, name and residual reference."""
        parameters = self.activation.parameters(self.residual.nr)
        return (type(self), self.activation.code, structure_key(parameters),
                self.residual.structure_key())

    def create_data(self, K, ndx, nu, bind=True):
        """The CostData of K knots (their weights bound to this cost unless ``bind`` is
        False: the stage binds the knots of each cost object itself)."""
        rdata = self.residual.create_data(K, ndx, nu)
        data = CostData(rdata, self.residual.nr, self.activation.parameters(self.residual.nr),
                        self._weight)
        if bind:
            self.bind(data, 0, K)
        return data

    def add(self, data, kinematics, xs, us, scale, out, with_derivatives):
        """Evaluate and add scale * weight * a(r) (and its derivatives in (xs, us)) into
        ``out`` (an object with cost, Lx, Lu, Lxx, Luu, Lxu arrays for the K knots).  At
        RK stage points y(x, u) the stage chains the sum of its terms to the knots' (x, u)
        (:func:`.stage._chain_stage_point`)."""
        rdata = data.residual
        if with_derivatives:
            self.residual.calc_diff(rdata, kinematics, xs, us)
        else:
            self.residual.calc(rdata, kinematics, xs, us)
        _activate(self.activation.code, data.params, rdata.r, data.value, data.a_r, data.A_rr)
        residual = self.residual
        with_u = us is not None and residual.uses_control
        Rx, Ru = rdata.Rx, rdata.Ru
        weights = np.multiply(data.weights, scale, out=data.scaled)
        if not with_derivatives:
            # cost += w a, all that the kernels below do without derivatives: the same
            # products and sums, without a 16-argument kernel call (4.2 -> 0.5 us on 50
            # knots; 16 per calc of an RK4 stage with four costs)
            out.cost += np.multiply(weights, data.value, out=data.scaled)
            return
        if self.activation.code == SMOOTH2:
            _accumulate(weights, data.value, data.a_r, data.A_rr, Rx, Ru,
                        out.cost, out.Lx, out.Lu, out.Lxx, out.Luu, out.Lxu, with_u,
                        with_derivatives, False, residual.depends_on_state)
        else:
            _accumulate_rows(weights, data.value, data.a_r, data.A_rr, Rx, Ru,
                             out.cost, out.Lx, out.Lu, out.Lxx, out.Luu, out.Lxu,
                             with_u, with_derivatives, residual.depends_on_state,
                             num_threads())


class Constraint:
    """lower <= residual(x, u) <= upper (equality where lower == upper)."""

    def __init__(self, residual, lower, upper, name=None):
        self.residual = residual
        if not hasattr(residual, "nr"):
            raise ValueError(f"Constraint: residual must be a residual model, got "
                             f"{type(residual).__name__}")
        self.lower, self.upper = as_bounds(lower, upper, residual.nr, "Constraint bounds")
        self.name = name or type(residual).__name__

    def structure_key(self):
        """Equal for constraints that differ only by name and residual reference."""
        return (type(self), structure_key(self.lower), structure_key(self.upper),
                self.residual.structure_key())

    @property
    def is_equality(self):
        return bool(np.all(self.lower == self.upper))

    def create_data(self, K, ndx, nu):
        return self.residual.create_data(K, ndx, nu)

    def calc(self, data, kinematics, xs, us, with_derivatives):
        if with_derivatives:
            self.residual.calc_diff(data, kinematics, xs, us)
        else:
            self.residual.calc(data, kinematics, xs, us)
        return data


@parallel_kernel("a_r")
def _accumulate_rows(weight, a, a_r, A_rr, Rx, Ru, cost, Lx, Lu, Lxx, Luu, Lxu, with_u,
                     with_derivatives, with_x, n_chunks):
    """:func:`_accumulate` for a diagonal A_rr, row by row over the non-zero entries
    (w = weight[k]):

        Lx += w a_r_i Rx_i,  Lxx += w A_ii Rx_i^T Rx_i,  Lxu += w A_ii Rx_i^T Ru_i, ...

    for each residual row i, on the columns where Rx_i (Ru_i) is not zero.  A state
    residual's rows have one non-zero (six on a free-flyer's base), a kinematic
    residual's only the configuration columns of the joints that carry its frame, so
    the cost is sum_i nnz_i^2 instead of nr ndx^2; rows with a_r_i = A_ii = 0 (a
    barrier inside its bounds) add nothing and are skipped; a row with half its entries
    or more non-zero goes along whole rows of Lxx (:func:`_dense_row`).  Knots in ``n_chunks``
    chunks (one column-index scratch each).
    """
    K, nr = a_r.shape
    ndx = Rx.shape[2]
    nu = Ru.shape[2]
    # the chunks' column-index scratch, one allocation per call (not two per chunk)
    columns = np.empty((n_chunks, ndx + nu), dtype=np.int64)
    for chunk in prange(n_chunks):
        cx = columns[chunk, :ndx]
        cu = columns[chunk, ndx:]
        for k in range(chunk * K // n_chunks, (chunk + 1) * K // n_chunks):
            cost[k] += weight[k] * a[k]
            if not with_derivatives:
                continue
            for i in range(nr):
                g = weight[k] * a_r[k, i]
                h = weight[k] * A_rr[k, i, i]
                if g == 0.0 and h == 0.0:          # e.g. a barrier row inside its bounds
                    continue
                nx = _nonzero_columns(Rx[k, i], cx) if with_x else 0
                nuc = _nonzero_columns(Ru[k, i], cu) if with_u else 0
                dense = 2 * nx >= ndx
                if dense:
                    _dense_row(g, h, Rx[k, i], Lx[k], Lxx[k])
                for p in range(nx):
                    c = cx[p]
                    hc = h * Rx[k, i, c]
                    if not dense:
                        Lx[k, c] += g * Rx[k, i, c]
                        _add_sparse_outer(hc, Rx, k, i, cx, p, nx, Lxx)
                    for q in range(nuc):
                        Lxu[k, c, cu[q]] += hc * Ru[k, i, cu[q]]
                for p in range(nuc):
                    c = cu[p]
                    hc = h * Ru[k, i, c]
                    Lu[k, c] += g * Ru[k, i, c]
                    _add_sparse_outer(hc, Ru, k, i, cu, p, nuc, Luu)


@inline_kernel
def _add_sparse_outer(hc, R, k, i, cols, p, n, L):
    """L[k] += (h R_c) R_d for c = cols[p] and the columns d = cols[p:n] of the row
    R_i = R[k, i] (non-zero there), mirrored below the diagonal (L[k] symmetric): the
    row c of h R_i^T R_i from its diagonal on, for Lxx and Luu."""
    c = cols[p]
    for q in range(p, n):
        d = cols[q]
        v = hc * R[k, i, d]
        L[k, c, d] += v
        if d != c:
            L[k, d, c] += v


@inline_kernel
def _dense_row(g, h, r, Lx, Lxx):
    """Lx += g r, Lxx += h r^T r for a row r mostly non-zero (a contact force's: zero
    only on the base's translation): the products of the row-sparse loop, entry for
    entry (Lxx[c, d] += (h r_c) r_d for d >= c, (h r_d) r_c below), so the same bits
    (the zero entries of r add +-0, which changes no sum of a finite r: a sum that
    starts at +0 is never -0), along contiguous rows of Lxx that vectorize (the
    index-gathered loop with its mirrored writes ran scalar: 3-5 us per knot for a
    friction cone's rows on solo12)."""
    n = r.shape[0]
    for c in range(n):
        Lx[c] += g * r[c]
        rc = r[c]
        hc = h * rc
        for d in range(c):
            Lxx[c, d] += (h * r[d]) * rc
        for d in range(c, n):
            Lxx[c, d] += hc * r[d]


@inline_kernel
def _nonzero_columns(row, columns):
    """Write the indices of the non-zero entries of ``row`` into ``columns``; their count."""
    n = 0
    for c in range(row.shape[0]):
        if row[c] != 0.0:
            columns[n] = c
            n += 1
    return n


@kernel
def chain_stage_point(point, y_x, y_u, mixed, out, A_x, A_u, T_x, T_u):
    """Add the cost of an RK stage point y(x, u) and its Gauss-Newton derivatives in
    (y, u), ``point`` = (cost, Ly, Lu, Lyy, Luu, Lyu), to ``out`` = (cost, Lx, Lu, Lxx,
    Luu, Lxu) in the knot's (x, u), once for the sum of the point's terms (the chain rule
    through y; Crocoddyl's ``IntegratedActionModelRK`` chains each stage's sum likewise):

        Lx += y_x^T Ly,   Lu += y_u^T Ly + Lu,   Lxx += y_x^T Lyy y_x,
        Lxu += y_x^T (Lyy y_u + Lyu),   Luu += y_u^T (Lyy y_u + Lyu) + Lyu^T y_u + Luu.

    Scratch: A_x (ndx, ndx) = Lyy y_x, A_u (ndx, nu) = Lyy y_u + Lyu, T_x (ndx, ndx),
    T_u (ndx + nu, nu) the products before they are added.  Every product is a sum of
    rows scaled by a scalar (contiguous inner loops, which vectorize).  ``mixed`` False:
    no term reads both y and u (Lyu is zero), its products are skipped."""
    c_y, Ly, Lu_y, Lyy, Luu_y, Lyu = point
    cost, Lx, Lu, Lxx, Luu, Lxu = out
    K, n = Ly.shape
    nu = Lu_y.shape[1]
    for k in range(K):
        cost[k] += c_y[k]
        A_x[:, :] = 0.0
        for i in range(n):
            for c in range(nu):
                A_u[i, c] = Lyu[k, i, c] if mixed else 0.0
            for m in range(n):
                a = Lyy[k, i, m]
                if a == 0.0:
                    continue
                for c in range(n):
                    A_x[i, c] += a * y_x[k, m, c]
                for c in range(nu):
                    A_u[i, c] += a * y_u[k, m, c]
        T_x[:, :] = 0.0
        T_u[:, :] = 0.0
        for i in range(n):
            g = Ly[k, i]
            for c in range(n):
                a = y_x[k, i, c]
                Lx[k, c] += a * g
                for d in range(n):
                    T_x[c, d] += a * A_x[i, d]
                for d in range(nu):
                    T_u[c, d] += a * A_u[i, d]
            for c in range(nu):
                a = y_u[k, i, c]
                Lu[k, c] += a * g
                for d in range(nu):
                    T_u[n + c, d] += a * A_u[i, d]
                if mixed:
                    for d in range(nu):
                        T_u[n + d, c] += Lyu[k, i, d] * a
        for c in range(n):
            for d in range(n):
                Lxx[k, c, d] += T_x[c, d]
            for d in range(nu):
                Lxu[k, c, d] += T_u[c, d]
        for c in range(nu):
            Lu[k, c] += Lu_y[k, c]
            for d in range(nu):
                Luu[k, c, d] += T_u[n + c, d] + Luu_y[k, c, d]
