"""Integrators: discrete dynamics x' = F(x, u) from a tangent field f(x, u), on the manifold.

Every scheme writes x' = x (+) w with a tangent increment w built from
evaluations of f, and gets its exact Jacobians by the chain rule through
``integrate`` (Dx = d(x (+) w)/dx, Dw = d(x (+) w)/dw):

    Fx = Dx + Dw dw/dx,   Fu = Dw dw/du.

The names are Crocoddyl's (same name, same scheme):

- ``euler``:          v' = v + dt a, w = (dt v', dt a): symplectic Euler, Crocoddyl's
  ``IntegratedActionModelEuler`` (``semi_implicit_euler`` is an alias)
- ``explicit_euler``: w = dt f(x, u) (x' = x (+) dt (v, a); also the jump of an
  impulse stage, f = (0, v+ - v) with dt = 1)
- ``rk2``, ``rk3``, ``rk4``: Crocoddyl's ``IntegratedActionModelRK``: stage points
  y_1 = x, y_i = x (+) c_i dt k_(i-1), k_i = f(y_i, u), w = dt sum_i b_i k_i, with
  rk2 c = (0, 1/2), b = (0, 1) (midpoint); rk3 c = (0, 1/3, 2/3), b = (1/4, 0, 3/4);
  rk4 c = (0, 1/2, 1/2, 1), b = (1/6, 1/3, 1/3, 1/6).

Stage points are evaluated for all K knots of a phase at once; their
Jacobians follow the same chain rule (dy_i/dx = Dx + Dw c_i dt dk_(i-1)/dx,
dy_i/du = Dw c_i dt dk_(i-1)/du).  The data keeps the stage points and those
Jacobians (``points``, ``points_x``, ``points_u``): the running cost of an RK
stage is integrated over them with the weights b (:mod:`.stage`).  Each
integrator's ``calc``/``calc_diff`` crosses into Numba a few times per phase,
never per knot.  The first evaluation of f is at the knots themselves, so the
kinematics of the knots stay in ``data.stages[0]``.
"""
import numpy as np

from ..dynamics.config import kernel, num_threads

INTEGRATORS = ("euler", "explicit_euler", "semi_implicit_euler", "rk2", "rk3", "rk4")
ALIASES = {"semi_implicit_euler": "euler"}
# Butcher nodes c_i (i >= 1) and weights b_i of the Runge-Kutta schemes (Crocoddyl's)
RK_TABLEAUS = {"rk2": ((0.5,), (0.0, 1.0)),
               "rk3": ((1.0 / 3.0, 2.0 / 3.0), (0.25, 0.0, 0.75)),
               "rk4": ((0.5, 0.5, 1.0), (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0))}


def stage_weights(scheme):
    """b_i: the weights of the stage points of ``scheme`` ((1.0,) for the Euler schemes)."""
    return RK_TABLEAUS[scheme][1] if scheme in RK_TABLEAUS else (1.0,)


class IntegratorData:
    """Per-phase arrays: the dynamics data of each stage, x', Fx, Fu, and the stage
    points y_i (K, nx) with their Jacobians dy_i/dx (K, ndx, ndx), dy_i/du (K, ndx, nu)
    (entry 0 is the knot itself: None)."""

    def __init__(self, dynamics, scheme, K):
        state = dynamics.state
        n = len(stage_weights(scheme))
        self.stages = [dynamics.create_data(K) for _ in range(n)]
        self.xnext = np.zeros((K, state.nx))
        self.Fx = np.zeros((K, state.ndx, state.ndx))
        self.Fu = np.zeros((K, state.ndx, dynamics.nu))
        self.points = [None] * n
        self.points_x = [None] * n
        self.points_u = [None] * n
        # the fused dynamics step of each stage (see :meth:`Integrator.fused_stages`)
        self.stage_steps = None


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
    """Discretization of ``dynamics`` with step ``dt`` and a scheme of :data:`INTEGRATORS`
    (``scheme`` keeps the canonical name: "semi_implicit_euler" reads "euler")."""

    def __init__(self, dynamics, dt, scheme="euler"):
        if scheme not in INTEGRATORS:
            raise ValueError(f"unknown integrator {scheme!r}; expected one of {INTEGRATORS}")
        scheme = ALIASES.get(scheme, scheme)
        try:
            dt = float(dt)
        except (TypeError, ValueError):     # None, a list, a word
            raise ValueError(f"dt must be a positive number, got {dt!r}") from None
        if not np.isfinite(dt) or dt <= 0.0:
            raise ValueError(f"dt must be a positive number, got {dt}")
        if scheme == "euler" and getattr(dynamics.state, "nv", None) is None:
            raise ValueError("euler (symplectic) needs a state with positions and velocities "
                             "(a multibody, or CustomDynamics(..., nq=...)); use "
                             "'explicit_euler' or an RK scheme otherwise")
        self.dynamics, self.dt, self.scheme = dynamics, dt, scheme
        self.state = dynamics.state
        self.nu = dynamics.nu
        self.weights = stage_weights(scheme)

    def create_data(self, K):
        return IntegratorData(self.dynamics, self.scheme, K)

    def fused_step(self, data):
        """The step of a phase function (:mod:`.fused`) for the Euler schemes of a
        multibody state (x', Fx, Fu from the field in ``data.stages[0]``); None for the
        RK schemes and other states (their stages take the per-term path)."""
        from .fused import Step, _euler, lie_scratch
        from .state import StateMultibody
        if self.scheme not in ("euler", "explicit_euler") or \
                not isinstance(self.state, StateMultibody):
            return None
        field = data.stages[0]
        K, nq, nv = data.xnext.shape[0], self.state.nq, self.state.nv
        work = (np.zeros(field.f.shape), np.zeros(field.f_x.shape), np.zeros(field.f_u.shape),
                np.zeros((K, nq)), np.zeros((K, nv)), np.zeros((K, nq)))
        return Step((bool(self.state.flat),
                     0 if self.scheme == "explicit_euler" else 1, self.dt,
                     (field.f, field.f_x, field.f_u), work, (data.xnext, data.Fx, data.Fu),
                     lie_scratch(nv)), _euler, model=self.state.model.arrays)

    def fused_stages(self, data, level):
        """Evaluate the field of every stage of ``data`` with the dynamics' fused step
        (FreeDynamics: :func:`.fused._free_field`, the ABA and its derivatives across
        SIMD lanes, 0.45x the time of the per-state kernel on kinova) from now on, on one
        Numba thread (on several, the parallel kernels of ``dynamics.calc_diff``).  The
        step leaves the stage's f, f_x, f_u and its placements and world Jacobians
        (what the built-in residuals read; ``level`` those of the COSTS mode, unused
        here), not the ABA's other intermediates: the stage asks for it only when all
        its terms are fused steps.  Returns whether the dynamics has such a step."""
        make = getattr(self.dynamics, "fused_step", None)
        if make is None or len(self.weights) == 1:
            return False
        steps = [make(stage, level) for stage in data.stages]
        if any(step is None or step.model is None for step in steps):
            return False
        data.stage_steps = steps
        return True

    def _field(self, data, i, xs, us, derivatives):
        """f (and f_x, f_u with ``derivatives``) of stage i at (xs, us): the fused step
        where :meth:`fused_stages` set it, on one Numba thread; else the dynamics'."""
        stage = data.stages[i]
        if data.stage_steps is not None and num_threads() == 1:
            from .fused import CALC, DIFF  # here: fused imports this module
            step = data.stage_steps[i]
            step.block(np.ascontiguousarray(xs), np.ascontiguousarray(us), step.model,
                       step.args, DIFF if derivatives else CALC)
            return (stage.f, stage.f_x, stage.f_u) if derivatives else stage.f
        if derivatives:
            return self.dynamics.calc_diff(stage, xs, us)
        return self.dynamics.calc(stage, xs, us)

    # -- values -----------------------------------------------------------
    def calc(self, data, xs, us):
        """x' for every knot into data.xnext (K, nx); the stage points into data.points."""
        dt, state = self.dt, self.state
        k = self._field(data, 0, xs, us, False)
        if self.scheme == "explicit_euler":
            w = dt * k
        elif self.scheme == "euler":
            w = _semi_implicit_increment(k, dt, state.nv)
        else:
            nodes = RK_TABLEAUS[self.scheme][0]
            ks = [k.copy()]
            for i, c in enumerate(nodes, start=1):
                data.points[i] = state.integrate(xs, c * dt * ks[-1])
                ks.append(self._field(data, i, data.points[i], us, False).copy())
            w = _rk_combination(self.scheme, dt, ks)
        data.xnext[:] = state.integrate(xs, w)
        return data.xnext

    # -- derivatives ------------------------------------------------------
    def calc_diff(self, data, xs, us):
        """x', Fx (K, ndx, ndx), Fu (K, ndx, nu) for every knot (and the stage points'
        Jacobians of the RK schemes)."""
        dt, state = self.dt, self.state
        f, f_x, f_u = self._field(data, 0, xs, us, True)
        scale = 1.0
        if self.scheme == "explicit_euler":
            w, w_x, w_u, scale = dt * f, f_x, f_u, dt
        elif self.scheme == "euler":
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
        """Tangent increment w of an RK scheme and its Jacobians by the chain rule; the
        stage points y_i and dy_i/dx, dy_i/du into data.points*."""
        dt, state = self.dt, self.state
        nodes, weights = RK_TABLEAUS[self.scheme]
        k, k_x, k_u = f.copy(), f_x.copy(), f_u.copy()
        ks = [k]
        w_x = weights[0] * dt * k_x
        w_u = weights[0] * dt * k_u
        for stage, c in enumerate(nodes, start=1):
            step = c * dt * k
            xi = state.integrate(xs, step)
            xi_x, xi_u = state.chain_integrate(step, k_x, k_u, np.empty_like(k_x),
                                               np.empty_like(k_u), c * dt)
            data.points[stage], data.points_x[stage], data.points_u[stage] = xi, xi_x, xi_u
            fi, fi_x, fi_u = self._field(data, stage, xi, us, True)
            k = fi.copy()
            k_x = fi_x @ xi_x
            k_u = fi_x @ xi_u + fi_u
            ks.append(k)
            w_x += weights[stage] * dt * k_x
            w_u += weights[stage] * dt * k_u
        return _rk_combination(self.scheme, dt, ks), w_x, w_u


def _rk_combination(scheme, dt, ks):
    """w = dt sum_i b_i k_i, written as Crocoddyl (and :func:`.step.free_step`) write it."""
    if scheme == "rk2":
        return dt * ks[1]
    if scheme == "rk3":
        return dt / 4.0 * (ks[0] + 3.0 * ks[2])
    return dt / 6.0 * (ks[0] + 2.0 * ks[1] + 2.0 * ks[2] + ks[3])
