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
counting that we measured at 5x the arithmetic of a whole RNEA.  Each helper
reads all its inputs into locals before it stores anything, so LLVM need not
reload them after every store (the arrays may alias as far as it knows); the
output row may therefore even be an input row.  Nothing allocates.  The helpers are inlined into their
callers (measured: RNEA on ur5 2.0 us -> 1.15 us per state).

The value forms (``cross``, ``act_motion_values``, ``inv_act_motion_values``,
``motion_cross_values``, ``rigid_inertia_times``) take and return plain numbers, for a
per-body step written on locals and stored once: every store into an array makes LLVM
reload the array values read after it (measured: ABA's backward pass on ur5 1.36 ->
1.02 us per state).  The row helpers store a value form; the force ones are the motion
ones with the halves swapped (the dual action: X* [f; n] = swap(X [n; f]), and
m x* [f; n] = swap(m x [n; f])), one piece of arithmetic for both.
"""
from .config import inline_kernel


@inline_kernel
def act_motion(Rs, ps, i, ms, j, outs, o):
    (outs[o, 0], outs[o, 1], outs[o, 2],
     outs[o, 3], outs[o, 4], outs[o, 5]) = act_motion_values(Rs, ps, i, ms[j, 0], ms[j, 1],
                                                            ms[j, 2], ms[j, 3], ms[j, 4],
                                                            ms[j, 5])


@inline_kernel
def inv_act_motion(Rs, ps, i, ms, j, outs, o):
    (outs[o, 0], outs[o, 1], outs[o, 2],
     outs[o, 3], outs[o, 4], outs[o, 5]) = inv_act_motion_values(Rs, ps, i, ms[j, 0], ms[j, 1],
                                                                ms[j, 2], ms[j, 3], ms[j, 4],
                                                                ms[j, 5])


@inline_kernel
def act_force(Rs, ps, i, fs, j, outs, o):
    # the dual action: [f; n] -> [R f; R n + p x R f] is the motion action on [n; f],
    # halves swapped
    (outs[o, 3], outs[o, 4], outs[o, 5],
     outs[o, 0], outs[o, 1], outs[o, 2]) = act_motion_values(Rs, ps, i, fs[j, 3], fs[j, 4],
                                                            fs[j, 5], fs[j, 0], fs[j, 1],
                                                            fs[j, 2])


@inline_kernel
def inv_act_force(Rs, ps, i, fs, j, outs, o):
    # [R^T f; R^T (n - p x f)]: the inverse motion action on [n; f], halves swapped
    (outs[o, 3], outs[o, 4], outs[o, 5],
     outs[o, 0], outs[o, 1], outs[o, 2]) = inv_act_motion_values(Rs, ps, i, fs[j, 3], fs[j, 4],
                                                                fs[j, 5], fs[j, 0], fs[j, 1],
                                                                fs[j, 2])


@inline_kernel
def motion_cross(m1s, i, m2s, j, outs, o):
    (outs[o, 0], outs[o, 1], outs[o, 2],
     outs[o, 3], outs[o, 4], outs[o, 5]) = motion_cross_values(
        m1s[i, 0], m1s[i, 1], m1s[i, 2], m1s[i, 3], m1s[i, 4], m1s[i, 5],
        m2s[j, 0], m2s[j, 1], m2s[j, 2], m2s[j, 3], m2s[j, 4], m2s[j, 5])


@inline_kernel
def force_cross(ms, i, fs, j, outs, o):
    # m x* [f; n] = [w x f; w x n + v x f]: m x [n; f], halves swapped
    (outs[o, 3], outs[o, 4], outs[o, 5],
     outs[o, 0], outs[o, 1], outs[o, 2]) = motion_cross_values(
        ms[i, 0], ms[i, 1], ms[i, 2], ms[i, 3], ms[i, 4], ms[i, 5],
        fs[j, 3], fs[j, 4], fs[j, 5], fs[j, 0], fs[j, 1], fs[j, 2])


@inline_kernel
def act_motion_values(Rs, ps, i, v0, v1, v2, x0, x1, x2):
    """:func:`act_motion` of the motion [v; x] given as values: six values
    [R v + p x R x; R x] for (R, p) = (Rs[i], ps[i]) (with the halves swapped, the
    force action :func:`act_force` of [x; v])."""
    r00, r01, r02 = Rs[i, 0, 0], Rs[i, 0, 1], Rs[i, 0, 2]
    r10, r11, r12 = Rs[i, 1, 0], Rs[i, 1, 1], Rs[i, 1, 2]
    r20, r21, r22 = Rs[i, 2, 0], Rs[i, 2, 1], Rs[i, 2, 2]
    p0, p1, p2 = ps[i, 0], ps[i, 1], ps[i, 2]
    w0 = r00 * x0 + r01 * x1 + r02 * x2
    w1 = r10 * x0 + r11 * x1 + r12 * x2
    w2 = r20 * x0 + r21 * x1 + r22 * x2
    return (r00 * v0 + r01 * v1 + r02 * v2 + p1 * w2 - p2 * w1,
            r10 * v0 + r11 * v1 + r12 * v2 + p2 * w0 - p0 * w2,
            r20 * v0 + r21 * v1 + r22 * v2 + p0 * w1 - p1 * w0, w0, w1, w2)


@inline_kernel
def motion_cross_values(a0, a1, a2, b0, b1, b2, c0, c1, c2, d0, d1, d2):
    """[a; b] x [c; d] = [b x c + a x d; b x d] of two motions given as values (with the
    halves of the second and of the result swapped, the force cross :func:`force_cross`
    of [a; b] and [d; c])."""
    return (b1 * c2 - b2 * c1 + a1 * d2 - a2 * d1,
            b2 * c0 - b0 * c2 + a2 * d0 - a0 * d2,
            b0 * c1 - b1 * c0 + a0 * d1 - a1 * d0,
            b1 * d2 - b2 * d1,
            b2 * d0 - b0 * d2,
            b0 * d1 - b1 * d0)


@inline_kernel
def mat6_vec(Ys, i, xs, j, outs, o):
    """outs[o] = Ys[i] xs[j] for 6x6 matrices (an inertia acting on a motion)."""
    x0, x1, x2, x3, x4, x5 = xs[j, 0], xs[j, 1], xs[j, 2], xs[j, 3], xs[j, 4], xs[j, 5]
    y0 = Ys[i, 0, 0] * x0 + Ys[i, 0, 1] * x1 + Ys[i, 0, 2] * x2 + Ys[i, 0, 3] * x3 \
        + Ys[i, 0, 4] * x4 + Ys[i, 0, 5] * x5
    y1 = Ys[i, 1, 0] * x0 + Ys[i, 1, 1] * x1 + Ys[i, 1, 2] * x2 + Ys[i, 1, 3] * x3 \
        + Ys[i, 1, 4] * x4 + Ys[i, 1, 5] * x5
    y2 = Ys[i, 2, 0] * x0 + Ys[i, 2, 1] * x1 + Ys[i, 2, 2] * x2 + Ys[i, 2, 3] * x3 \
        + Ys[i, 2, 4] * x4 + Ys[i, 2, 5] * x5
    y3 = Ys[i, 3, 0] * x0 + Ys[i, 3, 1] * x1 + Ys[i, 3, 2] * x2 + Ys[i, 3, 3] * x3 \
        + Ys[i, 3, 4] * x4 + Ys[i, 3, 5] * x5
    y4 = Ys[i, 4, 0] * x0 + Ys[i, 4, 1] * x1 + Ys[i, 4, 2] * x2 + Ys[i, 4, 3] * x3 \
        + Ys[i, 4, 4] * x4 + Ys[i, 4, 5] * x5
    y5 = Ys[i, 5, 0] * x0 + Ys[i, 5, 1] * x1 + Ys[i, 5, 2] * x2 + Ys[i, 5, 3] * x3 \
        + Ys[i, 5, 4] * x4 + Ys[i, 5, 5] * x5
    outs[o, 0] = y0
    outs[o, 1] = y1
    outs[o, 2] = y2
    outs[o, 3] = y3
    outs[o, 4] = y4
    outs[o, 5] = y5


@inline_kernel
def inertia_to_world(Rs, ps, Ys, outs, i):
    """outs[i] = X* Ys[i] X^-1: a rigid-body inertia (joint frame) in the world, oMi =
    (Rs[i], ps[i]), written as a 6x6 matrix (:func:`inertia_to_world_values`)."""
    m, H0, H1, H2, a00, a01, a02, a11, a12, a22 = inertia_to_world_values(Rs, ps, Ys, i)
    write_rigid_inertia(m, H0, H1, H2, a00, a01, a02, a11, a12, a22, outs, i)


@inline_kernel
def inertia_to_world_values(Rs, ps, Ys, i):
    """The ten parameters (m, h0, h1, h2, a00, a01, a02, a11, a12, a22) of X* Ys[i] X^-1,
    a rigid-body inertia (joint frame) in the world, oMi = (Rs[i], ps[i]).

    Uses the rigid structure of Y = [m 1, -[h]x; [h]x, I] (mass m, first moment
    h = m c, rotational inertia I about the joint origin): the ten parameters
    are moved to the world, h' = R h + m p and I' = R I R^T shifted from p to the
    world origin, in straight-line code on locals."""
    m = Ys[i, 0, 0]
    h0, h1, h2 = Ys[i, 5, 1], Ys[i, 3, 2], Ys[i, 4, 0]
    i00, i01, i02 = Ys[i, 3, 3], Ys[i, 3, 4], Ys[i, 3, 5]
    i11, i12, i22 = Ys[i, 4, 4], Ys[i, 4, 5], Ys[i, 5, 5]
    r00, r01, r02 = Rs[i, 0, 0], Rs[i, 0, 1], Rs[i, 0, 2]
    r10, r11, r12 = Rs[i, 1, 0], Rs[i, 1, 1], Rs[i, 1, 2]
    r20, r21, r22 = Rs[i, 2, 0], Rs[i, 2, 1], Rs[i, 2, 2]
    p0, p1, p2 = ps[i, 0], ps[i, 1], ps[i, 2]
    # g = R h, the first moment about p in world axes; H = g + m p about the origin
    g0 = r00 * h0 + r01 * h1 + r02 * h2
    g1 = r10 * h0 + r11 * h1 + r12 * h2
    g2 = r20 * h0 + r21 * h1 + r22 * h2
    H0, H1, H2 = g0 + m * p0, g1 + m * p1, g2 + m * p2
    # T = R I, then R I R^T (symmetric: the upper triangle)
    t00 = r00 * i00 + r01 * i01 + r02 * i02
    t01 = r00 * i01 + r01 * i11 + r02 * i12
    t02 = r00 * i02 + r01 * i12 + r02 * i22
    t10 = r10 * i00 + r11 * i01 + r12 * i02
    t11 = r10 * i01 + r11 * i11 + r12 * i12
    t12 = r10 * i02 + r11 * i12 + r12 * i22
    t20 = r20 * i00 + r21 * i01 + r22 * i02
    t21 = r20 * i01 + r21 * i11 + r22 * i12
    t22 = r20 * i02 + r21 * i12 + r22 * i22
    # shift from p to the origin: + m (|p|^2 1 - p p^T) + 2 (p.g) 1 - p g^T - g p^T,
    # written with H = g + m p: the diagonal entry (0, 0) is p1 (H1 + g1) + p2 (H2 + g2)
    # and the entry (0, 1) is -(p0 H1 + g0 p1) (9 products instead of 32)
    P0, P1, P2 = p0 * (H0 + g0), p1 * (H1 + g1), p2 * (H2 + g2)
    a00 = t00 * r00 + t01 * r01 + t02 * r02 + (P1 + P2)
    a01 = t00 * r10 + t01 * r11 + t02 * r12 - (p0 * H1 + g0 * p1)
    a02 = t00 * r20 + t01 * r21 + t02 * r22 - (p0 * H2 + g0 * p2)
    a11 = t10 * r10 + t11 * r11 + t12 * r12 + (P0 + P2)
    a12 = t10 * r20 + t11 * r21 + t12 * r22 - (p1 * H2 + g1 * p2)
    a22 = t20 * r20 + t21 * r21 + t22 * r22 + (P0 + P1)
    return m, H0, H1, H2, a00, a01, a02, a11, a12, a22


@inline_kernel
def cross(a0, a1, a2, b0, b1, b2):
    """a x b of two 3-vectors given as values, as three values."""
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@inline_kernel
def inv_act_motion_values(Rs, ps, i, v0, v1, v2, w0, w1, w2):
    """:func:`inv_act_motion` of the motion [v; w] given as values: six values
    [R^T (v - p x w); R^T w] for (R, p) = (Rs[i], ps[i])."""
    r00, r01, r02 = Rs[i, 0, 0], Rs[i, 0, 1], Rs[i, 0, 2]
    r10, r11, r12 = Rs[i, 1, 0], Rs[i, 1, 1], Rs[i, 1, 2]
    r20, r21, r22 = Rs[i, 2, 0], Rs[i, 2, 1], Rs[i, 2, 2]
    p0, p1, p2 = ps[i, 0], ps[i, 1], ps[i, 2]
    t0 = v0 - (p1 * w2 - p2 * w1)
    t1 = v1 - (p2 * w0 - p0 * w2)
    t2 = v2 - (p0 * w1 - p1 * w0)
    return (r00 * t0 + r10 * t1 + r20 * t2, r01 * t0 + r11 * t1 + r21 * t2,
            r02 * t0 + r12 * t1 + r22 * t2, r00 * w0 + r10 * w1 + r20 * w2,
            r01 * w0 + r11 * w1 + r21 * w2, r02 * w0 + r12 * w1 + r22 * w2)


@inline_kernel
def rigid_inertia_times(Ys, i, v0, v1, v2, w0, w1, w2):
    """Ys[i] [v; w] for a rigid-body inertia Ys[i] = [m 1, -[h]x; [h]x, I] (any frame),
    from its ten parameters (:func:`rigid_inertia_values_times`)."""
    return rigid_inertia_values_times(Ys[i, 0, 0], Ys[i, 5, 1], Ys[i, 3, 2], Ys[i, 4, 0],
                                      Ys[i, 3, 3], Ys[i, 3, 4], Ys[i, 3, 5], Ys[i, 4, 4],
                                      Ys[i, 4, 5], Ys[i, 5, 5], v0, v1, v2, w0, w1, w2)


@inline_kernel
def rigid_inertia_values_times(m, h0, h1, h2, a00, a01, a02, a11, a12, a22,
                               v0, v1, v2, w0, w1, w2):
    """[m v - h x w; I w + h x v]: the rigid-body inertia of parameters (m, h, I) (I
    symmetric, upper triangle a..) times the motion [v; w], 24 products instead of 36."""
    return (m * v0 - (h1 * w2 - h2 * w1),
            m * v1 - (h2 * w0 - h0 * w2),
            m * v2 - (h0 * w1 - h1 * w0),
            a00 * w0 + a01 * w1 + a02 * w2 + (h1 * v2 - h2 * v1),
            a01 * w0 + a11 * w1 + a12 * w2 + (h2 * v0 - h0 * v2),
            a02 * w0 + a12 * w1 + a22 * w2 + (h0 * v1 - h1 * v0))


@inline_kernel
def write_rigid_inertia(m, h0, h1, h2, a00, a01, a02, a11, a12, a22, outs, i):
    """outs[i] = [m 1, -[h]x; [h]x, A] (6, 6) from its ten parameters (A symmetric)."""
    outs[i, 0, 0], outs[i, 0, 1], outs[i, 0, 2] = m, 0.0, 0.0
    outs[i, 1, 0], outs[i, 1, 1], outs[i, 1, 2] = 0.0, m, 0.0
    outs[i, 2, 0], outs[i, 2, 1], outs[i, 2, 2] = 0.0, 0.0, m
    outs[i, 0, 3], outs[i, 0, 4], outs[i, 0, 5] = 0.0, h2, -h1
    outs[i, 1, 3], outs[i, 1, 4], outs[i, 1, 5] = -h2, 0.0, h0
    outs[i, 2, 3], outs[i, 2, 4], outs[i, 2, 5] = h1, -h0, 0.0
    outs[i, 3, 0], outs[i, 3, 1], outs[i, 3, 2] = 0.0, -h2, h1
    outs[i, 4, 0], outs[i, 4, 1], outs[i, 4, 2] = h2, 0.0, -h0
    outs[i, 5, 0], outs[i, 5, 1], outs[i, 5, 2] = -h1, h0, 0.0
    outs[i, 3, 3], outs[i, 3, 4], outs[i, 3, 5] = a00, a01, a02
    outs[i, 4, 3], outs[i, 4, 4], outs[i, 4, 5] = a01, a11, a12
    outs[i, 5, 3], outs[i, 5, 4], outs[i, 5, 5] = a02, a12, a22
