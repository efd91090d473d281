"""Analytical derivatives of inverse dynamics (Carpentier & Mansard, RSS 2018).

RNEA is differentiated in the world frame, where a perturbation of dof d
moves the whole subtree of its joint rigidly.  For a world-frame motion X
attached to that subtree dX/dq_d = J_d x X (identity (13) of the paper), for a
force dF/dq_d = J_d x* F (identity (14)); what is not rigid comes from the
velocity and acceleration of the parent of joint(d), lambda.  Per dof d:

    u_d     = v_lambda x J_d                      (dv_i/dq_d  = J_d x v_i + u_d)
    alpha_d = a_lambda x J_d + v_lambda x u_d     (da_i/dq_d  = J_d x a_i + alpha_d + u_d x v_i)
    gamma_d = (v_joint(d) + v_lambda) x J_d      (da_i/ddq_d = gamma_d - v_i x J_d)

(a includes gravity, a_0 = -g).  Summed over a subtree, the non-rigid part
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
"""
import numpy as np

from . import mimic
from .config import inline_kernel, kernel
from .crba import world_frame_quantities
from .kinematics import local_motions, world_motions
from .spatial import act_force, force_cross, mat6_vec, motion_cross
from .validation import as_dynamics_arguments, call_kernel, result


@kernel
def _add_inertia_variation(Y, i, v, h, B, work):
    """B[i] = (v_i x*) Y_i - Y_i (v_i x) + (h_i x-bar*), with h_i = Y_i v_i.

    Writes A = (v_i x*) Y_i column by column into the rows of work (7, 6)
    (row 6 is scratch), then B = A + A^T (Y symmetric: -Y (v x) = ((v x*) Y)^T)
    plus the operator u -> u x* h.
    """
    for c in range(6):
        for r in range(6):
            work[6, r] = Y[i, r, c]
        force_cross(v, i, work, 6, work, c)
    for r in range(6):
        for c in range(6):
            B[i, r, c] = work[c, r] + work[r, c]
    # u x* h = [u_ang x h_lin; u_ang x h_ang + u_lin x h_lin]
    h0, h1, h2, h3, h4, h5 = h[i, 0], h[i, 1], h[i, 2], h[i, 3], h[i, 4], h[i, 5]
    B[i, 0, 4] += h2
    B[i, 0, 5] -= h1
    B[i, 1, 3] -= h2
    B[i, 1, 5] += h0
    B[i, 2, 3] += h1
    B[i, 2, 4] -= h0
    B[i, 3, 1] += h2
    B[i, 3, 2] -= h1
    B[i, 4, 0] -= h2
    B[i, 4, 2] += h0
    B[i, 5, 0] += h1
    B[i, 5, 1] -= h0
    B[i, 3, 4] += h5
    B[i, 3, 5] -= h4
    B[i, 4, 3] -= h5
    B[i, 4, 5] += h3
    B[i, 5, 3] += h4
    B[i, 5, 4] -= h3


@kernel
def _rnea_derivatives_forward_pass(m, v, a, f_ext, oR, op, J, oY, ov, oa, h, f, Bcrb,
                                   u_cols, alpha_cols, gamma_cols, w6, work):
    """World velocities, accelerations, forces, and per-dof u, alpha, gamma (6, nv)."""
    world_motions(m, v, a, 2, True, J, ov, oa, w6)
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for i in range(1, m.njoints):
        par = parents[i]
        iv = idx_v[i]
        for c in range(iv, iv + nvs[i]):
            for r in range(6):
                w6[2, r] = J[r, c]
            motion_cross(ov, par, w6, 2, w6, 3)              # u = v_lambda x J_c
            motion_cross(oa, par, w6, 2, w6, 4)              # a_lambda x J_c
            motion_cross(ov, par, w6, 3, w6, 5)              # v_lambda x u
            for r in range(6):
                u_cols[r, c] = w6[3, r]
                alpha_cols[r, c] = w6[4, r] + w6[5, r]
                w6[1, r] = ov[i, r] + ov[par, r]
            motion_cross(w6, 1, w6, 2, w6, 0)                # (v_i + v_lambda) x J_c
            for r in range(6):
                gamma_cols[r, c] = w6[0, r]
        # f_i = Y_i a_i + v_i x* (Y_i v_i) - f_ext_i (world)
        mat6_vec(oY, i, ov, i, h, i)
        mat6_vec(oY, i, oa, i, f, i)
        force_cross(ov, i, h, i, w6, 0)
        act_force(oR, op, i, f_ext, i, w6, 1)
        for r in range(6):
            f[i, r] += w6[0, r] - w6[1, r]
        _add_inertia_variation(oY, i, ov, h, Bcrb, work)


@kernel
def _dot_col(X, r, Y, c):
    """X[:, r] . Y[:, c] for (6, n) arrays."""
    return (X[0, r] * Y[0, c] + X[1, r] * Y[1, c] + X[2, r] * Y[2, c]
            + X[3, r] * Y[3, c] + X[4, r] * Y[4, c] + X[5, r] * Y[5, c])


@kernel
def _rnea_derivatives_backward_pass(m, a, J, Ycrb, Bcrb, f, u_cols, alpha_cols, gamma_cols,
                                    tau, dtau_dq, dtau_dv, M, w6):
    parents, idx_v, nvs, armature = m.parents, m.idx_v, m.nvs, m.armature
    for i in range(m.njoints - 1, 0, -1):
        iv = idx_v[i]
        for c in range(iv, iv + nvs[i]):
            tau[c] = _dot_col(J, c, f.T, i) + armature[c] * a[c]
            # w6[0] = Ycrb J_c, w6[1] = Bcrb^T J_c
            for r in range(6):
                s0 = 0.0
                s1 = 0.0
                for t in range(6):
                    s0 += Ycrb[i, r, t] * J[t, c]
                    s1 += Bcrb[i, t, r] * J[t, c]
                w6[0, r] = s0
                w6[1, r] = s1
            j = i
            while j > 0:
                for d in range(idx_v[j], idx_v[j] + nvs[j]):
                    dq = 0.0
                    dv = 0.0
                    mm = 0.0
                    for r in range(6):
                        dq += w6[0, r] * alpha_cols[r, d] + w6[1, r] * u_cols[r, d]
                        dv += w6[0, r] * gamma_cols[r, d] + w6[1, r] * J[r, d]
                        mm += w6[0, r] * J[r, d]
                    dtau_dq[c, d] = dq
                    dtau_dv[c, d] = dv
                    M[c, d] = mm
                    M[d, c] = mm
                j = parents[j]
            M[c, c] += armature[c]
        par = parents[i]
        if par == 0:
            continue
        for d in range(iv, iv + nvs[i]):
            # w6[2] = J_d x* F + Ycrb alpha_d + Bcrb u_d, w6[3] = Ycrb gamma_d + Bcrb J_d
            for r in range(6):
                w6[4, r] = J[r, d]
            force_cross(w6, 4, f, i, w6, 2)
            for r in range(6):
                sq = 0.0
                sv = 0.0
                for t in range(6):
                    sq += Ycrb[i, r, t] * alpha_cols[t, d] + Bcrb[i, r, t] * u_cols[t, d]
                    sv += Ycrb[i, r, t] * gamma_cols[t, d] + Bcrb[i, r, t] * J[t, d]
                w6[2, r] += sq
                w6[3, r] = sv
            j = par
            while j > 0:
                for c in range(idx_v[j], idx_v[j] + nvs[j]):
                    dq = 0.0
                    dv = 0.0
                    for r in range(6):
                        dq += J[r, c] * w6[2, r]
                        dv += J[r, c] * w6[3, r]
                    dtau_dq[c, d] = dq
                    dtau_dv[c, d] = dv
                j = parents[j]
        for r in range(6):
            f[par, r] += f[i, r]
            for t in range(6):
                Ycrb[par, r, t] += Ycrb[i, r, t]
                Bcrb[par, r, t] += Bcrb[i, r, t]


@kernel
def rnea_derivatives_workspace(m):
    """Scratch of :func:`_rnea_derivatives_state`: XR, Xp, h, Bcrb, u, alpha, gamma, w6, work."""
    return (np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((m.njoints, 6)),
            np.empty((m.njoints, 6, 6)), np.empty((6, m.nv)), np.empty((6, m.nv)),
            np.empty((6, m.nv)), np.empty((6, 6)), np.empty((7, 6)))


@inline_kernel
def _rnea_derivatives_state(m, q, v, a, f_ext, liR, lip, oR, op, J, Ycrb, ov, oa, f, tau,
                            dtau_dq, dtau_dv, M, workspace):
    """tau and its three partial derivatives for one state (workspace from
    :func:`rnea_derivatives_workspace`); inlined into its callers, as
    :func:`.aba._aba_state` is (the call's arguments cost about 1 us a state)."""
    XR, Xp, h, Bcrb, u_cols, alpha_cols, gamma_cols, w6, work = workspace
    world_frame_quantities(m, q, XR, Xp, liR, lip, oR, op, J,
                           Ycrb)
    _rnea_derivatives_forward_pass(m, v, a, f_ext, oR, op, J, Ycrb, ov, oa, h, f, Bcrb,
                                   u_cols, alpha_cols, gamma_cols, w6, work)
    dtau_dq[:, :] = 0.0
    dtau_dv[:, :] = 0.0
    _rnea_derivatives_backward_pass(m, a, J, Ycrb, Bcrb, f, u_cols, alpha_cols, gamma_cols,
                                    tau, dtau_dq, dtau_dv, M, w6)


@kernel
def _rnea_derivatives(m, q, v, a, f_ext, liR, lip, oR, op, J, oYcrb, ov, oa_gf, of, tau,
                      dtau_dq, dtau_dv, M, vel, acc, oa):
    """The derivatives of K states; the world ov, oa_gf also as joint-frame vel, acc
    and world oa (gravity removed), as Pinocchio's ``computeRNEADerivatives``."""
    workspace = rnea_derivatives_workspace(m)
    for k in range(q.shape[0]):
        _rnea_derivatives_state(m, q[k], v[k], a[k], f_ext[k], liR[k], lip[k], oR[k], op[k],
                                J[k], oYcrb[k], ov[k], oa_gf[k], of[k], tau[k], dtau_dq[k],
                                dtau_dv[k], M[k], workspace)
        local_motions(m, oR[k], op[k], ov[k], oa_gf[k], vel[k], acc[k], oa[k])


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
    dtau_da = M(q).  Also fills ``data.tau`` (= rnea), ``data.J``, the world-frame
    ``data.ov``, ``data.oa``, ``data.oa_gf`` (gravity included), ``data.of`` and
    ``data.oYcrb``, and the joint-frame ``data.v``, ``data.a`` (as Pinocchio).
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.rnea_derivatives(model, data, q, v, a, f_ext)
    qs, vs, accs, fs, K, single = as_dynamics_arguments(model, data, q, v, a, f_ext, "a")
    call_kernel(_rnea_derivatives, model, qs, vs, accs, fs, data.liR, data.lip, data.oR, data.op,
                data.J, data.oYcrb, data.ov, data.oa_gf, data.of, data.tau, data.dtau_dq,
                data.dtau_dv, data.M, data.v, data.a, data.oa)
    return (result(data.dtau_dq, K, single).copy(), result(data.dtau_dv, K, single).copy(),
            result(data.M, K, single).copy())
