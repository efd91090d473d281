"""Composite rigid-body algorithm: the joint-space inertia matrix M(q).

Featherstone (2008), Table 6.2, written in the world frame as Pinocchio does:
with every quantity in the world, the composite inertia of a subtree is a plain
sum (no spatial transform per joint) and M[r, c] = J_r^T (oYcrb_i J_c) for a
dof c of joint i and every dof r that supports it.  Returns the full symmetric
M, armature added on the diagonal.
"""
import numpy as np

from . import mimic
from .config import inline_kernel, kernel, model_kernel
from .joints import placements, placements_inline
from .kinematics import jacobian_column
from .model_ref import model_arrays
from .linalg import copy_matrix
from .spatial import (inertia_to_world, inertia_to_world_values, rigid_inertia_values_times,
                      write_rigid_inertia)
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

    Inlined into its callers, as :func:`_crba_backward_pass` is: called as separate
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
def _crba_backward_pass(m, J, Ycrb, M):
    """M from the world Jacobian J (6, nv) and the world body inertias Ycrb (njoints,
    6, 6), which hold the composite inertias oYcrb on return.

    A sum of rigid-body inertias is a rigid-body inertia [m 1, -[h]x; [h]x, I]: the
    pass reads and sums its ten parameters only (not 36 entries), and the full
    matrix is written once, when it is final (:func:`_composite_inertia_step`)."""
    parents = m.parents
    for i in range(m.njoints - 1, 0, -1):
        mass, h0, h1, h2 = Ycrb[i, 0, 0], Ycrb[i, 5, 1], Ycrb[i, 3, 2], Ycrb[i, 4, 0]
        a00, a01, a02 = Ycrb[i, 3, 3], Ycrb[i, 3, 4], Ycrb[i, 3, 5]
        a11, a12, a22 = Ycrb[i, 4, 4], Ycrb[i, 4, 5], Ycrb[i, 5, 5]
        _composite_inertia_step(m, i, mass, h0, h1, h2, a00, a01, a02, a11, a12, a22, J, M)
        write_rigid_inertia(mass, h0, h1, h2, a00, a01, a02, a11, a12, a22, Ycrb, i)
        par = parents[i]
        if par > 0:
            Ycrb[par, 0, 0] += mass
            Ycrb[par, 5, 1] += h0
            Ycrb[par, 3, 2] += h1
            Ycrb[par, 4, 0] += h2
            Ycrb[par, 3, 3] += a00
            Ycrb[par, 3, 4] += a01
            Ycrb[par, 3, 5] += a02
            Ycrb[par, 4, 4] += a11
            Ycrb[par, 4, 5] += a12
            Ycrb[par, 5, 5] += a22
    for c in range(m.nv):
        M[c, c] += m.armature[c]


@inline_kernel
def _composite_inertia_step(m, i, mass, h0, h1, h2, a00, a01, a02, a11, a12, a22, J, M):
    """The columns of joint i: F = oYcrb_i J_c = [m v - h x w; I w + h x v] (24 products
    instead of 36, oYcrb_i given by its ten parameters), then M[r, c] = M[c, r] = J_r^T F
    for every dof r that supports c (Featherstone 2008, Table 6.2)."""
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for c in range(idx_v[i], idx_v[i] + nvs[i]):
        F0, F1, F2, F3, F4, F5 = rigid_inertia_values_times(
            mass, h0, h1, h2, a00, a01, a02, a11, a12, a22,
            J[0, c], J[1, c], J[2, c], J[3, c], J[4, c], J[5, c])
        j = i
        while j > 0:
            for r in range(idx_v[j], idx_v[j] + nvs[j]):
                s = (J[0, r] * F0 + J[1, r] * F1 + J[2, r] * F2
                     + J[3, r] * F3 + J[4, r] * F4 + J[5, r] * F5)
                M[r, c] = s
                M[c, r] = s
            j = parents[j]


@inline_kernel
def _crba_forward_pass(m, oR, op, J, Yc):
    """From oMi (oR, op): the world Jacobian J (6, nv), J_c = oMi.act(S_c), and the
    ten parameters of each body's inertia in the world, Yc (njoints, 10) = (m, h,
    upper triangle of I) of oMi.act(Y_i), on locals (the 6x6 form is never written)."""
    idx_v, nvs, S, Y = m.idx_v, m.nvs, m.S, m.inertia
    for i in range(1, m.njoints):
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            jacobian_column(oR, op, i, S, c, J)
        (Yc[i, 0], Yc[i, 1], Yc[i, 2], Yc[i, 3], Yc[i, 4], Yc[i, 5], Yc[i, 6], Yc[i, 7],
         Yc[i, 8], Yc[i, 9]) = inertia_to_world_values(oR, op, Y, i)


@inline_kernel
def _crba_composite_pass(m, J, Yc, M):
    """:func:`_crba_backward_pass` on the ten parameters Yc (njoints, 10) of the
    forward pass, summed in place into those of the composite inertias (the 6x6
    oYcrb_i are not formed)."""
    parents = m.parents
    for i in range(m.njoints - 1, 0, -1):
        mass, h0, h1, h2, a00 = Yc[i, 0], Yc[i, 1], Yc[i, 2], Yc[i, 3], Yc[i, 4]
        a01, a02, a11, a12, a22 = Yc[i, 5], Yc[i, 6], Yc[i, 7], Yc[i, 8], Yc[i, 9]
        _composite_inertia_step(m, i, mass, h0, h1, h2, a00, a01, a02, a11, a12, a22, J, M)
        par = parents[i]
        if par > 0:
            for t in range(10):
                Yc[par, t] += Yc[i, t]
    for c in range(m.nv):
        M[c, c] += m.armature[c]


@model_kernel
def _crba(model, q, oR, op, M):
    """CRBA over the stack q (K, nq): oMi (oR, op) and M (K, nv, nv) per state.

    The world Jacobian, the composite inertias (their ten parameters), liMi and M
    itself are computed in scratch that stays in cache, reused across the stack, and
    M is copied to the stack once, row by row.  A (K, ...) output is memory that is
    not in cache: on talos (1000 states, load 11) storing J (1.8 kB per state) and
    oYcrb (11 kB) per state took 1.5 of 5.9 us per state."""
    m = model_arrays(model)
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    liR = np.empty((m.njoints, 3, 3))
    lip = np.empty((m.njoints, 3))
    Yc = np.empty((m.njoints, 10))
    J = np.empty((6, m.nv))
    Ms = np.zeros((m.nv, m.nv))  # the entries of two dofs on separate branches stay 0
    for k in range(q.shape[0]):
        placements_inline(m, q[k], XR, Xp, liR, lip, oR[k], op[k])
        _crba_forward_pass(m, oR[k], op[k], J, Yc)
        _crba_composite_pass(m, J, Yc, Ms)
        copy_matrix(Ms, M[k])


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
