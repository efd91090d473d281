"""Integrators: discrete dynamics x' = F(x, u) from a tangent field f(x, u), on the manifold.

Every scheme writes x' = x (+) w with a tangent increment w built from
evaluations of f, and gets its exact Jacobians by the chain rule through
``integrate`` (Dx = d(x (+) w)/dx, Dw = d(x (+) w)/dw):

    Fx = Dx + Dw dw/dx,   Fu = Dw dw/du.

- ``euler``:               w = dt f(x, u)
- ``semi_implicit_euler``: v' = v + dt a, w = (dt v', dt a) (symplectic;
  Crocoddyl's IntegratedActionModelEuler)
- ``rk2`` (midpoint):      k1 = f(x), k2 = f(x (+) dt/2 k1), w = dt k2
- ``rk4``:                 w = dt/6 (k1 + 2 k2 + 2 k3 + k4), with
  k_i = f(x (+) c_i dt k_(i-1)), c = (1/2, 1/2, 1)

Stage points x (+) c dt k are evaluated for all K knots of a phase at once;
their Jacobians follow the same chain rule (dx_i/dx = Dx + Dw c dt dk/dx).
Each integrator's ``calc``/``calc_diff`` crosses into Numba a few times per
phase, never per knot.  The first evaluation of f is at the knots themselves,
so the kinematics of the knots stay in ``data.stages[0]``.
"""
import numpy as np

from ..dynamics.config import kernel

INTEGRATORS = ("euler", "semi_implicit_euler", "rk2", "rk4")
_RK_STAGES = {"euler": 1, "semi_implicit_euler": 1, "rk2": 2, "rk4": 4}


class IntegratorData:
    """Per-phase arrays: the dynamics data of each stage, x', Fx, Fu."""

    def __init__(self, dynamics, scheme, K):
        state = dynamics.state
        self.stages = [dynamics.create_data(K) for _ in range(_RK_STAGES[scheme])]
        self.xnext = np.zeros((K, state.nx))
        self.Fx = np.zeros((K, state.ndx, state.ndx))
        self.Fu = np.zeros((K, state.ndx, dynamics.nu))


def _semi_implicit_increment(f, dt, nv):
    """w = (dt (v + dt a), dt a) from f = (v, a)."""
    w = np.empty_like(f)
    w[:, nv:] = dt * f[:, nv:]
    w[:, :nv] = dt * f[:, :nv] + dt * w[:, nv:]
    return w


@kernel
def _semi_implicit_jacobian(f_J, dt, nv, out):
    """out = d w / d(x or u) from f_J = d f / d(x or u) (K, 2 nv, n): the rows of
    :func:`_semi_implicit_increment`, (dt f_J[:nv] + dt (dt f_J[nv:]), dt f_J[nv:])."""
    for k in range(f_J.shape[0]):
        for r in range(nv):
            for c in range(f_J.shape[2]):
                a = dt * f_J[k, nv + r, c]
                out[k, nv + r, c] = a
                out[k, r, c] = dt * f_J[k, r, c] + dt * a
    return out


class Integrator:
    """Discretization of ``dynamics`` with step ``dt`` and a scheme of :data:`INTEGRATORS`."""

    def __init__(self, dynamics, dt, scheme="euler"):
        if scheme not in INTEGRATORS:
            raise ValueError(f"unknown integrator {scheme!r}; expected one of {INTEGRATORS}")
        dt = float(dt)
        if not np.isfinite(dt) or dt <= 0.0:
            raise ValueError(f"dt must be a positive number, got {dt}")
        if scheme == "semi_implicit_euler" and getattr(dynamics.state, "nv", None) is None:
            raise ValueError("semi_implicit_euler needs a state with positions and velocities "
                             "(a multibody, or CustomDynamics(..., nq=...))")
        self.dynamics, self.dt, self.scheme = dynamics, dt, scheme
        self.state = dynamics.state
        self.nu = dynamics.nu

    def create_data(self, K):
        return IntegratorData(self.dynamics, self.scheme, K)

    # -- values -----------------------------------------------------------
    def calc(self, data, xs, us):
        """x' for every knot into data.xnext (K, nx)."""
        dyn, dt, state = self.dynamics, self.dt, self.state
        k1 = dyn.calc(data.stages[0], xs, us)
        if self.scheme == "euler":
            w = dt * k1
        elif self.scheme == "semi_implicit_euler":
            w = _semi_implicit_increment(k1, dt, state.nv)
        elif self.scheme == "rk2":
            x2 = state.integrate(xs, 0.5 * dt * k1)
            w = dt * dyn.calc(data.stages[1], x2, us)
        else:
            k1 = k1.copy()
            k2 = dyn.calc(data.stages[1], state.integrate(xs, 0.5 * dt * k1), us).copy()
            k3 = dyn.calc(data.stages[2], state.integrate(xs, 0.5 * dt * k2), us).copy()
            k4 = dyn.calc(data.stages[3], state.integrate(xs, dt * k3), us)
            w = dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        data.xnext[:] = state.integrate(xs, w)
        return data.xnext

    # -- derivatives ------------------------------------------------------
    def calc_diff(self, data, xs, us):
        """x', Fx (K, ndx, ndx), Fu (K, ndx, nu) for every knot."""
        dyn, dt, state = self.dynamics, self.dt, self.state
        f, f_x, f_u = dyn.calc_diff(data.stages[0], xs, us)
        scale = 1.0
        if self.scheme == "euler":
            w, w_x, w_u, scale = dt * f, f_x, f_u, dt
        elif self.scheme == "semi_implicit_euler":
            nv = state.nv
            w = _semi_implicit_increment(f, dt, nv)
            w_x = _semi_implicit_jacobian(f_x, dt, nv, np.empty(f_x.shape))
            w_u = _semi_implicit_jacobian(f_u, dt, nv, np.empty(f_u.shape))
        else:
            w, w_x, w_u = self._runge_kutta(data, xs, us, f, f_x, f_u)
        data.xnext[:] = state.integrate(xs, w)
        # Fx = Dx + Dw w_x, Fu = Dw w_u: products on the Lie-group rows only
        state.chain_integrate(w, w_x, w_u, data.Fx, data.Fu, scale)
        return data.xnext, data.Fx, data.Fu

    def _runge_kutta(self, data, xs, us, f, f_x, f_u):
        """Tangent increment w of RK2 / RK4 and its Jacobians by the chain rule."""
        dyn, dt, state = self.dynamics, self.dt, self.state
        if self.scheme == "rk2":
            coefficients, weights = (0.5,), (0.0, 1.0)
        else:
            coefficients, weights = (0.5, 0.5, 1.0), (1.0 / 6, 2.0 / 6, 2.0 / 6, 1.0 / 6)
        k, k_x, k_u = f.copy(), f_x.copy(), f_u.copy()
        w = weights[0] * dt * k
        w_x = weights[0] * dt * k_x
        w_u = weights[0] * dt * k_u
        for stage, c in enumerate(coefficients, start=1):
            step = c * dt * k
            xi = state.integrate(xs, step)
            xi_x, xi_u = state.chain_integrate(step, k_x, k_u, np.empty_like(k_x),
                                               np.empty_like(k_u), c * dt)
            fi, fi_x, fi_u = dyn.calc_diff(data.stages[stage], xi, us)
            k = fi.copy()
            k_x = fi_x @ xi_x
            k_u = fi_x @ xi_u + fi_u
            w += weights[stage] * dt * k
            w_x += weights[stage] * dt * k_x
            w_u += weights[stage] * dt * k_u
        return w, w_x, w_u
