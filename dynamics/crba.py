"""Composite rigid-body algorithm: the joint-space inertia matrix M(q).

Featherstone (2008), Table 6.2, written in the world frame as Pinocchio does:
with every quantity in the world, the composite inertia of a subtree is a plain
sum (no spatial transform per joint) and M[r, c] = J_r^T (oYcrb_i J_c) for a
dof c of joint i and every dof r that supports it.  Returns the full symmetric
M, armature added on the diagonal.
"""

import numpy as np
from numba.core import types

from . import mimic
from .borrowed import borrowed, borrowed_model, keep_alive
from .config import inline_kernel, kernel, model_kernel
from .joints import (compose, is_identity_rotation, joint_transform, placements,
                     prismatic_placement, quaternion_to_rotation, revolute_child_placement,
                     revolute_coordinate_axis, revolute_cos_sin, revolute_placement,
                     sincos_table)
from .kinematics import jacobian_column
from .model_ref import model_arrays
from .native import PassTable, call_pass
from .linalg import copy_matrix
from .model import FREE_FLYER, PRISMATIC, REVOLUTE, REVOLUTE_UNBOUNDED
from .streaming import STREAM_BYTES, store_fence, stream_copy
from .spatial import inertia_to_world, inertia_to_world_values, rigid_inertia_values_times
from .one_state import _crba_one, one_state
from .validation import as_configurations, call_kernel, check_data, result


# States whose joint angles' cosines and sines CRBA computes in one vectorized loop
SINCOS_BLOCK = 8


@kernel
def world_inertias(m, oR, op, oY):
    """oY[i] = oMi.act(Y_i) for every body of one state."""
    Y = m.inertia
    for i in range(1, m.njoints):
        inertia_to_world(oR, op, Y, oY, i)


@inline_kernel
def world_frame_quantities(m, q, XR, Xp, liR, lip, oR, op, J, oY):
    """What every world-frame algorithm starts from, for one state: liMi and oMi,
    the world Jacobian J (6, nv) and the body inertias oY in the world.

    Inlined into its callers, as the CRBA's passes are: called as separate
    functions with the state's array views, the two cost a quarter of CRBA (ur5,
    1000 states: 1.17 -> 0.90 us per state once inlined, load 8).  The Jacobian
    columns and the world inertias are one inlined loop for the same reason (two
    compiled calls taking the model tuple cost 15% of CRBA on ur5)."""
    placements(m, q, XR, Xp, liR, lip, oR, op)
    world_jacobian_and_inertias(m, oR, op, J, oY)


@inline_kernel
def world_jacobian_and_inertias(m, oR, op, J, oY):
    """From oMi (oR, op): the world Jacobian J (6, nv) and the body inertias oY in the
    world, one inlined loop."""
    idx_v, nvs, S, Y = m.idx_v, m.nvs, m.S, m.inertia
    for i in range(1, m.njoints):
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            jacobian_column(oR, op, i, S, c, J)
        inertia_to_world(oR, op, Y, oY, i)


@inline_kernel
def _crba_forward_pass(m, q, XR, Xp, liR, lip, oR, op, J, Yc):
    """:func:`_crba_forward` filling liMi (liR, lip), as constraint and impulse dynamics
    document."""
    _crba_forward(m, q, XR, Xp, liR, lip, oR, op, J, Yc, True, J, 0, False, None)


@inline_kernel
def _crba_forward(m, q, XR, Xp, liR, lip, oR, op, J, Yc, fill_local, cs, b, from_table,
                  passes):
    """One joint at a time: liMi and oMi (oR, op), the world Jacobian columns J (6, nv),
    J_c = oMi.act(S_c), and the ten parameters of the body's inertia in the world, Yc
    (njoints, 10) = (m, h, upper triangle of I) of oMi.act(Y_i), on locals (the 6x6
    form is never written).  XR (1, 3, 3) and Xp (1, 3) are scratch.

    A revolute joint about a coordinate axis k (most joints of real robots) is
    straight-line code inlined here: :func:`.joints.revolute_placement`, and its
    column [p x r_k; r_k] (r_k the column k of oR[i], 6 products instead of 33).
    When its jointPlacement has no rotation (all of talos's joints, all but the
    feet of solo12, anymal, go1 and bolt), oMi is its parent's with two columns
    mixed by (cos, sin): :func:`.joints.revolute_child_placement`, 12 products
    instead of 39, the same bits; its liMi is written only when ``fill_local`` (CRBA
    itself never reads it).  Its (cos, sin) come from ``cs[:, b + idx_q]`` when
    ``from_table`` (:func:`_crba`: one vectorized :func:`.joints.sincos_table` per
    block of states, within about 1 ulp of libm), else from libm (the constraint and
    impulse dynamics' calls through :func:`_crba_forward_pass`, as before).
    A prismatic joint (panda's fingers) is inlined too: :func:`.joints.prismatic_placement`
    (9 products instead of 36) and its column [R a; 0] (panda: 0.80x the time of
    the general pass, M bitwise equal).
    Every other joint goes through the compiled call :func:`_general_joint_pass`:
    inlined, its branches kept Numba from pruning the reference counts of the
    arrays it takes (seven atomic increments and decrements per joint and state;
    ur5, 1000 states in a jitted loop: 0.76 -> 0.50 us per state, load 6-10).
    It and the free flyer's :func:`_root_free_flyer_pass` are linked into the caller
    when ``passes`` is None, else called by address from the :data:`CRBA_PASSES`
    table ``passes`` (:func:`.native.call_pass`: compiled only for the models that
    have such joints)."""
    parents, jtype, axes, idx_q, jR, jp = m.parents, m.jtype, m.axis, m.idx_q, m.jR, m.jp
    idx_v, nvs, S, Y = m.idx_v, m.nvs, m.S, m.inertia
    for i in range(1, m.njoints):
        t = jtype[i]
        k = revolute_coordinate_axis(t, axes, i)
        if k >= 0:
            c, s = revolute_cos_sin(t, q, idx_q[i], cs, b, from_table)
            if is_identity_rotation(jR, i):
                revolute_child_placement(jp, parents[i], i, k, c, s, liR, lip, oR, op,
                                         fill_local)
            else:
                revolute_placement(jR, jp, i, k, c, s, liR, lip)
                compose(oR, op, parents[i], liR, lip, i, oR, op, i)
            axis_jacobian_column(oR, op, i, k, idx_v[i], J)
        elif t == FREE_FLYER and parents[i] == 0:
            call_pass(_root_free_flyer_pass, passes, ROOT_FREE_FLYER,
                      (jR, jp, i, q, idx_q[i], idx_v[i], XR, Xp, liR, lip, oR, op, J))
        elif t == PRISMATIC:
            prismatic_placement(jR, jp, axes, i, q[idx_q[i]], liR, lip)
            compose(oR, op, parents[i], liR, lip, i, oR, op, i)
            prismatic_jacobian_column(oR, axes, i, idx_v[i], J)
        else:
            call_pass(_general_joint_pass, passes, GENERAL_JOINT,
                      (t, axes, jR, jp, S, i, parents[i], idx_v[i], nvs[i], q, idx_q[i], XR,
                       Xp, liR, lip, oR, op, J))
        (Yc[i, 0], Yc[i, 1], Yc[i, 2], Yc[i, 3], Yc[i, 4], Yc[i, 5], Yc[i, 6], Yc[i, 7],
         Yc[i, 8], Yc[i, 9]) = inertia_to_world_values(oR, op, Y, i)


@kernel
def _general_joint_pass(t, axes, jR, jp, S, i, par, iv, nvi, q, o, XR, Xp, liR, lip, oR, op, J):
    """liMi, oMi and the Jacobian columns of joint i of any type t (parent par, dofs
    iv .. iv + nvi, configuration q[o:])."""
    joint_transform(t, axes, i, q, o, XR, Xp)
    compose(jR, jp, i, XR, Xp, 0, liR, lip, i)
    compose(oR, op, par, liR, lip, i, oR, op, i)
    for c in range(iv, iv + nvi):
        jacobian_column(oR, op, i, S, c, J)


@kernel
def _root_free_flyer_pass(jR, jp, i, q, o, iv, XR, Xp, liR, lip, oR, op, J):
    """liMi = jointPlacement * (q[o:o + 3], R(q[o + 3:o + 7])), oMi = liMi and the six
    Jacobian columns of a free flyer whose parent is the universe: S = 1, so the
    columns are those of oMi's action, [R, [p]x R; 0, R] (:func:`_general_joint_pass`
    without its products by the universe's identity and by the zeros of S, 198 of
    them)."""
    quaternion_to_rotation(q[o + 3], q[o + 4], q[o + 5], q[o + 6], XR)
    Xp[0, 0], Xp[0, 1], Xp[0, 2] = q[o], q[o + 1], q[o + 2]
    compose(jR, jp, i, XR, Xp, 0, liR, lip, i)
    for r in range(3):
        op[i, r] = lip[i, r]
        for c in range(3):
            oR[i, r, c] = liR[i, r, c]
    for k in range(3):
        c = iv + k
        J[0, c], J[1, c], J[2, c] = oR[i, 0, k], oR[i, 1, k], oR[i, 2, k]
        J[3, c], J[4, c], J[5, c] = 0.0, 0.0, 0.0
        axis_jacobian_column(oR, op, i, k, iv + 3 + k, J)


@inline_kernel
def axis_jacobian_column(oR, op, i, k, c, J):
    """J[:, c] = oMi.act(S_c) for S_c = [0; e_k] (a revolute joint about the coordinate
    axis k): [p x r_k; r_k], r_k the column k of oR[i] (what :func:`jacobian_column`
    computes, without its products by the zeros of S_c)."""
    w0, w1, w2 = oR[i, 0, k], oR[i, 1, k], oR[i, 2, k]
    p0, p1, p2 = op[i, 0], op[i, 1], op[i, 2]
    J[0, c] = p1 * w2 - p2 * w1
    J[1, c] = p2 * w0 - p0 * w2
    J[2, c] = p0 * w1 - p1 * w0
    J[3, c] = w0
    J[4, c] = w1
    J[5, c] = w2


@inline_kernel
def prismatic_jacobian_column(oR, axes, i, c, J):
    """J[:, c] = oMi.act(S_c) for S_c = [a; 0], a = axes[i] (a prismatic joint): [R a; 0],
    R = oR[i] (what :func:`jacobian_column` computes, without its products by the zeros
    of S_c: the same values up to the sign of an exact zero)."""
    a0, a1, a2 = axes[i, 0], axes[i, 1], axes[i, 2]
    J[0, c] = oR[i, 0, 0] * a0 + oR[i, 0, 1] * a1 + oR[i, 0, 2] * a2
    J[1, c] = oR[i, 1, 0] * a0 + oR[i, 1, 1] * a1 + oR[i, 1, 2] * a2
    J[2, c] = oR[i, 2, 0] * a0 + oR[i, 2, 1] * a1 + oR[i, 2, 2] * a2
    J[3, c] = 0.0
    J[4, c] = 0.0
    J[5, c] = 0.0


@inline_kernel
def _crba_composite_pass(m, oR, op, J, Yc, M):
    """:func:`_crba_composite` with its free-flyer pass linked (constraint and impulse
    dynamics)."""
    _crba_composite(m, oR, op, J, Yc, M, None)


@inline_kernel
def _crba_composite(m, oR, op, J, Yc, M, passes):
    """M from the world Jacobian J (6, nv) and the ten parameters Yc (njoints, 10) of the
    world body inertias, summed in place into those of the composite inertias oYcrb_i
    (the 6x6 matrices are not formed; Featherstone 2008, Table 6.2, in the world frame).

    For a dof c of joint i: F = oYcrb_i J_c = [m v - h x w; I w + h x v] (24 products
    instead of 36), then M[r, c] = M[c, r] = J_r^T F for c and each dof r up the
    dof-parent chain (``model.dof_parent``: the lower dofs of joint i, then the dofs
    supporting it), armature added on the diagonal.

    A free flyer as joint 1 (the root joint of a legged robot or a humanoid) takes
    :func:`_free_flyer_composite_pass`, a compiled call once per state (by address from
    the table ``passes`` unless it is None, as :func:`_crba_forward`); every other
    tree (a free flyer elsewhere included) the loop inlined here, unchanged."""
    if m.njoints > 1 and m.jtype[1] == FREE_FLYER:
        call_pass(_free_flyer_composite_pass, passes, FREE_FLYER_COMPOSITE,
                  (m.njoints, m.parents, m.idx_v, m.nvs, m.dof_parent, m.armature, oR, op, J,
                   Yc, M))
    else:
        _composite_joints(m.njoints, m.parents, m.idx_v, m.nvs, m.dof_parent, m.armature,
                          oR, op, J, Yc, M, -1)


@kernel
def _free_flyer_composite_pass(njoints, parents, idx_v, nvs, dof_parent, armature, oR, op,
                               J, Yc, M):
    """:func:`_crba_composite_pass` with a free flyer as joint 1 at oMi = (oR[1], op[1]):
    its dofs are 0 .. 5 and every other dof's chain ends in them.  Its six rows of a
    column c are the world force F in its frame, oMi^-1 F = [R^T f; R^T (n - p x f)]
    (24 products instead of the six dot products' 36, :func:`_root_free_flyer_rows`),
    and its 6x6 block is the composite inertia of the whole tree in its frame,
    J^T oYcrb J = oMi^-1 oYcrb (:func:`_root_free_flyer_block`: about 100 products
    instead of the 270 of six columns F and 21 dot products).

    A compiled call of its own: with the free flyer's branches in the loop that every
    robot runs, CRBA on panda was 12% slower (ur5 4%; 1000 states, load 14)."""
    _composite_joints(njoints, parents, idx_v, nvs, dof_parent, armature, oR, op, J, Yc, M,
                      5)
    _root_free_flyer_block(Yc[1, 0], Yc[1, 1], Yc[1, 2], Yc[1, 3], Yc[1, 4], Yc[1, 5],
                           Yc[1, 6], Yc[1, 7], Yc[1, 8], Yc[1, 9], oR, op, armature, M)


@inline_kernel
def _composite_joints(njoints, parents, idx_v, nvs, dof_parent, armature, oR, op, J, Yc, M,
                      last):
    """The loop of :func:`_crba_composite_pass` over the joints down to joint 1 (last =
    -1) or, with a free flyer as joint 1, down to joint 2 (last = 5, its last dof: the
    chains stop there and its rows are :func:`_root_free_flyer_rows`).  Inlined with
    ``last`` a constant in each of its two callers."""
    for i in range(njoints - 1, 0 if last < 0 else 1, -1):
        mass, h0, h1, h2, a00 = Yc[i, 0], Yc[i, 1], Yc[i, 2], Yc[i, 3], Yc[i, 4]
        a01, a02, a11, a12, a22 = Yc[i, 5], Yc[i, 6], Yc[i, 7], Yc[i, 8], Yc[i, 9]
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            F0, F1, F2, F3, F4, F5 = rigid_inertia_values_times(
                mass, h0, h1, h2, a00, a01, a02, a11, a12, a22,
                J[0, c], J[1, c], J[2, c], J[3, c], J[4, c], J[5, c])
            M[c, c] = (J[0, c] * F0 + J[1, c] * F1 + J[2, c] * F2
                       + J[3, c] * F3 + J[4, c] * F4 + J[5, c] * F5) + armature[c]
            r = dof_parent[c]
            while r > last:
                s = (J[0, r] * F0 + J[1, r] * F1 + J[2, r] * F2
                     + J[3, r] * F3 + J[4, r] * F4 + J[5, r] * F5)
                M[r, c] = s
                M[c, r] = s
                r = dof_parent[r]
            if last >= 0 and r >= 0:  # r == last: c is below the free flyer
                _root_free_flyer_rows(oR, op, c, F0, F1, F2, F3, F4, F5, M)
        par = parents[i]
        if par > 0:
            for t in range(10):
                Yc[par, t] += Yc[i, t]


@inline_kernel
def _root_free_flyer_rows(oR, op, c, f0, f1, f2, n0, n1, n2, M):
    """M[k, c] = M[c, k] = J_k^T F for the six dofs 0 .. 5 of the free flyer joint 1,
    J = [R, [p]x R; 0, R] with oMi = (R, p): R^T f and R^T (n - p x f), F = [f; n]."""
    i = 1
    p0, p1, p2 = op[i, 0], op[i, 1], op[i, 2]
    t0 = n0 - (p1 * f2 - p2 * f1)
    t1 = n1 - (p2 * f0 - p0 * f2)
    t2 = n2 - (p0 * f1 - p1 * f0)
    for k in range(3):
        r0, r1, r2 = oR[i, 0, k], oR[i, 1, k], oR[i, 2, k]
        s = r0 * f0 + r1 * f1 + r2 * f2
        M[k, c] = s
        M[c, k] = s
        s = r0 * t0 + r1 * t1 + r2 * t2
        M[3 + k, c] = s
        M[c, 3 + k] = s


@inline_kernel
def _root_free_flyer_block(mass, H0, H1, H2, a00, a01, a02, a11, a12, a22, oR, op,
                           armature, M):
    """M[:6, :6] = oMi^-1 oYcrb_i + armature, the composite inertia of parameters
    (mass, H, A) about the world origin moved to the frame of the free flyer joint 1,
    oMi = (R, p): the first moment about p, g = H - m p, in its axes h = R^T g; the
    rotational inertia shifted from the origin to p (the inverse of the shift of
    :func:`.spatial.inertia_to_world_values`), then R^T A_p R; the block
    [m 1, -[h]x; [h]x, R^T A_p R]."""
    i = 1
    r00, r01, r02 = oR[i, 0, 0], oR[i, 0, 1], oR[i, 0, 2]
    r10, r11, r12 = oR[i, 1, 0], oR[i, 1, 1], oR[i, 1, 2]
    r20, r21, r22 = oR[i, 2, 0], oR[i, 2, 1], oR[i, 2, 2]
    p0, p1, p2 = op[i, 0], op[i, 1], op[i, 2]
    g0, g1, g2 = H0 - mass * p0, H1 - mass * p1, H2 - mass * p2
    # A_p = A - m (|p|^2 1 - p p^T) - 2 (p.g) 1 + p g^T + g p^T
    d = mass * (p0 * p0 + p1 * p1 + p2 * p2) + 2.0 * (p0 * g0 + p1 * g1 + p2 * g2)
    b00 = a00 - d + mass * p0 * p0 + 2.0 * p0 * g0
    b01 = a01 + mass * p0 * p1 + p0 * g1 + g0 * p1
    b02 = a02 + mass * p0 * p2 + p0 * g2 + g0 * p2
    b11 = a11 - d + mass * p1 * p1 + 2.0 * p1 * g1
    b12 = a12 + mass * p1 * p2 + p1 * g2 + g1 * p2
    b22 = a22 - d + mass * p2 * p2 + 2.0 * p2 * g2
    # T = A_p R, then R^T T (symmetric: the upper triangle)
    t00 = b00 * r00 + b01 * r10 + b02 * r20
    t01 = b00 * r01 + b01 * r11 + b02 * r21
    t02 = b00 * r02 + b01 * r12 + b02 * r22
    t10 = b01 * r00 + b11 * r10 + b12 * r20
    t11 = b01 * r01 + b11 * r11 + b12 * r21
    t12 = b01 * r02 + b11 * r12 + b12 * r22
    t20 = b02 * r00 + b12 * r10 + b22 * r20
    t21 = b02 * r01 + b12 * r11 + b22 * r21
    t22 = b02 * r02 + b12 * r12 + b22 * r22
    c00 = r00 * t00 + r10 * t10 + r20 * t20
    c01 = r00 * t01 + r10 * t11 + r20 * t21
    c02 = r00 * t02 + r10 * t12 + r20 * t22
    c11 = r01 * t01 + r11 * t11 + r21 * t21
    c12 = r01 * t02 + r11 * t12 + r21 * t22
    c22 = r02 * t02 + r12 * t12 + r22 * t22
    h0 = r00 * g0 + r10 * g1 + r20 * g2
    h1 = r01 * g0 + r11 * g1 + r21 * g2
    h2 = r02 * g0 + r12 * g1 + r22 * g2
    M[0, 0], M[1, 1], M[2, 2] = mass + armature[0], mass + armature[1], mass + armature[2]
    M[3, 3], M[4, 4], M[5, 5] = c00 + armature[3], c11 + armature[4], c22 + armature[5]
    _set_symmetric(M, 0, 1, 0.0)
    _set_symmetric(M, 0, 2, 0.0)
    _set_symmetric(M, 1, 2, 0.0)
    _set_symmetric(M, 0, 3, 0.0)
    _set_symmetric(M, 0, 4, h2)
    _set_symmetric(M, 0, 5, -h1)
    _set_symmetric(M, 1, 3, -h2)
    _set_symmetric(M, 1, 4, 0.0)
    _set_symmetric(M, 1, 5, h0)
    _set_symmetric(M, 2, 3, h1)
    _set_symmetric(M, 2, 4, -h0)
    _set_symmetric(M, 2, 5, 0.0)
    _set_symmetric(M, 3, 4, c01)
    _set_symmetric(M, 3, 5, c02)
    _set_symmetric(M, 4, 5, c12)


@inline_kernel
def _set_symmetric(M, a, b, value):
    """M[a, b] = M[b, a] = value."""
    M[a, b] = value
    M[b, a] = value


@model_kernel
def _crba(model, q, oR, op, M, passes):
    """CRBA over the stack q (K, nq): oMi (oR, op) and M (K, nv, nv) per state.

    The world Jacobian, the composite inertias (their ten parameters), liMi and M
    itself are computed in scratch that stays in cache, reused across the stack, and
    M is copied to the stack once, row by row.  A (K, ...) output is memory that is
    not in cache: on talos (1000 states, load 11) storing J (1.8 kB per state) and
    oYcrb (11 kB) per state took 1.5 of 5.9 us per state.  The public call passes
    the array it returns as M (see :func:`crba`).

    Every array is :func:`.borrowed.borrowed`: the passes inlined per state no longer
    count references (60 atomic operations per state; 1000 states, CPU time, load 6:
    ur5 0.86x, solo12 0.98x, hyq 0.91x, talos 0.97x).

    The revolute joints' (cos, sin) of SINCOS_BLOCK states at a time come from one
    loop over the block's configurations that LLVM vectorizes
    (:func:`.joints.sincos_table`): libm's sin and cos cost about 20 ns per joint and
    state, a quarter of CRBA on ur5 and solo12 (new/old 0.72-0.89 on the five robots,
    M within 6e-14 of libm's).  A stack of M larger than
    :data:`.streaming.STREAM_BYTES` is written with non-temporal stores
    (:func:`.streaming.stream_copy`): talos's 1000 states (11.5 MB) fall out of the
    cache, and each plain store first read its line from memory and evicted the
    scratch (0.72x the time; 3.5 MB that stay in cache: 1.06x, so not streamed).

    The passes of the free flyer and of the joints that are neither revolute about a
    coordinate axis nor prismatic are called by address from ``passes``
    (:func:`crba_passes`): linked into this kernel, they were compiled on every
    model's first call (Numba's compile events: 4.0-4.4 s of ur5's, which never runs them;
    ur5's first crba 11.2-11.5 -> 8.4-8.5 CPU s without them)."""
    m = borrowed_model(model_arrays(model))
    q, oR, op, M = borrowed(q), borrowed(oR), borrowed(op), borrowed(M)
    passes = borrowed(passes)
    scratch = (np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((m.njoints, 3, 3)),
               np.empty((m.njoints, 3)), np.empty((m.njoints, 10)), np.empty((6, m.nv)),
               np.zeros((m.nv, m.nv)),  # Ms: entries of dofs on separate branches stay 0
               np.empty((2, SINCOS_BLOCK * m.nq)))
    XR, Xp, liR = borrowed(scratch[0]), borrowed(scratch[1]), borrowed(scratch[2])
    lip, Yc = borrowed(scratch[3]), borrowed(scratch[4])
    J, Ms, cs = borrowed(scratch[5]), borrowed(scratch[6]), borrowed(scratch[7])
    K, nq, nv2 = q.shape[0], m.nq, m.nv * m.nv
    # M may hold more states than q (a one-state call writes into data.M[:1])
    q_flat, Ms_flat = q.reshape(K * nq), Ms.reshape(nv2)
    M_flat = M.reshape(M.shape[0] * nv2)
    stream = K * nv2 * 8 > STREAM_BYTES
    for k0 in range(0, K, SINCOS_BLOCK):
        k1 = min(k0 + SINCOS_BLOCK, K)
        sincos_table(q_flat, k0 * nq, k1 * nq, cs)
        for k in range(k0, k1):
            _crba_forward(m, q[k], XR, Xp, liR, lip, oR[k], op[k], J, Yc, False, cs,
                          (k - k0) * nq, True, passes)
            _crba_composite(m, oR[k], op[k], J, Yc, Ms, passes)
            if stream:
                stream_copy(Ms_flat, M_flat, k * nv2)
            else:
                copy_matrix(Ms, M[k])
    if stream:
        store_fence()
    keep_alive(scratch)


def crba(model, data, q):
    """Joint-space inertia matrix M(q) (nv, nv), full and symmetric (CRBA).

    ``q`` (nq,) or (K, nq); returns (nv, nv) or (K, nv, nv), a new array (no later
    call changes it).  Fills ``data.oR, op`` (oMi); ``data.M`` too when the call is
    for one state (``q`` (nq,) or a stack of one), as ``pin.crba`` does.  For a
    stack of K > 1 states the kernel writes M straight into the array it returns and
    ``data.M`` is left as it was: filling both means writing every state's M twice
    or copying the stack on return, and writing only the returned array took
    0.79-0.93x the time of filling data.M and copying it (solo12, talos, go1, 1000
    states, load 10).  liMi, the world Jacobian and the composite inertias are
    scratch, not filled (as Pinocchio's crba in its default LOCAL convention fills
    neither ``J`` nor ``oYcrb``; ``compute_joint_jacobians`` fills ``data.J``).
    Armature is added on the diagonal.
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.crba(model, data, q)
    passes = crba_passes(model)
    if one_state(_crba_one, _crba, model, data, q, extra=(passes,)):
        return data.M[0].copy()
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    if K == 1:
        call_kernel(_crba, model, qs, data.oR, data.op, data.M, passes)
        return result(data.M, K, single).copy()
    out = np.empty((K, model.nv, model.nv))
    call_kernel(_crba, model, qs, data.oR, data.op, out, passes)
    return out


def _array(ndim, dtype=types.float64):
    return types.Array(dtype, ndim, "C")


_INT, _INTS = types.int64, _array(1, types.int64)
# The slots of CRBA_PASSES, and the argument types its kernels pass each
GENERAL_JOINT, ROOT_FREE_FLYER, FREE_FLYER_COMPOSITE = 0, 1, 2
CRBA_PASSES = PassTable(
    (_general_joint_pass, (_INT, _array(2), _array(3), _array(2), _array(2), _INT, _INT, _INT,
                           _INT, _array(1), _INT, _array(3), _array(2), _array(3), _array(2),
                           _array(3), _array(2), _array(2))),
    (_root_free_flyer_pass, (_array(3), _array(2), _INT, _array(1), _INT, _INT, _array(3),
                             _array(2), _array(3), _array(2), _array(3), _array(2),
                             _array(2))),
    (_free_flyer_composite_pass, (_INT, _INTS, _INTS, _INTS, _INTS, _array(1), _array(3),
                                  _array(2), _array(2), _array(2), _array(2))))


class JointKinds:
    """Which passes the joints of a model run (what its tables of passes hold):
    ``general_joint`` a joint that CRBA's forward pass does not inline (neither revolute
    about a coordinate axis, nor a free flyer child of the universe, nor prismatic),
    ``root_free_flyer`` a free flyer child of the universe, ``free_flyer_first`` joint 1
    a free flyer."""

    def __init__(self, m):
        jtype, parents = m.jtype[1:], m.parents[1:]
        revolute = (jtype == REVOLUTE) | (jtype == REVOLUTE_UNBOUNDED)
        on_axis = np.any(np.all(m.axis[1:, None, :] == np.eye(3)[None], axis=2), axis=1)
        coordinate_revolute = revolute & on_axis
        root_free_flyer = (jtype == FREE_FLYER) & (parents == 0)
        self.general_joint = bool(np.any(~(coordinate_revolute | root_free_flyer
                                           | (jtype == PRISMATIC))))
        self.root_free_flyer = bool(np.any(root_free_flyer))
        self.free_flyer_first = bool(m.njoints > 1 and m.jtype[1] == FREE_FLYER)


def model_passes(model, name, make_table):
    """``make_table(JointKinds(model.arrays))``, kept on ``model`` under ``name`` (made
    anew when its arrays change): a kernel's table of passes for this model.  A copied
    or pickled model carries none (the addresses are this
    process's: ``name`` is one of ``Model._PROCESS_CACHES``)."""
    kept = model.__dict__.get(name)
    if kept is not None and kept.arrays is model.arrays:
        return kept.table
    table = make_table(JointKinds(model.arrays))
    setattr(model, name, _KeptTable(model.arrays, table))
    return table


class _KeptTable:
    """A model's table of passes and the arrays it was made for."""

    __slots__ = ("arrays", "table")

    def __init__(self, arrays, table):
        self.arrays, self.table = arrays, table


def crba_passes(model):
    """The :data:`CRBA_PASSES` table of ``model`` (kept on it): the passes its joints
    run, compiled (or loaded from the cache) at their first use."""
    return model_passes(model, "_crba_passes", lambda kinds: CRBA_PASSES.table(
        (kinds.general_joint, kinds.root_free_flyer, kinds.free_flyer_first)))
