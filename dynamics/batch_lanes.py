"""RNEA and ABA over a stack of states laid out across SIMD lanes.

The per-state algorithms are those of :mod:`.rnea` (Featherstone 2008, Table
5.1) and the articulated-body algorithm in the joint frames (Featherstone
2008, Table 7.1; Pinocchio's ``aba`` with local quantities), unchanged; only
the memory layout differs.  A stack is cut into *tiles* of ``TILE``
consecutive states, and every workspace array of a tile has the lane (state)
axis last and contiguous:

- ``qt (nq, TILE)``, ``vt, ut (nv, TILE)``: the tile's inputs;
- ``liR (njoints, 3, 3, TILE)``, ``lip (njoints, 3, TILE)``: liMi;
- ``vel, acc, f, c, pA (njoints, 6, TILE)``: spatial vectors of each body;
- ``Ya (njoints, 6, 6, TILE)``: articulated inertias; ``U (6, nv, TILE)``,
  ``Dinv (nv, 6, TILE)``, ``u (nv, TILE)``: ABA's joint quantities.

Each helper runs one scalar step of the per-joint algorithm (a placement, a
spatial transform, a cross product, an inertia product) in a loop
``for s in range(TILE)`` innermost, reading its inputs into locals before any
store: the same arithmetic in every lane, stride-1 loads and stores, no
branch, so LLVM emits packed double instructions across states
(benchmarks/lanes.py counts them in the compiled assembly).  Joint-type
dispatch happens outside the lane loops: revolute joints (any axis, bounded
or not) and the free flyer have vectorized placements; the other types take
the one-state :func:`~geppetto.dynamics.joints.joint_transform` lane by lane.
The motion subspace S of every type is constant, so the rest is shared.

The sine and cosine of revolute angles come from :func:`_sincos_lanes`, a
branch-free Cody-Waite reduction and the minimax polynomials of Cephes
(Moshier 1989), accurate to about 1 ulp for |q| < 1e5 and replaced by
``math.sin``/``math.cos`` beyond; libm's calls do not vectorize.
"""
import math

import numpy as np

from . import mimic
from .config import inline_kernel, kernel
from .joints import coordinate_axis, joint_transform
from .model import FREE_FLYER, REVOLUTE, REVOLUTE_UNBOUNDED
from .validation import (UNIT_NORM_TOLERANCE, as_configurations, as_stack, check_invertible,
                         unit_blocks)

TILE = 32  # states per tile: 4 AVX-512 (8 AVX2) registers of doubles per lane loop

# Cody-Waite split of pi/2 and the Cephes sin/cos coefficients on [-pi/4, pi/4].
_PIO2_1 = 1.5707963267341256e+00
_PIO2_2 = 6.0771005065061922e-11
_PIO2_3 = 2.0222662487959506e-21
_SIN = (1.58962301576546568060e-10, -2.50507477628578072866e-8,
        2.75573136213857245213e-6, -1.98412698295895385996e-4,
        8.33333333332211858878e-3, -1.66666666666666307295e-1)
_COS = (-1.13585365213876817300e-11, 2.08757008419747316778e-9,
        -2.75573141792967388112e-7, 2.48015872888517045348e-5,
        -1.38888888888730564116e-3, 4.16666666666665929218e-2)
_SINCOS_RANGE = 1e5


@inline_kernel
def _sincos_lanes(qt, o, cs):
    """cs[0, s], cs[1, s] = cos, sin of qt[o, s] for every lane s."""
    for s in range(TILE):
        x = qt[o, s]
        n = math.floor(x * 0.6366197723675814 + 0.5)  # nearest multiple of pi/2
        r = ((x - n * _PIO2_1) - n * _PIO2_2) - n * _PIO2_3
        z = r * r
        ps = r + r * z * (((((_SIN[0] * z + _SIN[1]) * z + _SIN[2]) * z + _SIN[3]) * z
                           + _SIN[4]) * z + _SIN[5])
        pc = 1.0 - 0.5 * z + z * z * (((((_COS[0] * z + _COS[1]) * z + _COS[2]) * z
                                        + _COS[3]) * z + _COS[4]) * z + _COS[5])
        k = n - 4.0 * math.floor(n * 0.25)  # quadrant 0..3
        swap = k == 1.0 or k == 3.0
        sn = pc if swap else ps
        cn = ps if swap else pc
        cs[1, s] = -sn if k >= 2.0 else sn
        cs[0, s] = -cn if (k == 1.0 or k == 2.0) else cn
    for s in range(TILE):
        if abs(qt[o, s]) > _SINCOS_RANGE:
            cs[0, s] = math.cos(qt[o, s])
            cs[1, s] = math.sin(qt[o, s])


@inline_kernel
def _axis_placement_lanes(jR, jp, i, k, cs, liR, lip):
    """liMi = jointPlacement * rotation about the coordinate axis k by (cos, sin) = cs."""
    a = (k + 1) % 3
    b = (k + 2) % 3
    for r in range(3):
        ja, jb, jk, pr = jR[i, r, a], jR[i, r, b], jR[i, r, k], jp[i, r]
        for s in range(TILE):
            c, sn = cs[0, s], cs[1, s]
            liR[i, r, a, s] = c * ja + sn * jb
            liR[i, r, b, s] = c * jb - sn * ja
            liR[i, r, k, s] = jk
            lip[i, r, s] = pr


@inline_kernel
def _rodrigues_lanes(axes, i, cs, XR, Xp):
    """XJ = rotation about the unit axis axes[i] by (cos, sin) = cs, no translation."""
    x, y, z = axes[i, 0], axes[i, 1], axes[i, 2]
    for s in range(TILE):
        c, sn = cs[0, s], cs[1, s]
        t = 1.0 - c
        XR[0, 0, s] = c + t * x * x
        XR[0, 1, s] = t * x * y - sn * z
        XR[0, 2, s] = t * x * z + sn * y
        XR[1, 0, s] = t * x * y + sn * z
        XR[1, 1, s] = c + t * y * y
        XR[1, 2, s] = t * y * z - sn * x
        XR[2, 0, s] = t * x * z - sn * y
        XR[2, 1, s] = t * y * z + sn * x
        XR[2, 2, s] = c + t * z * z
        Xp[0, s] = 0.0
        Xp[1, s] = 0.0
        Xp[2, s] = 0.0


@inline_kernel
def _free_flyer_lanes(qt, o, XR, Xp):
    """XJ of a free flyer: translation qt[o:o+3], unit quaternion (x, y, z, w) after it."""
    for s in range(TILE):
        x, y, z, w = qt[o + 3, s], qt[o + 4, s], qt[o + 5, s], qt[o + 6, s]
        XR[0, 0, s] = 1.0 - 2.0 * (y * y + z * z)
        XR[0, 1, s] = 2.0 * (x * y - z * w)
        XR[0, 2, s] = 2.0 * (x * z + y * w)
        XR[1, 0, s] = 2.0 * (x * y + z * w)
        XR[1, 1, s] = 1.0 - 2.0 * (x * x + z * z)
        XR[1, 2, s] = 2.0 * (y * z - x * w)
        XR[2, 0, s] = 2.0 * (x * z - y * w)
        XR[2, 1, s] = 2.0 * (y * z + x * w)
        XR[2, 2, s] = 1.0 - 2.0 * (x * x + y * y)
        Xp[0, s] = qt[o, s]
        Xp[1, s] = qt[o + 1, s]
        Xp[2, s] = qt[o + 2, s]


@inline_kernel
def _compose_lanes(jR, jp, i, XR, Xp, liR, lip):
    """liMi = jointPlacement_i * XJ: (jR XR, jR Xp + jp) in every lane."""
    for r in range(3):
        a0, a1, a2, t = jR[i, r, 0], jR[i, r, 1], jR[i, r, 2], jp[i, r]
        for s in range(TILE):
            lip[i, r, s] = t + a0 * Xp[0, s] + a1 * Xp[1, s] + a2 * Xp[2, s]
            liR[i, r, 0, s] = a0 * XR[0, 0, s] + a1 * XR[1, 0, s] + a2 * XR[2, 0, s]
            liR[i, r, 1, s] = a0 * XR[0, 1, s] + a1 * XR[1, 1, s] + a2 * XR[2, 1, s]
            liR[i, r, 2, s] = a0 * XR[0, 2, s] + a1 * XR[1, 2, s] + a2 * XR[2, 2, s]


@kernel
def _placement_lanes(m, i, qt, cs, XR, Xp, R1, p1, liR, lip):
    """liMi of joint i in every lane of the tile; cs (2, TILE), XR (3, 3, TILE),
    Xp (3, TILE), R1 (1, 3, 3) and p1 (1, 3) are scratch."""
    t, o = m.jtype[i], m.idx_q[i]
    if t == REVOLUTE or t == REVOLUTE_UNBOUNDED:
        if t == REVOLUTE:
            _sincos_lanes(qt, o, cs)
        else:
            for s in range(TILE):
                cs[0, s] = qt[o, s]
                cs[1, s] = qt[o + 1, s]
        k = coordinate_axis(m.axis, i)
        if k >= 0:
            _axis_placement_lanes(m.jR, m.jp, i, k, cs, liR, lip)
            return
        _rodrigues_lanes(m.axis, i, cs, XR, Xp)
    elif t == FREE_FLYER:
        _free_flyer_lanes(qt, o, XR, Xp)
    else:
        for s in range(TILE):
            joint_transform(t, m.axis, i, qt[:, s], o, R1, p1)
            for r in range(3):
                Xp[r, s] = p1[0, r]
                for c in range(3):
                    XR[r, c, s] = R1[0, r, c]
    _compose_lanes(m.jR, m.jp, i, XR, Xp, liR, lip)


@inline_kernel
def _inv_act_motion_lanes(liR, lip, i, x, j, out, o):
    """out[o] = liMi^-1 x[j] = [R^T (v - p x w); R^T w] in every lane."""
    for s in range(TILE):
        r00, r01, r02 = liR[i, 0, 0, s], liR[i, 0, 1, s], liR[i, 0, 2, s]
        r10, r11, r12 = liR[i, 1, 0, s], liR[i, 1, 1, s], liR[i, 1, 2, s]
        r20, r21, r22 = liR[i, 2, 0, s], liR[i, 2, 1, s], liR[i, 2, 2, s]
        p0, p1, p2 = lip[i, 0, s], lip[i, 1, s], lip[i, 2, s]
        v0, v1, v2 = x[j, 0, s], x[j, 1, s], x[j, 2, s]
        w0, w1, w2 = x[j, 3, s], x[j, 4, s], x[j, 5, s]
        t0 = v0 - (p1 * w2 - p2 * w1)
        t1 = v1 - (p2 * w0 - p0 * w2)
        t2 = v2 - (p0 * w1 - p1 * w0)
        out[o, 0, s] = r00 * t0 + r10 * t1 + r20 * t2
        out[o, 1, s] = r01 * t0 + r11 * t1 + r21 * t2
        out[o, 2, s] = r02 * t0 + r12 * t1 + r22 * t2
        out[o, 3, s] = r00 * w0 + r10 * w1 + r20 * w2
        out[o, 4, s] = r01 * w0 + r11 * w1 + r21 * w2
        out[o, 5, s] = r02 * w0 + r12 * w1 + r22 * w2


@inline_kernel
def _force_to_parent(liR, lip, i, s, g0, g1, g2, n0, n1, n2):
    """liMi f = [R f; R n + p x R f] in lane s, for the force f = (g, n)."""
    r00, r01, r02 = liR[i, 0, 0, s], liR[i, 0, 1, s], liR[i, 0, 2, s]
    r10, r11, r12 = liR[i, 1, 0, s], liR[i, 1, 1, s], liR[i, 1, 2, s]
    r20, r21, r22 = liR[i, 2, 0, s], liR[i, 2, 1, s], liR[i, 2, 2, s]
    p0, p1, p2 = lip[i, 0, s], lip[i, 1, s], lip[i, 2, s]
    f0 = r00 * g0 + r01 * g1 + r02 * g2
    f1 = r10 * g0 + r11 * g1 + r12 * g2
    f2 = r20 * g0 + r21 * g1 + r22 * g2
    return (f0, f1, f2,
            r00 * n0 + r01 * n1 + r02 * n2 + p1 * f2 - p2 * f1,
            r10 * n0 + r11 * n1 + r12 * n2 + p2 * f0 - p0 * f2,
            r20 * n0 + r21 * n1 + r22 * n2 + p0 * f1 - p1 * f0)


@inline_kernel
def _add_act_force_lanes(liR, lip, i, x, j, out, o):
    """out[o] += liMi x[j] in every lane (a body force handed to the parent)."""
    for s in range(TILE):
        f0, f1, f2, f3, f4, f5 = _force_to_parent(liR, lip, i, s, x[j, 0, s], x[j, 1, s],
                                                  x[j, 2, s], x[j, 3, s], x[j, 4, s],
                                                  x[j, 5, s])
        out[o, 0, s] += f0
        out[o, 1, s] += f1
        out[o, 2, s] += f2
        out[o, 3, s] += f3
        out[o, 4, s] += f4
        out[o, 5, s] += f5


@inline_kernel
def _joint_motion_lanes(S, iv, nvi, x, out, o):
    """out[o] = S_i x[iv:iv+nvi] (the joint's motion for the rates x) in every lane."""
    for r in range(6):
        for s in range(TILE):
            out[o, r, s] = 0.0
    for c in range(iv, iv + nvi):
        for r in range(6):
            src = S[r, c]
            if src != 0.0:
                for s in range(TILE):
                    out[o, r, s] += src * x[c, s]


@inline_kernel
def _motion_cross_lanes(x, i, y, j, out, o):
    """out[o] = x[i] x y[j] = [w1 x v2 + v1 x w2; w1 x w2] in every lane."""
    for s in range(TILE):
        a0, a1, a2, b0, b1, b2 = x[i, 0, s], x[i, 1, s], x[i, 2, s], x[i, 3, s], x[i, 4, s], x[i, 5, s]
        c0, c1, c2, d0, d1, d2 = y[j, 0, s], y[j, 1, s], y[j, 2, s], y[j, 3, s], y[j, 4, s], y[j, 5, s]
        out[o, 0, s] = b1 * c2 - b2 * c1 + a1 * d2 - a2 * d1
        out[o, 1, s] = b2 * c0 - b0 * c2 + a2 * d0 - a0 * d2
        out[o, 2, s] = b0 * c1 - b1 * c0 + a0 * d1 - a1 * d0
        out[o, 3, s] = b1 * d2 - b2 * d1
        out[o, 4, s] = b2 * d0 - b0 * d2
        out[o, 5, s] = b0 * d1 - b1 * d0


@inline_kernel
def _bias_force_lanes(Y, i, vel, out, o, add):
    """out[o] (+)= v_i x* (Y_i v_i) in every lane (``add`` False: overwrite); Y_i (6, 6)
    constant, x* the force cross product [w x f; w x n + v x f]."""
    for s in range(TILE):
        m0, m1, m2 = vel[i, 0, s], vel[i, 1, s], vel[i, 2, s]
        m3, m4, m5 = vel[i, 3, s], vel[i, 4, s], vel[i, 5, s]
        h0 = (Y[i, 0, 0] * m0 + Y[i, 0, 1] * m1 + Y[i, 0, 2] * m2
              + Y[i, 0, 3] * m3 + Y[i, 0, 4] * m4 + Y[i, 0, 5] * m5)
        h1 = (Y[i, 1, 0] * m0 + Y[i, 1, 1] * m1 + Y[i, 1, 2] * m2
              + Y[i, 1, 3] * m3 + Y[i, 1, 4] * m4 + Y[i, 1, 5] * m5)
        h2 = (Y[i, 2, 0] * m0 + Y[i, 2, 1] * m1 + Y[i, 2, 2] * m2
              + Y[i, 2, 3] * m3 + Y[i, 2, 4] * m4 + Y[i, 2, 5] * m5)
        h3 = (Y[i, 3, 0] * m0 + Y[i, 3, 1] * m1 + Y[i, 3, 2] * m2
              + Y[i, 3, 3] * m3 + Y[i, 3, 4] * m4 + Y[i, 3, 5] * m5)
        h4 = (Y[i, 4, 0] * m0 + Y[i, 4, 1] * m1 + Y[i, 4, 2] * m2
              + Y[i, 4, 3] * m3 + Y[i, 4, 4] * m4 + Y[i, 4, 5] * m5)
        h5 = (Y[i, 5, 0] * m0 + Y[i, 5, 1] * m1 + Y[i, 5, 2] * m2
              + Y[i, 5, 3] * m3 + Y[i, 5, 4] * m4 + Y[i, 5, 5] * m5)
        g0 = m4 * h2 - m5 * h1
        g1 = m5 * h0 - m3 * h2
        g2 = m3 * h1 - m4 * h0
        g3 = m4 * h5 - m5 * h4 + m1 * h2 - m2 * h1
        g4 = m5 * h3 - m3 * h5 + m2 * h0 - m0 * h2
        g5 = m3 * h4 - m4 * h3 + m0 * h1 - m1 * h0
        if add:
            g0 += out[o, 0, s]
            g1 += out[o, 1, s]
            g2 += out[o, 2, s]
            g3 += out[o, 3, s]
            g4 += out[o, 4, s]
            g5 += out[o, 5, s]
        out[o, 0, s] = g0
        out[o, 1, s] = g1
        out[o, 2, s] = g2
        out[o, 3, s] = g3
        out[o, 4, s] = g4
        out[o, 5, s] = g5


@inline_kernel
def _inertia_times_lanes(Y, i, x, j, out, o):
    """out[o] = Y_i x[j] in every lane; Y_i (6, 6) constant."""
    for r in range(6):
        y0, y1, y2, y3, y4, y5 = Y[i, r, 0], Y[i, r, 1], Y[i, r, 2], Y[i, r, 3], Y[i, r, 4], Y[i, r, 5]
        for s in range(TILE):
            out[o, r, s] = (y0 * x[j, 0, s] + y1 * x[j, 1, s] + y2 * x[j, 2, s]
                            + y3 * x[j, 3, s] + y4 * x[j, 4, s] + y5 * x[j, 5, s])


@kernel
def _load_tile(x, b, n, lanes_major, out):
    """out (size, TILE) = states b .. b+n-1 of x ((size, K) when lanes_major, else
    (K, size)); the padding lanes repeat the last state, so every lane is valid."""
    for s in range(TILE):
        k = b + min(s, n - 1)
        for r in range(out.shape[0]):
            out[r, s] = x[r, k] if lanes_major else x[k, r]


@kernel
def _store_tile(t, b, n, lanes_major, x):
    """States b .. b+n-1 of x = the first n lanes of the tile t (size, TILE)."""
    for s in range(n):
        for r in range(t.shape[0]):
            if lanes_major:
                x[r, b + s] = t[r, s]
            else:
                x[b + s, r] = t[r, s]


@inline_kernel
def _add_lanes(x, i, y, j, out, o):
    """out[o] = x[i] + y[j] in every lane."""
    for r in range(6):
        for s in range(TILE):
            out[o, r, s] = x[i, r, s] + y[j, r, s]


@kernel
def _workspace(m):
    """The tile arrays shared by RNEA and ABA (see the module docstring) and the
    placement scratch: liR, lip, vel, acc, f, w (3, 6, TILE), cs, XR, Xp, R1, p1."""
    nj = m.njoints
    return (np.zeros((nj, 3, 3, TILE)), np.zeros((nj, 3, TILE)), np.zeros((nj, 6, TILE)),
            np.zeros((nj, 6, TILE)), np.zeros((nj, 6, TILE)), np.zeros((3, 6, TILE)),
            np.zeros((2, TILE)), np.zeros((3, 3, TILE)), np.zeros((3, TILE)),
            np.zeros((1, 3, 3)), np.zeros((1, 3)))


@kernel
def _rnea_forward_pass_lanes(m, qt, vt, at, ws):
    """v_i, a_i (gravity as a_0 = -g) and the net force f_i of every body, every lane."""
    liR, lip, vel, acc, f, w, cs, XR, Xp, R1, p1 = ws
    parents, idx_v, nvs, S, Y = m.parents, m.idx_v, m.nvs, m.S, m.inertia
    for r in range(6):
        for s in range(TILE):
            vel[0, r, s] = 0.0
            acc[0, r, s] = -m.gravity[r]
    for i in range(1, m.njoints):
        par, iv, nvi = parents[i], idx_v[i], nvs[i]
        _placement_lanes(m, i, qt, cs, XR, Xp, R1, p1, liR, lip)
        _joint_motion_lanes(S, iv, nvi, vt, w, 0)
        _inv_act_motion_lanes(liR, lip, i, vel, par, vel, i)
        _add_lanes(vel, i, w, 0, vel, i)
        # a_i = liMi^-1 a_par + v_i x (S dq_i) + S ddq_i
        _inv_act_motion_lanes(liR, lip, i, acc, par, acc, i)
        _motion_cross_lanes(vel, i, w, 0, w, 1)
        _joint_motion_lanes(S, iv, nvi, at, w, 2)
        _add_lanes(acc, i, w, 1, acc, i)
        _add_lanes(acc, i, w, 2, acc, i)
        # f_i = Y_i a_i + v_i x* Y_i v_i
        _inertia_times_lanes(Y, i, acc, i, f, i)
        _bias_force_lanes(Y, i, vel, f, i, True)


@kernel
def _rnea_backward_pass_lanes(m, at, ws, taut):
    """tau_i = S_i^T f_i + armature ddq_i; f_parent += liMi f_i, every lane."""
    liR, lip, f = ws[0], ws[1], ws[4]
    parents, idx_v, nvs, S, armature = m.parents, m.idx_v, m.nvs, m.S, m.armature
    for i in range(m.njoints - 1, 0, -1):
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            arm = armature[c]
            for s in range(TILE):
                taut[c, s] = arm * at[c, s]
            for r in range(6):
                src = S[r, c]
                if src != 0.0:
                    for s in range(TILE):
                        taut[c, s] += src * f[i, r, s]
        if parents[i] > 0:
            _add_act_force_lanes(liR, lip, i, f, i, f, parents[i])


@kernel
def _rnea_lanes(m, q, v, a, lanes_major, tau):
    """tau = RNEA(q, v, a) for K states, TILE at a time: (nq, K) inputs when
    lanes_major, else (K, nq); tau in the same layout."""
    ws = _workspace(m)
    K = q.shape[1] if lanes_major else q.shape[0]
    qt, vt, at = np.empty((m.nq, TILE)), np.empty((m.nv, TILE)), np.empty((m.nv, TILE))
    taut = np.empty((m.nv, TILE))
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        _load_tile(q, b, n, lanes_major, qt)
        _load_tile(v, b, n, lanes_major, vt)
        _load_tile(a, b, n, lanes_major, at)
        _rnea_forward_pass_lanes(m, qt, vt, at, ws)
        _rnea_backward_pass_lanes(m, at, ws, taut)
        _store_tile(taut, b, n, lanes_major, tau)


@kernel
def _aba_workspace(m):
    """ABA's tile arrays beside :func:`_workspace`'s: c, pA, Ya, U, Dinv, u, and the
    scratch D, work, UD, Ia, B (6, 6, TILE), pa (1, 6, TILE), e (6, TILE), pf (2, TILE)."""
    nj, nv = m.njoints, m.nv
    return (np.zeros((nj, 6, TILE)), np.zeros((nj, 6, TILE)), np.zeros((nj, 6, 6, TILE)),
            np.zeros((6, nv, TILE)), np.zeros((nv, 6, TILE)), np.zeros((nv, TILE)),
            np.zeros((6, 6, TILE)), np.zeros((6, 6, TILE)), np.zeros((6, 6, TILE)),
            np.zeros((6, 6, TILE)), np.zeros((6, 6, TILE)), np.zeros((1, 6, TILE)),
            np.zeros((6, TILE)), np.zeros((2, TILE)))


@kernel
def _aba_forward_pass_1_lanes(m, qt, vt, ws, wa):
    """liMi, v_i, c_i = v_i x (S dq_i), Ya_i = Y_i and pA_i = v_i x* Y_i v_i, every lane."""
    liR, lip, vel, w, cs, XR, Xp, R1, p1 = ws[0], ws[1], ws[2], ws[5], ws[6], ws[7], ws[8], ws[9], ws[10]
    c, pA, Ya = wa[0], wa[1], wa[2]
    parents, idx_v, nvs, S, Y = m.parents, m.idx_v, m.nvs, m.S, m.inertia
    for r in range(6):
        for s in range(TILE):
            vel[0, r, s] = 0.0
    for i in range(1, m.njoints):
        par, iv, nvi = parents[i], idx_v[i], nvs[i]
        _placement_lanes(m, i, qt, cs, XR, Xp, R1, p1, liR, lip)
        _joint_motion_lanes(S, iv, nvi, vt, w, 0)
        _inv_act_motion_lanes(liR, lip, i, vel, par, vel, i)
        _add_lanes(vel, i, w, 0, vel, i)
        _motion_cross_lanes(vel, i, w, 0, c, i)
        for r in range(6):
            for col in range(6):
                y = Y[i, r, col]
                for s in range(TILE):
                    Ya[i, r, col, s] = y
        _bias_force_lanes(Y, i, vel, pA, i, False)


@kernel
def _invert_spd_lanes(D, n, Dinv, iv, work, pf):
    """Dinv[iv:iv+n, :n] = D[:n, :n]^-1 in every lane (Gauss-Jordan; D is symmetric
    positive definite, so no pivoting)."""
    for r in range(n):
        for col in range(n):
            for s in range(TILE):
                work[r, col, s] = D[r, col, s]
                Dinv[iv + r, col, s] = 1.0 if r == col else 0.0
    for p in range(n):
        for s in range(TILE):
            pf[0, s] = 1.0 / work[p, p, s]
        for col in range(n):
            for s in range(TILE):
                work[p, col, s] *= pf[0, s]
                Dinv[iv + p, col, s] *= pf[0, s]
        for r in range(n):
            if r != p:
                for s in range(TILE):
                    pf[1, s] = work[r, p, s]
                for col in range(n):
                    for s in range(TILE):
                        work[r, col, s] -= pf[1, s] * work[p, col, s]
                        Dinv[iv + r, col, s] -= pf[1, s] * Dinv[iv + p, col, s]


@kernel
def _articulated_projection_lanes(m, i, tau, wa):
    """U = Ya_i S_i, D = S_i^T U + armature, Dinv = D^-1, u = tau_i - S_i^T pA_i."""
    pA, Ya, U, Dinv, u, D, work, pf = wa[1], wa[2], wa[3], wa[4], wa[5], wa[6], wa[7], wa[13]
    S, armature, iv, nvi = m.S, m.armature, m.idx_v[i], m.nvs[i]
    for c in range(iv, iv + nvi):
        for s in range(TILE):
            u[c, s] = tau[c, s]
        for r in range(6):
            for s in range(TILE):
                U[r, c, s] = 0.0
        for t in range(6):
            st = S[t, c]
            if st != 0.0:
                for s in range(TILE):
                    u[c, s] -= st * pA[i, t, s]
                for r in range(6):
                    for s in range(TILE):
                        U[r, c, s] += Ya[i, r, t, s] * st
    for a in range(nvi):
        for b in range(nvi):
            arm = armature[iv + a] if a == b else 0.0
            for s in range(TILE):
                D[a, b, s] = arm
            for r in range(6):
                sr = S[r, iv + a]
                if sr != 0.0:
                    for s in range(TILE):
                        D[a, b, s] += sr * U[r, iv + b, s]
    if nvi == 1:
        for s in range(TILE):
            Dinv[iv, 0, s] = 1.0 / D[0, 0, s]
    else:
        _invert_spd_lanes(D, nvi, Dinv, iv, work, pf)


@kernel
def _articulated_inertia_lanes(m, i, wa):
    """UD = U Dinv; Ia = Ya_i - UD U^T; pa = pA_i + Ia c_i + UD u_i (Featherstone
    2008, Table 7.1), every lane."""
    c, pA, Ya, U, Dinv, u, UD, Ia, pa = (wa[0], wa[1], wa[2], wa[3], wa[4], wa[5], wa[8],
                                         wa[9], wa[11])
    iv, nvi = m.idx_v[i], m.nvs[i]
    for r in range(6):
        for a in range(nvi):
            for s in range(TILE):
                UD[r, a, s] = 0.0
            for b in range(nvi):
                for s in range(TILE):
                    UD[r, a, s] += U[r, iv + b, s] * Dinv[iv + b, a, s]
    for r in range(6):
        for col in range(6):
            for s in range(TILE):
                Ia[r, col, s] = Ya[i, r, col, s]
            for a in range(nvi):
                for s in range(TILE):
                    Ia[r, col, s] -= UD[r, a, s] * U[col, iv + a, s]
    for r in range(6):
        for s in range(TILE):
            pa[0, r, s] = (pA[i, r, s] + Ia[r, 0, s] * c[i, 0, s] + Ia[r, 1, s] * c[i, 1, s]
                           + Ia[r, 2, s] * c[i, 2, s] + Ia[r, 3, s] * c[i, 3, s]
                           + Ia[r, 4, s] * c[i, 4, s] + Ia[r, 5, s] * c[i, 5, s])
        for a in range(nvi):
            for s in range(TILE):
                pa[0, r, s] += UD[r, a, s] * u[iv + a, s]


@kernel
def _hand_to_parent_lanes(i, par, liR, lip, wa):
    """Ya_par += liMi Ia liMi^T (as a force-to-motion map), pA_par += liMi pa."""
    pA, Ya, Ia, B, pa = wa[1], wa[2], wa[9], wa[10], wa[11]
    for col in range(6):
        for s in range(TILE):
            b0, b1, b2, b3, b4, b5 = _force_to_parent(liR, lip, i, s, Ia[0, col, s],
                                                      Ia[1, col, s], Ia[2, col, s],
                                                      Ia[3, col, s], Ia[4, col, s],
                                                      Ia[5, col, s])
            B[0, col, s] = b0
            B[1, col, s] = b1
            B[2, col, s] = b2
            B[3, col, s] = b3
            B[4, col, s] = b4
            B[5, col, s] = b5
    for r in range(6):
        for s in range(TILE):
            y0, y1, y2, y3, y4, y5 = _force_to_parent(liR, lip, i, s, B[r, 0, s], B[r, 1, s],
                                                      B[r, 2, s], B[r, 3, s], B[r, 4, s],
                                                      B[r, 5, s])
            Ya[par, r, 0, s] += y0
            Ya[par, r, 1, s] += y1
            Ya[par, r, 2, s] += y2
            Ya[par, r, 3, s] += y3
            Ya[par, r, 4, s] += y4
            Ya[par, r, 5, s] += y5
    _add_act_force_lanes(liR, lip, i, pa, 0, pA, par)


@kernel
def _aba_backward_pass_lanes(m, taut, ws, wa):
    liR, lip = ws[0], ws[1]
    for i in range(m.njoints - 1, 0, -1):
        _articulated_projection_lanes(m, i, taut, wa)
        par = m.parents[i]
        if par > 0:
            _articulated_inertia_lanes(m, i, wa)
            _hand_to_parent_lanes(i, par, liR, lip, wa)


@kernel
def _aba_forward_pass_2_lanes(m, ws, wa, ddqt):
    """a_i = liMi^-1 a_par + c_i, ddq_i = Dinv (u_i - U^T a_i), a_i += S ddq_i."""
    liR, lip, acc, w = ws[0], ws[1], ws[3], ws[5]
    c, U, Dinv, u, e = wa[0], wa[3], wa[4], wa[5], wa[12]
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for r in range(6):
        for s in range(TILE):
            acc[0, r, s] = -m.gravity[r]
    for i in range(1, m.njoints):
        par, iv, nvi = parents[i], idx_v[i], nvs[i]
        _inv_act_motion_lanes(liR, lip, i, acc, par, acc, i)
        _add_lanes(acc, i, c, i, acc, i)
        for a in range(nvi):
            for s in range(TILE):
                e[a, s] = (u[iv + a, s] - U[0, iv + a, s] * acc[i, 0, s]
                           - U[1, iv + a, s] * acc[i, 1, s] - U[2, iv + a, s] * acc[i, 2, s]
                           - U[3, iv + a, s] * acc[i, 3, s] - U[4, iv + a, s] * acc[i, 4, s]
                           - U[5, iv + a, s] * acc[i, 5, s])
        for a in range(nvi):
            for s in range(TILE):
                ddqt[iv + a, s] = 0.0
            for b in range(nvi):
                for s in range(TILE):
                    ddqt[iv + a, s] += Dinv[iv + a, b, s] * e[b, s]
        _joint_motion_lanes(m.S, iv, nvi, ddqt, w, 0)
        _add_lanes(acc, i, w, 0, acc, i)


@kernel
def _aba_lanes(m, q, v, tau, lanes_major, ddq):
    """ddq = ABA(q, v, tau) for K states, TILE at a time; layouts as :func:`_rnea_lanes`."""
    ws = _workspace(m)
    wa = _aba_workspace(m)
    K = q.shape[1] if lanes_major else q.shape[0]
    qt, vt, taut = np.empty((m.nq, TILE)), np.empty((m.nv, TILE)), np.empty((m.nv, TILE))
    ddqt = np.empty((m.nv, TILE))
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        _load_tile(q, b, n, lanes_major, qt)
        _load_tile(v, b, n, lanes_major, vt)
        _load_tile(tau, b, n, lanes_major, taut)
        _aba_forward_pass_1_lanes(m, qt, vt, ws, wa)
        _aba_backward_pass_lanes(m, taut, ws, wa)
        _aba_forward_pass_2_lanes(m, ws, wa, ddqt)
        _store_tile(ddqt, b, n, lanes_major, ddq)


def _as_lanes(model, x, size, name, K=None):
    """``x`` as a C-contiguous (size, K) float64 array of finite states, lanes layout."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu" or arr.ndim != 2 or arr.shape[0] != size:
        raise ValueError(f"{name}: expected a float array of shape ({size}, K) "
                         f"(states in columns), got shape {arr.shape} and dtype {arr.dtype}")
    if K is not None and arr.shape[1] != K:
        raise ValueError(f"{name}: expected {K} columns like q, got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf")
    return arr if arr.flags.writeable else arr.copy()


def _check_plain_model(model):
    if isinstance(model, mimic.MimicModel):
        raise TypeError("model: the lanes kernels take a plain Model, not a MimicModel "
                        "(use rnea/aba, which resolve the mimicked joints)")


def _as_lanes_configurations(model, q):
    """Configurations (nq, K), finite, with unit quaternions and (cos, sin) pairs."""
    _check_plain_model(model)
    arr = _as_lanes(model, q, model.nq, "q")
    for start, length, joint in unit_blocks(model):
        norms = np.sqrt(np.sum(arr[start:start + length] ** 2, axis=0))
        bad = np.abs(norms - 1.0) > UNIT_NORM_TOLERANCE
        if np.any(bad):
            raise ValueError(f"q: the unit block q[{start}:{start + length}] of joint "
                             f"{joint!r} has norm {norms[int(np.argmax(bad))]:.9g} in column "
                             f"{int(np.argmax(bad))}, expected 1")
    return arr


def _as_stacks(model, q, v, u, name_u):
    """(K, nq), (K, nv), (K, nv) stacks, validated as rnea's arguments."""
    _check_plain_model(model)
    qs, single = as_configurations(model, q)
    vs, _ = as_stack(v, model.nv, "v", (qs.shape[0], single))
    us, _ = as_stack(u, model.nv, name_u, (qs.shape[0], single))
    if single:
        raise ValueError("q: expected a stack (K, nq); for one state call rnea/aba")
    return qs, vs, us


def rnea_lanes(model, q, v, a):
    """Inverse dynamics of K states laid out across SIMD lanes.

    Parameters
    ----------
    q : (nq, K) configurations, one state per column; v, a : (nv, K).

    Returns tau (nv, K), equal to :func:`~geppetto.dynamics.rnea` of each column.
    No Data is filled; no external forces.
    """
    q = _as_lanes_configurations(model, q)
    v = _as_lanes(model, v, model.nv, "v", q.shape[1])
    a = _as_lanes(model, a, model.nv, "a", q.shape[1])
    tau = np.empty((model.nv, q.shape[1]))
    _rnea_lanes(model.arrays, q, v, a, True, tau)
    return tau


def rnea_batch(model, q, v, a):
    """:func:`rnea_lanes` on the usual stacks: q (K, nq), v and a (K, nv) -> tau (K, nv);
    the tiles are transposed in the kernel as they are loaded and stored."""
    qs, vs, as_ = _as_stacks(model, q, v, a, "a")
    tau = np.empty((qs.shape[0], model.nv))
    _rnea_lanes(model.arrays, qs, vs, as_, False, tau)
    return tau


def aba_lanes(model, q, v, tau):
    """Forward dynamics of K states laid out across SIMD lanes (local-frame ABA).

    q : (nq, K); v, tau : (nv, K).  Returns ddq (nv, K), equal to
    :func:`~geppetto.dynamics.aba` of each column.  No Data is filled.
    """
    q = _as_lanes_configurations(model, q)
    v = _as_lanes(model, v, model.nv, "v", q.shape[1])
    tau = _as_lanes(model, tau, model.nv, "tau", q.shape[1])
    ddq = np.empty((model.nv, q.shape[1]))
    _aba_lanes(model.arrays, q, v, tau, True, ddq)
    check_invertible(model, ddq, ddq.shape[0], "aba_lanes")
    return ddq


def aba_batch(model, q, v, tau):
    """:func:`aba_lanes` on the usual stacks: q (K, nq), v and tau (K, nv) -> ddq (K, nv)."""
    qs, vs, taus = _as_stacks(model, q, v, tau, "tau")
    ddq = np.empty((qs.shape[0], model.nv))
    _aba_lanes(model.arrays, qs, vs, taus, False, ddq)
    check_invertible(model, ddq, ddq.shape[0], "aba_batch")
    return ddq
