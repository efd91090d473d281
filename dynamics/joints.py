"""Joint models: the placement ``liMi = jointPlacement * XJ(q)`` of every joint type.

The motion subspace S of each type is constant in the joint frame and is
stored in ``model.S``; only the joint transform XJ(q) depends on the type.
The dispatch is on the integer type code of :mod:`.model` (one compiled
kernel for every model, so the cache is shared).

Performance rule for every kernel of this package (measured on ur5 RNEA:
5.7 us -> 1.15 us per state): a per-state function reads the fields of the
``ModelArrays`` tuple once, into locals, and passes plain arrays and indices
to the inlined per-joint helpers; it never reads ``m.field`` inside a
per-joint loop nor passes array slices to helpers.
"""
import math

import numpy as np

from .config import inline_kernel, kernel
from .model import (REVOLUTE, REVOLUTE_UNBOUNDED, PRISMATIC, FREE_FLYER,
                    SPHERICAL, PLANAR, TRANSLATION)


@inline_kernel
def quaternion_to_rotation(x, y, z, w, R):
    """R[0] (3, 3) from a unit quaternion (x, y, z, w), Eigen's convention."""
    R[0, 0, 0] = 1.0 - 2.0 * (y * y + z * z)
    R[0, 0, 1] = 2.0 * (x * y - z * w)
    R[0, 0, 2] = 2.0 * (x * z + y * w)
    R[0, 1, 0] = 2.0 * (x * y + z * w)
    R[0, 1, 1] = 1.0 - 2.0 * (x * x + z * z)
    R[0, 1, 2] = 2.0 * (y * z - x * w)
    R[0, 2, 0] = 2.0 * (x * z - y * w)
    R[0, 2, 1] = 2.0 * (y * z + x * w)
    R[0, 2, 2] = 1.0 - 2.0 * (x * x + y * y)


# Cody-Waite split of pi/2 and the Cephes sin/cos coefficients on [-pi/4, pi/4] (Moshier
# 1989), the constants of :func:`.lane_tiles.sincos_lanes`; beyond SINCOS_RANGE libm.
PIO2_1 = 1.5707963267341256e+00
PIO2_2 = 6.0771005065061922e-11
PIO2_3 = 2.0222662487959506e-21
SIN_COEFFICIENTS = (1.58962301576546568060e-10, -2.50507477628578072866e-8,
                    2.75573136213857245213e-6, -1.98412698295895385996e-4,
                    8.33333333332211858878e-3, -1.66666666666666307295e-1)
COS_COEFFICIENTS = (-1.13585365213876817300e-11, 2.08757008419747316778e-9,
                    -2.75573141792967388112e-7, 2.48015872888517045348e-5,
                    -1.38888888888730564116e-3, 4.16666666666665929218e-2)
SINCOS_RANGE = 1e5


@inline_kernel
def sincos_values(x):
    """(cos x, sin x) without a branch or a call, so that a loop of it vectorizes: x
    reduced by the nearest multiple n of pi/2 (Cody-Waite, three parts of pi/2), the
    Cephes polynomials on [-pi/4, pi/4], the quadrant n mod 4 picking and negating
    them.  Within about 1 ulp of libm for |x| <= SINCOS_RANGE (not beyond: the
    callers use libm there); the arithmetic of :func:`.lane_tiles.sincos_lanes`, to
    the bit."""
    S, C = SIN_COEFFICIENTS, COS_COEFFICIENTS
    n = math.floor(x * 0.6366197723675814 + 0.5)  # nearest multiple of pi/2
    r = ((x - n * PIO2_1) - n * PIO2_2) - n * PIO2_3
    z = r * r
    ps = r + r * z * (((((S[0] * z + S[1]) * z + S[2]) * z + S[3]) * z + S[4]) * z + S[5])
    pc = 1.0 - 0.5 * z + z * z * (((((C[0] * z + C[1]) * z + C[2]) * z + C[3]) * z
                                   + C[4]) * z + C[5])
    k = n - 4.0 * math.floor(n * 0.25)  # quadrant 0..3
    swap = k == 1.0 or k == 3.0
    sn = pc if swap else ps
    cn = ps if swap else pc
    return -cn if (k == 1.0 or k == 2.0) else cn, -sn if k >= 2.0 else sn


@inline_kernel
def sincos_table(x, start, stop, cs):
    """cs[0, j], cs[1, j] = cos, sin of x[start + j] for the entries start .. stop of
    the flat array x: a loop that LLVM vectorizes (:func:`sincos_values`; 1.5-3.6 ns
    per entry against about 50 ns for libm's sin and cos), libm for the entries
    beyond SINCOS_RANGE (and NaN)."""
    b, n = np.uint64(start), np.uint64(stop - start)
    near = 0
    for j in range(n):
        v = x[b + j]
        c, s = sincos_values(v)
        cs[0, j] = c
        cs[1, j] = s
        near += 1 if abs(v) <= SINCOS_RANGE else 0
    if near < n:
        for j in range(n):
            v = x[b + j]
            if not abs(v) <= SINCOS_RANGE:
                cs[0, j] = math.cos(v)
                cs[1, j] = math.sin(v)


@inline_kernel
def axis_rotation(axes, i, c, s, R):
    """Rodrigues: R[0] = rotation about the unit axis axes[i] by the angle (c, s) = (cos, sin)."""
    t = 1.0 - c
    x, y, z = axes[i, 0], axes[i, 1], axes[i, 2]
    R[0, 0, 0] = c + t * x * x
    R[0, 0, 1] = t * x * y - s * z
    R[0, 0, 2] = t * x * z + s * y
    R[0, 1, 0] = t * x * y + s * z
    R[0, 1, 1] = c + t * y * y
    R[0, 1, 2] = t * y * z - s * x
    R[0, 2, 0] = t * x * z - s * y
    R[0, 2, 1] = t * y * z + s * x
    R[0, 2, 2] = c + t * z * z


@inline_kernel
def joint_transform(jtype, axes, i, q, o, XR, Xp):
    """XJ(q) of joint i (type ``jtype``, configuration q[o:]): XR[0] (3, 3), Xp[0] (3,)."""
    for r in range(3):
        Xp[0, r] = 0.0
        for c in range(3):
            XR[0, r, c] = 1.0 if r == c else 0.0
    if jtype == REVOLUTE:
        axis_rotation(axes, i, math.cos(q[o]), math.sin(q[o]), XR)
    elif jtype == REVOLUTE_UNBOUNDED:
        axis_rotation(axes, i, q[o], q[o + 1], XR)
    elif jtype == PRISMATIC:
        for r in range(3):
            Xp[0, r] = axes[i, r] * q[o]
    elif jtype == FREE_FLYER:
        for r in range(3):
            Xp[0, r] = q[o + r]
        quaternion_to_rotation(q[o + 3], q[o + 4], q[o + 5], q[o + 6], XR)
    elif jtype == SPHERICAL:
        quaternion_to_rotation(q[o], q[o + 1], q[o + 2], q[o + 3], XR)
    elif jtype == PLANAR:
        Xp[0, 0] = q[o]
        Xp[0, 1] = q[o + 1]
        XR[0, 0, 0] = q[o + 2]
        XR[0, 0, 1] = -q[o + 3]
        XR[0, 1, 0] = q[o + 3]
        XR[0, 1, 1] = q[o + 2]
    elif jtype == TRANSLATION:
        for r in range(3):
            Xp[0, r] = q[o + r]


@inline_kernel
def compose(R1, p1, i1, R2, p2, i2, Ro, po, io):
    """(Ro[io], po[io]) = (R1[i1], p1[i1]) * (R2[i2], p2[i2]) (inputs read before any store)."""
    a00, a01, a02 = R1[i1, 0, 0], R1[i1, 0, 1], R1[i1, 0, 2]
    a10, a11, a12 = R1[i1, 1, 0], R1[i1, 1, 1], R1[i1, 1, 2]
    a20, a21, a22 = R1[i1, 2, 0], R1[i1, 2, 1], R1[i1, 2, 2]
    b00, b01, b02 = R2[i2, 0, 0], R2[i2, 0, 1], R2[i2, 0, 2]
    b10, b11, b12 = R2[i2, 1, 0], R2[i2, 1, 1], R2[i2, 1, 2]
    b20, b21, b22 = R2[i2, 2, 0], R2[i2, 2, 1], R2[i2, 2, 2]
    q0, q1, q2 = p2[i2, 0], p2[i2, 1], p2[i2, 2]
    t0, t1, t2 = p1[i1, 0], p1[i1, 1], p1[i1, 2]
    po[io, 0] = t0 + a00 * q0 + a01 * q1 + a02 * q2
    po[io, 1] = t1 + a10 * q0 + a11 * q1 + a12 * q2
    po[io, 2] = t2 + a20 * q0 + a21 * q1 + a22 * q2
    Ro[io, 0, 0] = a00 * b00 + a01 * b10 + a02 * b20
    Ro[io, 0, 1] = a00 * b01 + a01 * b11 + a02 * b21
    Ro[io, 0, 2] = a00 * b02 + a01 * b12 + a02 * b22
    Ro[io, 1, 0] = a10 * b00 + a11 * b10 + a12 * b20
    Ro[io, 1, 1] = a10 * b01 + a11 * b11 + a12 * b21
    Ro[io, 1, 2] = a10 * b02 + a11 * b12 + a12 * b22
    Ro[io, 2, 0] = a20 * b00 + a21 * b10 + a22 * b20
    Ro[io, 2, 1] = a20 * b01 + a21 * b11 + a22 * b21
    Ro[io, 2, 2] = a20 * b02 + a21 * b12 + a22 * b22


@inline_kernel
def coordinate_axis(axes, i):
    """0, 1 or 2 when axes[i] is the unit x, y or z axis, else -1."""
    x, y, z = axes[i, 0], axes[i, 1], axes[i, 2]
    if y == 0.0 and z == 0.0 and x == 1.0:
        return 0
    if x == 0.0 and z == 0.0 and y == 1.0:
        return 1
    if x == 0.0 and y == 0.0 and z == 1.0:
        return 2
    return -1


@inline_kernel
def revolute_coordinate_axis(t, axes, i):
    """0, 1 or 2 when joint i, of type t, is revolute (bounded or not) about the unit x, y
    or z axis (:func:`coordinate_axis`), else -1: the joints that take the straight-line
    placements below."""
    return coordinate_axis(axes, i) if t == REVOLUTE or t == REVOLUTE_UNBOUNDED else -1


@inline_kernel
def revolute_cos_sin(t, q, o, cs, b, from_table):
    """(cos, sin) of the angle of a revolute joint of type t whose configuration starts at
    q[o]: an unbounded one stores them (q[o], q[o + 1]); a bounded one takes them from the
    table ``cs[:, b + o]`` (:func:`sincos_table`) when ``from_table`` (a constant in each
    caller), else from libm."""
    if t == REVOLUTE:
        if from_table:
            return cs[0, b + o], cs[1, b + o]
        return math.cos(q[o]), math.sin(q[o])
    return q[o], q[o + 1]


@inline_kernel
def rotated_pair(x, y, c, s):
    """(c x + s y, c y - s x): the entries of a row's columns a and b of R times the
    rotation by the angle (c, s) = (cos, sin) about the coordinate axis k (columns a,
    b the two others, in cyclic order).  Takes and returns values, no arrays: the
    straight-line code of :func:`revolute_placement` and
    :func:`revolute_child_placement` keeps no reference counting."""
    return c * x + s * y, c * y - s * x


@inline_kernel
def revolute_placement(jR, jp, i, k, c, s, liR, lip):
    """liMi = jointPlacement * (rotation about the coordinate axis k by the angle
    (c, s) = (cos, sin)): two columns of jR mixed, the third copied
    (:func:`rotated_about_axis`), no translation (Pinocchio's JointModelRevoluteX/Y/Z;
    12 products instead of compose's 36).

    Straight-line code, inputs read before any store: a loop here keeps Numba from
    pruning the reference counts of the inlined array arguments, an atomic increment
    and decrement per joint (measured with placements on ur5)."""
    p0, p1, p2 = jp[i, 0], jp[i, 1], jp[i, 2]
    rotated_about_axis(jR, i, k, c, s, liR, i)
    lip[i, 0], lip[i, 1], lip[i, 2] = p0, p1, p2


@inline_kernel
def rotated_about_axis(R, i, k, c, s, Ro, io):
    """Ro[io] = R[i] Rk, Rk the rotation about the coordinate axis k by the angle
    (c, s) = (cos, sin): the columns a, b of R[i] (the two other axes, in cyclic order)
    mixed by :func:`rotated_pair`, its column k copied.  Inputs read before any store
    (Ro[io] may be R[i])."""
    a = 1 if k == 0 else (2 if k == 1 else 0)
    b = 3 - k - a
    x0, y0, z0 = R[i, 0, a], R[i, 0, b], R[i, 0, k]
    x1, y1, z1 = R[i, 1, a], R[i, 1, b], R[i, 1, k]
    x2, y2, z2 = R[i, 2, a], R[i, 2, b], R[i, 2, k]
    (Ro[io, 0, a], Ro[io, 0, b]), Ro[io, 0, k] = rotated_pair(x0, y0, c, s), z0
    (Ro[io, 1, a], Ro[io, 1, b]), Ro[io, 1, k] = rotated_pair(x1, y1, c, s), z1
    (Ro[io, 2, a], Ro[io, 2, b]), Ro[io, 2, k] = rotated_pair(x2, y2, c, s), z2


@inline_kernel
def prismatic_placement(jR, jp, axes, i, x, liR, lip):
    """liMi = jointPlacement * (1, axes[i] x) for a prismatic joint i at displacement x:
    (jR, jp + jR axes[i] x), :func:`compose` after :func:`joint_transform` to the bit up
    to the sign of an exact zero (its products by the identity's ones and zeros are
    exact, 9 products instead of 36).  Straight-line code, inputs read before any
    store."""
    x0, x1, x2 = axes[i, 0] * x, axes[i, 1] * x, axes[i, 2] * x
    r00, r01, r02 = jR[i, 0, 0], jR[i, 0, 1], jR[i, 0, 2]
    r10, r11, r12 = jR[i, 1, 0], jR[i, 1, 1], jR[i, 1, 2]
    r20, r21, r22 = jR[i, 2, 0], jR[i, 2, 1], jR[i, 2, 2]
    t0, t1, t2 = jp[i, 0], jp[i, 1], jp[i, 2]
    lip[i, 0] = t0 + r00 * x0 + r01 * x1 + r02 * x2
    lip[i, 1] = t1 + r10 * x0 + r11 * x1 + r12 * x2
    lip[i, 2] = t2 + r20 * x0 + r21 * x1 + r22 * x2
    liR[i, 0, 0], liR[i, 0, 1], liR[i, 0, 2] = r00, r01, r02
    liR[i, 1, 0], liR[i, 1, 1], liR[i, 1, 2] = r10, r11, r12
    liR[i, 2, 0], liR[i, 2, 1], liR[i, 2, 2] = r20, r21, r22


@inline_kernel
def is_identity_rotation(R, i):
    """True when R[i] (3, 3) is exactly the identity (a jointPlacement without rotation:
    all joints but the feet on solo12, anymal, go1 and bolt, all of talos's)."""
    return (R[i, 0, 0] == 1.0 and R[i, 1, 1] == 1.0 and R[i, 2, 2] == 1.0
            and R[i, 0, 1] == 0.0 and R[i, 0, 2] == 0.0 and R[i, 1, 0] == 0.0
            and R[i, 1, 2] == 0.0 and R[i, 2, 0] == 0.0 and R[i, 2, 1] == 0.0)


@inline_kernel
def revolute_child_placement(jp, par, i, k, c, s, liR, lip, oR, op, fill_local):
    """liMi = (Rk, jp) and oMi = oM(par) * liMi for a revolute joint i about the
    coordinate axis k whose jointPlacement has no rotation (:func:`is_identity_rotation`),
    Rk the rotation by the angle (c, s) = (cos, sin): oMi's columns a, b are those of
    oM(par) mixed by (c, s), its column k copied (12 products instead of the 39 of
    :func:`revolute_placement` then :func:`compose`), its translation as compose's.

    Equal to revolute_placement then compose to the bit, up to the sign of an exact
    zero: there each entry is a dot product whose third term is a product by an
    entry 0 of Rk (x + 0 = x), and x c + y s = y s + x c.  liMi is written only when
    ``fill_local`` (a constant in each caller: CRBA's scratch liMi is never read).
    Inputs read before any store."""
    # compose's translation, in its order: t + R(par) jp
    p0, p1, p2 = jp[i, 0], jp[i, 1], jp[i, 2]
    u0 = op[par, 0] + oR[par, 0, 0] * p0 + oR[par, 0, 1] * p1 + oR[par, 0, 2] * p2
    u1 = op[par, 1] + oR[par, 1, 0] * p0 + oR[par, 1, 1] * p1 + oR[par, 1, 2] * p2
    u2 = op[par, 2] + oR[par, 2, 0] * p0 + oR[par, 2, 1] * p1 + oR[par, 2, 2] * p2
    # stored after the rotation, whose reads of oR[par] then reuse these loads
    rotated_about_axis(oR, par, k, c, s, oR, i)
    op[i, 0], op[i, 1], op[i, 2] = u0, u1, u2
    if fill_local:
        a = 1 if k == 0 else (2 if k == 1 else 0)
        b = 3 - k - a
        liR[i, a, a], liR[i, a, b], liR[i, a, k] = c, -s, 0.0
        liR[i, b, a], liR[i, b, b], liR[i, b, k] = s, c, 0.0
        liR[i, k, a], liR[i, k, b], liR[i, k, k] = 0.0, 0.0, 1.0
        lip[i, 0], lip[i, 1], lip[i, 2] = p0, p1, p2


@kernel
def placements(m, q, XR, Xp, liR, lip, oR, op):
    """liMi = jointPlacement * XJ(q) and oMi = oM(parent) * liMi of every joint, one
    state: :func:`placements_inline` as a compiled call."""
    placements_inline(m, q, XR, Xp, liR, lip, oR, op)


@inline_kernel
def placements_inline(m, q, XR, Xp, liR, lip, oR, op):
    """liMi = jointPlacement * XJ(q) and oMi = oM(parent) * liMi of every joint, one state,
    inlined into a loop over states (:func:`.aba._compute_minverse`; as a compiled call,
    which passes the model tuple, it cost 13-18% of CRBA on ur5, panda and solo12).

    A revolute joint about a coordinate axis (most joints of real robots) takes
    :func:`revolute_placement`, straight-line code; every other joint the compiled
    call :func:`general_placement`.  XR (1, 3, 3) and Xp (1, 3) are scratch.
    """
    placements_of(m, q, XR, Xp, liR, lip, oR, op, Xp, 0, False)


@inline_kernel
def placements_from_table(m, q, cs, b, XR, Xp, liR, lip, oR, op):
    """:func:`placements_inline` with each revolute joint's (cos, sin) read from
    ``cs[:, b + idx_q]``, a table that :func:`sincos_table` filled for a block of states
    (within about 1 ulp of libm's; the ABA family's stack kernels, as CRBA's)."""
    placements_of(m, q, XR, Xp, liR, lip, oR, op, cs, b, True)


@inline_kernel
def placements_of(m, q, XR, Xp, liR, lip, oR, op, cs, b, from_table):
    """The loop of :func:`placements_inline` and :func:`placements_from_table`: a
    revolute joint about a coordinate axis takes its (cos, sin) from ``cs[:, b + o]``
    when ``from_table`` (a constant in each caller), else from libm."""
    parents, jtype, axes, idx_q, jR, jp = m.parents, m.jtype, m.axis, m.idx_q, m.jR, m.jp
    for i in range(1, m.njoints):
        t = jtype[i]
        k = revolute_coordinate_axis(t, axes, i)
        if k >= 0:
            c, s = revolute_cos_sin(t, q, idx_q[i], cs, b, from_table)
            revolute_placement(jR, jp, i, k, c, s, liR, lip)
        else:
            general_placement(t, axes, jR, jp, i, q, idx_q[i], XR, Xp, liR, lip)
        compose(oR, op, parents[i], liR, lip, i, oR, op, i)


@kernel
def general_placement(t, axes, jR, jp, i, q, o, XR, Xp, liR, lip):
    """liMi = jointPlacement * XJ(q) of joint i of any type t (configuration q[o:]), a
    compiled call: inlined, the branches of :func:`joint_transform` keep Numba from
    pruning the reference counts of the arrays it takes (an atomic increment and
    decrement per array, joint and state, paid by the revolute joints as well)."""
    joint_transform(t, axes, i, q, o, XR, Xp)
    compose(jR, jp, i, XR, Xp, 0, liR, lip, i)
