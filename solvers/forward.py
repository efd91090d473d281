"""The forward pass of DDP / FDDP: the nonlinear rollout with the feedback law, one kernel per phase.

For knot t of a trial with step alpha (Crocoddyl's FDDP, Mastalli et al. 2020):

    x_t^try = x_t^pred (+) (alpha - 1) f_t    (x^pred = F of the previous knot, x_0^pred = x0;
                                               only while infeasible and alpha < 1)
    u_t^try = u_t - alpha k_t - K_t (x_t^try (-) x_t)     (clamped to the bounds for BoxFDDP)
    x_(t+1)^pred = F(x_t^try, u_t^try)

The predicted states are kept: after a step they give the new gaps without a
second evaluation of the dynamics.  A non-finite state stops the kernel,
which returns the knot where it happened (-1 on success).
"""
import numpy as np

from ..dynamics.config import kernel
from ..dynamics.liegroups import difference_state
from ..ocp.step import _state_integrate, free_step


@kernel
def _state_difference(m, x0, x1, out, ws):
    """out = x1 (-) x0 for x = (q, v)."""
    s4, t4, s3 = ws[3]
    nq, nv = m.nq, m.nv
    difference_state(m, x0[:nq], x1[:nq], out[:nv], s4, t4, s3)
    for i in range(nv):
        out[nv + i] = x1[nq + i] - x0[nq + i]


@kernel
def forward_pass_free(m, B, damping, scheme, dt, xs, us, k, K, gaps, alpha, use_gaps,
                      boxed, u_lower, u_upper, x_start, xs_try, us_try, xnext, ws):
    """Trial states/controls of one phase of FreeDynamics knots (see the module docstring).

    xs (n, nx), us (n, nu), k (n, nu), K (n, nu, ndx), gaps (n, ndx) of the
    phase; x_start (nx,) the predicted state entering the phase.  Writes
    xs_try, us_try, xnext (n, ...).  Returns -1 or the failing knot.
    """
    n, nu = us.shape
    ndx = gaps.shape[1]
    dx = np.empty(ndx)
    w = np.empty(ndx)
    predicted = x_start
    for t in range(n):
        if use_gaps:
            for i in range(ndx):
                w[i] = (alpha - 1.0) * gaps[t, i]
            _state_integrate(m, predicted, w, xs_try[t], ws)
        else:
            for i in range(xs_try.shape[1]):
                xs_try[t, i] = predicted[i]
        _state_difference(m, xs[t], xs_try[t], dx, ws)
        for i in range(nu):
            s = us[t, i] - alpha * k[t, i]
            for j in range(ndx):
                s -= K[t, i, j] * dx[j]
            if boxed:
                s = min(max(s, u_lower[t, i]), u_upper[t, i])
            us_try[t, i] = s
        free_step(m, B, damping, scheme, dt, xs_try[t], us_try[t], xnext[t], ws)
        for i in range(xnext.shape[1]):
            if not np.isfinite(xnext[t, i]):
                return t
        predicted = xnext[t]
    return -1
