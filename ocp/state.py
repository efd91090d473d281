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

from ..dynamics.liegroup_derivatives import _difference_stack, _lie_jacobians, _scratch
from ..dynamics.liegroups import _integrate, neutral
from ..dynamics.model import FREE_FLYER, PLANAR, SPHERICAL
from ..dynamics.validation import as_configurations, as_stack


class StateVector:
    """Euclidean state x in R^nx (ndx = nx); ``nq`` first coordinates are
    positions and the rest their velocities when ``nq`` is given (for the
    semi-implicit Euler integrator)."""

    flat = True     # integrate/difference Jacobians are identities

    def __init__(self, nx, nq=None):
        self.nx = self.ndx = int(nx)
        self.nq = nq
        self.nv = None if nq is None else self.nx - nq

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

    def jacobians_difference(self, x0s, x1s):
        """(D0, D1) of difference w.r.t. x0 and x1: -I, I."""
        K = x0s.shape[0]
        eye = np.broadcast_to(np.eye(self.ndx), (K, self.ndx, self.ndx))
        return -eye, eye.copy()

    def validate(self, xs, name="x"):
        arr, single = as_stack(xs, self.nx, name)
        return arr, single


class StateMultibody:
    """x = (q, v) of ``model``; tangent dx = (dq, dv), ndx = 2 nv."""

    def __init__(self, model):
        self.model = model
        self.nq, self.nv = model.nq, model.nv
        self.nx = self.nq + self.nv
        self.ndx = 2 * self.nv
        # Revolute, prismatic, translation and SO(2) joints have identity Jacobians
        # of integrate/difference in tangent coordinates: callers may skip them.
        types = model.arrays.jtype[1:]
        self.flat = not np.any(np.isin(types, (FREE_FLYER, SPHERICAL, PLANAR)))

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

    def jacobians_difference(self, x0s, x1s):
        """(D0, D1): d difference(x0, x1)/dx0 and /dx1, (K, ndx, ndx) each."""
        nv = self.nv
        d = self.difference(x0s, x1s)[:, :nv]
        K = x0s.shape[0]
        D0 = np.zeros((K, 2 * nv, 2 * nv))
        D1 = np.zeros((K, 2 * nv, 2 * nv))
        D0[:, :nv, :nv] = self._blocks(d, 2, -1.0, -1.0)
        D1[:, :nv, :nv] = self._blocks(d, 2, 1.0, 1.0)
        idx = np.arange(nv, 2 * nv)
        D0[:, idx, idx] = -1.0
        D1[:, idx, idx] = 1.0
        return D0, D1

    def validate(self, xs, name="x"):
        """xs (nx,) or (K, nx), finite, with unit quaternions; returns (K, nx), single."""
        arr, single = as_stack(xs, self.nx, name)
        as_configurations(self.model, arr[:, :self.nq], f"{name} (configuration part)")
        return arr, single
