"""One jitted discrete step x' = F(x, u) of :class:`~.dynamics.FreeDynamics`, for sequential loops.

Rollouts (and the solvers' forward passes) are sequential by nature: they
run as one Numba kernel per phase (:func:`.trial.rollout_free`, which serves
both) that steps knot after knot.  The
step matches :class:`~.integrators.Integrator` exactly (same schemes, same
formulas): the tests compare the two.  The step and its helpers are inlined
into the loops that call them (a call passes the model and workspace tuples
field by field: measured on ur5, a 100-knot line-search trial 0.41 -> 0.35 ms).
"""
import numpy as np

from ..dynamics.aba import _aba_state, aba_workspace
from ..dynamics.config import inline_kernel, kernel
from ..dynamics.liegroups import integrate_state

# integrator name (ocp.integrators) -> scheme code of free_step
SCHEME_CODES = {"explicit_euler": 0, "euler": 1, "semi_implicit_euler": 1, "rk2": 2, "rk4": 3,
                "rk3": 4}


@inline_kernel
def placements_workspace(nj):
    """liR, lip, oR, op of one state, the universe's rotation the identity (the
    kernels never write entry 0)."""
    liR = np.zeros((nj, 3, 3))
    oR = np.zeros((nj, 3, 3))
    for a in range(3):
        liR[0, a, a] = 1.0
        oR[0, a, a] = 1.0
    return liR, np.zeros((nj, 3)), oR, np.zeros((nj, 3))


@inline_kernel
def actuated_torque(m, B, damping, x, u, tau):
    """tau = B u - D v at x = (q, v)."""
    nq = m.nq
    for i in range(m.nv):
        s = -damping[i] * x[nq + i]
        for j in range(B.shape[1]):
            s += B[i, j] * u[j]
        tau[i] = s


@kernel
def step_workspace(m, nx):
    """Scratch of :func:`free_step`: per-state dynamics arrays and stage vectors."""
    nj, nv = m.njoints, m.nv
    liR, lip, oR, op = placements_workspace(nj)
    dyn = (liR, lip, oR, op,
           np.empty((6, nv)), np.empty((nj, 6, 6)), np.empty((nj, 6)), np.empty((nj, 6)),
           np.empty((nj, 6)), np.empty((6, nv)), np.empty((nv, 6)), np.empty(nv),
           np.empty(nv), np.zeros((nj, 6)), np.empty(nv))
    stages = (np.empty((4, 2 * nv)), np.empty(2 * nv), np.empty(nx))
    return dyn, stages, aba_workspace(m), (np.empty(4), np.empty(4), np.empty(3))


@inline_kernel
def _tangent_field(m, B, damping, x, u, out, ws):
    """out (2 nv,) = f(x, u) = (v, ABA(q, v, B u - D v))."""
    dyn, stages, aba_ws, lie_ws = ws
    liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, uu, ddq, f_ext, tau = dyn
    nq, nv = m.nq, m.nv
    actuated_torque(m, B, damping, x, u, tau)
    _aba_state(m, x[:nq], x[nq:], tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv,
               uu, ddq, aba_ws)
    for i in range(nv):
        out[i] = x[nq + i]
        out[nv + i] = ddq[i]


@inline_kernel
def state_integrate(m, x, w, out, s4, t4, s3):
    """out = x (+) w for x = (q, v), w = (dq, dv); s4, t4, s3 the Lie-group scratch."""
    nq, nv = m.nq, m.nv
    integrate_state(m, x[:nq], w[:nv], out[:nq], s4, t4, s3)
    for i in range(nv):
        out[nq + i] = x[nq + i] + w[nv + i]


@inline_kernel
def _state_integrate(m, x, w, out, ws):
    """:func:`state_integrate` with the scratch of a step workspace ``ws``."""
    s4, t4, s3 = ws[3]
    state_integrate(m, x, w, out, s4, t4, s3)


@inline_kernel
def euler_increment(scheme, dt, v, ddq, w):
    """w (2 nv,) = dt f of an Euler step at velocity v and acceleration ddq: explicit
    (scheme 0) (dt v, dt ddq), semi-implicit (1) (dt v + dt^2 ddq, dt ddq)."""
    nv = v.shape[0]
    if scheme == 0:
        for i in range(nv):
            w[i] = dt * v[i]
            w[nv + i] = dt * ddq[i]
    else:
        for i in range(nv):
            w[nv + i] = dt * ddq[i]
            w[i] = dt * v[i] + dt * w[nv + i]


@inline_kernel
def stage_count(scheme):
    """The number of field evaluations of a step of ``scheme`` (a SCHEME_CODES value)."""
    if scheme <= 1:
        return 1
    if scheme == 2:
        return 2
    if scheme == 3:
        return 4
    return 3


@inline_kernel
def stage_offset(scheme, dt, stage, k, w):
    """w (2 nv,) = c dt k[stage - 1]: the tangent step from x to the point of Runge-Kutta
    stage ``stage`` >= 1 (c = 1/2 for rk2; 1/2, 1/2, 1 for rk4; 1/3, 2/3 for rk3)."""
    if scheme == 2:
        c = 0.5
    elif scheme == 3:
        c = 1.0 if stage == 3 else 0.5
    else:
        c = stage / 3.0
    for i in range(w.shape[0]):
        w[i] = c * dt * k[stage - 1, i]


@inline_kernel
def step_increment(scheme, dt, k, w):
    """w (2 nv,) = dt sum_i b_i k_i of a step of ``scheme`` from the stages' fields k
    (stages, 2 nv) (:func:`euler_increment` for the Euler schemes)."""
    n = w.shape[0]
    nv = n // 2
    if scheme <= 1:
        euler_increment(scheme, dt, k[0, :nv], k[0, nv:], w)
    elif scheme == 2:
        for i in range(n):
            w[i] = dt * k[1, i]
    elif scheme == 3:
        for i in range(n):
            w[i] = dt / 6.0 * (k[0, i] + 2.0 * k[1, i] + 2.0 * k[2, i] + k[3, i])
    else:
        for i in range(n):
            w[i] = dt / 4.0 * (k[0, i] + 3.0 * k[2, i])


@inline_kernel
def free_step(m, B, damping, scheme, dt, x, u, xnext, ws):
    """xnext = F(x, u) for one state with the integrator ``scheme`` (a SCHEME_CODES value).
    The stages' fields are evaluated at one call site of :func:`_tangent_field` (one
    inlined copy of ABA: a call site per scheme compiled it four times)."""
    k, w, xi = ws[1]
    for stage in range(stage_count(scheme)):
        point = x
        if stage > 0:
            stage_offset(scheme, dt, stage, k, w)
            _state_integrate(m, x, w, xi, ws)
            point = xi
        _tangent_field(m, B, damping, point, u, k[stage], ws)
    step_increment(scheme, dt, k, w)
    _state_integrate(m, x, w, xnext, ws)
