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

Every helper writes into ``out`` (which must not alias the inputs) and
allocates nothing; LLVM inlines them into the algorithm kernels.
"""
from .config import kernel


@kernel
def act_motion(R, p, m, out):
    w0 = R[0, 0] * m[3] + R[0, 1] * m[4] + R[0, 2] * m[5]
    w1 = R[1, 0] * m[3] + R[1, 1] * m[4] + R[1, 2] * m[5]
    w2 = R[2, 0] * m[3] + R[2, 1] * m[4] + R[2, 2] * m[5]
    out[0] = R[0, 0] * m[0] + R[0, 1] * m[1] + R[0, 2] * m[2] + p[1] * w2 - p[2] * w1
    out[1] = R[1, 0] * m[0] + R[1, 1] * m[1] + R[1, 2] * m[2] + p[2] * w0 - p[0] * w2
    out[2] = R[2, 0] * m[0] + R[2, 1] * m[1] + R[2, 2] * m[2] + p[0] * w1 - p[1] * w0
    out[3] = w0
    out[4] = w1
    out[5] = w2


@kernel
def inv_act_motion(R, p, m, out):
    t0 = m[0] - (p[1] * m[5] - p[2] * m[4])
    t1 = m[1] - (p[2] * m[3] - p[0] * m[5])
    t2 = m[2] - (p[0] * m[4] - p[1] * m[3])
    out[0] = R[0, 0] * t0 + R[1, 0] * t1 + R[2, 0] * t2
    out[1] = R[0, 1] * t0 + R[1, 1] * t1 + R[2, 1] * t2
    out[2] = R[0, 2] * t0 + R[1, 2] * t1 + R[2, 2] * t2
    out[3] = R[0, 0] * m[3] + R[1, 0] * m[4] + R[2, 0] * m[5]
    out[4] = R[0, 1] * m[3] + R[1, 1] * m[4] + R[2, 1] * m[5]
    out[5] = R[0, 2] * m[3] + R[1, 2] * m[4] + R[2, 2] * m[5]


@kernel
def act_force(R, p, f, out):
    f0 = R[0, 0] * f[0] + R[0, 1] * f[1] + R[0, 2] * f[2]
    f1 = R[1, 0] * f[0] + R[1, 1] * f[1] + R[1, 2] * f[2]
    f2 = R[2, 0] * f[0] + R[2, 1] * f[1] + R[2, 2] * f[2]
    out[3] = R[0, 0] * f[3] + R[0, 1] * f[4] + R[0, 2] * f[5] + p[1] * f2 - p[2] * f1
    out[4] = R[1, 0] * f[3] + R[1, 1] * f[4] + R[1, 2] * f[5] + p[2] * f0 - p[0] * f2
    out[5] = R[2, 0] * f[3] + R[2, 1] * f[4] + R[2, 2] * f[5] + p[0] * f1 - p[1] * f0
    out[0] = f0
    out[1] = f1
    out[2] = f2


@kernel
def inv_act_force(R, p, f, out):
    n0 = f[3] - (p[1] * f[2] - p[2] * f[1])
    n1 = f[4] - (p[2] * f[0] - p[0] * f[2])
    n2 = f[5] - (p[0] * f[1] - p[1] * f[0])
    out[0] = R[0, 0] * f[0] + R[1, 0] * f[1] + R[2, 0] * f[2]
    out[1] = R[0, 1] * f[0] + R[1, 1] * f[1] + R[2, 1] * f[2]
    out[2] = R[0, 2] * f[0] + R[1, 2] * f[1] + R[2, 2] * f[2]
    out[3] = R[0, 0] * n0 + R[1, 0] * n1 + R[2, 0] * n2
    out[4] = R[0, 1] * n0 + R[1, 1] * n1 + R[2, 1] * n2
    out[5] = R[0, 2] * n0 + R[1, 2] * n1 + R[2, 2] * n2


@kernel
def motion_cross(m1, m2, out):
    out[0] = m1[4] * m2[2] - m1[5] * m2[1] + m1[1] * m2[5] - m1[2] * m2[4]
    out[1] = m1[5] * m2[0] - m1[3] * m2[2] + m1[2] * m2[3] - m1[0] * m2[5]
    out[2] = m1[3] * m2[1] - m1[4] * m2[0] + m1[0] * m2[4] - m1[1] * m2[3]
    out[3] = m1[4] * m2[5] - m1[5] * m2[4]
    out[4] = m1[5] * m2[3] - m1[3] * m2[5]
    out[5] = m1[3] * m2[4] - m1[4] * m2[3]


@kernel
def force_cross(m, f, out):
    out[0] = m[4] * f[2] - m[5] * f[1]
    out[1] = m[5] * f[0] - m[3] * f[2]
    out[2] = m[3] * f[1] - m[4] * f[0]
    out[3] = m[4] * f[5] - m[5] * f[4] + m[1] * f[2] - m[2] * f[1]
    out[4] = m[5] * f[3] - m[3] * f[5] + m[2] * f[0] - m[0] * f[2]
    out[5] = m[3] * f[4] - m[4] * f[3] + m[0] * f[1] - m[1] * f[0]


@kernel
def mat6_vec(Y, x, out):
    """out = Y x for a 6x6 matrix (an inertia acting on a motion)."""
    for r in range(6):
        out[r] = (Y[r, 0] * x[0] + Y[r, 1] * x[1] + Y[r, 2] * x[2]
                  + Y[r, 3] * x[3] + Y[r, 4] * x[4] + Y[r, 5] * x[5])


@kernel
def inertia_to_world(R, p, Y, out):
    """out = X* Y X^-1: a rigid-body inertia Y (joint frame) in the world, oMi = (R, p).

    Uses the rigid structure of Y: mass m, first moment h = m c and
    rotational inertia about the origin; only R rotations and a shift.
    """
    m = Y[0, 0]
    # h = m c from the block Y[3:, :3] = m [c]x.
    h0 = Y[5, 1]
    h1 = Y[3, 2]
    h2 = Y[4, 0]
    # world first moment: R h + m p
    H0 = R[0, 0] * h0 + R[0, 1] * h1 + R[0, 2] * h2 + m * p[0]
    H1 = R[1, 0] * h0 + R[1, 1] * h1 + R[1, 2] * h2 + m * p[1]
    H2 = R[2, 0] * h0 + R[2, 1] * h1 + R[2, 2] * h2 + m * p[2]
    # rotational inertia about the joint origin, rotated: R I R^T
    for r in range(3):
        for c in range(3):
            s = 0.0
            for k in range(3):
                t = R[r, 0] * Y[3, 3 + k] + R[r, 1] * Y[4, 3 + k] + R[r, 2] * Y[5, 3 + k]
                s += t * R[c, k]
            out[3 + r, 3 + c] = s
    # shift the rotational inertia from the joint origin to the world origin:
    # I_O = I_p - m [p]x^2 - [p]x [Rh]x - [Rh]x [p]x  with Rh = H - m p.
    g0 = H0 - m * p[0]
    g1 = H1 - m * p[1]
    g2 = H2 - m * p[2]
    pg = p[0] * g0 + p[1] * g1 + p[2] * g2
    pp = p[0] * p[0] + p[1] * p[1] + p[2] * p[2]
    for r in range(3):
        for c in range(3):
            delta = 1.0 if r == c else 0.0
            # -m [p]x^2 = m (|p|^2 I - p p^T); -([p]x[g]x + [g]x[p]x) = 2 (p.g) I - p g^T - g p^T
            out[3 + r, 3 + c] += (m * (pp * delta - p[r] * p[c])
                                  + 2.0 * pg * delta - p[r] * _at(g0, g1, g2, c)
                                  - _at(g0, g1, g2, r) * p[c])
    for r in range(3):
        for c in range(3):
            out[r, c] = m if r == c else 0.0
    # upper-right block -[h]x, lower-left block its transpose [h]x
    out[0, 3] = 0.0
    out[0, 4] = H2
    out[0, 5] = -H1
    out[1, 3] = -H2
    out[1, 4] = 0.0
    out[1, 5] = H0
    out[2, 3] = H1
    out[2, 4] = -H0
    out[2, 5] = 0.0
    for r in range(3):
        for c in range(3):
            out[3 + r, c] = out[c, 3 + r]


@kernel
def _at(x0, x1, x2, i):
    if i == 0:
        return x0
    if i == 1:
        return x1
    return x2
