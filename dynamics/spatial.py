"""Spatial algebra on raw arrays (Featherstone 2008, ch. 2), for the kernels.

A placement aMb is stored as a rotation ``R`` (3, 3) and a translation ``p``
(3,).  Motions ``m = [v; w]`` and forces ``f = [f; n]`` are 6-vectors with the
linear part first (Pinocchio's convention).  With aMb = (R, p):

- ``act_motion``:      m_a = [R v + p x R w; R w]
- ``inv_act_motion``:  m_b = [R^T (v - p x w); R^T w]
- ``act_force``:       f_a = [R f; R n + p x R f]
- ``inv_act_force``:   f_b = [R^T f; R^T (n - p x f)]
- ``motion_cross``:    m1 x m2   = [w1 x v2 + v1 x w2; w1 x w2]
- ``force_cross``:     m x* f    = [w x f + 0; w x n + v x f]

Every helper reads and writes rows of the arrays it is given, by index:
``act_motion(R, p, i, m, j, out, o)`` reads the placement ``(R[i], p[i])``,
the motion ``m[j]`` and writes ``out[o]``.  Kernels never slice an array to
pass a view into a helper inside a per-joint loop: a view costs reference
counting that we measured at 5x the arithmetic of a whole RNEA.  ``out`` must
not alias the inputs; nothing allocates.  The helpers are inlined into their
callers (measured: RNEA on ur5 2.0 us -> 1.15 us per state).
"""
from .config import inline_kernel


@inline_kernel
def act_motion(Rs, ps, i, ms, j, outs, o):
    w0 = Rs[i, 0, 0] * ms[j, 3] + Rs[i, 0, 1] * ms[j, 4] + Rs[i, 0, 2] * ms[j, 5]
    w1 = Rs[i, 1, 0] * ms[j, 3] + Rs[i, 1, 1] * ms[j, 4] + Rs[i, 1, 2] * ms[j, 5]
    w2 = Rs[i, 2, 0] * ms[j, 3] + Rs[i, 2, 1] * ms[j, 4] + Rs[i, 2, 2] * ms[j, 5]
    outs[o, 0] = Rs[i, 0, 0] * ms[j, 0] + Rs[i, 0, 1] * ms[j, 1] + Rs[i, 0, 2] * ms[j, 2] + ps[i, 1] * w2 - ps[i, 2] * w1
    outs[o, 1] = Rs[i, 1, 0] * ms[j, 0] + Rs[i, 1, 1] * ms[j, 1] + Rs[i, 1, 2] * ms[j, 2] + ps[i, 2] * w0 - ps[i, 0] * w2
    outs[o, 2] = Rs[i, 2, 0] * ms[j, 0] + Rs[i, 2, 1] * ms[j, 1] + Rs[i, 2, 2] * ms[j, 2] + ps[i, 0] * w1 - ps[i, 1] * w0
    outs[o, 3] = w0
    outs[o, 4] = w1
    outs[o, 5] = w2


@inline_kernel
def inv_act_motion(Rs, ps, i, ms, j, outs, o):
    t0 = ms[j, 0] - (ps[i, 1] * ms[j, 5] - ps[i, 2] * ms[j, 4])
    t1 = ms[j, 1] - (ps[i, 2] * ms[j, 3] - ps[i, 0] * ms[j, 5])
    t2 = ms[j, 2] - (ps[i, 0] * ms[j, 4] - ps[i, 1] * ms[j, 3])
    outs[o, 0] = Rs[i, 0, 0] * t0 + Rs[i, 1, 0] * t1 + Rs[i, 2, 0] * t2
    outs[o, 1] = Rs[i, 0, 1] * t0 + Rs[i, 1, 1] * t1 + Rs[i, 2, 1] * t2
    outs[o, 2] = Rs[i, 0, 2] * t0 + Rs[i, 1, 2] * t1 + Rs[i, 2, 2] * t2
    outs[o, 3] = Rs[i, 0, 0] * ms[j, 3] + Rs[i, 1, 0] * ms[j, 4] + Rs[i, 2, 0] * ms[j, 5]
    outs[o, 4] = Rs[i, 0, 1] * ms[j, 3] + Rs[i, 1, 1] * ms[j, 4] + Rs[i, 2, 1] * ms[j, 5]
    outs[o, 5] = Rs[i, 0, 2] * ms[j, 3] + Rs[i, 1, 2] * ms[j, 4] + Rs[i, 2, 2] * ms[j, 5]


@inline_kernel
def act_force(Rs, ps, i, fs, j, outs, o):
    f0 = Rs[i, 0, 0] * fs[j, 0] + Rs[i, 0, 1] * fs[j, 1] + Rs[i, 0, 2] * fs[j, 2]
    f1 = Rs[i, 1, 0] * fs[j, 0] + Rs[i, 1, 1] * fs[j, 1] + Rs[i, 1, 2] * fs[j, 2]
    f2 = Rs[i, 2, 0] * fs[j, 0] + Rs[i, 2, 1] * fs[j, 1] + Rs[i, 2, 2] * fs[j, 2]
    outs[o, 3] = Rs[i, 0, 0] * fs[j, 3] + Rs[i, 0, 1] * fs[j, 4] + Rs[i, 0, 2] * fs[j, 5] + ps[i, 1] * f2 - ps[i, 2] * f1
    outs[o, 4] = Rs[i, 1, 0] * fs[j, 3] + Rs[i, 1, 1] * fs[j, 4] + Rs[i, 1, 2] * fs[j, 5] + ps[i, 2] * f0 - ps[i, 0] * f2
    outs[o, 5] = Rs[i, 2, 0] * fs[j, 3] + Rs[i, 2, 1] * fs[j, 4] + Rs[i, 2, 2] * fs[j, 5] + ps[i, 0] * f1 - ps[i, 1] * f0
    outs[o, 0] = f0
    outs[o, 1] = f1
    outs[o, 2] = f2


@inline_kernel
def inv_act_force(Rs, ps, i, fs, j, outs, o):
    n0 = fs[j, 3] - (ps[i, 1] * fs[j, 2] - ps[i, 2] * fs[j, 1])
    n1 = fs[j, 4] - (ps[i, 2] * fs[j, 0] - ps[i, 0] * fs[j, 2])
    n2 = fs[j, 5] - (ps[i, 0] * fs[j, 1] - ps[i, 1] * fs[j, 0])
    outs[o, 0] = Rs[i, 0, 0] * fs[j, 0] + Rs[i, 1, 0] * fs[j, 1] + Rs[i, 2, 0] * fs[j, 2]
    outs[o, 1] = Rs[i, 0, 1] * fs[j, 0] + Rs[i, 1, 1] * fs[j, 1] + Rs[i, 2, 1] * fs[j, 2]
    outs[o, 2] = Rs[i, 0, 2] * fs[j, 0] + Rs[i, 1, 2] * fs[j, 1] + Rs[i, 2, 2] * fs[j, 2]
    outs[o, 3] = Rs[i, 0, 0] * n0 + Rs[i, 1, 0] * n1 + Rs[i, 2, 0] * n2
    outs[o, 4] = Rs[i, 0, 1] * n0 + Rs[i, 1, 1] * n1 + Rs[i, 2, 1] * n2
    outs[o, 5] = Rs[i, 0, 2] * n0 + Rs[i, 1, 2] * n1 + Rs[i, 2, 2] * n2


@inline_kernel
def motion_cross(m1s, i, m2s, j, outs, o):
    outs[o, 0] = m1s[i, 4] * m2s[j, 2] - m1s[i, 5] * m2s[j, 1] + m1s[i, 1] * m2s[j, 5] - m1s[i, 2] * m2s[j, 4]
    outs[o, 1] = m1s[i, 5] * m2s[j, 0] - m1s[i, 3] * m2s[j, 2] + m1s[i, 2] * m2s[j, 3] - m1s[i, 0] * m2s[j, 5]
    outs[o, 2] = m1s[i, 3] * m2s[j, 1] - m1s[i, 4] * m2s[j, 0] + m1s[i, 0] * m2s[j, 4] - m1s[i, 1] * m2s[j, 3]
    outs[o, 3] = m1s[i, 4] * m2s[j, 5] - m1s[i, 5] * m2s[j, 4]
    outs[o, 4] = m1s[i, 5] * m2s[j, 3] - m1s[i, 3] * m2s[j, 5]
    outs[o, 5] = m1s[i, 3] * m2s[j, 4] - m1s[i, 4] * m2s[j, 3]


@inline_kernel
def force_cross(ms, i, fs, j, outs, o):
    outs[o, 0] = ms[i, 4] * fs[j, 2] - ms[i, 5] * fs[j, 1]
    outs[o, 1] = ms[i, 5] * fs[j, 0] - ms[i, 3] * fs[j, 2]
    outs[o, 2] = ms[i, 3] * fs[j, 1] - ms[i, 4] * fs[j, 0]
    outs[o, 3] = ms[i, 4] * fs[j, 5] - ms[i, 5] * fs[j, 4] + ms[i, 1] * fs[j, 2] - ms[i, 2] * fs[j, 1]
    outs[o, 4] = ms[i, 5] * fs[j, 3] - ms[i, 3] * fs[j, 5] + ms[i, 2] * fs[j, 0] - ms[i, 0] * fs[j, 2]
    outs[o, 5] = ms[i, 3] * fs[j, 4] - ms[i, 4] * fs[j, 3] + ms[i, 0] * fs[j, 1] - ms[i, 1] * fs[j, 0]


@inline_kernel
def mat6_vec(Ys, i, xs, j, outs, o):
    """outs[o] = Ys[i] xs[j] for 6x6 matrices (an inertia acting on a motion)."""
    for r in range(6):
        outs[o, r] = (Ys[i, r, 0] * xs[j, 0] + Ys[i, r, 1] * xs[j, 1] + Ys[i, r, 2] * xs[j, 2]
                      + Ys[i, r, 3] * xs[j, 3] + Ys[i, r, 4] * xs[j, 4] + Ys[i, r, 5] * xs[j, 5])


@inline_kernel
def inertia_to_world(Rs, ps, Ys, outs, i):
    """outs[i] = X* Ys[i] X^-1: a rigid-body inertia (joint frame) in the world, oMi = (Rs[i], ps[i]).

    Uses the rigid structure of Y: mass m, first moment h = m c and
    rotational inertia about the origin; only R rotations and a shift.
    """
    m = Ys[i, 0, 0]
    # h = m c from the block Ys[i, 3:, :3] = m [c]x.
    h0 = Ys[i, 5, 1]
    h1 = Ys[i, 3, 2]
    h2 = Ys[i, 4, 0]
    # world first moment: R h + m p
    H0 = Rs[i, 0, 0] * h0 + Rs[i, 0, 1] * h1 + Rs[i, 0, 2] * h2 + m * ps[i, 0]
    H1 = Rs[i, 1, 0] * h0 + Rs[i, 1, 1] * h1 + Rs[i, 1, 2] * h2 + m * ps[i, 1]
    H2 = Rs[i, 2, 0] * h0 + Rs[i, 2, 1] * h1 + Rs[i, 2, 2] * h2 + m * ps[i, 2]
    # rotational inertia about the joint origin, rotated: R I R^T
    for r in range(3):
        for c in range(3):
            s = 0.0
            for k in range(3):
                t = Rs[i, r, 0] * Ys[i, 3, 3 + k] + Rs[i, r, 1] * Ys[i, 4, 3 + k] + Rs[i, r, 2] * Ys[i, 5, 3 + k]
                s += t * Rs[i, c, k]
            outs[i, 3 + r, 3 + c] = s
    # shift the rotational inertia from the joint origin to the world origin:
    # I_O = I_p - m [p]x^2 - [p]x [Rh]x - [Rh]x [p]x  with Rh = H - m p.
    g0 = H0 - m * ps[i, 0]
    g1 = H1 - m * ps[i, 1]
    g2 = H2 - m * ps[i, 2]
    pg = ps[i, 0] * g0 + ps[i, 1] * g1 + ps[i, 2] * g2
    pp = ps[i, 0] * ps[i, 0] + ps[i, 1] * ps[i, 1] + ps[i, 2] * ps[i, 2]
    for r in range(3):
        for c in range(3):
            delta = 1.0 if r == c else 0.0
            # -m [p]x^2 = m (|p|^2 I - p p^T); -([p]x[g]x + [g]x[p]x) = 2 (p.g) I - p g^T - g p^T
            outs[i, 3 + r, 3 + c] += (m * (pp * delta - ps[i, r] * ps[i, c])
                                  + 2.0 * pg * delta - ps[i, r] * _at(g0, g1, g2, c)
                                  - _at(g0, g1, g2, r) * ps[i, c])
    for r in range(3):
        for c in range(3):
            outs[i, r, c] = m if r == c else 0.0
    # upper-right block -[h]x, lower-left block its transpose [h]x
    outs[i, 0, 3] = 0.0
    outs[i, 0, 4] = H2
    outs[i, 0, 5] = -H1
    outs[i, 1, 3] = -H2
    outs[i, 1, 4] = 0.0
    outs[i, 1, 5] = H0
    outs[i, 2, 3] = H1
    outs[i, 2, 4] = -H0
    outs[i, 2, 5] = 0.0
    for r in range(3):
        for c in range(3):
            outs[i, 3 + r, c] = outs[i, c, 3 + r]


@inline_kernel
def _at(x0, x1, x2, i):
    if i == 0:
        return x0
    if i == 1:
        return x1
    return x2
