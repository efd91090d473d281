"""Analytical derivatives of inverse dynamics (Carpentier & Mansard, RSS 2018).

RNEA is differentiated in the world frame, where a perturbation of dof d
moves the whole subtree of its joint rigidly.  For a world-frame motion X
attached to that subtree dX/dq_d = J_d x X (identity (13) of the paper), for a
force dF/dq_d = J_d x* F (identity (14)); what is not rigid comes from the
velocity and acceleration of the parent of joint(d), lambda.  Per dof d:

    u_d     = v_lambda x J_d                      (dv_i/dq_d  = J_d x v_i + u_d)
    alpha_d = a_lambda x J_d + v_lambda x u_d     (da_i/dq_d  = J_d x a_i + alpha_d + u_d x v_i)
    gamma_d = (v_joint(d) + v_lambda) x J_d      (da_i/ddq_d = gamma_d - v_i x J_d)

(a includes gravity, a_0 = -g; for a 1-dof joint v_joint(d) = v_lambda + J_d dq_d
and J_d x J_d = 0, so gamma_d = 2 u_d).  Summed over a subtree, the non-rigid part
of the body forces is Ycrb alpha_d + Bcrb u_d, with Ycrb the composite inertia
and Bcrb = sum_k (v_k x* Y_k - Y_k v_k x + (Y_k v_k) x-bar*) the composite of
the inertia's variation along the body velocities (the paper's Alg. 2 and 3).
Then, for a dof c of joint j(c) and a dof d of joint j(d):

- j(d) ancestor of or equal to j(c):
  dtau_c/dq_d = (Ycrb J_c) . alpha_d + (Bcrb^T J_c) . u_d    (composites of j(c))
  dtau_c/dv_d = (Ycrb J_c) . gamma_d + (Bcrb^T J_c) . J_d
- j(c) strict ancestor of j(d):
  dtau_c/dq_d = J_c . (J_d x* F + Ycrb alpha_d + Bcrb u_d)    (composites of j(d))
  dtau_c/dv_d = J_c . (Ycrb gamma_d + Bcrb J_d)

and dtau/da = M.  Derivatives with respect to q are in the tangent space (nv
columns), as Pinocchio's ``computeRNEADerivatives``.

Structure, not dense 6x6 algebra (what Pinocchio's Inertia class does, and
more).  A rigid inertia in the world is Y = [m 1, -[H]x; [H]x, I] (mass m,
first moment H = m c, rotational inertia I about the origin), and so is a sum
of them: Y x costs 24 products, not 36 (:func:`inertia_action`).  Its
variation is sparser still: with h = Y v, the time derivative of H is h_lin,
so that (checked against the dense formula to round-off)

    B = v x* Y - Y v x + h x-bar* = [0, -2 [h_lin]x; 0, B_ang],
    B_ang = [w]x I - I [w]x + 2 (H . v_lin) 1 - v_lin H^T - H v_lin^T - [h_ang]x

(v = [v_lin; w]).  ``Bcrb`` (njoints, 4, 3) keeps B_ang in rows 0-2 and
b = 2 h_lin in row 3: B x = [x_ang x b; B_ang x_ang] and B^T x = [0; b x x_lin +
B_ang^T x_ang], 12 numbers and 15 products instead of 36 and 36.  The per-dof
columns u, alpha, gamma are stored as rows, (nv, 6), so a column is contiguous.
"""
from collections import namedtuple

import numpy as np

from . import mimic
from .borrowed import borrowed, borrowed_model, keep_alive
from .config import inline_kernel, kernel, model_kernel
from .crba import SINCOS_BLOCK, axis_jacobian_column
from .joints import coordinate_axis, placements_from_table, sincos_table
from .kinematics import jacobian_column, joint_world_motion, local_motions, world_motions
from .model import FREE_FLYER, REVOLUTE, REVOLUTE_UNBOUNDED
from .model_ref import model_arrays
from .spatial import (act_force, force_cross, inertia_to_world_values, motion_cross,
                      rigid_inertia_times, rigid_inertia_values_times, write_rigid_inertia)
from .one_state import _rnea_derivatives_one, one_state
from .rnea import stack_scratch
from .validation import as_dynamics_arguments, call_kernel, result


# --- Rigid inertias in the world, by their structure ---------------------------------

@inline_kernel
def inertia_action(Y, i, xs, j, outs, o):
    """outs[o] = Y[i] xs[j] (:func:`~.spatial.rigid_inertia_times` on rows)."""
    y0, y1, y2, y3, y4, y5 = rigid_inertia_times(Y, i, xs[j, 0], xs[j, 1], xs[j, 2], xs[j, 3],
                                           xs[j, 4], xs[j, 5])
    outs[o, 0], outs[o, 1], outs[o, 2] = y0, y1, y2
    outs[o, 3], outs[o, 4], outs[o, 5] = y3, y4, y5


@inline_kernel
def inertia_variation(Y, i, v, h, B):
    """B[i] = (B_ang in rows 0-2, b = 2 h_lin in row 3) for the inertia Y[i] moving at
    v[i] with momentum h[i] = Y[i] v[i] (module docstring; :func:`inertia_variation_values`)."""
    inertia_variation_values(Y, i, v[i, 0], v[i, 1], v[i, 2], v[i, 3], v[i, 4], v[i, 5],
                             h[i, 0], h[i, 1], h[i, 2], h[i, 3], h[i, 4], h[i, 5], B)


@inline_kernel
def inertia_variation_values(Y, i, l0, l1, l2, w0, w1, w2, k0, k1, k2, g0, g1, g2, B):
    """:func:`inertia_variation` of the motion [l; w] and momentum [k; g] given as
    values; P = [w]x I."""
    # the ten parameters' entries only (those rigid_inertia_times reads; the matrix is
    # symmetric): the forward pass of the RNEA derivatives writes no others
    H0, H1, H2 = Y[i, 5, 1], Y[i, 3, 2], Y[i, 4, 0]
    p00 = w1 * Y[i, 3, 5] - w2 * Y[i, 3, 4]
    p10 = w2 * Y[i, 3, 3] - w0 * Y[i, 3, 5]
    p20 = w0 * Y[i, 3, 4] - w1 * Y[i, 3, 3]
    p01 = w1 * Y[i, 4, 5] - w2 * Y[i, 4, 4]
    p11 = w2 * Y[i, 3, 4] - w0 * Y[i, 4, 5]
    p21 = w0 * Y[i, 4, 4] - w1 * Y[i, 3, 4]
    p02 = w1 * Y[i, 5, 5] - w2 * Y[i, 4, 5]
    p12 = w2 * Y[i, 3, 5] - w0 * Y[i, 5, 5]
    p22 = w0 * Y[i, 4, 5] - w1 * Y[i, 3, 5]
    s = H0 * l0 + H1 * l1 + H2 * l2
    B[i, 0, 0] = 2.0 * (p00 + s - l0 * H0)
    B[i, 1, 1] = 2.0 * (p11 + s - l1 * H1)
    B[i, 2, 2] = 2.0 * (p22 + s - l2 * H2)
    s01 = p01 + p10 - l0 * H1 - H0 * l1
    s02 = p02 + p20 - l0 * H2 - H0 * l2
    s12 = p12 + p21 - l1 * H2 - H1 * l2
    B[i, 0, 1], B[i, 1, 0] = s01 + g2, s01 - g2
    B[i, 0, 2], B[i, 2, 0] = s02 - g1, s02 + g1
    B[i, 1, 2], B[i, 2, 1] = s12 + g0, s12 - g0
    B[i, 3, 0], B[i, 3, 1], B[i, 3, 2] = 2.0 * k0, 2.0 * k1, 2.0 * k2


# --- Forward pass --------------------------------------------------------------------

@inline_kernel
def _world_columns_and_parameters(m, oR, op, J, oY):
    """From oMi (oR, op): the world Jacobian J (6, nv) and the ten parameters of the body
    inertias in the world, written into their entries of oY (those that
    :func:`.spatial.rigid_inertia_times` and :func:`inertia_variation` read; the backward
    pass writes the full composites).  A revolute joint about a coordinate axis takes
    :func:`.crba.axis_jacobian_column` (6 products instead of 33)."""
    jtype, axes, idx_v, nvs, S, Y = m.jtype, m.axis, m.idx_v, m.nvs, m.S, m.inertia
    for i in range(1, m.njoints):
        t = jtype[i]
        k = coordinate_axis(axes, i) if t == REVOLUTE or t == REVOLUTE_UNBOUNDED else -1
        if k >= 0:
            axis_jacobian_column(oR, op, i, k, idx_v[i], J)
        else:
            for c in range(idx_v[i], idx_v[i] + nvs[i]):
                jacobian_column(oR, op, i, S, c, J)
        mass, h0, h1, h2, a00, a01, a02, a11, a12, a22 = inertia_to_world_values(oR, op, Y, i)
        oY[i, 0, 0], oY[i, 5, 1], oY[i, 3, 2], oY[i, 4, 0] = mass, h0, h1, h2
        oY[i, 3, 3], oY[i, 3, 4], oY[i, 3, 5] = a00, a01, a02
        oY[i, 4, 4], oY[i, 4, 5], oY[i, 5, 5] = a11, a12, a22


@inline_kernel
def body_forces_and_columns(m, f_ext, oR, op, J, oY, ov, oa, h, f, Bcrb, u_cols, alpha_cols,
                            gamma_cols, w6, bias_in_f):
    """From the world motions ov, oa (gravity included, oa_0 = -g): per joint h_i = Y_i v_i,
    f_i = Y_i a_i + v_i x* h_i - f_ext_i (world) and B_i; per dof the rows u, alpha,
    gamma (nv, 6).  Shared by the RNEA and ABA derivatives (ABA has ov, oa already,
    and its bias forces v_i x* h_i - f_ext_i: with ``bias_in_f``, f holds them on entry
    and only Y_i a_i is added).  Inlined: it passes the compiled pass
    :func:`_body_forces_and_columns` the three model arrays it reads, not the model
    tuple (the call's arguments, about 170 of them for the tuple's 22 arrays, cost
    more than a small robot's pass)."""
    _body_forces_and_columns(m.parents, m.idx_v, m.nvs, np.int64(1), m.njoints, f_ext, oR, op, J,
                             oY, ov, oa, h, f, Bcrb, u_cols, alpha_cols, gamma_cols, w6,
                             bias_in_f)


@kernel
def _body_forces_and_columns(parents, idx_v, nvs, i0, i1, f_ext, oR, op, J, oY, ov, oa, h, f,
                             Bcrb, u_cols, alpha_cols, gamma_cols, w6, bias_in_f):
    """:func:`body_forces_and_columns` of the joints i0 .. i1 - 1 on the model's parents,
    idx_v and nvs (its helpers inlined one level deep: nested inlined helpers cost
    compile time)."""
    for i in range(i0, i1):
        par = parents[i]
        for d in range(idx_v[i], idx_v[i] + nvs[i]):
            for r in range(6):
                w6[0, r] = J[r, d]
            motion_cross(ov, par, w6, 0, u_cols, d)          # u = v_lambda x J_d
            motion_cross(oa, par, w6, 0, alpha_cols, d)      # a_lambda x J_d
            motion_cross(ov, par, u_cols, d, w6, 1)          # v_lambda x u
            for r in range(6):
                alpha_cols[d, r] += w6[1, r]
            if nvs[i] == 1:
                # v_i = v_lambda + J_d dq_d and J_d x J_d = 0: gamma = 2 u
                for r in range(6):
                    gamma_cols[d, r] = 2.0 * u_cols[d, r]
                continue
            for r in range(6):
                w6[2, r] = ov[i, r] + ov[par, r]
            motion_cross(w6, 2, w6, 0, gamma_cols, d)        # (v_i + v_lambda) x J_d
        inertia_action(oY, i, ov, i, h, i)
        inertia_variation_values(oY, i, ov[i, 0], ov[i, 1], ov[i, 2], ov[i, 3], ov[i, 4],
                                 ov[i, 5], h[i, 0], h[i, 1], h[i, 2], h[i, 3], h[i, 4], h[i, 5],
                                 Bcrb)
        if bias_in_f:
            inertia_action(oY, i, oa, i, w6, 0)
            for r in range(6):
                f[i, r] += w6[0, r]
            continue
        inertia_action(oY, i, oa, i, f, i)
        force_cross(ov, i, h, i, w6, 0)
        if (f_ext[i, 0] == 0.0 and f_ext[i, 1] == 0.0 and f_ext[i, 2] == 0.0
                and f_ext[i, 3] == 0.0 and f_ext[i, 4] == 0.0 and f_ext[i, 5] == 0.0):
            # no external force on the body (rnea_derivatives without f_ext): its move
            # to the world frame, 24 products of zeros, is skipped (the same sums)
            for r in range(6):
                f[i, r] += w6[0, r]
            continue
        act_force(oR, op, i, f_ext, i, w6, 1)
        for r in range(6):
            f[i, r] += w6[0, r] - w6[1, r]


@kernel
def _motions_forces_and_columns(parents, idx_v, nvs, gravity, v, a, f_ext, oR, op, J, oY, ov,
                                oa, h, f, Bcrb, u_cols, alpha_cols, gamma_cols, w6):
    """:func:`.kinematics.world_motions` (with gravity, oa_0 = -g) and
    :func:`_body_forces_and_columns` in one pass over the joints, the same sums in the
    same order: a 1-dof joint's motions, columns and forces on locals, each result
    stored once (:func:`_one_dof_step`; through the two passes, 0.8 and 1.6 us of
    talos's dID per state went mostly to stores and the loads after them), a
    multi-dof joint (the free flyer) by the two passes' steps."""
    for r in range(6):
        ov[0, r] = 0.0
        oa[0, r] = -gravity[r]
    for i in range(1, parents.shape[0]):
        par = parents[i]
        if nvs[i] == 1:
            _one_dof_step(i, par, idx_v[i], v, a, f_ext, oR, op, J, oY, ov, oa, f, Bcrb,
                          u_cols, alpha_cols, gamma_cols, w6)
            continue
        _joint_world_motion(i, par, idx_v[i], nvs[i], v, a, J, ov, oa, w6)
        # the compiled pass the ABA derivatives call, on this joint: its code is not
        # compiled a second time into this pass
        _body_forces_and_columns(parents, idx_v, nvs, i, i + 1, f_ext, oR, op, J, oY, ov, oa,
                                 h, f, Bcrb, u_cols, alpha_cols, gamma_cols, w6, bool(False))


@kernel
def _joint_world_motion(i, par, iv, nvi, v, a, J, ov, oa, w6):
    """ov_i and oa_i of a multi-dof joint: :func:`.kinematics.joint_world_motion`
    (order 2) as a compiled call (inlined into the one-pass loop it would grow its
    compile)."""
    joint_world_motion(i, par, iv, nvi, v, a, 2, J, ov, oa, w6)


@inline_kernel
def _one_dof_step(i, par, d, v, a, f_ext, oR, op, J, oY, ov, oa, f, Bcrb, u_cols, alpha_cols,
                  gamma_cols, w6):
    """World motions, the columns u, alpha, gamma of dof d and the body's h, B and f, of
    a 1-dof joint i, on locals: the arithmetic of :func:`.kinematics.world_motions` and
    :func:`_body_forces_and_columns` in their order (x = 0.0 + y kept where they sum from 0.0: the
    same signed zeros)."""
    j0, j1, j2, j3, j4, j5 = J[0, d], J[1, d], J[2, d], J[3, d], J[4, d], J[5, d]
    p0, p1, p2, p3, p4, p5 = ov[par, 0], ov[par, 1], ov[par, 2], ov[par, 3], ov[par, 4], ov[par, 5]
    q0, q1, q2, q3, q4, q5 = oa[par, 0], oa[par, 1], oa[par, 2], oa[par, 3], oa[par, 4], oa[par, 5]
    x, y = v[d], a[d]
    s0, s1, s2 = 0.0 + j0 * x, 0.0 + j1 * x, 0.0 + j2 * x       # J_d dq_d
    s3, s4, s5 = 0.0 + j3 * x, 0.0 + j4 * x, 0.0 + j5 * x
    t0, t1, t2 = 0.0 + j0 * y, 0.0 + j1 * y, 0.0 + j2 * y       # J_d ddq_d
    t3, t4, t5 = 0.0 + j3 * y, 0.0 + j4 * y, 0.0 + j5 * y
    # ov_i = ov_lambda + J_d dq_d, oa_i = oa_lambda + J_d ddq_d + ov_i x J_d dq_d
    v0, v1, v2, v3, v4, v5 = p0 + s0, p1 + s1, p2 + s2, p3 + s3, p4 + s4, p5 + s5
    a0 = q0 + t0 + (v4 * s2 - v5 * s1 + v1 * s5 - v2 * s4)
    a1 = q1 + t1 + (v5 * s0 - v3 * s2 + v2 * s3 - v0 * s5)
    a2 = q2 + t2 + (v3 * s1 - v4 * s0 + v0 * s4 - v1 * s3)
    a3 = q3 + t3 + (v4 * s5 - v5 * s4)
    a4 = q4 + t4 + (v5 * s3 - v3 * s5)
    a5 = q5 + t5 + (v3 * s4 - v4 * s3)
    ov[i, 0], ov[i, 1], ov[i, 2], ov[i, 3], ov[i, 4], ov[i, 5] = v0, v1, v2, v3, v4, v5
    oa[i, 0], oa[i, 1], oa[i, 2], oa[i, 3], oa[i, 4], oa[i, 5] = a0, a1, a2, a3, a4, a5
    # u = v_lambda x J_d, alpha = a_lambda x J_d + v_lambda x u, gamma = 2 u
    u0 = p4 * j2 - p5 * j1 + p1 * j5 - p2 * j4
    u1 = p5 * j0 - p3 * j2 + p2 * j3 - p0 * j5
    u2 = p3 * j1 - p4 * j0 + p0 * j4 - p1 * j3
    u3 = p4 * j5 - p5 * j4
    u4 = p5 * j3 - p3 * j5
    u5 = p3 * j4 - p4 * j3
    u_cols[d, 0], u_cols[d, 1], u_cols[d, 2] = u0, u1, u2
    u_cols[d, 3], u_cols[d, 4], u_cols[d, 5] = u3, u4, u5
    alpha_cols[d, 0] = ((q4 * j2 - q5 * j1 + q1 * j5 - q2 * j4)
                        + (p4 * u2 - p5 * u1 + p1 * u5 - p2 * u4))
    alpha_cols[d, 1] = ((q5 * j0 - q3 * j2 + q2 * j3 - q0 * j5)
                        + (p5 * u0 - p3 * u2 + p2 * u3 - p0 * u5))
    alpha_cols[d, 2] = ((q3 * j1 - q4 * j0 + q0 * j4 - q1 * j3)
                        + (p3 * u1 - p4 * u0 + p0 * u4 - p1 * u3))
    alpha_cols[d, 3] = (q4 * j5 - q5 * j4) + (p4 * u5 - p5 * u4)
    alpha_cols[d, 4] = (q5 * j3 - q3 * j5) + (p5 * u3 - p3 * u5)
    alpha_cols[d, 5] = (q3 * j4 - q4 * j3) + (p3 * u4 - p4 * u3)
    gamma_cols[d, 0], gamma_cols[d, 1], gamma_cols[d, 2] = 2.0 * u0, 2.0 * u1, 2.0 * u2
    gamma_cols[d, 3], gamma_cols[d, 4], gamma_cols[d, 5] = 2.0 * u3, 2.0 * u4, 2.0 * u5
    # h = Y v, B, f = Y a + v x* h (- the external force, in the world)
    # the ten parameters read once for both products (helpers one level deep: nested
    # inlined helpers cost compile time)
    ym, y0, y1, y2 = oY[i, 0, 0], oY[i, 5, 1], oY[i, 3, 2], oY[i, 4, 0]
    y00, y01, y02, y11, y12, y22 = (oY[i, 3, 3], oY[i, 3, 4], oY[i, 3, 5], oY[i, 4, 4],
                                    oY[i, 4, 5], oY[i, 5, 5])
    h0, h1, h2, h3, h4, h5 = rigid_inertia_values_times(ym, y0, y1, y2, y00, y01, y02, y11,
                                                        y12, y22, v0, v1, v2, v3, v4, v5)
    inertia_variation_values(oY, i, v0, v1, v2, v3, v4, v5, h0, h1, h2, h3, h4, h5, Bcrb)
    g0, g1, g2, g3, g4, g5 = rigid_inertia_values_times(ym, y0, y1, y2, y00, y01, y02, y11,
                                                        y12, y22, a0, a1, a2, a3, a4, a5)
    c0 = v4 * h2 - v5 * h1
    c1 = v5 * h0 - v3 * h2
    c2 = v3 * h1 - v4 * h0
    c3 = v4 * h5 - v5 * h4 + v1 * h2 - v2 * h1
    c4 = v5 * h3 - v3 * h5 + v2 * h0 - v0 * h2
    c5 = v3 * h4 - v4 * h3 + v0 * h1 - v1 * h0
    if (f_ext[i, 0] != 0.0 or f_ext[i, 1] != 0.0 or f_ext[i, 2] != 0.0
            or f_ext[i, 3] != 0.0 or f_ext[i, 4] != 0.0 or f_ext[i, 5] != 0.0):
        act_force(oR, op, i, f_ext, i, w6, 1)
        c0, c1, c2 = c0 - w6[1, 0], c1 - w6[1, 1], c2 - w6[1, 2]
        c3, c4, c5 = c3 - w6[1, 3], c4 - w6[1, 4], c5 - w6[1, 5]
    f[i, 0], f[i, 1], f[i, 2] = g0 + c0, g1 + c1, g2 + c2
    f[i, 3], f[i, 4], f[i, 5] = g3 + c3, g4 + c4, g5 + c5


@kernel
def _rnea_derivatives_forward_pass(m, v, a, f_ext, oR, op, J, oY, ov, oa, h, f, Bcrb,
                                   u_cols, alpha_cols, gamma_cols, w6):
    """World velocities, accelerations (gravity included), forces, B and the per-dof rows."""
    world_motions(m, v, a, 2, True, J, ov, oa, w6)
    body_forces_and_columns(m, f_ext, oR, op, J, oY, ov, oa, h, f, Bcrb, u_cols, alpha_cols,
                            gamma_cols, w6, bool(False))


# --- Backward pass -------------------------------------------------------------------

@inline_kernel
def _row(parents, idx_v, nvs, armature, i, c, end, a, J, Ycrb, Bcrb, f, u_cols, alpha_cols,
         gamma_cols, tau, dtau_dq, dtau_dv, M, with_mass_matrix, ff_root):
    """Row c (a dof of joint i) of dtau_dq, dtau_dv and (with_mass_matrix) M, every entry
    written once (zeros included), and tau_c.  The dofs d of i and its ancestors from
    the composites of i; the dofs d of its strict descendants [idx_v[i] + nvs[i], end)
    from the vectors that :func:`_descendant_columns` left in the rows d of
    alpha_cols and gamma_cols, and M[c, d] = M[d, c].  The model's arrays come as
    arguments: unpacked from the model tuple here, they kept Numba's reference counts
    in the loop over rows (six atomic increments and decrements a row)."""
    nv = dtau_dq.shape[1]
    j0, j1, j2, j3, j4, j5 = J[0, c], J[1, c], J[2, c], J[3, c], J[4, c], J[5, c]
    arm = armature[c]
    tau[c] = (j0 * f[i, 0] + j1 * f[i, 1] + j2 * f[i, 2] + j3 * f[i, 3] + j4 * f[i, 4]
              + j5 * f[i, 5] + arm * a[c])
    # strict descendants d (c's joint is an ancestor of d's): J_c . x_d, J_c . y_d and
    # M[c, d] = J_c . (Ycrb J_d) = M[d, c], which row d (a descendant's row, written
    # before this one) computed as (Ycrb J_d) . J_c: the same products summed in the
    # same order, so M is copied, not computed again; then the zeros of the dofs
    # after the subtree
    if ff_root and i == 1 and c < 3:
        # a root free flyer's linear dof: J_c = [R e_c; 0], J_c . x = (R e_c) . x_lin
        for d in range(np.uint64(6), np.uint64(end)):
            dtau_dq[c, d] = j0 * alpha_cols[d, 0] + j1 * alpha_cols[d, 1] + j2 * alpha_cols[d, 2]
            dtau_dv[c, d] = j0 * gamma_cols[d, 0] + j1 * gamma_cols[d, 1] + j2 * gamma_cols[d, 2]
            if with_mass_matrix:
                M[c, d] = M[d, c]
    else:
        for d in range(np.uint64(idx_v[i] + nvs[i]), np.uint64(end)):
            dtau_dq[c, d] = (j0 * alpha_cols[d, 0] + j1 * alpha_cols[d, 1]
                             + j2 * alpha_cols[d, 2] + j3 * alpha_cols[d, 3]
                             + j4 * alpha_cols[d, 4] + j5 * alpha_cols[d, 5])
            dtau_dv[c, d] = (j0 * gamma_cols[d, 0] + j1 * gamma_cols[d, 1]
                             + j2 * gamma_cols[d, 2] + j3 * gamma_cols[d, 3]
                             + j4 * gamma_cols[d, 4] + j5 * gamma_cols[d, 5])
            if with_mass_matrix:  # symmetric, and row d came first (the same bits)
                M[c, d] = M[d, c]
    for d in range(np.uint64(end), np.uint64(nv)):
        dtau_dq[c, d] = 0.0
        dtau_dv[c, d] = 0.0
        if with_mass_matrix:
            M[c, d] = 0.0
    # d of i and its ancestors (j(d) ancestor of or equal to j(c)), segment by segment
    # down the row, the zeros of the other branches between them
    y0, y1, y2, y3, y4, y5 = rigid_inertia_times(Ycrb, i, j0, j1, j2, j3, j4, j5)
    # Bcrb^T J_c = [0; b x J_lin + B_ang^T J_ang]
    b0, b1, b2 = Bcrb[i, 3, 0], Bcrb[i, 3, 1], Bcrb[i, 3, 2]
    t0 = b1 * j2 - b2 * j1 + Bcrb[i, 0, 0] * j3 + Bcrb[i, 1, 0] * j4 + Bcrb[i, 2, 0] * j5
    t1 = b2 * j0 - b0 * j2 + Bcrb[i, 0, 1] * j3 + Bcrb[i, 1, 1] * j4 + Bcrb[i, 2, 1] * j5
    t2 = b0 * j1 - b1 * j0 + Bcrb[i, 0, 2] * j3 + Bcrb[i, 1, 2] * j4 + Bcrb[i, 2, 2] * j5
    above = idx_v[i] + nvs[i]
    j = i
    root = 1 if ff_root and i > 1 else 0  # below a root free flyer: its columns after
    while j > root:
        start = idx_v[j]
        for d in range(np.uint64(start + nvs[j]), np.uint64(above)):
            dtau_dq[c, d] = 0.0
            dtau_dv[c, d] = 0.0
            if with_mass_matrix:
                M[c, d] = 0.0
        for d in range(np.uint64(start), np.uint64(start + nvs[j])):
            dtau_dq[c, d] = (y0 * alpha_cols[d, 0] + y1 * alpha_cols[d, 1]
                             + y2 * alpha_cols[d, 2] + y3 * alpha_cols[d, 3]
                             + y4 * alpha_cols[d, 4] + y5 * alpha_cols[d, 5]
                             + t0 * u_cols[d, 3] + t1 * u_cols[d, 4] + t2 * u_cols[d, 5])
            dtau_dv[c, d] = (y0 * gamma_cols[d, 0] + y1 * gamma_cols[d, 1]
                             + y2 * gamma_cols[d, 2] + y3 * gamma_cols[d, 3]
                             + y4 * gamma_cols[d, 4] + y5 * gamma_cols[d, 5]
                             + t0 * J[3, d] + t1 * J[4, d] + t2 * J[5, d])
            if with_mass_matrix:  # the armature on the diagonal
                M[c, d] = (y0 * J[0, d] + y1 * J[1, d] + y2 * J[2, d] + y3 * J[3, d]
                           + y4 * J[4, d] + y5 * J[5, d]) + (arm if d == c else 0.0)
        above = start
        j = parents[j]
    zeros_from = 0
    if j == 1:
        # stopped at a root free flyer (dofs 0-5): its columns without the products by
        # its known zeros, u_d = v_0 x J_d = 0 (the universe is at rest), and for its
        # linear dofs J_d = [R e_d; 0] and gamma_d = v_1 x J_d have no angular part;
        # 90 products instead of 144, the same sums but for terms that are 0
        zeros_from = 6
        for d in range(3):
            dtau_dq[c, d] = (y0 * alpha_cols[d, 0] + y1 * alpha_cols[d, 1]
                             + y2 * alpha_cols[d, 2] + y3 * alpha_cols[d, 3]
                             + y4 * alpha_cols[d, 4] + y5 * alpha_cols[d, 5])
            dtau_dv[c, d] = (y0 * gamma_cols[d, 0] + y1 * gamma_cols[d, 1]
                             + y2 * gamma_cols[d, 2])
            if with_mass_matrix:
                M[c, d] = y0 * J[0, d] + y1 * J[1, d] + y2 * J[2, d]
        for d in range(3, 6):
            dtau_dq[c, d] = (y0 * alpha_cols[d, 0] + y1 * alpha_cols[d, 1]
                             + y2 * alpha_cols[d, 2] + y3 * alpha_cols[d, 3]
                             + y4 * alpha_cols[d, 4] + y5 * alpha_cols[d, 5])
            dtau_dv[c, d] = (y0 * gamma_cols[d, 0] + y1 * gamma_cols[d, 1]
                             + y2 * gamma_cols[d, 2] + y3 * gamma_cols[d, 3]
                             + y4 * gamma_cols[d, 4] + y5 * gamma_cols[d, 5]
                             + t0 * J[3, d] + t1 * J[4, d] + t2 * J[5, d])
            if with_mass_matrix:
                M[c, d] = (y0 * J[0, d] + y1 * J[1, d] + y2 * J[2, d] + y3 * J[3, d]
                           + y4 * J[4, d] + y5 * J[5, d])
    for d in range(np.uint64(zeros_from), np.uint64(above)):
        dtau_dq[c, d] = 0.0
        dtau_dv[c, d] = 0.0
        if with_mass_matrix:
            M[c, d] = 0.0


@inline_kernel
def _descendant_columns(i, d, J, Ycrb, Bcrb, f, u_cols, alpha_cols, gamma_cols):
    """For a dof d of joint i, once the rows of i are written: the vectors that give the
    entries of d in the rows c of the strict ancestors of i (dtau_dq[c, d] = J_c . x,
    dtau_dv[c, d] = J_c . y), into the rows d of alpha_cols and gamma_cols, which no
    later row reads (M[c, d] is copied from M[d, c]: :func:`_row`)."""
    j0, j1, j2, j3, j4, j5 = J[0, d], J[1, d], J[2, d], J[3, d], J[4, d], J[5, d]
    a0, a1, a2, a3, a4, a5 = rigid_inertia_times(Ycrb, i, alpha_cols[d, 0], alpha_cols[d, 1],
                                           alpha_cols[d, 2], alpha_cols[d, 3],
                                           alpha_cols[d, 4], alpha_cols[d, 5])
    g0, g1, g2, g3, g4, g5 = rigid_inertia_times(Ycrb, i, gamma_cols[d, 0], gamma_cols[d, 1],
                                           gamma_cols[d, 2], gamma_cols[d, 3],
                                           gamma_cols[d, 4], gamma_cols[d, 5])
    b0, b1, b2 = Bcrb[i, 3, 0], Bcrb[i, 3, 1], Bcrb[i, 3, 2]
    n0, n1, n2 = u_cols[d, 3], u_cols[d, 4], u_cols[d, 5]
    F0, F1, F2, F3, F4, F5 = f[i, 0], f[i, 1], f[i, 2], f[i, 3], f[i, 4], f[i, 5]
    # x = J_d x* F + Ycrb alpha_d + Bcrb u_d,  y = Ycrb gamma_d + Bcrb J_d,
    # with B z = [z_ang x b; B_ang z_ang]
    alpha_cols[d, 0] = j4 * F2 - j5 * F1 + a0 + n1 * b2 - n2 * b1
    alpha_cols[d, 1] = j5 * F0 - j3 * F2 + a1 + n2 * b0 - n0 * b2
    alpha_cols[d, 2] = j3 * F1 - j4 * F0 + a2 + n0 * b1 - n1 * b0
    alpha_cols[d, 3] = (j4 * F5 - j5 * F4 + j1 * F2 - j2 * F1 + a3
                        + Bcrb[i, 0, 0] * n0 + Bcrb[i, 0, 1] * n1 + Bcrb[i, 0, 2] * n2)
    alpha_cols[d, 4] = (j5 * F3 - j3 * F5 + j2 * F0 - j0 * F2 + a4
                        + Bcrb[i, 1, 0] * n0 + Bcrb[i, 1, 1] * n1 + Bcrb[i, 1, 2] * n2)
    alpha_cols[d, 5] = (j3 * F4 - j4 * F3 + j0 * F1 - j1 * F0 + a5
                        + Bcrb[i, 2, 0] * n0 + Bcrb[i, 2, 1] * n1 + Bcrb[i, 2, 2] * n2)
    gamma_cols[d, 0] = g0 + j4 * b2 - j5 * b1
    gamma_cols[d, 1] = g1 + j5 * b0 - j3 * b2
    gamma_cols[d, 2] = g2 + j3 * b1 - j4 * b0
    gamma_cols[d, 3] = g3 + Bcrb[i, 0, 0] * j3 + Bcrb[i, 0, 1] * j4 + Bcrb[i, 0, 2] * j5
    gamma_cols[d, 4] = g4 + Bcrb[i, 1, 0] * j3 + Bcrb[i, 1, 1] * j4 + Bcrb[i, 1, 2] * j5
    gamma_cols[d, 5] = g5 + Bcrb[i, 2, 0] * j3 + Bcrb[i, 2, 1] * j4 + Bcrb[i, 2, 2] * j5


@inline_kernel
def _rnea_derivatives_backward_pass(m, a, J, Ycrb, Bcrb, f, u_cols, alpha_cols, gamma_cols,
                                    tau, dtau_dq, dtau_dv, M, with_mass_matrix):
    """tau (at a), dtau_dq, dtau_dv and (with_mass_matrix) M, each row written once in
    the order it is stored, the zeros of dofs on different branches included (the rows
    of a joint come after those of its descendants, whose entries need only the
    descendants' composites); Ycrb, Bcrb and f become the composites of the subtrees,
    and the rows of u_cols, alpha_cols, gamma_cols are overwritten.  Callers pass the
    flag as ``bool(...)`` (a literal would compile a specialization of its own).
    Inlined: it passes the compiled pass :func:`_backward_pass` the model arrays it
    reads, not the model tuple (as :func:`body_forces_and_columns`)."""
    _backward_pass(m.parents, m.jtype, m.idx_v, m.nvs, m.subtree_end, m.armature, a, J, Ycrb,
                   Bcrb, f, u_cols, alpha_cols, gamma_cols, tau, dtau_dq, dtau_dv, M,
                   with_mass_matrix, bool(True))


@inline_kernel
def _backward_pass_of(m, a, J, Ycrb, Bcrb, f, u_cols, alpha_cols, gamma_cols, tau, dtau_dq,
                      dtau_dv, M, with_mass_matrix, full_composites):
    """:func:`_rnea_derivatives_backward_pass`, the full 6 x 6 composites written to Ycrb
    only with ``full_composites`` (the pass reads their ten parameters; a stack's
    scratch needs no more)."""
    _backward_pass(m.parents, m.jtype, m.idx_v, m.nvs, m.subtree_end, m.armature, a, J, Ycrb,
                   Bcrb, f, u_cols, alpha_cols, gamma_cols, tau, dtau_dq, dtau_dv, M,
                   with_mass_matrix, full_composites)


@kernel
def _backward_pass(parents, jtype, idx_v, nvs, subtree_end, armature, a, J, Ycrb, Bcrb, f,
                   u_cols, alpha_cols, gamma_cols, tau, dtau_dq, dtau_dv, M, with_mass_matrix,
                   full_composites):
    """:func:`_rnea_derivatives_backward_pass` on the model's arrays."""
    njoints, nv = parents.shape[0], armature.shape[0]
    ff_root = njoints > 1 and jtype[1] == FREE_FLYER
    for i in range(njoints - 1, 0, -1):
        iv = idx_v[i]
        end = nv if subtree_end[i] >= njoints else idx_v[subtree_end[i]]
        for c in range(iv, iv + nvs[i]):
            _row(parents, idx_v, nvs, armature, i, c, end, a, J, Ycrb, Bcrb, f, u_cols,
                 alpha_cols, gamma_cols, tau, dtau_dq, dtau_dv, M, with_mass_matrix, ff_root)
        # the composite of i is final: its full matrix from its ten parameters, which
        # alone are summed into the parent's (the only entries the pass reads)
        mass, h0, h1, h2 = Ycrb[i, 0, 0], Ycrb[i, 5, 1], Ycrb[i, 3, 2], Ycrb[i, 4, 0]
        a00, a01, a02 = Ycrb[i, 3, 3], Ycrb[i, 3, 4], Ycrb[i, 3, 5]
        a11, a12, a22 = Ycrb[i, 4, 4], Ycrb[i, 4, 5], Ycrb[i, 5, 5]
        if full_composites:
            write_rigid_inertia(mass, h0, h1, h2, a00, a01, a02, a11, a12, a22, Ycrb, i)
        par = parents[i]
        if par == 0:
            continue
        for d in range(iv, iv + nvs[i]):
            _descendant_columns(i, d, J, Ycrb, Bcrb, f, u_cols, alpha_cols, gamma_cols)
        for r in range(6):
            f[par, r] += f[i, r]
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
        for r in range(4):
            for t in range(3):
                Bcrb[par, r, t] += Bcrb[i, r, t]


# The model's fields that :func:`.kinematics.world_motions` and
# :func:`.kinematics.local_motions` read: called with these, not the model's 22 arrays
# (passed as their fields, about 170 arguments), the two calls cost less per state
MotionTree = namedtuple("MotionTree", ["njoints", "parents", "idx_v", "nvs", "gravity"])


# --- One state, a stack, the public function -------------------------------------------

@kernel
def rnea_derivatives_workspace(m):
    """Scratch of :func:`_rnea_derivatives_state`: XR, Xp, h, Bcrb, u, alpha, gamma, w6."""
    return (np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((m.njoints, 6)),
            np.empty((m.njoints, 4, 3)), np.empty((m.nv, 6)), np.empty((m.nv, 6)),
            np.empty((m.nv, 6)), np.empty((6, 6)))


@inline_kernel
def _rnea_derivatives_state(m, tree, q, v, a, f_ext, liR, lip, oR, op, J, Ycrb, ov, oa, f,
                            tau, dtau_dq, dtau_dv, M, workspace, cs, b, full_composites):
    """tau and its three partial derivatives for one state (workspace from
    :func:`rnea_derivatives_workspace`; ``tree`` the :data:`MotionTree` of ``m``, which
    :func:`.kinematics.world_motions` is given), the revolute joints' (cos, sin) read from the
    table ``cs[:, b:]`` (:func:`.joints.sincos_table`, as the ABA family's stack
    kernels); inlined into its callers, as :func:`.aba._aba_state` is (the call's
    arguments cost about 1 us a state).

    The backward pass writes every entry of the three matrices once, row by row: zeroing
    dtau_dq, dtau_dv first, then writing columns across rows, cost talos 2 of its 16 us
    per state of a 1000-state stack (the stack's matrices go to memory)."""
    XR, Xp, h, Bcrb, u_cols, alpha_cols, gamma_cols, w6 = workspace
    placements_from_table(m, q, cs, b, XR, Xp, liR, lip, oR, op)
    _world_columns_and_parameters(m, oR, op, J, Ycrb)
    # the two steps of _rnea_derivatives_forward_pass, called from here: through it, the
    # 35 arrays it passes on were reference-counted at its entry and exit (70 atomic
    # operations a state)
    _motions_forces_and_columns(m.parents, m.idx_v, m.nvs, m.gravity, v, a, f_ext, oR, op, J,
                                Ycrb, ov, oa, h, f, Bcrb, u_cols, alpha_cols, gamma_cols, w6)
    _backward_pass_of(m, a, J, Ycrb, Bcrb, f, u_cols, alpha_cols, gamma_cols, tau, dtau_dq,
                      dtau_dv, M, bool(True), full_composites)


@model_kernel
def _rnea_derivatives(model, q, v, a, f_ext, liR, lip, oR, op, J, oYcrb, ov, oa_gf, of, tau,
                      dtau_dq, dtau_dv, M, vel, acc, oa):
    """The derivatives of K states; the world ov, oa_gf also as joint-frame vel, acc
    and world oa (gravity removed), as Pinocchio's ``computeRNEADerivatives``.

    The intermediates (liR, lip, J .. of) passed with fewer states than the stack (one,
    a stack from :func:`rnea_derivatives`: :func:`.rnea.stack_scratch`) are kept in slot
    k % slots, vel, acc, oa passed with fewer states are not computed, and the composites
    keep their ten parameters only: tau, oMi and the three matrices alone reach memory
    (on talos 38 kB a state instead of 63 kB; a 1000-state stack does not stay in cache).

    Every array is :func:`.borrowed.borrowed`: the slices of the stack per state, the
    workspace and the arrays passed on to the compiled passes no longer count
    references (as in :func:`.crba._crba`)."""
    m = borrowed_model(model_arrays(model))
    per_state = min(vel.shape[0], acc.shape[0], oa.shape[0]) >= q.shape[0]
    slots = min(liR.shape[0], lip.shape[0], J.shape[0], oYcrb.shape[0], ov.shape[0],
                oa_gf.shape[0], of.shape[0])
    full_composites = oYcrb.shape[0] >= q.shape[0]  # data.oYcrb is filled
    q, v, a, f_ext = borrowed(q), borrowed(v), borrowed(a), borrowed(f_ext)
    liR, lip, oR, op, J = borrowed(liR), borrowed(lip), borrowed(oR), borrowed(op), borrowed(J)
    oYcrb, ov, oa_gf, of = borrowed(oYcrb), borrowed(ov), borrowed(oa_gf), borrowed(of)
    tau, dtau_dq, dtau_dv, M = borrowed(tau), borrowed(dtau_dq), borrowed(dtau_dv), borrowed(M)
    vel, acc, oa = borrowed(vel), borrowed(acc), borrowed(oa)
    tree = MotionTree(m.njoints, m.parents, m.idx_v, m.nvs, m.gravity)
    scratch = rnea_derivatives_workspace(m)
    workspace = (borrowed(scratch[0]), borrowed(scratch[1]), borrowed(scratch[2]),
                 borrowed(scratch[3]), borrowed(scratch[4]), borrowed(scratch[5]),
                 borrowed(scratch[6]), borrowed(scratch[7]))
    # the revolute joints' (cos, sin) of SINCOS_BLOCK states from one vectorized loop
    # (libm's sin and cos cost about 20 ns a joint and state)
    nq, K = m.nq, q.shape[0]
    q_flat = q.reshape(K * nq)
    table = np.empty((2, SINCOS_BLOCK * nq))
    cs = borrowed(table)
    for b0 in range(0, K, SINCOS_BLOCK):
        b1 = min(b0 + SINCOS_BLOCK, K)
        sincos_table(q_flat, b0 * nq, b1 * nq, cs)
        for k in range(b0, b1):
            s = k % slots
            _rnea_derivatives_state(m, tree, q[k], v[k], a[k], f_ext[k], liR[s], lip[s], oR[k],
                                    op[k], J[s], oYcrb[s], ov[s], oa_gf[s], of[s], tau[k],
                                    dtau_dq[k], dtau_dv[k], M[k], workspace, cs,
                                    (k - b0) * nq, full_composites)
            if per_state:
                local_motions(tree, oR[k], op[k], ov[s], oa_gf[s], vel[k], acc[k], oa[k])
    keep_alive(scratch)
    keep_alive((table,))


def rnea_derivatives(model, data, q, v, a, f_ext=None):
    """Partial derivatives of tau = RNEA(q, v, a, f_ext).

    Parameters
    ----------
    q : (nq,) or (K, nq); v, a : (nv,) or (K, nv);
    f_ext : None, (njoints, 6) or (K, njoints, 6), local joint frames.

    Returns
    -------
    dtau_dq, dtau_dv, dtau_da : (nv, nv) each, or (K, nv, nv).  dtau_dq is in
    the tangent space of q (as Pinocchio's ``computeRNEADerivatives``);
    dtau_da = M(q).  Also fills ``data.tau`` (= rnea) and ``data.oR, op``.  For one
    state (or a stack of one) it fills, as Pinocchio, ``data.dtau_dq``, ``data.dtau_dv``,
    ``data.M``,
    ``data.J``, the world-frame ``data.ov``, ``data.oa``, ``data.oa_gf`` (gravity
    included), ``data.of`` and ``data.oYcrb``, and the joint-frame ``data.v``,
    ``data.a``; for a stack it writes the three matrices straight into the arrays it
    returns and leaves those fields as they were (a stack's intermediates, 28 kB a
    state on talos, would go to memory that nobody reads).
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.rnea_derivatives(model, data, q, v, a, f_ext)
    if f_ext is None:
        out = np.empty((3, model.nv, model.nv))
        if one_state(_rnea_derivatives_one, _rnea_derivatives, model, data, q, v, a, (out,)):
            return out[0], out[1], out[2]
    qs, vs, accs, fs, K, single = as_dynamics_arguments(model, data, q, v, a, f_ext, "a")
    d, t = data, stack_scratch(model, data, K)
    # one state (or a stack of one) fills Data as Pinocchio does; a stack writes its three
    # matrices straight into the arrays it returns and skips the joint-frame motions
    single_state = K == 1
    out = (d.dtau_dq, d.dtau_dv, d.M) if single_state else np.empty((3, K, model.nv, model.nv))
    n = K if single_state else 0
    call_kernel(_rnea_derivatives, model, qs, vs, accs, fs, t.liR, t.lip, d.oR, d.op, t.J,
                t.oYcrb, t.ov, t.oa_gf, t.of, d.tau, out[0], out[1], out[2], d.v[:n], d.a[:n],
                d.oa[:n])
    if single_state:
        return tuple(result(x, K, single).copy() for x in out)
    return out[0], out[1], out[2]
