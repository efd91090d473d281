"""The gaps of a multibody's trajectory in one kernel, for the shooting problem and for
the solvers' backward pass that follows a parallel calc_diff (a small module: what
imports it is recompiled when it changes, not when the problem's module does).

Notation (:mod:`.problem`): ``xs (N+1, nx)``, ``xnext (N, nx)`` the predicted states
F(x_k, u_k), gaps[0] = x0 (-) xs[0] and gaps[k+1] = xnext[k] (-) xs[k+1], x = (q, v).
"""
from ..dynamics.config import kernel
from ..dynamics.liegroups import difference_state
from ..dynamics.model_ref import model_arrays


@kernel
def multibody_gaps(model, x0, xnext, xs, out, scratch):
    """out[0] = x0 (-) xs[0], out[k+1] = xnext[k] (-) xs[k+1] for x = (q, v); ``model``
    a ModelRef (one object to unbox: the ModelArrays tuple cost ~8 us per call from
    Python, on ur5); ``scratch`` (4,), (4,), (3,) arrays for the Lie differences."""
    m = model_arrays(model)
    s4, t4, s3 = scratch
    nq, nv = m.nq, m.nv
    for t in range(xs.shape[0]):
        x1 = x0 if t == 0 else xnext[t - 1]
        if nq == nv:        # no joint with nq > nv: every joint's q1 (-) q0 is q1 - q0
            for i in range(nq):
                out[t, i] = x1[i] - xs[t, i]
        else:
            difference_state(m, xs[t, :nq], x1[:nq], out[t, :nv], s4, t4, s3)
        for i in range(nv):
            out[t, nv + i] = x1[nq + i] - xs[t, nq + i]
