"""RNEA, ABA and CRBA over a stack of states laid out across SIMD lanes.

The per-state algorithms are those of :mod:`.rnea` (Featherstone 2008, Table
5.1), the articulated-body algorithm in the joint frames (Featherstone 2008,
Table 7.1; Pinocchio's ``aba`` with local quantities) and the composite
rigid-body algorithm in the world frame (Featherstone 2008, Table 6.2, as
Pinocchio writes it), unchanged; only the memory layout differs.  A stack is cut into *tiles* of ``T = TILE``
consecutive states; every workspace array of a tile is flat, with the lane
(state) axis last and contiguous, so that entry (j, r) of lane s sits at
``(j * width + r) * T + s``:

- ``qt (nq x T)``, ``vt, ut (nv x T)``: the tile's inputs, row r at ``r * T``;
- ``liR (njoints x 9 x T)``, ``lip (njoints x 3 x T)``: liMi (R row-major);
- ``vel, acc, f, c, pA (njoints x 6 x T)``: spatial vectors of each body;
- ``Ya (njoints x 36 x T)``: articulated inertias; ``Ic (njoints x 10 x T)``:
  CRBA's composite inertias in the world frame, compact (mass, m c, rotational
  inertia about the origin);
  ``U, Dinv (nv x 6 x T)`` (column c of U and row c of D^-1 at ``c * 6 * T``),
  ``u (nv x T)``; ``Mt (nv x nv x T)``: the tile's mass matrices.

Each helper runs one step of the per-joint algorithm (a placement, a spatial
transform, a cross product, an inertia product) in a loop ``for s in
range(TILE)`` innermost, reading its inputs into locals before any store: the
same arithmetic in every lane, stride-1 loads and stores, no branch, so LLVM
emits packed double instructions across states (benchmarks/lanes.py counts
them in the compiled assembly).  The flat layout and unsigned offsets matter:
with Numba's N-d arrays the distance between two rows is a run-time stride,
and a signed index carries Numba's negative-index wraparound; either way LLVM
cannot prove that the stores of one lane loop do not overlap the loads, and
it leaves the loop scalar.  With ``TILE`` a compile-time constant and
unsigned offsets every such distance is known.

Joint-type dispatch happens outside the lane loops: revolute joints (any
axis, bounded or not) and the free flyer have vectorized placements; the
other types take the one-state :func:`~geppetto.dynamics.joints.joint_transform`
lane by lane.  The motion subspace S of every type is constant, so the rest
is shared.  The sine and cosine of revolute angles come from
:func:`_sincos_lanes`, a branch-free Cody-Waite reduction and the minimax
polynomials of Cephes (Moshier 1989), within about 1 ulp of libm for
|q| < 1e5 and replaced by ``math.sin``/``math.cos`` beyond (libm's calls do
not vectorize).
"""
import math

import numpy as np

from . import mimic
from .config import inline_kernel, kernel
from .joints import coordinate_axis, joint_transform
from .model import FREE_FLYER, REVOLUTE, REVOLUTE_UNBOUNDED
from .validation import (UNIT_NORM_TOLERANCE, as_configurations, as_stack, check_invertible,
                         unit_blocks)

TILE = 64  # states per tile (measured: 64 beats 32 by 5-25%; lane loops of 8 AVX-512 registers)
T6 = 6 * TILE
T9 = 9 * TILE
T36 = 36 * TILE
# Lane loops run over s in range(_T) and index with unsigned offsets: Numba adds no
# negative-index wraparound to an unsigned index, a select that would hide the
# constant distances between rows from LLVM's vectorizer (measured: no packed
# instruction in the loops indexed with signed integers).
_T = np.uint64(TILE)
_T1, _T2, _T3, _T4 = (np.uint64(k * TILE) for k in (1, 2, 3, 4))
_T5, _T6, _T7, _T8 = (np.uint64(k * TILE) for k in (5, 6, 7, 8))
_T9 = np.uint64(9 * TILE)
T10 = 10 * TILE

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
def _sincos_lanes(qt, bq, cs):
    """cs[s], cs[T + s] = cos, sin of qt[bq + s] for every lane s."""
    b = np.uint64(bq)
    far = 0
    for s in range(_T):
        x = qt[b + s]
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
        cs[_T1 + s] = -sn if k >= 2.0 else sn
        cs[s] = -cn if (k == 1.0 or k == 2.0) else cn
        far += 1 if abs(x) > _SINCOS_RANGE else 0
    if far > 0:
        for s in range(_T):
            if abs(qt[b + s]) > _SINCOS_RANGE:
                cs[s] = math.cos(qt[b + s])
                cs[_T1 + s] = math.sin(qt[b + s])


@inline_kernel
def _axis_placement_lanes(jR, jp, i, k, cs, liR, lip):
    """liMi = jointPlacement * rotation about the coordinate axis k by (cos, sin) = cs."""
    a = (k + 1) % 3
    b = (k + 2) % 3
    for r in range(3):
        ja, jb, jk, pr = jR[i, r, a], jR[i, r, b], jR[i, r, k], jp[i, r]
        oa = np.uint64(i * T9 + (3 * r + a) * TILE)
        ob = np.uint64(i * T9 + (3 * r + b) * TILE)
        ok = np.uint64(i * T9 + (3 * r + k) * TILE)
        op = np.uint64((3 * i + r) * TILE)
        for s in range(_T):
            c, sn = cs[s], cs[_T1 + s]
            liR[oa + s] = c * ja + sn * jb
            liR[ob + s] = c * jb - sn * ja
            liR[ok + s] = jk
            lip[op + s] = pr


@inline_kernel
def _rodrigues_lanes(axes, i, cs, XR, Xp):
    """XJ = rotation about the unit axis axes[i] by (cos, sin) = cs, no translation."""
    x, y, z = axes[i, 0], axes[i, 1], axes[i, 2]
    for s in range(_T):
        c, sn = cs[s], cs[_T1 + s]
        t = 1.0 - c
        XR[s] = c + t * x * x
        XR[_T1 + s] = t * x * y - sn * z
        XR[_T2 + s] = t * x * z + sn * y
        XR[_T3 + s] = t * x * y + sn * z
        XR[_T4 + s] = c + t * y * y
        XR[_T5 + s] = t * y * z - sn * x
        XR[_T6 + s] = t * x * z - sn * y
        XR[_T7 + s] = t * y * z + sn * x
        XR[_T8 + s] = c + t * z * z
        Xp[s] = 0.0
        Xp[_T1 + s] = 0.0
        Xp[_T2 + s] = 0.0


@inline_kernel
def _free_flyer_lanes(qt, bq, XR, Xp):
    """XJ of a free flyer: translation rows bq.., then the unit quaternion (x, y, z, w)."""
    b = np.uint64(bq)
    for s in range(_T):
        x, y, z, w = qt[b + _T3 + s], qt[b + _T4 + s], qt[b + _T5 + s], qt[b + _T6 + s]
        XR[s] = 1.0 - 2.0 * (y * y + z * z)
        XR[_T1 + s] = 2.0 * (x * y - z * w)
        XR[_T2 + s] = 2.0 * (x * z + y * w)
        XR[_T3 + s] = 2.0 * (x * y + z * w)
        XR[_T4 + s] = 1.0 - 2.0 * (x * x + z * z)
        XR[_T5 + s] = 2.0 * (y * z - x * w)
        XR[_T6 + s] = 2.0 * (x * z - y * w)
        XR[_T7 + s] = 2.0 * (y * z + x * w)
        XR[_T8 + s] = 1.0 - 2.0 * (x * x + y * y)
        Xp[s] = qt[b + s]
        Xp[_T1 + s] = qt[b + _T1 + s]
        Xp[_T2 + s] = qt[b + _T2 + s]


@inline_kernel
def _compose_lanes(jR, jp, i, XR, Xp, liR, lip):
    """liMi = jointPlacement_i * XJ: (jR XR, jR Xp + jp) in every lane."""
    for r in range(3):
        a0, a1, a2, t = jR[i, r, 0], jR[i, r, 1], jR[i, r, 2], jp[i, r]
        o = np.uint64(i * T9 + 3 * r * TILE)
        op = np.uint64((3 * i + r) * TILE)
        for s in range(_T):
            lip[op + s] = t + a0 * Xp[s] + a1 * Xp[_T1 + s] + a2 * Xp[_T2 + s]
            liR[o + s] = a0 * XR[s] + a1 * XR[_T3 + s] + a2 * XR[_T6 + s]
            liR[o + _T1 + s] = a0 * XR[_T1 + s] + a1 * XR[_T4 + s] + a2 * XR[_T7 + s]
            liR[o + _T2 + s] = a0 * XR[_T2 + s] + a1 * XR[_T5 + s] + a2 * XR[_T8 + s]


@kernel
def _placement_lanes(m, i, qt, ws):
    """liMi of joint i in every lane of the tile (into ws's liR, lip)."""
    liR, lip, cs, XR, Xp, R1, p1, ql = ws[0], ws[1], ws[6], ws[7], ws[8], ws[9], ws[10], ws[11]
    t, bq = m.jtype[i], m.idx_q[i] * TILE
    if t == REVOLUTE or t == REVOLUTE_UNBOUNDED:
        if t == REVOLUTE:
            _sincos_lanes(qt, bq, cs)
        else:
            for s in range(TILE):
                cs[s] = qt[bq + s]
                cs[TILE + s] = qt[bq + TILE + s]
        k = coordinate_axis(m.axis, i)
        if k >= 0:
            _axis_placement_lanes(m.jR, m.jp, i, k, cs, liR, lip)
            return
        _rodrigues_lanes(m.axis, i, cs, XR, Xp)
    elif t == FREE_FLYER:
        _free_flyer_lanes(qt, bq, XR, Xp)
    else:
        for s in range(TILE):
            for r in range(m.nq):
                ql[r] = qt[r * TILE + s]
            joint_transform(t, m.axis, i, ql, m.idx_q[i], R1, p1)
            for r in range(3):
                Xp[r * TILE + s] = p1[0, r]
                for c in range(3):
                    XR[(3 * r + c) * TILE + s] = R1[0, r, c]
    _compose_lanes(m.jR, m.jp, i, XR, Xp, liR, lip)


@inline_kernel
def _inv_act_motion_lanes(liR, lip, i, x, bx, out, bo):
    """out[bo] = liMi^-1 x[bx] = [R^T (v - p x w); R^T w] in every lane."""
    R, P = np.uint64(i * T9), np.uint64(3 * i * TILE)
    X, O = np.uint64(bx), np.uint64(bo)
    for s in range(_T):
        r00, r01, r02 = liR[R + s], liR[R + _T1 + s], liR[R + _T2 + s]
        r10, r11, r12 = liR[R + _T3 + s], liR[R + _T4 + s], liR[R + _T5 + s]
        r20, r21, r22 = liR[R + _T6 + s], liR[R + _T7 + s], liR[R + _T8 + s]
        p0, p1, p2 = lip[P + s], lip[P + _T1 + s], lip[P + _T2 + s]
        v0, v1, v2 = x[X + s], x[X + _T1 + s], x[X + _T2 + s]
        w0, w1, w2 = x[X + _T3 + s], x[X + _T4 + s], x[X + _T5 + s]
        t0 = v0 - (p1 * w2 - p2 * w1)
        t1 = v1 - (p2 * w0 - p0 * w2)
        t2 = v2 - (p0 * w1 - p1 * w0)
        out[O + s] = r00 * t0 + r10 * t1 + r20 * t2
        out[O + _T1 + s] = r01 * t0 + r11 * t1 + r21 * t2
        out[O + _T2 + s] = r02 * t0 + r12 * t1 + r22 * t2
        out[O + _T3 + s] = r00 * w0 + r10 * w1 + r20 * w2
        out[O + _T4 + s] = r01 * w0 + r11 * w1 + r21 * w2
        out[O + _T5 + s] = r02 * w0 + r12 * w1 + r22 * w2


@inline_kernel
def _force_to_parent(liR, lip, R, P, s, g0, g1, g2, n0, n1, n2):
    """liMi f = [R f; R n + p x R f] in lane s for the force f = (g, n); liMi at the
    unsigned offsets R (rotation) and P (translation)."""
    r00, r01, r02 = liR[R + s], liR[R + _T1 + s], liR[R + _T2 + s]
    r10, r11, r12 = liR[R + _T3 + s], liR[R + _T4 + s], liR[R + _T5 + s]
    r20, r21, r22 = liR[R + _T6 + s], liR[R + _T7 + s], liR[R + _T8 + s]
    p0, p1, p2 = lip[P + s], lip[P + _T1 + s], lip[P + _T2 + s]
    f0 = r00 * g0 + r01 * g1 + r02 * g2
    f1 = r10 * g0 + r11 * g1 + r12 * g2
    f2 = r20 * g0 + r21 * g1 + r22 * g2
    return (f0, f1, f2,
            r00 * n0 + r01 * n1 + r02 * n2 + p1 * f2 - p2 * f1,
            r10 * n0 + r11 * n1 + r12 * n2 + p2 * f0 - p0 * f2,
            r20 * n0 + r21 * n1 + r22 * n2 + p0 * f1 - p1 * f0)


@inline_kernel
def _act_force_lanes(liR, lip, i, x, bx, out, bo, add):
    """out[bo] (+)= liMi x[bx] in every lane (a body force handed to the parent; x and
    out distinct arrays: LLVM does not vectorize the update of one row of an array
    from another row of it)."""
    R, P = np.uint64(i * T9), np.uint64(3 * i * TILE)
    X, O = np.uint64(bx), np.uint64(bo)
    for s in range(_T):
        f0, f1, f2, f3, f4, f5 = _force_to_parent(
            liR, lip, R, P, s, x[X + s], x[X + _T1 + s], x[X + _T2 + s],
            x[X + _T3 + s], x[X + _T4 + s], x[X + _T5 + s])
        if add:
            f0 += out[O + s]
            f1 += out[O + _T1 + s]
            f2 += out[O + _T2 + s]
            f3 += out[O + _T3 + s]
            f4 += out[O + _T4 + s]
            f5 += out[O + _T5 + s]
        out[O + s] = f0
        out[O + _T1 + s] = f1
        out[O + _T2 + s] = f2
        out[O + _T3 + s] = f3
        out[O + _T4 + s] = f4
        out[O + _T5 + s] = f5


@inline_kernel
def _joint_motion_lanes(S, iv, nvi, x, out, bo, add):
    """out[bo] (+)= S_i x[iv:iv+nvi] (the joint's motion for the rates x) in every lane.

    Every lane loop below does six rows at once: LLVM unrolls a 32-iteration loop
    of one product completely, and the unrolled copy is not vectorized."""
    O = np.uint64(bo)
    for c in range(iv, iv + nvi):
        s0, s1, s2, s3, s4, s5 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
        X = np.uint64(c * TILE)
        keep = add or c > iv
        for s in range(_T):
            xc = x[X + s]
            y0, y1, y2, y3, y4, y5 = s0 * xc, s1 * xc, s2 * xc, s3 * xc, s4 * xc, s5 * xc
            if keep:
                y0 += out[O + s]
                y1 += out[O + _T1 + s]
                y2 += out[O + _T2 + s]
                y3 += out[O + _T3 + s]
                y4 += out[O + _T4 + s]
                y5 += out[O + _T5 + s]
            out[O + s] = y0
            out[O + _T1 + s] = y1
            out[O + _T2 + s] = y2
            out[O + _T3 + s] = y3
            out[O + _T4 + s] = y4
            out[O + _T5 + s] = y5


@inline_kernel
def _motion_cross_lanes(x, bx, y, by, out, bo):
    """out[bo] = x[bx] x y[by] = [w1 x v2 + v1 x w2; w1 x w2] in every lane."""
    X, Y, O = np.uint64(bx), np.uint64(by), np.uint64(bo)
    for s in range(_T):
        a0, a1, a2 = x[X + s], x[X + _T1 + s], x[X + _T2 + s]
        b0, b1, b2 = x[X + _T3 + s], x[X + _T4 + s], x[X + _T5 + s]
        c0, c1, c2 = y[Y + s], y[Y + _T1 + s], y[Y + _T2 + s]
        d0, d1, d2 = y[Y + _T3 + s], y[Y + _T4 + s], y[Y + _T5 + s]
        out[O + s] = b1 * c2 - b2 * c1 + a1 * d2 - a2 * d1
        out[O + _T1 + s] = b2 * c0 - b0 * c2 + a2 * d0 - a0 * d2
        out[O + _T2 + s] = b0 * c1 - b1 * c0 + a0 * d1 - a1 * d0
        out[O + _T3 + s] = b1 * d2 - b2 * d1
        out[O + _T4 + s] = b2 * d0 - b0 * d2
        out[O + _T5 + s] = b0 * d1 - b1 * d0


@inline_kernel
def _add_lanes(x, bx, y, by, out, bo):
    """out[bo] = x[bx] + y[by] in every lane."""
    X, Y, O = np.uint64(bx), np.uint64(by), np.uint64(bo)
    for s in range(_T):
        out[O + s] = x[X + s] + y[Y + s]
        out[O + _T1 + s] = x[X + _T1 + s] + y[Y + _T1 + s]
        out[O + _T2 + s] = x[X + _T2 + s] + y[Y + _T2 + s]
        out[O + _T3 + s] = x[X + _T3 + s] + y[Y + _T3 + s]
        out[O + _T4 + s] = x[X + _T4 + s] + y[Y + _T4 + s]
        out[O + _T5 + s] = x[X + _T5 + s] + y[Y + _T5 + s]


@inline_kernel
def _inertia_times_lanes(Yi, i, x, bx, out, bo):
    """out[bo] = Y_i x[bx] in every lane; Y_i (6, 6) constant."""
    X = np.uint64(bx)
    for r in range(6):
        y0, y1, y2 = Yi[i, r, 0], Yi[i, r, 1], Yi[i, r, 2]
        y3, y4, y5 = Yi[i, r, 3], Yi[i, r, 4], Yi[i, r, 5]
        O = np.uint64(bo + r * TILE)
        for s in range(_T):
            out[O + s] = (y0 * x[X + s] + y1 * x[X + _T1 + s] + y2 * x[X + _T2 + s]
                          + y3 * x[X + _T3 + s] + y4 * x[X + _T4 + s] + y5 * x[X + _T5 + s])


@inline_kernel
def _force_cross_lanes(x, bx, h, bh, out, bo):
    """out[bo] += x[bx] x* h[bh] = [w x f; w x n + v x f] in every lane."""
    X, H, O = np.uint64(bx), np.uint64(bh), np.uint64(bo)
    for s in range(_T):
        m0, m1, m2 = x[X + s], x[X + _T1 + s], x[X + _T2 + s]
        m3, m4, m5 = x[X + _T3 + s], x[X + _T4 + s], x[X + _T5 + s]
        h0, h1, h2 = h[H + s], h[H + _T1 + s], h[H + _T2 + s]
        h3, h4, h5 = h[H + _T3 + s], h[H + _T4 + s], h[H + _T5 + s]
        out[O + s] += m4 * h2 - m5 * h1
        out[O + _T1 + s] += m5 * h0 - m3 * h2
        out[O + _T2 + s] += m3 * h1 - m4 * h0
        out[O + _T3 + s] += m4 * h5 - m5 * h4 + m1 * h2 - m2 * h1
        out[O + _T4 + s] += m5 * h3 - m3 * h5 + m2 * h0 - m0 * h2
        out[O + _T5 + s] += m3 * h4 - m4 * h3 + m0 * h1 - m1 * h0


@inline_kernel
def _fill_lanes(out, bo, rows, value):
    """rows x T entries of out from bo on = value."""
    for r in range(rows):
        O = np.uint64(bo + r * TILE)
        for s in range(_T):
            out[O + s] = value


@kernel
def _load_tile(x, b, n, lanes_major, out):
    """out (size x T) = states b .. b+n-1 of x ((size, K) when lanes_major, else
    (K, size)); the padding lanes repeat the last state, so every lane is valid.
    Each layout is read along its contiguous axis."""
    if lanes_major:
        for r in range(x.shape[0]):
            for s in range(TILE):
                out[r * TILE + s] = x[r, b + min(s, n - 1)]
    else:
        for s in range(TILE):
            k = b + min(s, n - 1)
            for r in range(x.shape[1]):
                out[r * TILE + s] = x[k, r]


@kernel
def _store_tile(t, b, n, lanes_major, x):
    """States b .. b+n-1 of x = the first n lanes of the tile t (size x T), written
    along x's contiguous axis."""
    if lanes_major:
        for r in range(x.shape[0]):
            for s in range(n):
                x[r, b + s] = t[r * TILE + s]
    else:
        for s in range(n):
            for r in range(x.shape[1]):
                x[b + s, r] = t[r * TILE + s]


@kernel
def _workspace(m):
    """The tile arrays shared by RNEA and ABA (see the module docstring) and the
    placement scratch: liR, lip, vel, acc, f, w (3 x 6 x T), cs, XR, Xp, R1, p1, ql."""
    nj = m.njoints
    return (np.zeros(nj * T9), np.zeros(nj * 3 * TILE), np.zeros(nj * T6),
            np.zeros(nj * T6), np.zeros(nj * T6), np.zeros(3 * T6),
            np.zeros(2 * TILE), np.zeros(T9), np.zeros(3 * TILE),
            np.zeros((1, 3, 3)), np.zeros((1, 3)), np.zeros(m.nq))


@kernel
def _rnea_forward_pass_lanes(m, qt, vt, at, ws):
    """v_i, a_i (gravity as a_0 = -g) and the net force f_i of every body, every lane."""
    liR, lip, vel, acc, f, w = ws[0], ws[1], ws[2], ws[3], ws[4], ws[5]
    parents, idx_v, nvs, S, Y = m.parents, m.idx_v, m.nvs, m.S, m.inertia
    _fill_lanes(vel, 0, 6, 0.0)
    for r in range(6):
        _fill_lanes(acc, r * TILE, 1, -m.gravity[r])
    for i in range(1, m.njoints):
        bi, bp, iv, nvi = i * T6, parents[i] * T6, idx_v[i], nvs[i]
        _placement_lanes(m, i, qt, ws)
        _joint_motion_lanes(S, iv, nvi, vt, w, 0, False)
        _inv_act_motion_lanes(liR, lip, i, vel, bp, vel, bi)
        _add_lanes(vel, bi, w, 0, vel, bi)
        # a_i = liMi^-1 a_par + v_i x (S dq_i) + S ddq_i
        _inv_act_motion_lanes(liR, lip, i, acc, bp, acc, bi)
        _motion_cross_lanes(vel, bi, w, 0, w, T6)
        _add_lanes(acc, bi, w, T6, acc, bi)
        _joint_motion_lanes(S, iv, nvi, at, acc, bi, True)
        # f_i = Y_i a_i + v_i x* Y_i v_i
        _inertia_times_lanes(Y, i, acc, bi, f, bi)
        _inertia_times_lanes(Y, i, vel, bi, w, T6)
        _force_cross_lanes(vel, bi, w, T6, f, bi)


@kernel
def _rnea_backward_pass_lanes(m, at, ws, taut):
    """tau_i = S_i^T f_i + armature ddq_i; f_parent += liMi f_i, every lane."""
    liR, lip, f, w = ws[0], ws[1], ws[4], ws[5]
    parents, idx_v, nvs, S, armature = m.parents, m.idx_v, m.nvs, m.S, m.armature
    for i in range(m.njoints - 1, 0, -1):
        F = np.uint64(i * T6)
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            arm, C = armature[c], np.uint64(c * TILE)
            s0, s1, s2, s3, s4, s5 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
            for s in range(_T):
                taut[C + s] = (arm * at[C + s] + s0 * f[F + s] + s1 * f[F + _T1 + s]
                               + s2 * f[F + _T2 + s] + s3 * f[F + _T3 + s]
                               + s4 * f[F + _T4 + s] + s5 * f[F + _T5 + s])
        if parents[i] > 0:
            _act_force_lanes(liR, lip, i, f, i * T6, w, 0, False)
            _add_lanes(f, parents[i] * T6, w, 0, f, parents[i] * T6)


@kernel
def _rnea_lanes(m, q, v, a, lanes_major, tau):
    """tau = RNEA(q, v, a) for K states, TILE at a time: (nq, K) inputs when
    lanes_major, else (K, nq); tau in the same layout."""
    ws = _workspace(m)
    K = q.shape[1] if lanes_major else q.shape[0]
    qt, vt, at = np.empty(m.nq * TILE), np.empty(m.nv * TILE), np.empty(m.nv * TILE)
    taut = np.empty(m.nv * TILE)
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
    scratch D, work, UD, Ia, B (36 x T), pa, e (6 x T), pf (2 x T)."""
    nj, nv = m.njoints, m.nv
    return (np.zeros(nj * T6), np.zeros(nj * T6), np.zeros(nj * T36),
            np.zeros(nv * T6), np.zeros(nv * T6), np.zeros(nv * TILE),
            np.zeros(T36), np.zeros(T36), np.zeros(T36), np.zeros(T36), np.zeros(T36),
            np.zeros(T6), np.zeros(T6), np.zeros(2 * TILE))


@kernel
def _aba_forward_pass_1_lanes(m, qt, vt, ws, wa):
    """liMi, v_i, c_i = v_i x (S dq_i), Ya_i = Y_i and pA_i = v_i x* Y_i v_i, every lane."""
    liR, lip, vel, w = ws[0], ws[1], ws[2], ws[5]
    c, pA, Ya = wa[0], wa[1], wa[2]
    parents, idx_v, nvs, S, Y = m.parents, m.idx_v, m.nvs, m.S, m.inertia
    _fill_lanes(vel, 0, 6, 0.0)
    for i in range(1, m.njoints):
        bi, bp, iv, nvi = i * T6, parents[i] * T6, idx_v[i], nvs[i]
        _placement_lanes(m, i, qt, ws)
        _joint_motion_lanes(S, iv, nvi, vt, w, 0, False)
        _inv_act_motion_lanes(liR, lip, i, vel, bp, vel, bi)
        _add_lanes(vel, bi, w, 0, vel, bi)
        _motion_cross_lanes(vel, bi, w, 0, c, bi)
        for rc in range(36):
            _fill_lanes(Ya, i * T36 + rc * TILE, 1, Y[i, rc // 6, rc % 6])
        _inertia_times_lanes(Y, i, vel, bi, w, T6)
        _fill_lanes(pA, bi, 6, 0.0)
        _force_cross_lanes(vel, bi, w, T6, pA, bi)


@kernel
def _invert_spd_lanes(D, n, Dinv, iv, work, pf):
    """Rows iv..iv+n of Dinv = D[:n, :n]^-1 in every lane (Gauss-Jordan; D is
    symmetric positive definite, so no pivoting).  D, work: entry (r, c) at (6 r + c) T."""
    for r in range(n):
        for col in range(n):
            W, I = np.uint64((6 * r + col) * TILE), np.uint64((iv + r) * T6 + col * TILE)
            for s in range(_T):
                work[W + s] = D[W + s]
            _fill_lanes(Dinv, (iv + r) * T6 + col * TILE, 1, 1.0 if r == col else 0.0)
    for p in range(n):
        Wp = np.uint64((6 * p + p) * TILE)
        for s in range(_T):
            pf[s] = 1.0 / work[Wp + s]
        for col in range(n):
            W, I = np.uint64((6 * p + col) * TILE), np.uint64((iv + p) * T6 + col * TILE)
            for s in range(_T):
                work[W + s] *= pf[s]
                Dinv[I + s] *= pf[s]
        for r in range(n):
            if r != p:
                Wr = np.uint64((6 * r + p) * TILE)
                for s in range(_T):
                    pf[_T1 + s] = work[Wr + s]
                for col in range(n):
                    Wrc, Wpc = np.uint64((6 * r + col) * TILE), np.uint64((6 * p + col) * TILE)
                    Irc = np.uint64((iv + r) * T6 + col * TILE)
                    Ipc = np.uint64((iv + p) * T6 + col * TILE)
                    for s in range(_T):
                        work[Wrc + s] -= pf[_T1 + s] * work[Wpc + s]
                        Dinv[Irc + s] -= pf[_T1 + s] * Dinv[Ipc + s]


@kernel
def _articulated_projection_lanes(m, i, taut, wa):
    """U = Ya_i S_i, D = S_i^T U + armature, Dinv = D^-1, u = tau_i - S_i^T pA_i."""
    pA, Ya, U, Dinv, u, D, work, pf = wa[1], wa[2], wa[3], wa[4], wa[5], wa[6], wa[7], wa[13]
    S, armature, iv, nvi = m.S, m.armature, m.idx_v[i], m.nvs[i]
    P = np.uint64(i * T6)
    for c in range(iv, iv + nvi):
        s0, s1, s2, s3, s4, s5 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
        C = np.uint64(c * TILE)
        for s in range(_T):
            u[C + s] = taut[C + s] - (s0 * pA[P + s] + s1 * pA[P + _T1 + s]
                                      + s2 * pA[P + _T2 + s] + s3 * pA[P + _T3 + s]
                                      + s4 * pA[P + _T4 + s] + s5 * pA[P + _T5 + s])
        for r in range(6):
            Uo, Yo = np.uint64(c * T6 + r * TILE), np.uint64(i * T36 + 6 * r * TILE)
            for s in range(_T):
                U[Uo + s] = (Ya[Yo + s] * s0 + Ya[Yo + _T1 + s] * s1 + Ya[Yo + _T2 + s] * s2
                             + Ya[Yo + _T3 + s] * s3 + Ya[Yo + _T4 + s] * s4
                             + Ya[Yo + _T5 + s] * s5)
    for a in range(nvi):
        s0, s1, s2 = S[0, iv + a], S[1, iv + a], S[2, iv + a]
        s3, s4, s5 = S[3, iv + a], S[4, iv + a], S[5, iv + a]
        for b in range(nvi):
            arm = armature[iv + a] if a == b else 0.0
            Do, Uo, I = np.uint64((6 * a + b) * TILE), np.uint64((iv + b) * T6), np.uint64(iv * T6)
            for s in range(_T):
                d = (arm + s0 * U[Uo + s] + s1 * U[Uo + _T1 + s] + s2 * U[Uo + _T2 + s]
                     + s3 * U[Uo + _T3 + s] + s4 * U[Uo + _T4 + s] + s5 * U[Uo + _T5 + s])
                D[Do + s] = d
                if nvi == 1:
                    Dinv[I + s] = 1.0 / d
    if nvi > 1:
        _invert_spd_lanes(D, nvi, Dinv, iv, work, pf)


@kernel
def _articulated_inertia_lanes(m, i, wa):
    """UD = U Dinv; Ia = Ya_i - UD U^T; pa = pA_i + Ia c_i + UD u_i (Featherstone
    2008, Table 7.1), every lane.  UD, Ia: entry (r, c) at (6 r + c) T."""
    c, pA, Ya, U, Dinv, u, UD, Ia, pa = (wa[0], wa[1], wa[2], wa[3], wa[4], wa[5], wa[8],
                                         wa[9], wa[11])
    iv, nvi = m.idx_v[i], m.nvs[i]
    for a in range(nvi):  # column a of UD, six rows per lane loop
        for b in range(nvi):
            Uo, Do = np.uint64((iv + b) * T6), np.uint64((iv + b) * T6 + a * TILE)
            O, first = np.uint64(a * TILE), b == 0
            for s in range(_T):
                d = Dinv[Do + s]
                for r in range(6):
                    x = U[Uo + np.uint64(r * TILE) + s] * d
                    if not first:
                        x += UD[O + np.uint64(6 * r * TILE) + s]
                    UD[O + np.uint64(6 * r * TILE) + s] = x
    for r in range(6):  # row r of Ia
        for a in range(nvi):
            Io, Yo = np.uint64(6 * r * TILE), np.uint64(i * T36 + 6 * r * TILE)
            UDo, Uo, first = np.uint64((6 * r + a) * TILE), np.uint64((iv + a) * T6), a == 0
            for s in range(_T):
                ud = UD[UDo + s]
                for col in range(6):
                    Ct = np.uint64(col * TILE)
                    x = Ya[Yo + Ct + s] if first else Ia[Io + Ct + s]
                    Ia[Io + Ct + s] = x - ud * U[Uo + Ct + s]
    _inertia_bias_lanes(Ia, c, i * T6, pA, pa)
    for a in range(nvi):
        UDo, uo = np.uint64(a * TILE), np.uint64((iv + a) * TILE)
        for s in range(_T):
            ua = u[uo + s]
            for r in range(6):
                pa[np.uint64(r * TILE) + s] += UD[UDo + np.uint64(6 * r * TILE) + s] * ua


@inline_kernel
def _inertia_bias_lanes(Ia, c, bc, pA, pa):
    """pa = pA[bc] + Ia c[bc] in every lane."""
    C = np.uint64(bc)
    for r in range(6):
        o, P, A = np.uint64(6 * r * TILE), np.uint64(r * TILE), np.uint64(bc + r * TILE)
        for s in range(_T):
            pa[P + s] = (pA[A + s] + Ia[o + s] * c[C + s] + Ia[o + _T1 + s] * c[C + _T1 + s]
                         + Ia[o + _T2 + s] * c[C + _T2 + s] + Ia[o + _T3 + s] * c[C + _T3 + s]
                         + Ia[o + _T4 + s] * c[C + _T4 + s] + Ia[o + _T5 + s] * c[C + _T5 + s])


@kernel
def _add_congruence_lanes(liR, lip, i, A, bA, B, out, bo):
    """out[bo] += liMi A[bA] liMi^T in every lane, for a 6x6 force-from-motion map A
    (an inertia) in the frame of joint i, carried to its parent's frame; B (36 x T)
    scratch.  Entry (r, c) of A, B, out at (6 r + c) T from their bases."""
    R, P = np.uint64(i * T9), np.uint64(3 * i * TILE)
    for col in range(6):  # B = X A, column by column
        a, o = np.uint64(bA + col * TILE), np.uint64(col * TILE)
        for s in range(_T):
            b0, b1, b2, b3, b4, b5 = _force_to_parent(
                liR, lip, R, P, s, A[a + s], A[a + _T6 + s], A[a + 2 * _T6 + s],
                A[a + 3 * _T6 + s], A[a + 4 * _T6 + s], A[a + 5 * _T6 + s])
            B[o + s] = b0
            B[o + _T6 + s] = b1
            B[o + 2 * _T6 + s] = b2
            B[o + 3 * _T6 + s] = b3
            B[o + 4 * _T6 + s] = b4
            B[o + 5 * _T6 + s] = b5
    for r in range(6):  # out += B X^T, row by row
        o, Yo = np.uint64(6 * r * TILE), np.uint64(bo + 6 * r * TILE)
        for s in range(_T):
            y0, y1, y2, y3, y4, y5 = _force_to_parent(
                liR, lip, R, P, s, B[o + s], B[o + _T1 + s], B[o + _T2 + s],
                B[o + _T3 + s], B[o + _T4 + s], B[o + _T5 + s])
            out[Yo + s] += y0
            out[Yo + _T1 + s] += y1
            out[Yo + _T2 + s] += y2
            out[Yo + _T3 + s] += y3
            out[Yo + _T4 + s] += y4
            out[Yo + _T5 + s] += y5


@kernel
def _hand_to_parent_lanes(i, par, liR, lip, wa):
    """Ya_par += liMi Ia liMi^T, pA_par += liMi pa."""
    pA, Ya, Ia, B, pa = wa[1], wa[2], wa[9], wa[10], wa[11]
    _add_congruence_lanes(liR, lip, i, Ia, 0, B, Ya, par * T36)
    _act_force_lanes(liR, lip, i, pa, 0, pA, par * T6, True)


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
    liR, lip, acc = ws[0], ws[1], ws[3]
    c, U, Dinv, u, e = wa[0], wa[3], wa[4], wa[5], wa[12]
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for r in range(6):
        _fill_lanes(acc, r * TILE, 1, -m.gravity[r])
    for i in range(1, m.njoints):
        bi, bp, iv, nvi = i * T6, parents[i] * T6, idx_v[i], nvs[i]
        _inv_act_motion_lanes(liR, lip, i, acc, bp, acc, bi)
        _add_lanes(acc, bi, c, bi, acc, bi)
        A, I = np.uint64(bi), np.uint64(iv * T6)
        for a in range(nvi):
            o, E, uo = np.uint64((iv + a) * T6), np.uint64(a * TILE), np.uint64((iv + a) * TILE)
            for s in range(_T):
                x = (u[uo + s] - U[o + s] * acc[A + s] - U[o + _T1 + s] * acc[A + _T1 + s]
                     - U[o + _T2 + s] * acc[A + _T2 + s] - U[o + _T3 + s] * acc[A + _T3 + s]
                     - U[o + _T4 + s] * acc[A + _T4 + s] - U[o + _T5 + s] * acc[A + _T5 + s])
                e[E + s] = x
                if nvi == 1:
                    ddqt[uo + s] = Dinv[I + s] * x
        if nvi > 1:
            for a in range(nvi):
                Q = np.uint64((iv + a) * TILE)
                _fill_lanes(ddqt, (iv + a) * TILE, 1, 0.0)
                for b in range(nvi):
                    Do, E = np.uint64((iv + a) * T6 + b * TILE), np.uint64(b * TILE)
                    for s in range(_T):
                        ddqt[Q + s] += Dinv[Do + s] * e[E + s]
        _joint_motion_lanes(m.S, iv, nvi, ddqt, acc, bi, True)


@kernel
def _aba_lanes(m, q, v, tau, lanes_major, ddq):
    """ddq = ABA(q, v, tau) for K states, TILE at a time; layouts as :func:`_rnea_lanes`."""
    ws = _workspace(m)
    wa = _aba_workspace(m)
    K = q.shape[1] if lanes_major else q.shape[0]
    qt, vt, taut = np.empty(m.nq * TILE), np.empty(m.nv * TILE), np.empty(m.nv * TILE)
    ddqt = np.empty(m.nv * TILE)
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        _load_tile(q, b, n, lanes_major, qt)
        _load_tile(v, b, n, lanes_major, vt)
        _load_tile(tau, b, n, lanes_major, taut)
        _aba_forward_pass_1_lanes(m, qt, vt, ws, wa)
        _aba_backward_pass_lanes(m, taut, ws, wa)
        _aba_forward_pass_2_lanes(m, ws, wa, ddqt)
        _store_tile(ddqt, b, n, lanes_major, ddq)


@kernel
def _compact_inertias(m):
    """(njoints, 10) compact inertias of the bodies: mass m, h = m c (c the centre of
    mass) and the upper triangle I00 I01 I02 I11 I12 I22 of the rotational inertia
    about the joint frame's origin, read from the spatial inertias
    [[m E, -[h]], [[h], I]]."""
    Y = m.inertia
    out = np.zeros((m.njoints, 10))
    for i in range(1, m.njoints):
        out[i, 0] = Y[i, 0, 0]
        out[i, 1], out[i, 2], out[i, 3] = Y[i, 5, 1], Y[i, 3, 2], Y[i, 4, 0]
        out[i, 4], out[i, 5], out[i, 6] = Y[i, 3, 3], Y[i, 3, 4], Y[i, 3, 5]
        out[i, 7], out[i, 8], out[i, 9] = Y[i, 4, 4], Y[i, 4, 5], Y[i, 5, 5]
    return out


@inline_kernel
def _compose_world_lanes(liR, lip, i, par, oR, op):
    """oMi = oM_par liMi in every lane (oR, op hold the identity at joint 0)."""
    A, P, B, Q = np.uint64(par * T9), np.uint64(3 * par * TILE), np.uint64(i * T9), np.uint64(3 * i * TILE)
    C, D = np.uint64(i * T9), np.uint64(3 * i * TILE)
    for s in range(_T):
        a00, a01, a02 = oR[A + s], oR[A + _T1 + s], oR[A + _T2 + s]
        a10, a11, a12 = oR[A + _T3 + s], oR[A + _T4 + s], oR[A + _T5 + s]
        a20, a21, a22 = oR[A + _T6 + s], oR[A + _T7 + s], oR[A + _T8 + s]
        b00, b01, b02 = liR[B + s], liR[B + _T1 + s], liR[B + _T2 + s]
        b10, b11, b12 = liR[B + _T3 + s], liR[B + _T4 + s], liR[B + _T5 + s]
        b20, b21, b22 = liR[B + _T6 + s], liR[B + _T7 + s], liR[B + _T8 + s]
        q0, q1, q2 = lip[Q + s], lip[Q + _T1 + s], lip[Q + _T2 + s]
        op[D + s] = op[P + s] + a00 * q0 + a01 * q1 + a02 * q2
        op[D + _T1 + s] = op[P + _T1 + s] + a10 * q0 + a11 * q1 + a12 * q2
        op[D + _T2 + s] = op[P + _T2 + s] + a20 * q0 + a21 * q1 + a22 * q2
        oR[C + s] = a00 * b00 + a01 * b10 + a02 * b20
        oR[C + _T1 + s] = a00 * b01 + a01 * b11 + a02 * b21
        oR[C + _T2 + s] = a00 * b02 + a01 * b12 + a02 * b22
        oR[C + _T3 + s] = a10 * b00 + a11 * b10 + a12 * b20
        oR[C + _T4 + s] = a10 * b01 + a11 * b11 + a12 * b21
        oR[C + _T5 + s] = a10 * b02 + a11 * b12 + a12 * b22
        oR[C + _T6 + s] = a20 * b00 + a21 * b10 + a22 * b20
        oR[C + _T7 + s] = a20 * b01 + a21 * b11 + a22 * b21
        oR[C + _T8 + s] = a20 * b02 + a21 * b12 + a22 * b22


@inline_kernel
def _world_motion_lanes(oR, op, i, S, c, J):
    """J column c = oMi S_c = [R v + p x R w; R w] for S_c = (v, w), every lane."""
    v0, v1, v2, w0, w1, w2 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
    R, P, O = np.uint64(i * T9), np.uint64(3 * i * TILE), np.uint64(c * T6)
    for s in range(_T):
        r00, r01, r02 = oR[R + s], oR[R + _T1 + s], oR[R + _T2 + s]
        r10, r11, r12 = oR[R + _T3 + s], oR[R + _T4 + s], oR[R + _T5 + s]
        r20, r21, r22 = oR[R + _T6 + s], oR[R + _T7 + s], oR[R + _T8 + s]
        p0, p1, p2 = op[P + s], op[P + _T1 + s], op[P + _T2 + s]
        x0 = r00 * w0 + r01 * w1 + r02 * w2
        x1 = r10 * w0 + r11 * w1 + r12 * w2
        x2 = r20 * w0 + r21 * w1 + r22 * w2
        J[O + s] = r00 * v0 + r01 * v1 + r02 * v2 + p1 * x2 - p2 * x1
        J[O + _T1 + s] = r10 * v0 + r11 * v1 + r12 * v2 + p2 * x0 - p0 * x2
        J[O + _T2 + s] = r20 * v0 + r21 * v1 + r22 * v2 + p0 * x1 - p1 * x0
        J[O + _T3 + s] = x0
        J[O + _T4 + s] = x1
        J[O + _T5 + s] = x2


@inline_kernel
def _inertia_to_world_lanes(oR, op, i, Yc, Ic):
    """Ic_i = oMi.act(Y_i) for the compact body inertia Yc[i] = (m, h = m c, I about the
    joint origin): with (R, p) = oMi and a = R h, h' = a + m p and
    I' = R I R^T - ([a][p] + [p][a] + m [p]^2) (the parallel-axis theorem moved from
    c to c' = R c + p), in every lane."""
    mass, h0, h1, h2 = Yc[i, 0], Yc[i, 1], Yc[i, 2], Yc[i, 3]
    i00, i01, i02, i11, i12, i22 = Yc[i, 4], Yc[i, 5], Yc[i, 6], Yc[i, 7], Yc[i, 8], Yc[i, 9]
    R, P, C = np.uint64(i * T9), np.uint64(3 * i * TILE), np.uint64(i * T10)
    for s in range(_T):
        r00, r01, r02 = oR[R + s], oR[R + _T1 + s], oR[R + _T2 + s]
        r10, r11, r12 = oR[R + _T3 + s], oR[R + _T4 + s], oR[R + _T5 + s]
        r20, r21, r22 = oR[R + _T6 + s], oR[R + _T7 + s], oR[R + _T8 + s]
        p0, p1, p2 = op[P + s], op[P + _T1 + s], op[P + _T2 + s]
        a0 = r00 * h0 + r01 * h1 + r02 * h2
        a1 = r10 * h0 + r11 * h1 + r12 * h2
        a2 = r20 * h0 + r21 * h1 + r22 * h2
        t00 = r00 * i00 + r01 * i01 + r02 * i02  # T = R I
        t01 = r00 * i01 + r01 * i11 + r02 * i12
        t02 = r00 * i02 + r01 * i12 + r02 * i22
        t10 = r10 * i00 + r11 * i01 + r12 * i02
        t11 = r10 * i01 + r11 * i11 + r12 * i12
        t12 = r10 * i02 + r11 * i12 + r12 * i22
        t20 = r20 * i00 + r21 * i01 + r22 * i02
        t21 = r20 * i01 + r21 * i11 + r22 * i12
        t22 = r20 * i02 + r21 * i12 + r22 * i22
        diagonal = 2.0 * (a0 * p0 + a1 * p1 + a2 * p2) + mass * (p0 * p0 + p1 * p1 + p2 * p2)
        mp0, mp1, mp2 = mass * p0, mass * p1, mass * p2
        Ic[C + s] = mass
        Ic[C + _T1 + s] = a0 + mp0
        Ic[C + _T2 + s] = a1 + mp1
        Ic[C + _T3 + s] = a2 + mp2
        Ic[C + _T4 + s] = t00 * r00 + t01 * r01 + t02 * r02 - (2.0 * a0 * p0 + mp0 * p0) + diagonal
        Ic[C + _T5 + s] = t00 * r10 + t01 * r11 + t02 * r12 - (a0 * p1 + p0 * a1 + mp0 * p1)
        Ic[C + _T6 + s] = t00 * r20 + t01 * r21 + t02 * r22 - (a0 * p2 + p0 * a2 + mp0 * p2)
        Ic[C + _T7 + s] = t10 * r10 + t11 * r11 + t12 * r12 - (2.0 * a1 * p1 + mp1 * p1) + diagonal
        Ic[C + _T8 + s] = t10 * r20 + t11 * r21 + t12 * r22 - (a1 * p2 + p1 * a2 + mp1 * p2)
        Ic[C + _T9 + s] = t20 * r20 + t21 * r21 + t22 * r22 - (2.0 * a2 * p2 + mp2 * p2) + diagonal


@inline_kernel
def _inertia_times_motion_lanes(Ic, i, J, c, F):
    """F = Ic_i J_c = [m v + w x h; h x v + I w] for the motion J_c = (v, w), every lane."""
    C, O = np.uint64(i * T10), np.uint64(c * T6)
    for s in range(_T):
        mass, h0, h1, h2 = Ic[C + s], Ic[C + _T1 + s], Ic[C + _T2 + s], Ic[C + _T3 + s]
        i00, i01, i02 = Ic[C + _T4 + s], Ic[C + _T5 + s], Ic[C + _T6 + s]
        i11, i12, i22 = Ic[C + _T7 + s], Ic[C + _T8 + s], Ic[C + _T9 + s]
        v0, v1, v2 = J[O + s], J[O + _T1 + s], J[O + _T2 + s]
        w0, w1, w2 = J[O + _T3 + s], J[O + _T4 + s], J[O + _T5 + s]
        F[s] = mass * v0 + w1 * h2 - w2 * h1
        F[_T1 + s] = mass * v1 + w2 * h0 - w0 * h2
        F[_T2 + s] = mass * v2 + w0 * h1 - w1 * h0
        F[_T3 + s] = h1 * v2 - h2 * v1 + i00 * w0 + i01 * w1 + i02 * w2
        F[_T4 + s] = h2 * v0 - h0 * v2 + i01 * w0 + i11 * w1 + i12 * w2
        F[_T5 + s] = h0 * v1 - h1 * v0 + i02 * w0 + i12 * w1 + i22 * w2


@inline_kernel
def _mass_entry_lanes(J, d, F, arm, Mt, bo, mirror):
    """Mt[bo] = Mt[mirror] = J_d^T F + arm in every lane."""
    O, X, Mi = np.uint64(d * T6), np.uint64(bo), np.uint64(mirror)
    for s in range(_T):
        y = (arm + J[O + s] * F[s] + J[O + _T1 + s] * F[_T1 + s] + J[O + _T2 + s] * F[_T2 + s]
             + J[O + _T3 + s] * F[_T3 + s] + J[O + _T4 + s] * F[_T4 + s]
             + J[O + _T5 + s] * F[_T5 + s])
        Mt[X + s] = y
        Mt[Mi + s] = y


@kernel
def _crba_forward_pass_lanes(m, qt, ws, oR, op, J, Ic, Yc):
    """liMi, oMi, the world motion subspaces J and the bodies' world inertias Ic."""
    for i in range(1, m.njoints):
        _placement_lanes(m, i, qt, ws)
        _compose_world_lanes(ws[0], ws[1], i, m.parents[i], oR, op)
        for c in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            _world_motion_lanes(oR, op, i, m.S, c, J)
        _inertia_to_world_lanes(oR, op, i, Yc, Ic)


@kernel
def _crba_backward_pass_lanes(m, J, Ic, F, Mt):
    """M[d, c] = J_d^T (Ic_i J_c) for every dof c of joint i and every dof d of i and of
    its ancestors; Ic_parent += Ic_i (Featherstone 2008, Table 6.2, in the world frame
    as Pinocchio: composite inertias add without a transform)."""
    nv = m.nv
    for i in range(m.njoints - 1, 0, -1):
        for c in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            _inertia_times_motion_lanes(Ic, i, J, c, F)
            j = i
            while j > 0:
                for d in range(m.idx_v[j], m.idx_v[j] + m.nvs[j]):
                    arm = m.armature[c] if d == c else 0.0
                    _mass_entry_lanes(J, d, F, arm, Mt, (d * nv + c) * TILE, (c * nv + d) * TILE)
                j = m.parents[j]
        par = m.parents[i]
        if par > 0:
            A, B = np.uint64(par * T10), np.uint64(i * T10)
            for s in range(_T):
                for r in range(10):
                    Ic[A + np.uint64(r * TILE) + s] += Ic[B + np.uint64(r * TILE) + s]


@kernel
def _crba_lanes(m, q, lanes_major, M):
    """M(q) for K states, TILE at a time: q (nq, K) and M (nv * nv, K) when lanes_major,
    else q (K, nq) and M (K, nv * nv).  oR, op (njoints x 9 x T, njoints x 3 x T): oMi,
    the identity at joint 0; J (nv x 6 x T); Ic (njoints x 10 x T) compact inertias."""
    ws = _workspace(m)
    oR, op = np.zeros(m.njoints * T9), np.zeros(m.njoints * 3 * TILE)
    _fill_lanes(oR, 0, 1, 1.0)
    _fill_lanes(oR, 4 * TILE, 1, 1.0)
    _fill_lanes(oR, 8 * TILE, 1, 1.0)
    J, Ic, F = np.zeros(m.nv * T6), np.zeros(m.njoints * T10), np.zeros(T6)
    K = q.shape[1] if lanes_major else q.shape[0]
    qt = np.empty(m.nq * TILE)
    Mt = np.zeros(m.nv * m.nv * TILE)  # the entries of unrelated dofs stay zero
    Yc = _compact_inertias(m)
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        _load_tile(q, b, n, lanes_major, qt)
        _crba_forward_pass_lanes(m, qt, ws, oR, op, J, Ic, Yc)
        _crba_backward_pass_lanes(m, J, Ic, F, Mt)
        _store_tile(Mt, b, n, lanes_major, M)


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


def crba_lanes(model, q):
    """The joint-space inertia matrix of K states laid out across SIMD lanes.

    q : (nq, K).  Returns M (nv, nv, K), full and symmetric (armature on the diagonal),
    equal to :func:`~geppetto.dynamics.crba` of each column.  No Data is filled.
    """
    q = _as_lanes_configurations(model, q)
    M = np.empty((model.nv, model.nv, q.shape[1]))
    _crba_lanes(model.arrays, q, True, M.reshape(model.nv * model.nv, q.shape[1]))
    return M


def crba_batch(model, q):
    """:func:`crba_lanes` on the usual stack: q (K, nq) -> M (K, nv, nv)."""
    _check_plain_model(model)
    qs, single = as_configurations(model, q)
    if single:
        raise ValueError("q: expected a stack (K, nq); for one state call crba")
    M = np.empty((qs.shape[0], model.nv, model.nv))
    _crba_lanes(model.arrays, qs, False, M.reshape(qs.shape[0], model.nv * model.nv))
    return M


def aba_batch(model, q, v, tau):
    """:func:`aba_lanes` on the usual stacks: q (K, nq), v and tau (K, nv) -> ddq (K, nv)."""
    qs, vs, taus = _as_stacks(model, q, v, tau, "tau")
    ddq = np.empty((qs.shape[0], model.nv))
    _aba_lanes(model.arrays, qs, vs, taus, False, ddq)
    check_invertible(model, ddq, ddq.shape[0], "aba_batch")
    return ddq
