"""Composite rigid-body algorithm: the joint-space inertia matrix M(q).

Featherstone (2008), Table 6.2, written in the world frame as Pinocchio does:
with every quantity in the world, the composite inertia of a subtree is a plain
sum (no spatial transform per joint) and M[r, c] = J_r^T (oYcrb_i J_c) for a
dof c of joint i and every dof r that supports it.  Returns the full symmetric
M, armature added on the diagonal.
"""
import math

import numpy as np

from . import mimic
from .borrowed import borrowed, borrowed_model, keep_alive
from .config import inline_kernel, kernel, model_kernel
from .joints import (compose, coordinate_axis, joint_transform, placements,
                     quaternion_to_rotation, revolute_placement)
from .kinematics import jacobian_column
from .model_ref import model_arrays
from .linalg import copy_matrix
from .model import FREE_FLYER, REVOLUTE, REVOLUTE_UNBOUNDED
from .spatial import inertia_to_world, inertia_to_world_values, rigid_inertia_values_times
from .one_state import _crba_one, one_state
from .validation import as_configurations, call_kernel, check_data, result


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
    """One joint at a time: liMi and oMi (oR, op), the world Jacobian columns J (6, nv),
    J_c = oMi.act(S_c), and the ten parameters of the body's inertia in the world, Yc
    (njoints, 10) = (m, h, upper triangle of I) of oMi.act(Y_i), on locals (the 6x6
    form is never written).  XR (1, 3, 3) and Xp (1, 3) are scratch.

    A revolute joint about a coordinate axis k (most joints of real robots) is
    straight-line code inlined here: :func:`.joints.revolute_placement`, and its
    column [p x r_k; r_k] (r_k the column k of oR[i], 6 products instead of 33).
    Every other joint goes through the compiled call :func:`_general_joint_pass`:
    inlined, its branches kept Numba from pruning the reference counts of the
    arrays it takes (seven atomic increments and decrements per joint and state;
    ur5, 1000 states in a jitted loop: 0.76 -> 0.50 us per state, load 6-10)."""
    parents, jtype, axes, idx_q, jR, jp = m.parents, m.jtype, m.axis, m.idx_q, m.jR, m.jp
    idx_v, nvs, S, Y = m.idx_v, m.nvs, m.S, m.inertia
    for i in range(1, m.njoints):
        t = jtype[i]
        k = coordinate_axis(axes, i) if t == REVOLUTE or t == REVOLUTE_UNBOUNDED else -1
        if k >= 0:
            o = idx_q[i]
            if t == REVOLUTE:
                c, s = math.cos(q[o]), math.sin(q[o])
            else:
                c, s = q[o], q[o + 1]
            revolute_placement(jR, jp, i, k, c, s, liR, lip)
            compose(oR, op, parents[i], liR, lip, i, oR, op, i)
            axis_jacobian_column(oR, op, i, k, idx_v[i], J)
        elif t == FREE_FLYER and parents[i] == 0:
            _root_free_flyer_pass(jR, jp, i, q, idx_q[i], idx_v[i], XR, Xp, liR, lip, oR,
                                  op, J)
        else:
            _general_joint_pass(t, axes, jR, jp, S, i, parents[i], idx_v[i], nvs[i], q,
                                idx_q[i], XR, Xp, liR, lip, oR, op, J)
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
def _crba_composite_pass(m, J, Yc, M):
    """M from the world Jacobian J (6, nv) and the ten parameters Yc (njoints, 10) of the
    world body inertias, summed in place into those of the composite inertias oYcrb_i
    (the 6x6 matrices are not formed; Featherstone 2008, Table 6.2, in the world frame).

    For a dof c of joint i: F = oYcrb_i J_c = [m v - h x w; I w + h x v] (24 products
    instead of 36), then M[r, c] = M[c, r] = J_r^T F for c and each dof r up the
    dof-parent chain (``model.dof_parent``: the lower dofs of joint i, then the dofs
    supporting it), armature added on the diagonal."""
    parents, idx_v, nvs, dof_parent, armature = m.parents, m.idx_v, m.nvs, m.dof_parent, m.armature
    for i in range(m.njoints - 1, 0, -1):
        mass, h0, h1, h2, a00 = Yc[i, 0], Yc[i, 1], Yc[i, 2], Yc[i, 3], Yc[i, 4]
        a01, a02, a11, a12, a22 = Yc[i, 5], Yc[i, 6], Yc[i, 7], Yc[i, 8], Yc[i, 9]
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            F0, F1, F2, F3, F4, F5 = rigid_inertia_values_times(
                mass, h0, h1, h2, a00, a01, a02, a11, a12, a22,
                J[0, c], J[1, c], J[2, c], J[3, c], J[4, c], J[5, c])
            M[c, c] = (J[0, c] * F0 + J[1, c] * F1 + J[2, c] * F2
                       + J[3, c] * F3 + J[4, c] * F4 + J[5, c] * F5) + armature[c]
            r = dof_parent[c]
            while r >= 0:
                s = (J[0, r] * F0 + J[1, r] * F1 + J[2, r] * F2
                     + J[3, r] * F3 + J[4, r] * F4 + J[5, r] * F5)
                M[r, c] = s
                M[c, r] = s
                r = dof_parent[r]
        par = parents[i]
        if par > 0:
            for t in range(10):
                Yc[par, t] += Yc[i, t]


@model_kernel
def _crba(model, q, oR, op, M):
    """CRBA over the stack q (K, nq): oMi (oR, op) and M (K, nv, nv) per state.

    The world Jacobian, the composite inertias (their ten parameters), liMi and M
    itself are computed in scratch that stays in cache, reused across the stack, and
    M is copied to the stack once, row by row.  A (K, ...) output is memory that is
    not in cache: on talos (1000 states, load 11) storing J (1.8 kB per state) and
    oYcrb (11 kB) per state took 1.5 of 5.9 us per state.

    Every array is :func:`.borrowed.borrowed`: the passes inlined per state no longer
    count references (60 atomic operations per state; 1000 states, CPU time, load 6:
    ur5 0.86x, solo12 0.98x, hyq 0.91x, talos 0.97x)."""
    m = borrowed_model(model_arrays(model))
    q, oR, op, M = borrowed(q), borrowed(oR), borrowed(op), borrowed(M)
    scratch = (np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((m.njoints, 3, 3)),
               np.empty((m.njoints, 3)), np.empty((m.njoints, 10)), np.empty((6, m.nv)),
               np.zeros((m.nv, m.nv)))  # Ms: entries of dofs on separate branches stay 0
    XR, Xp, liR = borrowed(scratch[0]), borrowed(scratch[1]), borrowed(scratch[2])
    lip, Yc = borrowed(scratch[3]), borrowed(scratch[4])
    J, Ms = borrowed(scratch[5]), borrowed(scratch[6])
    for k in range(q.shape[0]):
        _crba_forward_pass(m, q[k], XR, Xp, liR, lip, oR[k], op[k], J, Yc)
        _crba_composite_pass(m, J, Yc, Ms)
        copy_matrix(Ms, M[k])
    keep_alive(scratch)


def crba(model, data, q):
    """Joint-space inertia matrix M(q) (nv, nv), full and symmetric (CRBA).

    ``q`` (nq,) or (K, nq); returns (nv, nv) or (K, nv, nv).  Fills
    ``data.oR, op`` (oMi) and ``data.M``; liMi, the world Jacobian and the
    composite inertias are scratch, not filled (as Pinocchio's crba in its default
    LOCAL convention fills neither ``J`` nor ``oYcrb``; ``compute_joint_jacobians``
    fills ``data.J``).  Armature is added on the diagonal.
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.crba(model, data, q)
    if one_state(_crba_one, _crba, model, data, q):
        return data.M[0].copy()
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    call_kernel(_crba, model, qs, data.oR, data.op, data.M)
    return result(data.M, K, single).copy()
