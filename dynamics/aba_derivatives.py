"""Analytical derivatives of forward dynamics (Carpentier & Mansard, RSS 2018, Sec. III-E).

With ddq = FD(q, v, tau) and tau = ID(q, v, ddq), differentiating the identity
ID(q, v, FD(q, v, tau)) = tau gives (their eq. 24 and 17)

    dFD/dq = -M^-1 dID/dq |_(ddq = FD),   dFD/dv = -M^-1 dID/dv,   dFD/dtau = M^-1.

One kernel per state, in the order of Pinocchio's ``computeABADerivatives``:
ABA's three passes (:mod:`.aba`, on a copy of the world inertias, which its
backward pass turns into articulated ones); the two sweeps of the dedicated
M^-1 algorithm (Sec. IV-B), which read ABA's U and D^-1 instead of computing
them again; the RNEA derivatives at ddq, which start from ABA's world motions
ov, oa and bias forces (RNEA's forward sweep is not repeated, M is not
formed); then the two (nv, nv) products through BLAS.

The M^-1 sweeps are :func:`.minverse.minverse_sweeps`.  ABA's two forward passes and the
M^-1 sweeps are inlined into the loop over states (ABA's backward pass stays a compiled
call, as in :func:`.aba._aba`): through their compiled calls, which passed the model's
22 arrays (about 170 arguments) and a dozen arrays more each, ur5's 1000-state stack
took 3.3 us a state, inlined 2.6 (the same bits; the first call's compile grows by
about 10 s, see ``benchmarks/threads_notes.md``, round of dfd30).
"""
import numpy as np

from . import mimic
from .aba import (_aba_backward_pass, _aba_forward_pass_1_inlined,
                  _aba_forward_pass_2_inlined)
from numba import prange

from .borrowed import borrowed_all, borrowed_model, keep_alive
from .config import inline_kernel, kernel, model_kernel, parallel_kernel
from .crba import SINCOS_BLOCK, world_jacobian_and_inertias
from .joints import placements_from_table, sincos_table
from .kinematics import compute_joint_jacobians, express_jacobian
from .model_ref import model_arrays
from .linalg import copy_matrix
from .minverse import minverse_sweeps
from .rnea_derivatives import (_backward_pass_of, body_forces_and_columns,
                               rnea_derivatives_workspace)
from .one_state import _aba_derivatives_one, one_state
from .rnea import stack_scratch
from .validation import (as_configurations, as_dynamics_arguments, call_kernel, check_invertible,
                         result)


@kernel
def aba_derivatives_workspace(m):
    """Scratch of :func:`_aba_derivatives_state`; the last, cs (2, SINCOS_BLOCK nq), the
    cos/sin table of :func:`_aba_derivatives_states`."""
    return (np.empty((m.njoints, 6, 6)), np.empty((m.njoints, 6)), np.empty((6, m.nv)),
            np.empty((m.njoints, 6, m.nv)), np.empty((6, 6)), np.empty((6, 6)),
            np.empty((6, 6)), rnea_derivatives_workspace(m), np.empty((m.nv, m.nv)),
            np.empty((2, SINCOS_BLOCK * m.nq)))


@inline_kernel
def _aba_derivatives_state(m, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv,
                           u, ddq, Minv, f, tau_id, dtau_dq, dtau_dv, ddq_dq, ddq_dv,
                           workspace, b, full_composites):
    """ABA, M^-1 and the inverse-dynamics derivatives at ddq for one state, the
    revolute joints' (cos, sin) read from the table ``workspace[9][:, b:]``
    (:func:`_aba_derivatives_states`); inlined into its callers, as
    :func:`.aba._aba_state` is."""
    oYaba, cJ, F, A, Ia, D, work, rnea_ws, Ms, cs = workspace
    XR, Xp, h, Bcrb, u_cols, alpha_cols, gamma_cols, w6 = rnea_ws
    # forward dynamics, on a copy of the world inertias (ABA's backward pass turns it
    # into the articulated ones), then M^-1 from ABA's U and D^-1
    placements_from_table(m, q, cs, b, XR, Xp, liR, lip, oR, op)
    world_jacobian_and_inertias(m, oR, op, J, oY)
    for i in range(1, m.njoints):
        for r in range(6):
            for c in range(6):
                oYaba[i, r, c] = oY[i, r, c]
    _aba_forward_pass_1_inlined(m, v, f_ext, oR, op, J, oYaba, ov, cJ, pA, w6)
    for i in range(1, m.njoints):
        for r in range(6):
            f[i, r] = pA[i, r]                  # the bias forces, before the backward pass
    _aba_backward_pass(m, tau, J, oYaba, cJ, pA, U, Dinv, u, Ia, D, work, w6)
    _aba_forward_pass_2_inlined(m, J, cJ, U, Dinv, u, oa, ddq, w6)
    # M^-1 in a scratch that stays in cache (the sweeps write its rows twice, the last
    # first), copied to the stack once and read from the scratch
    minverse_sweeps(m, J, U, Dinv, Ms, F, A, D[0])
    copy_matrix(Ms, Minv)
    # inverse-dynamics derivatives at ddq (eq. 24), from ABA's world motions ov and
    # oa (gravity included): RNEA's forward sweep is not repeated; M is not formed
    body_forces_and_columns(m, f_ext, oR, op, J, oY, ov, oa, h, f, Bcrb, u_cols, alpha_cols,
                            gamma_cols, w6, bool(True))
    _backward_pass_of(m, ddq, J, oY, Bcrb, f, u_cols, alpha_cols, gamma_cols, tau_id, dtau_dq,
                      dtau_dv, ddq_dq, bool(False), full_composites)
    _negative_products(Ms, dtau_dq, dtau_dv, ddq_dq, ddq_dv)


@inline_kernel
def _negative_products(Minv, A, B, out_A, out_B):
    """out_A = -Minv A, out_B = -Minv B (BLAS: faster than a loop in Numba from 6 dof
    on, measured 0.17 us against 0.25 us on 6 dof, 0.8 against 2.8 on 18)."""
    np.dot(Minv, A, out_A)
    np.dot(Minv, B, out_B)
    nv = Minv.shape[0]
    for r in range(nv):
        for c in range(nv):
            out_A[r, c] = -out_A[r, c]
            out_B[r, c] = -out_B[r, c]


@inline_kernel
def _aba_derivatives_states(m, k0, k1, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA,
                            U, Dinv, u, ddq, Minv, f, tau_id, dtau_dq, dtau_dv, ddq_dq, ddq_dv,
                            workspace):
    """The states k0 .. k1 of the stack, SINCOS_BLOCK at a time: the revolute joints'
    (cos, sin) of a block from one vectorized loop (:func:`.joints.sincos_table`, as
    :func:`.aba._aba_states`), then :func:`_aba_derivatives_state` per state.  The
    intermediates (all but oR, op, ddq, Minv, ddq_dq, ddq_dv) passed with fewer states
    than the stack (one, a stack from :func:`aba_derivatives`: :func:`.rnea.stack_scratch`)
    are kept in slot k % slots: only the results reach memory (the threaded kernel is
    given the stack's arrays)."""
    slots = min(liR.shape[0], lip.shape[0], J.shape[0], oY.shape[0],
                ov.shape[0], oa.shape[0], pA.shape[0], U.shape[0], Dinv.shape[0], u.shape[0],
                f.shape[0], tau_id.shape[0], dtau_dq.shape[0], dtau_dv.shape[0])
    full_composites = oY.shape[0] >= k1  # data.oYcrb is filled
    nq = m.nq
    q_flat = q.reshape(q.shape[0] * nq)
    cs = workspace[9]
    for b0 in range(k0, k1, SINCOS_BLOCK):
        b1 = min(b0 + SINCOS_BLOCK, k1)
        sincos_table(q_flat, b0 * nq, b1 * nq, cs)
        for k in range(b0, b1):
            s = k % slots
            _aba_derivatives_state(m, q[k], v[k], tau[k], f_ext[k], liR[s], lip[s], oR[k],
                                   op[k], J[s], oY[s], ov[s], oa[s], pA[s], U[s], Dinv[s],
                                   u[s], ddq[k], Minv[k], f[s], tau_id[s], dtau_dq[s],
                                   dtau_dv[s], ddq_dq[k], ddq_dv[k], workspace, (k - b0) * nq,
                                   full_composites)


@model_kernel
def _aba_derivatives(model, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u,
                     ddq, Minv, f, tau_id, dtau_dq, dtau_dv, ddq_dq, ddq_dv):
    """The partials of the stack (:func:`_aba_derivatives_states`).  Every array is
    :func:`.borrowed.borrowed_all` (the arguments live for the whole call, the workspace
    until :func:`.borrowed.keep_alive`), as in :func:`.aba._aba`: the passes' compiled
    calls took and released a reference to every array of the model tuple and to each
    per-state view they were passed (the same operations, the same bits)."""
    m = borrowed_model(model_arrays(model))
    workspace = aba_derivatives_workspace(m)
    (q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq, Minv, f, tau_id,
     dtau_dq, dtau_dv, ddq_dq, ddq_dv, borrowed_work) = borrowed_all(
        (q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq, Minv, f, tau_id,
         dtau_dq, dtau_dv, ddq_dq, ddq_dv, workspace))
    _aba_derivatives_states(m, 0, q.shape[0], q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov,
                            oa, pA, U, Dinv, u, ddq, Minv, f, tau_id, dtau_dq, dtau_dv, ddq_dq,
                            ddq_dv, borrowed_work)
    keep_alive(workspace)


def aba_derivatives(model, data, q, v, tau, f_ext=None):
    """Partial derivatives of ddq = ABA(q, v, tau, f_ext).

    Parameters
    ----------
    q : (nq,) or (K, nq); v, tau : (nv,) or (K, nv);
    f_ext : None, (njoints, 6) or (K, njoints, 6), local joint frames.

    Returns
    -------
    dddq_dq, dddq_dv, dddq_dtau : (nv, nv) each, or (K, nv, nv); dddq_dq in
    the tangent space of q, dddq_dtau = M^-1 (as Pinocchio's
    ``computeABADerivatives``).  Also fills ``data.ddq`` (= aba) and ``data.oR, op``.
    For one state (or a stack of one) it fills, as Pinocchio, ``data.ddq_dq``, ``data.ddq_dv``,
    ``data.Minv``, ``data.dtau_dq`` and ``data.dtau_dv`` (at ddq), the world-frame
    ``data.ov``, ``data.oa_gf`` (gravity included), ``data.of`` and ``data.oYcrb``
    (composite inertias); the joint-frame ``data.v``, ``data.a`` are left as they were
    (as Pinocchio's ``computeABADerivatives``).  A stack writes the three results
    straight into the arrays it returns and leaves those fields as they were (as
    :func:`~geppetto.dynamics.rnea_derivatives`).
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.aba_derivatives(model, data, q, v, tau, f_ext)
    if f_ext is None:
        out = np.empty((3, model.nv, model.nv))
        if one_state(_aba_derivatives_one, _aba_derivatives, model, data, q, v, tau, (out,)):
            return out[0], out[1], out[2]
    qs, vs, taus, fs, K, single = as_dynamics_arguments(model, data, q, v, tau, f_ext, "tau")
    d, t = data, stack_scratch(model, data, K)
    # one state (or a stack of one) fills Data as Pinocchio does; a stack writes its three
    # matrices straight into the arrays it returns
    single_state = K == 1
    out = (d.ddq_dq, d.ddq_dv, d.Minv) if single_state else np.empty((3, K, model.nv, model.nv))
    call_kernel(_aba_derivatives, model, qs, vs, taus, fs, t.liR, t.lip, d.oR, d.op, t.J,
                t.oYcrb, t.ov, t.oa_gf, t.pA, t.U, t.Dinv, t.u, d.ddq, out[2], t.of, t.tau,
                t.dtau_dq, t.dtau_dv, out[0], out[1])
    check_invertible(model, out[2], K, "aba_derivatives")
    if single_state:
        return tuple(result(x, K, single).copy() for x in out)
    return out[0], out[1], out[2]


@kernel
def _aba_derivative_f_ext(m, Minv, J, oR, op, out):
    """out[k, :, i, :] = Minv_k J_i^LOCAL^T for every joint i (columns of its support)."""
    Jl = np.zeros((6, m.nv))
    for k in range(Minv.shape[0]):
        for i in range(1, m.njoints):
            express_jacobian(m, i, J[k], oR[k], op[k], i, 0, Jl)
            for r in range(m.nv):
                for a in range(6):
                    s = 0.0
                    for c in range(m.nv):
                        s += Minv[k, r, c] * Jl[a, c]
                    out[k, r, i, a] = s


def aba_derivative_f_ext(model, data, q):
    """dddq/df_ext (nv, njoints, 6): ddq depends on the force on body i through
    M^-1 J_i^T, with J_i the LOCAL Jacobian of joint i (row 0, the universe, is zero).

    Single configuration or stack (then (K, nv, njoints, 6)).  Fills
    ``data.Minv``, ``data.J`` and the placements (one kernel call after
    ``compute_minverse`` and ``compute_joint_jacobians``).
    """
    from .aba import compute_minverse
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    compute_minverse(model, data, qs)
    compute_joint_jacobians(model, data, qs)
    out = np.zeros((K, model.nv, model.njoints, 6))
    _aba_derivative_f_ext(model.arrays, data.Minv[:K], data.J[:K], data.oR[:K], data.op[:K], out)
    return out[0] if single else out


@parallel_kernel("q")
def _aba_derivatives_parallel(m, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U,
                              Dinv, u, ddq, Minv, f, tau_id, dtau_dq, dtau_dv, ddq_dq, ddq_dv,
                              n_chunks):
    """:func:`_aba_derivatives` with the stack split in ``n_chunks`` chunks run by
    Numba's threads; each chunk has its own workspace, so the results do not
    depend on the number of threads."""
    K = q.shape[0]
    for chunk in prange(n_chunks):
        _aba_derivatives_states(m, chunk * K // n_chunks, (chunk + 1) * K // n_chunks, q, v,
                                tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u,
                                ddq, Minv, f, tau_id, dtau_dq, dtau_dv, ddq_dq, ddq_dv,
                                aba_derivatives_workspace(m))
