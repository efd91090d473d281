"""Finite-difference checks of every derivative of the OCP layer, on the manifold.

Use them on your own terms before you trust a solver with them: a custom
dynamics, a new residual, a whole problem::

    errors = gp.ocp.check_dynamics(my_dynamics, xs, us)
    assert max(errors) < 1e-6, errors

Central differences, with states perturbed *on the manifold*: the j-th
column of a Jacobian with respect to x is

    (g(x (+) h e_j) - g(x (-) h e_j)) / 2h,      x (-) h e_j := x (+) (-h e_j),

with ``state.integrate`` (never x + h e_j), so Jacobians have ndx columns in
the tangent convention of the analytical ones.  Controls are vectors: the
j-th column is (g(u + h_j e_j) - g(u - h_j e_j)) / (u_j^+ - u_j^-), with
h_j = h max(1, |u_j|).  The step h defaults to eps^(1/3) ~ 6e-6 (truncation
O(h^2), rounding O(eps |g| / h): about two thirds of the digits).

What is differentiated (g above) is what the analytical derivative means:

- dynamics: f(x, u) (K, ndx), compared in coordinates (plain subtraction),
  the convention of the integrators' chain rule: f_x, f_u;
- integrators: F(x, u) (-) F(x0, u0), the tangent at the unperturbed x' =
  F(x0, u0): Fx, Fu;
- residuals: r(x, u) (K, nr): Rx, Ru (kinematic residuals get their
  placements and Jacobians from a fresh kinematics pass at each point);
- costs: the value w a(r(x, u)) of each knot: Lx, Lu (the Gauss-Newton
  Hessians Lxx, Luu, Lxu are not second derivatives and are not checked);
- activations: a(r) and a_r(r): a_r, A_rr;
- a problem: its total cost ``problem.calc(xs, us)`` (the sum of the stage
  costs), differentiated with respect to every knot of xs and us, one
  coordinate at a time, against the gradient (Lx, Lu) assembled from
  ``problem.calc_diff``.

Every ``check_*`` returns a named tuple of scaled errors, one per Jacobian:
``max|analytical - numerical| / max(1, max|numerical|)`` (the error relative
to the size of the derivative, as the dynamics tests measure it).  The
``*_fd`` functions return the numerical Jacobians themselves, with the
shapes of the analytical ones, for a closer look.
"""
from collections import namedtuple

import numpy as np

from ..dynamics.kinematics import _compute_joint_jacobians
from .costs import _activate
from .stage import StageOutputs

STEP = float(np.finfo(float).eps ** (1.0 / 3.0))

DynamicsCheck = namedtuple("DynamicsCheck", ["f_x", "f_u"])
IntegratorCheck = namedtuple("IntegratorCheck", ["Fx", "Fu"])
ResidualCheck = namedtuple("ResidualCheck", ["Rx", "Ru"])
CostCheck = namedtuple("CostCheck", ["Lx", "Lu"])
ActivationCheck = namedtuple("ActivationCheck", ["a_r", "A_rr"])
GradientCheck = namedtuple("GradientCheck", ["Lx", "Lu"])


def scaled_error(analytical, numerical):
    """max|analytical - numerical| / max(1, max|numerical|) (0 for empty arrays)."""
    analytical = np.asarray(analytical, dtype=float)
    numerical = np.asarray(numerical, dtype=float)
    if analytical.shape != numerical.shape:
        raise ValueError(f"shapes differ: analytical {analytical.shape}, "
                         f"numerical {numerical.shape}")
    if numerical.size == 0:
        return 0.0
    error = np.abs(analytical - numerical)
    if not np.all(np.isfinite(error)):
        return float("inf")
    return float(error.max() / max(1.0, float(np.abs(numerical).max())))


# --- the central differences -----------------------------------------------------------

def _central_x(fun, state, xs, step):
    """d fun / dx (K, m, ndx) of ``fun(xs) -> (K, m)`` on the manifold."""
    K = xs.shape[0]
    columns = []
    for j in range(state.ndx):
        dx = np.zeros((K, state.ndx))
        dx[:, j] = step
        plus = np.array(fun(state.integrate(xs, dx)), dtype=float)
        minus = np.array(fun(state.integrate(xs, -dx)), dtype=float)
        columns.append((plus - minus) / (2.0 * step))
    if not columns:
        return np.zeros((K, 0, 0))
    return np.stack(columns, axis=-1)


def _central_u(fun, us, step):
    """d fun / du (K, m, nu) of ``fun(us) -> (K, m)``."""
    columns = []
    for j in range(us.shape[1]):
        h = step * np.maximum(1.0, np.abs(us[:, j]))
        up, um = us.copy(), us.copy()
        up[:, j] += h
        um[:, j] -= h
        taken = (up[:, j] - um[:, j])[:, None]
        columns.append((np.array(fun(up), dtype=float) - np.array(fun(um), dtype=float))
                       / taken)
    if not columns:             # no controls (nu = 0, e.g. an impulse)
        return np.zeros(np.shape(fun(us)) + (0,))
    return np.stack(columns, axis=-1)


def _states(state, xs):
    xs, _ = state.validate(xs, "xs")
    return xs


def _controls(us, K, nu, name="us"):
    us = np.asarray(us, dtype=float)
    if us.ndim == 1:
        us = us.reshape(1, -1)
    if us.shape != (K, nu):
        raise ValueError(f"{name}: expected shape ({K}, {nu}) (one control per state), "
                         f"got {us.shape}")
    if not np.all(np.isfinite(us)):
        raise ValueError(f"{name}: contains NaN or inf")
    return np.ascontiguousarray(us)


# --- dynamics and integrators ------------------------------------------------------------

def _inputs(model, xs, us):
    """(xs (K, nx), us (K, nu), its data for K knots) of a dynamics or an integrator at
    states xs (K, nx) or (nx,) and controls us (K, nu) or (nu,), checked."""
    xs = _states(model.state, xs)
    us = _controls(us, xs.shape[0], model.nu)
    return xs, us, model.create_data(xs.shape[0])


def dynamics_derivatives_fd(dynamics, xs, us, step=STEP):
    """Numerical (f_x (K, ndx, ndx), f_u (K, ndx, nu)) of a dynamics object at
    states xs (K, nx) or (nx,) and controls us (K, nu) or (nu,)."""
    state = dynamics.state
    xs, us, data = _inputs(dynamics, xs, us)

    def f(x, u):
        return dynamics.calc(data, np.ascontiguousarray(x), u).copy()

    f_x = _central_x(lambda x: f(x, us), state, xs, step)
    f_u = _central_u(lambda u: f(xs, u), us, step)
    return f_x, f_u


def check_dynamics(dynamics, xs, us, step=STEP):
    """Scaled errors (f_x, f_u) of ``dynamics.calc_diff`` against central differences.

    Parameters
    ----------
    dynamics : FreeDynamics, CustomDynamics or any object with ``state``,
        ``nu``, ``create_data(K)``, ``calc(data, xs, us)`` and
        ``calc_diff(data, xs, us)``.
    xs : (K, nx) or (nx,) states.  us : (K, nu) or (nu,) controls.
    step : base step h of the central differences.
    """
    xs, us, data = _inputs(dynamics, xs, us)
    _, f_x, f_u = (a.copy() for a in dynamics.calc_diff(data, xs, us))
    num_x, num_u = dynamics_derivatives_fd(dynamics, xs, us, step)
    return DynamicsCheck(scaled_error(f_x, num_x), scaled_error(f_u, num_u))


def _integrator(model):
    """An Integrator, or the integrator of a running StageModel."""
    return getattr(model, "integrator", model)


def integrator_derivatives_fd(integrator, xs, us, step=STEP):
    """Numerical (Fx (K, ndx, ndx), Fu (K, ndx, nu)) of an Integrator (or a running
    StageModel), each column a tangent vector at the unperturbed x' = F(x, u)."""
    integrator = _integrator(integrator)
    state = integrator.state
    xs, us, data = _inputs(integrator, xs, us)

    def F(x, u):
        return integrator.calc(data, np.ascontiguousarray(x), u).copy()

    x1 = F(xs, us)
    Fx = _central_x(lambda x: state.difference(x1, F(x, us)), state, xs, step)
    Fu = _central_u(lambda u: state.difference(x1, F(xs, u)), us, step)
    return Fx, Fu


def check_integrator(integrator, xs, us, step=STEP):
    """Scaled errors (Fx, Fu) of ``integrator.calc_diff`` against central differences.

    ``integrator`` is an :class:`~.integrators.Integrator` or a running
    :class:`~.stage.StageModel`; xs (K, nx), us (K, nu) (or one of each).
    """
    integrator = _integrator(integrator)
    xs, us, data = _inputs(integrator, xs, us)
    _, Fx, Fu = (a.copy() for a in integrator.calc_diff(data, xs, us))
    num_x, num_u = integrator_derivatives_fd(integrator, xs, us, step)
    return IntegratorCheck(scaled_error(Fx, num_x), scaled_error(Fu, num_u))


# --- residuals, costs, activations ----------------------------------------------------

class _Evaluator:
    """Evaluates a residual (or a cost) at K knots the way a stage does: a fresh
    kinematics pass (placements, world Jacobians) when the residual needs one."""

    def __init__(self, residual, state, xs, us):
        self.residual, self.state = residual, state
        self.xs = _states(state, xs)
        K = self.xs.shape[0]
        if us is None:
            if residual.uses_control:
                raise ValueError(f"{type(residual).__name__} uses the controls: pass us")
            self.us, self.nu = None, 0
        else:
            us = np.asarray(us, dtype=float)
            self.us = _controls(us, K, us.shape[-1] if us.ndim else 0)
            self.nu = self.us.shape[1]
        self.kinematics = None
        if residual.needs_kinematics:
            model = getattr(state, "model", None)
            if model is None:
                raise ValueError(f"{type(residual).__name__} needs a multibody state")
            self.kinematics = model.create_data()
            self.kinematics.resize(K)

    def kinematics_at(self, xs):
        if self.kinematics is not None:
            k = self.kinematics
            _compute_joint_jacobians(self.state.model.arrays,
                                     np.ascontiguousarray(xs[:, :self.state.nq]), k.liR, k.lip,
                                     k.oR, k.op, k.J)
        return self.kinematics


def residual_derivatives_fd(residual, state, xs, us=None, step=STEP):
    """Numerical (Rx (K, nr, ndx), Ru (K, nr, nu) or None) of a residual.

    ``state`` is the stage's state (``dynamics.state`` or a StateMultibody);
    us (K, nu) is needed when the residual uses the controls.
    """
    ev = _Evaluator(residual, state, xs, us)
    data = residual.create_data(ev.xs.shape[0], state.ndx, ev.nu)

    def r(x, u):
        x = np.ascontiguousarray(x)
        residual.calc(data, ev.kinematics_at(x), x, u)
        return data.r.copy()

    Rx = _central_x(lambda x: r(x, ev.us), state, ev.xs, step)
    Ru = None if ev.us is None else _central_u(lambda u: r(ev.xs, u), ev.us, step)
    return Rx, Ru


def check_residual(residual, state, xs, us=None, step=STEP):
    """Scaled errors (Rx, Ru) of ``residual.calc_diff`` against central differences.

    Parameters
    ----------
    residual : any :class:`~.residuals.Residual`; its reference may be per knot
        (a leading axis of K, the number of states).
    state : the state of the stage it belongs to (``dynamics.state``).
    xs : (K, nx) states; us : (K, nu) controls (None for a terminal residual).
    Ru's error is 0 when us is None.
    """
    ev = _Evaluator(residual, state, xs, us)
    data = residual.create_data(ev.xs.shape[0], state.ndx, ev.nu)
    residual.calc_diff(data, ev.kinematics_at(ev.xs), ev.xs, ev.us)
    Rx, Ru = data.Rx.copy(), data.Ru.copy()
    num_x, num_u = residual_derivatives_fd(residual, state, xs, us, step)
    return ResidualCheck(scaled_error(Rx, num_x),
                         0.0 if num_u is None else scaled_error(Ru, num_u))


def _cost_outputs(K, ndx, nu):
    return StageOutputs(np.zeros(K), np.zeros((K, ndx)), np.zeros((K, nu)),
                        np.zeros((K, ndx, ndx)), np.zeros((K, nu, nu)), np.zeros((K, ndx, nu)))


def cost_derivatives_fd(cost, state, xs, us=None, step=STEP):
    """Numerical (Lx (K, ndx), Lu (K, nu) or None) of one cost term's value per knot."""
    ev = _Evaluator(cost.residual, state, xs, us)
    K = ev.xs.shape[0]
    data = cost.create_data(K, state.ndx, ev.nu)
    out = _cost_outputs(K, state.ndx, ev.nu)

    def value(x, u):
        x = np.ascontiguousarray(x)
        out.clear(False)
        cost.add(data, ev.kinematics_at(x), x, u, 1.0, out, False)
        return out.cost.copy()[:, None]

    Lx = _central_x(lambda x: value(x, ev.us), state, ev.xs, step)[:, 0]
    Lu = None if ev.us is None else _central_u(lambda u: value(ev.xs, u), ev.us, step)[:, 0]
    return Lx, Lu


def check_cost(cost, state, xs, us=None, step=STEP):
    """Scaled errors (Lx, Lu) of a :class:`~.costs.Cost`'s gradient (weight *
    activation of its residual) against central differences of its value."""
    ev = _Evaluator(cost.residual, state, xs, us)
    K = ev.xs.shape[0]
    data = cost.create_data(K, state.ndx, ev.nu)
    out = _cost_outputs(K, state.ndx, ev.nu)
    out.clear(True)
    cost.add(data, ev.kinematics_at(ev.xs), ev.xs, ev.us, 1.0, out, True)
    num_x, num_u = cost_derivatives_fd(cost, state, xs, us, step)
    return CostCheck(scaled_error(out.Lx, num_x),
                     0.0 if num_u is None else scaled_error(out.Lu, num_u))


def _activation_values(activation, rs):
    K, nr = rs.shape
    params = activation.parameters(nr)
    value, a_r, A_rr = np.zeros(K), np.zeros((K, nr)), np.zeros((K, nr, nr))
    _activate(activation.code, params, np.ascontiguousarray(rs), value, a_r, A_rr)
    return value, a_r, A_rr


def check_activation(activation, rs, step=STEP):
    """Scaled errors (a_r, A_rr) of an activation at residuals rs (K, nr):
    a_r against differences of a, A_rr against differences of a_r (exact
    second derivatives: keep rs away from a barrier's bounds)."""
    rs = np.asarray(rs, dtype=float)
    if rs.ndim != 2 or not np.all(np.isfinite(rs)):
        raise ValueError(f"rs: expected finite residuals of shape (K, nr), got {rs.shape}")
    _, a_r, A_rr = _activation_values(activation, rs)
    num_r = _central_u(lambda r: _activation_values(activation, r)[0][:, None], rs, step)[:, 0]
    num_rr = _central_u(lambda r: _activation_values(activation, r)[1], rs, step)
    return ActivationCheck(scaled_error(a_r, num_r), scaled_error(A_rr, num_rr))


# --- a whole problem ------------------------------------------------------------------

def problem_gradient_fd(problem, xs, us, knots=None, step=STEP):
    """Numerical gradient of the total cost ``problem.calc(xs, us)``: (gx (N+1, ndx),
    gu (N, nu)), one knot coordinate at a time (2 (ndx (N+1) + nu N) calls of
    calc).  ``knots``: only these knot indices (others left NaN)."""
    state = problem.state
    xs, us = problem._validate(xs, us)
    xs, us = xs.copy(), us.copy()
    N = problem.N
    knots = range(N + 1) if knots is None else [int(k) for k in knots]
    gx = np.full((N + 1, state.ndx), np.nan)
    gu = np.full((N, problem.nu), np.nan)
    for j in range(state.ndx):
        dx = np.zeros((N + 1, state.ndx))
        dx[:, j] = step
        plus, minus = state.integrate(xs, dx), state.integrate(xs, -dx)
        for k in knots:
            perturbed = xs.copy()
            perturbed[k] = plus[k]
            c_plus = problem.calc(perturbed, us)
            perturbed[k] = minus[k]
            gx[k, j] = (c_plus - problem.calc(perturbed, us)) / (2.0 * step)
    for k in knots:
        if k == N:
            continue
        for j in range(problem.nu):
            h = step * max(1.0, abs(us[k, j]))
            perturbed = us.copy()
            perturbed[k, j] = us[k, j] + h
            c_plus = problem.calc(xs, perturbed)
            up = perturbed[k, j]
            perturbed[k, j] = us[k, j] - h
            gu[k, j] = (c_plus - problem.calc(xs, perturbed)) / (up - perturbed[k, j])
    return gx, gu


def check_problem_gradient(problem, xs, us, knots=None, step=STEP):
    """Scaled errors (Lx, Lu) of the total-cost gradient assembled from
    ``problem.calc_diff`` (Lx (N+1, ndx), Lu (N, nu): the total cost is the sum
    of the stage costs, each depending on its own knot) against central
    differences of ``problem.calc``; ``knots`` restricts the check to some knots."""
    problem.calc_diff(xs, us)
    Lx, Lu = problem.Lx.copy(), problem.Lu.copy()
    gx, gu = problem_gradient_fd(problem, xs, us, knots, step)
    rows = range(problem.N + 1) if knots is None else [int(k) for k in knots]
    urows = [k for k in rows if k < problem.N]
    return GradientCheck(scaled_error(Lx[list(rows)], gx[list(rows)]),
                         scaled_error(Lu[urows], gu[urows]))
