"""State manifolds of the optimal control problem.

Notation of the whole ``ocp`` package (trajax's, with Crocoddyl's names):
a phase of K knots has states ``xs (K, nx)`` and controls ``us (K, nu)``;
tangent vectors are ``(K, ndx)``; ``Fx (K, ndx, ndx)``, ``Fu (K, ndx, nu)``
are the Jacobians of the discrete dynamics x' = F(x, u), ``Lx, Lu, Lxx, Luu,
Lxu`` those of the stage cost, every Jacobian taken in tangent coordinates:
a perturbation ``dx`` of x means ``x (+) dx``.

- :class:`StateMultibody`: x = (q, v) of a multibody Model, nx = nq + nv,
  ndx = 2 nv; ``integrate(x, dx) = (q (+) dq, v + dv)``,
  ``difference(x0, x1) = (q1 (-) q0, v1 - v0)``.
- :class:`StateVector`: x in R^n (custom dynamics such as a unicycle).

Every method takes stacks (leading axis) and crosses into Numba once.
"""
import numpy as np

from ..dynamics.config import kernel
from ..dynamics.liegroup_derivatives import (_difference_stack, _lie_block, _lie_jacobians,
                                             _load_twist, _scratch)
from ..dynamics.liegroups import _integrate, neutral
from ..dynamics.model import FREE_FLYER, PLANAR, SPHERICAL
from ..dynamics.validation import as_configurations, as_count, as_stack, check_model


class StateVector:
    """Euclidean state x in R^nx (ndx = nx); ``nq`` first coordinates are
    positions and the rest their velocities when ``nq`` is given (for the
    symplectic Euler integrator, "euler")."""

    flat = True     # integrate/difference Jacobians are identities

    def __init__(self, nx, nq=None):
        self.nx = self.ndx = as_count(nx, "nx", 1)
        if nq is not None:
            nq = as_count(nq, "nq")
            if nq > self.nx:
                raise ValueError(f"nq: expected at most nx = {self.nx} positions, got {nq}")
        self.nq = nq
        self.nv = None if nq is None else self.nx - nq

    def structure_key(self):
        return (type(self), self.nx, self.nv)

    def zero(self):
        return np.zeros(self.nx)

    def integrate(self, xs, dxs):
        return xs + dxs

    def difference(self, x0s, x1s):
        return x1s - x0s

    def jacobians_integrate(self, xs, dxs):
        """(Dx, Ddx) of integrate, (K, ndx, ndx) each: identities."""
        K = xs.shape[0]
        eye = np.broadcast_to(np.eye(self.ndx), (K, self.ndx, self.ndx))
        return eye.copy(), eye.copy()

    def chain_integrate(self, dxs, dxs_x, dxs_u, Fx, Fu, scale=1.0):
        """Fx = I + scale dxs_x, Fu = scale dxs_u: the Jacobians of x (+) dx(x, u) (see
        :meth:`StateMultibody.chain_integrate`)."""
        return _chain_integrate_flat(dxs_x, dxs_u, Fx, Fu, scale)

    def jacobian_difference(self, x0s, x1s, arg="x1", d=None):
        """d difference(x0, x1)/d arg (K, ndx, ndx): I for "x1", -I for "x0"."""
        K = x0s.shape[0]
        sign = _difference_sign(arg)
        return np.broadcast_to(sign * np.eye(self.ndx), (K, self.ndx, self.ndx)).copy()

    def jacobians_difference(self, x0s, x1s):
        """(D0, D1) of difference w.r.t. x0 and x1: -I, I."""
        D1 = self.jacobian_difference(x0s, x1s)
        return -D1, D1

    def validate(self, xs, name="x"):
        arr, single = as_stack(xs, self.nx, name)
        return arr, single


class StateMultibody:
    """x = (q, v) of ``model``; tangent dx = (dq, dv), ndx = 2 nv."""

    def __init__(self, model):
        check_model(model)
        self.model = model
        self.nq, self.nv = model.nq, model.nv
        self.nx = self.nq + self.nv
        self.ndx = 2 * self.nv
        # Revolute, prismatic, translation and SO(2) joints have identity Jacobians
        # of integrate/difference in tangent coordinates: callers may skip them.
        m = model.arrays
        lie = [i for i in range(1, m.njoints) if m.jtype[i] in (FREE_FLYER, SPHERICAL, PLANAR)]
        self.flat = not lie
        # the tangent rows of those joints (dq's; the others' Jacobians are the identity)
        self.lie_rows = np.array([m.idx_v[i] + r for i in lie for r in range(m.nvs[i])],
                                 dtype=np.int64)

    def structure_key(self):
        return (type(self), id(self.model))

    def zero(self):
        """(neutral q, zero v)."""
        return np.concatenate([neutral(self.model), np.zeros(self.nv)])

    def integrate(self, xs, dxs):
        """x (+) dx for stacks (K, nx), (K, ndx)."""
        nq, nv = self.nq, self.nv
        out = np.empty_like(xs)
        qs = np.ascontiguousarray(xs[:, :nq])
        dqs = np.ascontiguousarray(dxs[:, :nv])
        qout = np.empty_like(qs)
        _integrate(self.model.arrays, qs, dqs, qout, np.empty(4), np.empty(4), np.empty(3))
        out[:, :nq] = qout
        out[:, nq:] = xs[:, nq:] + dxs[:, nv:]
        return out

    def difference(self, x0s, x1s):
        """x1 (-) x0 for stacks (K, nx): (K, ndx)."""
        nq, nv = self.nq, self.nv
        out = np.empty((x0s.shape[0], 2 * nv))
        dq = np.empty((x0s.shape[0], nv))
        _difference_stack(self.model.arrays, np.ascontiguousarray(x0s[:, :nq]),
                          np.ascontiguousarray(x1s[:, :nq]), dq)
        out[:, :nv] = dq
        out[:, nv:] = x1s[:, nq:] - x0s[:, nq:]
        return out

    def _blocks(self, tangent, which, sign, scale):
        K = tangent.shape[0]
        out = np.empty((K, self.nv, self.nv))
        _lie_jacobians(self.model.arrays, np.ascontiguousarray(tangent), which, sign, scale,
                       out, *_scratch())
        return out

    def jacobians_integrate(self, xs, dxs):
        """(Dx, Ddx): d integrate(x, dx)/dx and /d dx, (K, ndx, ndx) each."""
        nv = self.nv
        dq = dxs[:, :nv]
        K = xs.shape[0]
        Dx = np.zeros((K, 2 * nv, 2 * nv))
        Ddx = np.zeros((K, 2 * nv, 2 * nv))
        Dx[:, :nv, :nv] = self._blocks(dq, 0, -1.0, 1.0)
        Ddx[:, :nv, :nv] = self._blocks(dq, 1, 1.0, 1.0)
        idx = np.arange(nv, 2 * nv)
        Dx[:, idx, idx] = 1.0
        Ddx[:, idx, idx] = 1.0
        return Dx, Ddx

    def chain_integrate(self, dxs, dxs_x, dxs_u, Fx, Fu, scale=1.0):
        """Jacobians of x (+) dx(x, u) by the chain rule, into Fx (K, ndx, ndx), Fu (K, ndx, nu):

            Fx = Dx + Ddx (scale dxs_x),   Fu = Ddx (scale dxs_u),

        (Dx, Ddx) the Jacobians of integrate at the increments dxs (K, ndx), dxs_x
        (K, ndx, ndx) and dxs_u (K, ndx, nu) those of the increment.  Dx and Ddx are
        identities but for one Lie block per free-flyer, spherical or planar joint
        of the configuration part: only those rows are multiplied.  Returns (Fx, Fu).
        """
        if self.flat:
            return _chain_integrate_flat(dxs_x, dxs_u, Fx, Fu, scale)
        dq = np.ascontiguousarray(dxs[:, :self.nv])
        _integrate_chain(self.model.arrays, dq, scale, dxs_x, dxs_u, Fx, Fu, *_scratch(),
                         np.empty((1, 6, 6)))
        return Fx, Fu

    def jacobian_difference(self, x0s, x1s, arg="x1", d=None):
        """d difference(x0, x1)/d arg (K, ndx, ndx) for arg "x1" (Jr(d)^-1 blocks, I)
        or "x0" (-Jl(d)^-1 blocks, -I); ``d`` (K, ndx): the difference when the
        caller has it (not computed again)."""
        sign = _difference_sign(arg)
        nv = self.nv
        if d is None:
            d = self.difference(x0s, x1s)
        D = np.zeros((x0s.shape[0], 2 * nv, 2 * nv))
        D[:, :nv, :nv] = self._blocks(d[:, :nv], 2, sign, sign)
        idx = np.arange(nv, 2 * nv)
        D[:, idx, idx] = sign
        return D

    def jacobians_difference(self, x0s, x1s):
        """(D0, D1): d difference(x0, x1)/dx0 and /dx1, (K, ndx, ndx) each."""
        d = self.difference(x0s, x1s)
        return (self.jacobian_difference(x0s, x1s, "x0", d),
                self.jacobian_difference(x0s, x1s, "x1", d))

    def validate(self, xs, name="x"):
        """xs (nx,) or (K, nx), finite, with unit quaternions; returns (K, nx), single."""
        arr, single = as_stack(xs, self.nx, name)
        as_configurations(self.model, arr[:, :self.nq], f"{name} (configuration part)")
        return arr, single


def _difference_sign(arg):
    if arg not in ("x0", "x1"):
        raise ValueError(f"jacobian_difference: arg must be 'x0' or 'x1', got {arg!r}")
    return 1.0 if arg == "x1" else -1.0


def _chain_integrate_flat(dxs_x, dxs_u, Fx, Fu, scale):
    """Fx = I + scale dxs_x, Fu = scale dxs_u (identity Jacobians of integrate)."""
    np.multiply(dxs_x, scale, out=Fx)
    idx = np.arange(Fx.shape[1])
    Fx[:, idx, idx] += 1.0
    np.multiply(dxs_u, scale, out=Fu)
    return Fx, Fu


@kernel
def _integrate_chain(m, dq, scale, w_x, w_u, Fx, Fu, xi, W, S, D):
    """Fx[k] = Dx + Dw (scale w_x[k]), Fu[k] = Dw (scale w_u[k]) (see
    StateMultibody.chain_integrate); D (1, 6, 6) scratch for one joint's block."""
    K, ndx, nu = Fu.shape
    for k in range(K):
        for r in range(ndx):
            for c in range(ndx):
                Fx[k, r, c] = scale * w_x[k, r, c]
            Fx[k, r, r] += 1.0
            for c in range(nu):
                Fu[k, r, c] = scale * w_u[k, r, c]
        for i in range(1, m.njoints):
            t, iv, n = m.jtype[i], m.idx_v[i], m.nvs[i]
            if t == FREE_FLYER or t == SPHERICAL or t == PLANAR:
                _load_twist(t, dq, k, iv, xi)
                _lie_block(t, 1, 1.0, 1.0, xi, W, S, D, 0, 0)          # Dw = Jr(dq)
                _lie_rows(D[0], n, scale, w_x[k], w_u[k], Fx[k], Fu[k], iv)
                _lie_block(t, 0, -1.0, 1.0, xi, W, S, D, 0, 0)         # Dx = Ad(exp(-dq))
                for r in range(n):
                    for c in range(n):
                        Fx[k, iv + r, iv + c] += D[0, r, c]


@kernel
def _lie_rows(B, n, scale, w_x, w_u, Fx, Fu, iv):
    """Rows iv:iv+n of Fx, Fu = B (scale w_x), B (scale w_u) on those rows."""
    ndx, nu = Fu.shape
    for r in range(n):
        # each row as a sum of rows of w (p in increasing order: the same sum per entry
        # as a dot product over p, so the same bits), along contiguous rows that vectorize
        # where a dot product per entry (a chain of dependent additions) did not
        x, u = Fx[iv + r], Fu[iv + r]
        for c in range(ndx):
            x[c] = 0.0
        for c in range(nu):
            u[c] = 0.0
        for p in range(n):
            b = B[r, p]
            for c in range(ndx):
                x[c] += b * (scale * w_x[iv + p, c])
            for c in range(nu):
                u[c] += b * (scale * w_u[iv + p, c])
