"""The forward pass of DDP / FDDP over a contact phase or an impact: one kernel per phase.

The same trial as :func:`.forward.forward_pass_free` (see :mod:`.forward`),
the knots stepped by :func:`~geppetto.ocp.contact_step.contact_step`
(``ContactDynamics`` with Euler or symplectic Euler) or
:func:`~geppetto.ocp.contact_step.impulse_step` (``ImpulseDynamics``):

    x_t^try = x_t^pred (+) (alpha - 1) f_t    (only while infeasible and alpha < 1)
    u_t^try = u_t - alpha k_t - K_t (x_t^try (-) x_t)     (clamped for BoxFDDP)
    x_(t+1)^pred = F(x_t^try, u_t^try)

``stage`` = (B, damping, (mu, max_iterations, accuracy), scheme, dt,
restitution), with scheme IMPULSE for an impact.  Returns -1, or the knot
where the state became non-finite or the contacts degenerate.
"""
import numpy as np

from ..dynamics.config import kernel
from ..ocp.contact_step import contact_step, impulse_step
from ..ocp.step import _state_integrate
from .forward import _state_difference

IMPULSE = -1


@kernel
def forward_pass_contact(m, ca, stage, xs, us, k, K, gaps, alpha, use_gaps, boxed, u_lower,
                         u_upper, x_start, xs_try, us_try, xnext, ws):
    """Trial states/controls of one phase; shapes as :func:`.forward.forward_pass_free`."""
    B, damping, settings, scheme, dt, restitution = stage
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
        if scheme == IMPULSE:
            regular = impulse_step(m, ca, restitution, settings, xs_try[t], xnext[t], ws)
        else:
            regular = contact_step(m, ca, B, damping, settings, scheme, dt, xs_try[t],
                                   us_try[t], xnext[t], ws)
        if not regular:
            return t
        for i in range(xnext.shape[1]):
            if not np.isfinite(xnext[t, i]):
                return t
        predicted = xnext[t]
    return -1
