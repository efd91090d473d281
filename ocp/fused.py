"""One compiled call per phase: a stage's dynamics, integrator, residuals, activations and
cost accumulation evaluated by compiled code, with no Python per term.

Each component of a stage (the dynamics, the integrator, a residual, a cost) hands out a
*step*: a block kernel of this module (or a user's knot kernel, :class:`~.numba_residual.
NumbaResidual`) and the tuple of preallocated arrays and parameters it works on.  A phase
runs its steps in order::

    _free_field(xs, us, m, dynamics, mode)     # f, f_x, f_u (COSTS: _free_kinematics)
    _euler(xs, us, m, integrator, mode)        # x', Fx, Fu
    _clear(out, mode)
    _frame(xs, us, m, residual, mode)          # r, Rx of a residual
    _cost(cost, out, mode)                     # activation, weight * dt, into cost, Lx, ...

``mode``: :data:`CALC` (values), :data:`DIFF` (values and derivatives), :data:`COSTS`
(the costs only, the kinematics refreshed as the residuals need them: the line search),
:data:`TRIAL` (the costs only, the kinematics as they are: the line-search rollout
stored them, :meth:`.stage.StageModel.rollout_trial`).

Two compiled calls per phase: the dynamics (or a kinematics pass) block, then the rest.
The dynamics' block is chosen per mode in Python (:attr:`Step.by_mode`): each compiles
only what its modes run (FreeDynamics: :func:`_free_field` for CALC and DIFF,
:func:`_free_kinematics` for COSTS; contacts and impulses: the values for CALC and
COSTS, the derivatives for DIFF), so that ``calc_costs`` and the line search do not
compile the derivative kernels.
The rest runs in :func:`_interpret`, one kernel compiled once for every composition of
built-in blocks (a program of rows over the phase's operands: its float arrays in one
typed List of vectors, its scalars in flat tables): a new problem structure compiles
nothing.  A user's knot kernel (:class:`~.numba_residual.NumbaResidual`) is a block of
the interpreter too, :func:`_user`: it calls, by address, the kernel's knot loop
(:func:`knot_loop`), a few lines of Python written once per kernel to
``<cache>/phases/<hash>.py`` (the hash covers the source, this package's kernels and
the user kernel's code) and compiled with the project's options, so Numba's on-disk
cache keeps it.  The interpreter's code does not depend on the user's, so a phase with
a user residual is a program like any other (and the horizon's one-call evaluation and
trial, :mod:`.horizon`, run it); a new kernel compiles its loop alone.  Steps the
interpreter cannot take (operands of other types) get a generated phase function
(:func:`phase_function`, the same cache folder): its first compile costs seconds (LLVM
compiles the blocks' code linked into it again), later processes load it.

Blocks are serial (one Numba thread); a stage evaluated on several threads takes the
per-term path with the parallel kernels.  Contact and impulse dynamics are separate
blocks (:func:`_contact_field`, :func:`_impulse_field` and their ``_diff``
blocks: the constrained dynamics' state kernels on scratch made at build) that return whether the contacts were regular; the
phase raises their stage's error when not.  A component without a step
(the RK schemes, custom dynamics, JointTorqueResidual, SmoothFrictionConeResidual, a
frame translation restricted to some axes) makes its stage take the per-term path: the
same results, more Python.  An RK FreeDynamics stage whose terms all have steps runs
them as interpreted programs per cost point, its stages' fields by the dynamics' step
(:meth:`.stage.StageModel._point_programs`, :meth:`.integrators.Integrator.
fused_stages`), and the RK scheme itself in Python.
"""
import hashlib
import importlib.util
import os
import sys
import threading
import types as pytypes

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic
from numba.experimental.structref import _Utils as _StructUtils
from numba.np.arrayobj import make_array, populate_array

from ..dynamics.borrowed import borrow_value
from ..dynamics.config import (declare_imports, imported_modules, imports_fingerprint,
                               inline_kernel, kernel)
from ..dynamics.constrained_dynamics import (_constraint_dynamics_state,
                                             _impulse_state, impulse_dynamics_derivatives_stack,
                                             _joint_outputs,
                                             constraint_dynamics_derivatives_kkt)
from ..dynamics.constraints import constraint_placements_state
from ..dynamics.kinematics import _compute_joint_jacobians, _forward_kinematics
from ..dynamics.liegroup_derivatives import _difference_stack, _lie_jacobians
from ..dynamics.liegroups import _integrate
from ..dynamics.native import call_checked
from .contact_step import DERIVATIVES, VALUES, _contact_jacobians, solved_at
from .costs import _accumulate, _accumulate_rows, _activate
from .held import HeldType, held, typed_list
from .integrators import _semi_implicit_jacobian
from .residuals import (_com_residual, _frame_residual, _frame_velocity_residual,
                        JACOBIANS, PLACEMENTS)
from .state import _integrate_chain

# NumPy integers, not Python ints: Numba types a Python int global as a literal, so a
# kernel passing one on (the horizon trial's ``_interpret(..., TRIAL)``) compiled its
# callee, and every block below it, once more per constant; an np.int64 is an int64 (the
# type a mode passed from Python has), so every caller shares one specialization
CALC, DIFF, COSTS, TRIAL = np.int64(0), np.int64(1), np.int64(2), np.int64(3)

_activate_s = _activate.serial
_accumulate_s = _accumulate.serial
_accumulate_rows_s = _accumulate_rows.serial
_frame_residual_s = _frame_residual.serial
_frame_velocity_residual_s = _frame_velocity_residual.serial
_com_residual_s = _com_residual.serial


# --- dynamics --------------------------------------------------------------------------

@inline_kernel
def _split_states(xs, nq, nv, qs, vs):
    """qs = xs[:, :nq], vs = xs[:, nq:nq + nv] (contiguous copies the kernels read)."""
    for k in range(xs.shape[0]):
        for i in range(nq):
            qs[k, i] = xs[k, i]
        for i in range(nv):
            vs[k, i] = xs[k, nq + i]


@kernel
def _free_field(xs, us, m, a, mode):
    """f = (v, ABA(q, v, B u - D v)) and, in DIFF mode, f_x, f_u of FreeDynamics (see
    :meth:`.dynamics.FreeDynamics.calc_diff`): the CALC and DIFF block of the step (COSTS
    mode runs :func:`_free_kinematics`, TRIAL mode nothing: see :class:`Step`).  It runs
    the phase's knots across SIMD lanes
    (:func:`~geppetto.dynamics.derivative_lanes.aba_tiles`, called by its (address, key)
    in ``lanes``: see :meth:`.dynamics.FreeDynamics.fused_step`), which also leave the
    placements and world Jacobians the residuals read in the Data."""
    B, damping, level, buf, d, out, lanes = a
    qs, vs, tau, f_ext, zeros = buf
    liR, lip, oR, op, J, IA, Ycrb, v, acc, pA, U, Dinv, u, ddq, Minv, fj, tau_id, \
        dtau_dq, dtau_dv, M, ddq_dq, ddq_dv = d
    work, oR_flat, op_flat, J_flat, Minv_flat, ddq_dq_flat, ddq_dv_flat, tiles = lanes
    f, f_x, f_u = out
    K = xs.shape[0]
    nv = m.nv
    _split_states(xs, m.nq, nv, qs, vs)
    for k in range(K):
        for i in range(nv):
            s = 0.0
            for j in range(B.shape[1]):
                s += B[i, j] * us[k, j]
            tau[k, i] = s - damping[i] * vs[k, i]
    call_checked(tiles[0], tiles[1], (m, qs, vs, tau, mode == DIFF, work, ddq, ddq_dq_flat,
                                      ddq_dv_flat, Minv_flat, oR_flat, op_flat, J_flat))
    for k in range(K):
        for i in range(nv):
            f[k, i] = vs[k, i]
            f[k, nv + i] = ddq[k, i]
    if mode == DIFF:
        _free_jacobians(B, damping, Minv, ddq_dq, ddq_dv, f_x, f_u)


@kernel
def _free_kinematics(xs, us, m, a, mode):
    """The COSTS block of the FreeDynamics step (the arguments of :func:`_free_field`):
    only the knots' placements (level 1) or placements and world Jacobians (level 2) that
    the residuals read.  A block of its own, so that the line search's costs and
    ``calc_costs`` do not compile the lanes' ABA and its derivatives."""
    B, damping, level, buf, d, out, lanes = a
    qs, vs, tau, f_ext, zeros = buf
    liR, lip, oR, op, J, IA, Ycrb, v, acc, pA, U, Dinv, u, ddq, Minv, fj, tau_id, \
        dtau_dq, dtau_dv, M, ddq_dq, ddq_dv = d
    _knot_kinematics(m, xs, level, qs, zeros, liR, lip, oR, op, J, v, acc)


@kernel
def _free_jacobians(B, damping, Minv, ddq_dq, ddq_dv, f_x, f_u):
    """f_x = [[0, I], [dddq_dq, dddq_dv - M^-1 D]], f_u = [[0], [M^-1 B]]."""
    K, nv = ddq_dq.shape[0], ddq_dq.shape[1]
    for k in range(K):
        for i in range(nv):
            f_x[k, i, nv + i] = 1.0
            for j in range(nv):
                f_x[k, nv + i, j] = ddq_dq[k, i, j]
                f_x[k, nv + i, nv + j] = ddq_dv[k, i, j] - Minv[k, i, j] * damping[j]
            for j in range(B.shape[1]):
                s = 0.0
                for c in range(nv):
                    s += Minv[k, i, c] * B[c, j]
                f_u[k, nv + i, j] = s


# --- integrators -----------------------------------------------------------------------

@kernel
def _euler(xs, us, m, a, mode):
    """x' = x (+) w, Fx = Dx + Dw w_x, Fu = Dw w_u for "explicit_euler" (scheme 0:
    w = dt f) and "euler" (scheme 1: w = (dt (v + dt a), dt a)) from the field in
    (f, f_x, f_u) (see :class:`.integrators.Integrator`); nothing in COSTS and TRIAL
    modes."""
    flat, scheme, dt, field, work, out, lie = a
    f, f_x, f_u = field
    w, w_x, w_u, qs, dq, qout = work
    xnext, Fx, Fu = out
    s4, t4, s3, xi, W, S, D = lie
    if mode == COSTS or mode == TRIAL:
        return
    K, ndx = f.shape
    nv = ndx // 2
    for k in range(K):
        if scheme == 0:
            for i in range(ndx):
                w[k, i] = dt * f[k, i]
        else:
            for i in range(nv):
                w[k, nv + i] = dt * f[k, nv + i]
                w[k, i] = dt * f[k, i] + dt * w[k, nv + i]
    nq = xs.shape[1] - nv
    for k in range(K):
        for i in range(nq):
            qs[k, i] = xs[k, i]
        for i in range(nv):
            dq[k, i] = w[k, i]
    _integrate(m, qs, dq, qout, s4, t4, s3)
    for k in range(K):
        for i in range(nq):
            xnext[k, i] = qout[k, i]
        for i in range(nv):
            xnext[k, nq + i] = xs[k, nq + i] + w[k, nv + i]
    if mode != DIFF:
        return
    scale = dt
    if scheme == 1:
        scale = 1.0
        _semi_implicit_jacobian(f_x, dt, nv, w_x)
        _semi_implicit_jacobian(f_u, dt, nv, w_u)
        field_x, field_u = w_x, w_u
    else:
        field_x, field_u = f_x, f_u
    if flat:
        for k in range(K):
            for r in range(ndx):
                for c in range(ndx):
                    Fx[k, r, c] = field_x[k, r, c] * scale
                Fx[k, r, r] += 1.0
                for c in range(Fu.shape[2]):
                    Fu[k, r, c] = field_u[k, r, c] * scale
    else:
        _integrate_chain(m, dq, scale, field_x, field_u, Fx, Fu, xi, W, S, D)


# --- contact and impulse dynamics ----------------------------------------------------

@inline_kernel
def _torques(xs, us, m, B, damping, qs, vs, tau):
    """qs, vs of the knots and tau = B u - D v."""
    _split_states(xs, m.nq, m.nv, qs, vs)
    for k in range(xs.shape[0]):
        for i in range(m.nv):
            s = 0.0
            for j in range(B.shape[1]):
                s += B[i, j] * us[k, j]
            tau[k, i] = s - damping[i] * vs[k, i]


@kernel
def _contact_field(xs, us, holder, mode):
    """ContactDynamics' CALC and COSTS block: ddq, lambda = constraint_dynamics(q, v, B u -
    D v), f = (v, ddq) (the values in COSTS mode too: the force residuals read lambda,
    the kinematic ones the placements and Jacobians the solve leaves; TRIAL mode runs
    nothing: the rollout stored them).  Stamps the data with (xs, us) and VALUES; returns
    whether the contacts are regular at every knot.  ``holder.item`` = (model, arguments)
    (:func:`held`); DIFF mode runs :func:`_contact_field_diff` on the same arguments."""
    m, a = _borrowed_item(holder)
    ca, B, damping, settings, buf, d, out, stamp, ws, _, _, _ = a
    qs, vs, tau = buf
    liR, lip, oR, op, J, oY, M, ddq = d
    f, f_x, f_u, lam, lam_x, lam_u, ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv, dlam_dtau, \
        iterations, regular = out
    mu, max_iterations, accuracy = settings
    _torques(xs, us, m, B, damping, qs, vs, tau)
    ok = True
    for k in range(xs.shape[0]):
        iterations[k], regular[k] = _constraint_dynamics_state(
            m, ca, qs[k], vs[k], tau[k], mu, max_iterations, accuracy, liR[k], lip[k], oR[k],
            op[k], J[k], oY[k], M[k], ddq[k], lam[k], ws)
        ok = ok and regular[k]
        for i in range(m.nv):
            f[k, i] = vs[k, i]
            f[k, m.nv + i] = ddq[k, i]
    _stamp(xs, us, stamp, mode)
    return ok


@kernel
def _contact_field_diff(xs, us, holder, mode):
    """ContactDynamics' DIFF block: the values of :func:`_contact_field` and f_x, f_u,
    lambda_x, lambda_u (see :meth:`.contacts.ContactDynamics.calc_diff`); stamps the data
    with DERIVATIVES; returns as :func:`_contact_field`.  A knot whose solve the last
    trial rollout kept at this very point (``solved``, :func:`.contact_step.solved_at`:
    the accepted trial of a DDP iteration) takes it (placements, Jacobians, M, ddq,
    lambda, the KKT factors: the same kernel on the same point, so the same bits) and
    only differentiates, as Crocoddyl's calcDiff reuses its calc.  ``direct`` (the
    actuation selects dofs, no damping: :meth:`.contacts.ContactDynamics.fused_step`):
    the KKT pass differentiates in u itself (d/dtau B, the actuated dofs' columns of
    d/dtau) and each knot's f_x, f_u, lambda_x, lambda_u are written from it at once
    (:func:`_contact_rows`), without the raw partials (ddq_dq ... dlam_dtau, not
    filled) or the products with B; otherwise the raw partials, then
    :func:`.contact_step._contact_jacobians`."""
    m, a = _borrowed_item(holder)
    ca, B, damping, settings, buf, d, out, stamp, ws, dws, solved, direct = a
    qs, vs, tau = buf
    liR, lip, oR, op, J, oY, M, ddq = d
    f, f_x, f_u, lam, lam_x, lam_u, ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv, dlam_dtau, \
        iterations, regular = out
    mu, max_iterations, accuracy = settings
    _torques(xs, us, m, B, damping, qs, vs, tau)
    kkt_ws = ws[2]
    ok = True
    for k in range(xs.shape[0]):
        kkt = kkt_ws
        if solved_at(solved, k, xs[k], us[k]):
            iterations[k], regular[k] = solved[11][k], True
            _take_solve(solved, k, liR[k], lip[k], oR[k], op[k], J[k], M[k], ddq[k], lam[k])
            con = ws[1]
            constraint_placements_state(ca, oR[k], op[k], con[0], con[1], con[2], con[3])
            kkt = (solved[8][k], kkt_ws[1], kkt_ws[2], solved[9][k], solved[10][k], kkt_ws[5])
        else:
            iterations[k], regular[k] = _constraint_dynamics_state(
                m, ca, qs[k], vs[k], tau[k], mu, max_iterations, accuracy, liR[k], lip[k],
                oR[k], op[k], J[k], oY[k], M[k], ddq[k], lam[k], ws)
        ok = ok and regular[k]
        constraint_dynamics_derivatives_kkt(m, ca, vs[k], mu, iterations[k], oR[k], op[k], J[k],
                                            oY[k], M[k], ddq[k], lam[k], kkt, ws, dws)
        if direct:
            _contact_rows(m.nv, vs[k], ddq[k], dws[10], f[k], f_x[k], f_u[k], lam_x[k],
                          lam_u[k])
        else:
            _joint_outputs(m.nv, dws[10], ddq_dq[k], ddq_dv[k], ddq_dtau[k], dlam_dq[k],
                           dlam_dv[k], dlam_dtau[k])
    if not direct:
        _contact_jacobians(vs, ddq, ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv, dlam_dtau, B,
                           damping, f, f_x, f_u, lam_x, lam_u)
    _stamp(xs, us, stamp, mode)
    return ok


@inline_kernel
def _contact_rows(nv, v, ddq, joint, f, f_x, f_u, lam_x, lam_u):
    """One knot's f = (v, ddq), f_x = [[0, I], [ddq_dq, ddq_dv]], f_u = [[0], [ddq_du]],
    lam_x = [dlam_dq, dlam_dv], lam_u = dlam_du from the joint KKT pass in u
    (``joint``, :func:`~geppetto.dynamics.constrained_dynamics._kkt_derivatives_joint`
    with the actuated dofs' columns; no damping): contiguous row copies.  The values of
    :func:`.contact_step._contact_jacobians` with B selecting those dofs and D = 0 (its
    sums over the rows of B add zeros to the one term; ``0.0 +`` keeps the sign of
    their zeros)."""
    Z, dlam, n = joint[0], joint[3], f_u.shape[1]
    for i in range(nv):
        f[i] = v[i]
        f[nv + i] = ddq[i]
    for i in range(nv):
        row = f_x[i]
        for j in range(2 * nv):
            row[j] = 0.0
        row[nv + i] = 1.0
        for c in range(n):
            f_u[i, c] = 0.0
    for i in range(nv):
        row, z = f_x[nv + i], Z[i]
        for j in range(2 * nv):
            row[j] = z[j]
        for c in range(n):
            f_u[nv + i, c] = 0.0 + z[2 * nv + c]
    for a in range(dlam.shape[0]):
        row, z = lam_x[a], dlam[a]
        for j in range(2 * nv):
            row[j] = z[j]
        for c in range(n):
            lam_u[a, c] = 0.0 + z[2 * nv + c]


@inline_kernel
def _take_solve(solved, k, liR, lip, oR, op, J, M, ddq, lam):
    """Knot k's placements, Jacobians, M, ddq and lambda of ``solved`` into the Data's."""
    liR[:, :, :] = solved[0][k]
    lip[:, :] = solved[1][k]
    oR[:, :, :] = solved[2][k]
    op[:, :] = solved[3][k]
    J[:, :] = solved[4][k]
    M[:, :] = solved[5][k]
    ddq[:] = solved[6][k]
    lam[:] = solved[7][k]


@kernel
def _impulse_field(xs, us, holder, mode):
    """ImpulseDynamics' CALC and COSTS block: v+, Lambda = impulse_dynamics(q, v), f = (0,
    v+ - v); modes and return as :func:`_contact_field` (DIFF mode runs
    :func:`_impulse_field_diff`).  ``holder.item`` = (model, (model without gravity,
    constraints, constraints without Baumgarte gains, restitution, settings, scratch,
    Data arrays, outputs, stamp, solve workspace, derivatives workspace))
    (:func:`~geppetto.dynamics.constrained_dynamics.impulse_derivatives_workspace`)."""
    m, a = holder.item
    m0, ca, ca0, restitution, settings, buf, d, out, stamp, ws, _ = a
    qs, vs = buf
    liR, lip, oR, op, J, oY, M, v_after = d
    f, f_x, f_u, lam, lam_x, lam_u, dv_dq, dv_dv, dlam_dq, dlam_dv, iterations, regular = out
    mu, max_iterations, accuracy = settings
    _split_states(xs, m.nq, m.nv, qs, vs)
    ok = True
    for k in range(xs.shape[0]):
        iterations[k], regular[k] = _impulse_state(
            m, ca, qs[k], vs[k], restitution, mu, max_iterations, accuracy, liR[k], lip[k],
            oR[k], op[k], J[k], oY[k], M[k], v_after[k], lam[k], ws)
        ok = ok and regular[k]
    _impulse_jump(vs, v_after, f)
    _stamp(xs, us, stamp, mode)
    return ok


@kernel
def _impulse_field_diff(xs, us, holder, mode):
    """ImpulseDynamics' DIFF block: the values of :func:`_impulse_field` and f_x = [[0, 0],
    [dv+_dq, dv+_dv - I]], f_u = 0, lambda_x = [dLambda_dq, dLambda_dv], lambda_u = 0 (see
    :meth:`.contacts.ImpulseDynamics.calc_diff`; ``m0``, ``ca0``: the model without gravity
    and the constraints without Baumgarte gains, the derivatives' kernel; the workspaces
    are the step's, made with the data: no allocation per call).  The item's arrays are
    borrowed (the holder, an argument, owns them for the whole call): the stack's calls
    per knot count no references."""
    m, a = _borrowed_item(holder)
    m0, ca, ca0, restitution, settings, buf, d, out, stamp, ws, dws = a
    qs, vs = buf
    liR, lip, oR, op, J, oY, M, v_after = d
    f, f_x, f_u, lam, lam_x, lam_u, dv_dq, dv_dv, dlam_dq, dlam_dv, iterations, regular = out
    mu, max_iterations, accuracy = settings
    K, nv = xs.shape[0], m.nv
    _split_states(xs, m.nq, nv, qs, vs)
    ok = impulse_dynamics_derivatives_stack(m, m0, ca, ca0, qs, vs, restitution, mu,
                                            max_iterations, accuracy, liR, lip, oR, op, J, oY, M,
                                            v_after, lam, iterations, dv_dq, dv_dv, dlam_dq,
                                            dlam_dv, ws, dws)
    for k in range(K):
        regular[k] = ok
    _impulse_jump(vs, v_after, f)
    f_x[:] = 0.0
    f_u[:] = 0.0
    lam_u[:] = 0.0
    for k in range(K):
        for i in range(nv):
            for j in range(nv):
                f_x[k, nv + i, j] = dv_dq[k, i, j]
                f_x[k, nv + i, nv + j] = dv_dv[k, i, j]
            f_x[k, nv + i, nv + i] -= 1.0
        for r in range(lam.shape[1]):
            for j in range(nv):
                lam_x[k, r, j] = dlam_dq[k, r, j]
                lam_x[k, r, nv + j] = dlam_dv[k, r, j]
    _stamp(xs, us, stamp, mode)
    return ok


@inline_kernel
def _impulse_jump(vs, v_after, f):
    """f = (0, v+ - v) at every knot."""
    nv = vs.shape[1]
    for k in range(vs.shape[0]):
        for i in range(nv):
            f[k, i] = 0.0
            f[k, nv + i] = v_after[k, i] - vs[k, i]


@kernel
def _stamp(xs, us, stamp, mode):
    """The stamp of a ContactDynamicsData (xs, us, holding): the point and what the data
    holds there (DERIVATIVES or VALUES)."""
    sx, su, holding = stamp
    sx[:, :] = xs
    su[:, :] = us
    holding[0] = DERIVATIVES if mode == DIFF else VALUES


# --- kinematics ----------------------------------------------------------------------

@inline_kernel
def _knot_kinematics(m, xs, level, qs, zeros, liR, lip, oR, op, J, v, acc):
    """qs = the knots' configurations, then their placements (level PLACEMENTS) or
    placements and world Jacobians (level JACOBIANS)."""
    _split_states(xs, m.nq, 0, qs, qs)
    if level == JACOBIANS:
        _compute_joint_jacobians(m, qs, liR, lip, oR, op, J)
    elif level == PLACEMENTS:
        _forward_kinematics(m, qs, zeros, zeros, 0, liR, lip, oR, op, v, acc)


@kernel
def _kinematics(xs, us, holder, mode):
    """The knots' placements (level 1) or placements and world Jacobians (level 2) (the
    terminal knot's pass); ``holder.item`` = (model, arguments) (:func:`held`), its arrays
    borrowed (the holder, an argument, owns them for the whole call): the passes' calls
    per joint count no references."""
    m, a = _borrowed_item(holder)
    level, qs, zeros, liR, lip, oR, op, J, v, acc = a
    _knot_kinematics(m, xs, level, qs, zeros, liR, lip, oR, op, J, v, acc)


def kinematics_step(arrays, kinematics, level):
    """The :func:`_kinematics` step on the kinematics Data of the phase's knots."""
    K, nq, nv = kinematics.oR.shape[0], arrays.nq, arrays.nv
    k = kinematics
    return Step(held((arrays, (int(level), np.zeros((K, nq)), np.zeros((K, nv)), k.liR,
                               k.lip, k.oR, k.op, k.J, k.v, k.a))), _kinematics, separate=True)


# --- residuals -------------------------------------------------------------------------

@kernel
def _state(xs, us, m, a, mode):
    """r = x (-) x_ref of a multibody state; Rx's configuration block (Lie Jacobians)
    unless the state is flat (its constant blocks are written once, at build)."""
    flat, ref, ref_q, qs, dq, r, Rx, block, xi, W, S = a
    K = xs.shape[0]
    nq, nv = m.nq, m.nv
    for k in range(K):
        for i in range(nq):
            ref_q[k, i] = ref[k, i]
            qs[k, i] = xs[k, i]
    _difference_stack(m, ref_q, qs, dq)
    for k in range(K):
        for i in range(nv):
            r[k, i] = dq[k, i]
            r[k, nv + i] = xs[k, nq + i] - ref[k, nq + i]
    if mode == DIFF and not flat:
        _lie_jacobians(m, dq, 2, 1.0, 1.0, block, xi, W, S)
        for k in range(K):
            for i in range(nv):
                for j in range(nv):
                    Rx[k, i, j] = block[k, i, j]


@kernel
def _control(xs, us, a, mode):
    """r = u - u_ref (Ru = I, constant)."""
    ref, r = a
    for k in range(r.shape[0]):
        for i in range(r.shape[1]):
            r[k, i] = us[k, i] - ref[k, i]


@kernel
def _frame(xs, us, m, a, mode):
    """Frame translation (kind 0), rotation (1) or placement (2): :func:`.residuals.
    _frame_residual`."""
    oR, op, J, joint, fR, fp, kind, ref_R, ref_p, r, Rx = a
    _frame_residual_s(m, oR, op, J, joint, fR, fp, kind, ref_R, ref_p, mode == DIFF, r, Rx)


@kernel
def _frame_velocity(xs, us, m, a, mode):
    """:func:`.residuals._frame_velocity_residual` on the knots' velocities."""
    oR, op, J, vs, joint, fR, fp, reference, ref, r, Rx = a
    nq = m.nq
    for k in range(xs.shape[0]):
        for i in range(vs.shape[1]):
            vs[k, i] = xs[k, nq + i]
    _frame_velocity_residual_s(m, oR, op, J, vs, joint, fR, fp, reference, ref, mode == DIFF,
                               r, Rx)


@kernel
def _com(xs, us, m, a, mode):
    """:func:`.residuals._com_residual`."""
    oR, op, J, ref, r, Rx = a
    _com_residual_s(m, oR, op, J, ref, mode == DIFF, r, Rx)


@kernel
def _contact_wrench(xs, us, a, mode):
    """r = A w - ref for the force w of one constraint (rows row0:row0+size of the contact
    forces lam that the stage's dynamics left), w in world axes (rotate 1: w = R l per
    block of 3, R = oR[joint] R1 the contact frame), in the contact frame's axes (2:
    w = R^T l) or as it is (0); the Jacobians of :meth:`.contacts._ContactResidual.
    _force_in`: d(R l) = R dl - [R l]x J_w dq, d(R^T l) = R^T dl + R^T [l]x J_w dq."""
    lam, lam_x, lam_u, oR, J, joint, R1, row0, dofs, A, ref, rotate, r, Rx, Ru, w, w_x, \
        w_u, Rt = a
    K, size = w.shape
    with_derivatives = mode == DIFF
    for k in range(K):
        if rotate != 0:
            for i in range(3):
                for j in range(3):
                    s = 0.0
                    for c in range(3):
                        s += oR[k, joint, i, c] * R1[c, j]
                    if rotate == 1:
                        Rt[i, j] = s
                    else:
                        Rt[j, i] = s
        for b in range(0, size, 3):
            _rotate_rows(Rt, rotate, lam[k], row0 + b, w[k], b)
            if not with_derivatives:
                continue
            _rotate_rows(Rt, rotate, lam_x[k], row0 + b, w_x[k], b)
            _rotate_rows(Rt, rotate, lam_u[k], row0 + b, w_u[k], b)
            if rotate != 0:
                _rotation_columns(Rt, rotate, lam[k], row0 + b, w[k], b, J[k], dofs, w_x[k])
        _linear_map(A, w[k], w_x[k], w_u[k], ref, k, with_derivatives, r[k], Rx[k], Ru[k])


@kernel
def _rotate_rows(Rt, rotate, source, s0, target, t0):
    """target[t0:t0+3] = Rt source[s0:s0+3] (rows of a vector or of a matrix), or a copy
    (rotate 0)."""
    for i in range(3):
        if rotate == 0:
            target[t0 + i] = source[s0 + i]
        else:
            target[t0 + i] = Rt[i, 0] * source[s0] + Rt[i, 1] * source[s0 + 1] + \
                Rt[i, 2] * source[s0 + 2]


@kernel
def _rotation_columns(Rt, rotate, lam, s0, w, t0, J, dofs, w_x):
    """The rotation's part of w_x on the columns ``dofs`` (J_w = J[3:]): world (1)
    -= [w]x J_w, contact frame (2) += Rt [l]x J_w."""
    for p in range(dofs.shape[0]):
        c = dofs[p]
        j0, j1, j2 = J[3, c], J[4, c], J[5, c]
        if rotate == 1:
            x0, x1, x2 = w[t0], w[t0 + 1], w[t0 + 2]
            w_x[t0, c] -= x1 * j2 - x2 * j1
            w_x[t0 + 1, c] -= x2 * j0 - x0 * j2
            w_x[t0 + 2, c] -= x0 * j1 - x1 * j0
        else:
            x0, x1, x2 = lam[s0], lam[s0 + 1], lam[s0 + 2]
            y0, y1, y2 = x1 * j2 - x2 * j1, x2 * j0 - x0 * j2, x0 * j1 - x1 * j0
            for i in range(3):
                w_x[t0 + i, c] += Rt[i, 0] * y0 + Rt[i, 1] * y1 + Rt[i, 2] * y2


@kernel
def _linear_map(A, w, w_x, w_u, ref, k, with_derivatives, r, Rx, Ru):
    """r = A w[:n] - ref[k] (no reference when ref has no columns), Rx = A w_x[:n],
    Ru = A w_u[:n], n = A's columns."""
    nr, n = A.shape
    for i in range(nr):
        s = 0.0
        for j in range(n):
            s += A[i, j] * w[j]
        r[i] = s - ref[k, i] if ref.shape[1] == nr else s
        if not with_derivatives:
            continue
        for c in range(Rx.shape[1]):
            s = 0.0
            for j in range(n):
                s += A[i, j] * w_x[j, c]
            Rx[i, c] = s
        for c in range(Ru.shape[1]):
            s = 0.0
            for j in range(n):
                s += A[i, j] * w_u[j, c]
            Ru[i, c] = s


# --- user residuals ------------------------------------------------------------------

@kernel
def _user(xs, us, a, mode):
    """A user residual (:class:`~.numba_residual.NumbaResidual`): ``a`` = (address, key,
    oR, op, J, reference, parameters, r, Rx, Ru), (address, key) those of the compiled
    knot loop of the user's kernel (:func:`knot_loop`) for C-contiguous xs, us, these
    operands' types and an int64 mode (:meth:`.numba_residual.NumbaResidual.fused_step`
    looks them up; :func:`~geppetto.dynamics.native.call_checked`).  Called by address,
    the user's code is not linked into this block nor into the interpreter: their types,
    and so their compiled code, do not depend on it."""
    address, key, oR, op, J, reference, parameters, r, Rx, Ru = a
    call_checked(address, key, (np.ascontiguousarray(xs), np.ascontiguousarray(us),
                                (oR, op, J, reference, parameters, r, Rx, Ru), mode))


# --- costs ---------------------------------------------------------------------------

@kernel
def _clear(out, mode):
    """cost = 0 (and its derivatives in DIFF mode)."""
    cost, Lx, Lu, Lxx, Luu, Lxu = out
    cost[:] = 0.0
    if mode == DIFF:
        Lx[:] = 0.0
        Lu[:] = 0.0
        Lxx[:] = 0.0
        Luu[:] = 0.0
        Lxu[:] = 0.0


@kernel
def _cost(a, out, mode):
    """Activation of r, then cost += w a (and Lx, Lu, Lxx, Luu, Lxu, Gauss-Newton) with
    w = scale * the knot's weight: :meth:`.costs.Cost.add`."""
    code, params, r, value, a_r, A_rr, weights, scaled, scale, Rx, Ru, with_u, with_x, \
        smooth2 = a
    cost, Lx, Lu, Lxx, Luu, Lxu = out
    _activate_s(code, params, r, value, a_r, A_rr)
    for k in range(weights.shape[0]):
        scaled[k] = weights[k] * scale
    with_derivatives = mode == DIFF
    if smooth2:
        _accumulate_s(scaled, value, a_r, A_rr, Rx, Ru, cost, Lx, Lu, Lxx, Luu, Lxu, with_u,
                      with_derivatives, False, with_x)
    else:
        _accumulate_rows_s(scaled, value, a_r, A_rr, Rx, Ru, cost, Lx, Lu, Lxx, Luu, Lxu,
                           with_u, with_derivatives, with_x, 1)


# --- steps and generated phase functions ----------------------------------------------

class Step:
    """One call of a phase function: ``block`` (a kernel of this module, called
    ``block(xs, us, args, mode)``, ``block(xs, us, model, args, mode)`` when the step
    has a ``model`` (ModelArrays: passed once per phase, however many steps use it), or
    with ``cost=True`` ``block(args, out, mode)``) or a user knot kernel
    (``knot_kernel``: the phase loops over the knots and calls it, see
    :mod:`.numba_residual`), on ``args``."""

    def __init__(self, args, block=None, cost=False, knot_kernel=None, model=None,
                 separate=False, failed=None, by_mode=None):
        self.args, self.block, self.cost, self.knot_kernel = args, block, cost, knot_kernel
        self.model = model
        # a separate block that returns False calls ``failed()`` (which raises)
        self.failed = failed
        # a heavy block (the dynamics, a kinematics pass) called on its own before the
        # phase function: linked into it, LLVM would optimize its code again for every
        # new composition (measured on ur5: 11 s instead of a few)
        self.separate = separate
        # a separate step's block in each mode ({mode: block} on ``args``; a mode left
        # out runs nothing; default ``block`` in every mode but TRIAL).  Blocks of their
        # own per mode compile only what their modes run: the line search's COSTS block
        # of FreeDynamics is a kinematics pass, not the lanes' ABA and its derivatives
        if by_mode is None:
            by_mode = {CALC: block, DIFF: block, COSTS: block}
        self.by_mode = tuple(by_mode.get(mode) for mode in (CALC, DIFF, COSTS, TRIAL))


def _model_indices(steps):
    """(the distinct models of ``steps`` by identity, each step's index into them or -1)."""
    models, indices = [], []
    for step in steps:
        if step.model is None:
            indices.append(-1)
            continue
        for j, model in enumerate(models):
            if model is step.model:
                indices.append(j)
                break
        else:
            indices.append(len(models))
            models.append(step.model)
    return tuple(models), indices


def cost_step(cost, cdata, scale, with_u):
    """The :func:`_cost` step of ``cost`` (data ``cdata``) at ``scale`` (dt b_j)."""
    rdata, residual = cdata.residual, cost.residual
    return Step((np.int64(cost.activation.code), cdata.params, rdata.r, cdata.value, cdata.a_r,
                 cdata.A_rr, cdata.weights, cdata.scaled, float(scale), rdata.Rx, rdata.Ru,
                 bool(with_u), bool(residual.depends_on_state),
                 cost.activation.code == 4), _cost, cost=True)


def cost_steps(costs, cost_data, kinematics, state, scale, with_u):
    """[residual step, cost step] of every cost, or None if a residual has no step."""
    steps = []
    for cost, cdata in zip(costs, cost_data):
        make = getattr(cost.residual, "fused_step", None)
        step = None if make is None else make(cdata.residual, kinematics, state)
        if step is None:
            return None
        steps += [step, cost_step(cost, cdata, scale, with_u and cost.residual.uses_control)]
    return steps


_LOCK = threading.Lock()
_MODULES = {}
_USER_FINGERPRINTS = {}
_IMPORTED = {}


def _kernel_fingerprint(function):
    """The code of a user kernel and the contents of the source files of it and of what it
    compiles in (:func:`_user_sources`), once per process and kernel: an edited kernel,
    helper or module constant gets a new phase file.  (Numba's cache of the generated
    loop checks only the loop file's own stamp, and the kernel, its helpers and the
    globals they read are compiled into the loop: without this an edit of a helper or a
    constant kept running the old code.)"""
    fingerprint = _USER_FINGERPRINTS.get(function)
    if fingerprint is None:
        code = getattr(function, "py_func", function).__code__
        digest = hashlib.sha256(repr((code.co_code, code.co_consts, code.co_names,
                                      function.__module__, function.__qualname__)).encode())
        files, package_modules = _user_sources(function)
        digest.update(imports_fingerprint(package_modules).encode())
        for path in sorted(files):
            try:
                with open(path, "rb") as handle:
                    content = handle.read()
            except OSError:  # no file (an interactive session): its code above only
                content = b""
            digest.update(path.encode() + b"\0" + content + b"\0")
        fingerprint = _USER_FINGERPRINTS[function] = digest.hexdigest()
    return fingerprint


def _user_sources(function):
    """The source files of a user kernel and of the Numba functions it calls, found
    through the names its code reads (globals, closure cells, attributes of modules it
    reads, recursively), and of the modules whose constants it reads; and apart, the
    package's modules of the package's kernels it calls (not followed further: their
    imports are, by :func:`~..dynamics.config.imports_fingerprint`)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    files, package_modules, seen, pending = set(), set(), set(), [function]
    while pending:
        py_func = getattr(pending.pop(), "py_func", None)
        if not isinstance(py_func, pytypes.FunctionType) or py_func in seen:
            continue
        seen.add(py_func)
        filename = os.path.abspath(py_func.__code__.co_filename)
        if filename.startswith(package):
            package_modules.add(py_func.__module__)
            continue
        files.add(filename)
        names, codes = set(), [py_func.__code__]
        while codes:
            code = codes.pop()
            names.update(code.co_names)
            codes += [c for c in code.co_consts if isinstance(c, pytypes.CodeType)]
        values = [py_func.__globals__.get(name) for name in names]
        values += _cell_contents(py_func)
        for value in values:
            if isinstance(value, pytypes.ModuleType):
                for name in names:
                    attribute = getattr(value, name, None)
                    if hasattr(attribute, "py_func"):
                        pending.append(attribute)
                    elif isinstance(attribute, (int, float, complex, tuple, np.ndarray)):
                        path = getattr(value, "__file__", None)
                        if path and not os.path.abspath(path).startswith(package):
                            files.add(os.path.abspath(path))
                        elif path:
                            package_modules.add(value.__name__)
            elif hasattr(value, "py_func"):
                pending.append(value)
    return files, package_modules


def _cell_contents(py_func):
    """The values in ``py_func``'s closure cells (an empty cell, not yet assigned, is
    left out)."""
    values = []
    for cell in py_func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            continue
    return values


def cache_folder():
    """Where the phase sources live: $GEPPETTO_CACHE_DIR/phases, default
    ~/.cache/geppetto/phases."""
    root = os.environ.get("GEPPETTO_CACHE_DIR",
                          os.path.join(os.path.expanduser("~"), ".cache", "geppetto"))
    return os.path.join(root, "phases")


def _source(steps, clear_at):
    """The phase module's source for ``steps`` (see the module docstring)."""
    package = __name__
    imports = [f"from {kernel.__module__} import kernel",
               f"from {package} import _clear"]
    loops, body = [], []
    _, model_index = _model_indices(steps)
    for i, step in enumerate(steps):
        if i == clear_at:
            body.append("    _clear(out, mode)")
        if step.knot_kernel is not None:
            function = step.knot_kernel
            imports.append(f"from {function.__module__} import {function.__name__} as _user{i}")
            loops.append(_knot_loop(i))
            body.append(f"    _loop{i}(xs, us, a[{i}], mode)")
        else:
            imports.append(f"from {step.block.__module__} import {step.block.__name__}")
            if step.cost:
                body.append(f"    {step.block.__name__}(a[{i}], out, mode)")
            elif step.model is not None:
                body.append(f"    {step.block.__name__}(xs, us, models[{model_index[i]}], "
                            f"a[{i}], mode)")
            else:
                body.append(f"    {step.block.__name__}(xs, us, a[{i}], mode)")
    if clear_at == len(steps):
        body.append("    _clear(out, mode)")
    lines = ['"""A phase function of geppetto.ocp.fused (generated)."""']
    lines += sorted(set(imports)) + [""] + loops
    lines += ["", "@kernel", "def phase(xs, us, models, a, out, mode):"] + (body or ["    pass"])
    return "\n".join(lines) + "\n"


def _knot_loop(i):
    return (f"\n@kernel\ndef _loop{i}(xs, us, a, mode):\n"
            "    oR, op, J, reference, parameters, r, Rx, Ru = a\n"
            "    with_jacobian = mode == 1\n"
            "    for k in range(xs.shape[0]):\n"
            f"        _user{i}(xs[k], us[k], oR[k], op[k], J[k], reference[k], parameters, "
            "r[k], Rx[k], Ru[k], with_jacobian)\n")


def phase_function(steps, clear_at=None):
    """The compiled ``phase(xs, us, models, a, out, mode)`` calling ``steps`` in order, and
    ``_clear(out, mode)`` before step ``clear_at`` (None: never)."""
    return _phase_module(steps, clear_at).phase


def knot_loop(function):
    """The compiled ``_loop0(xs, us, a, mode)`` calling the user's knot kernel ``function``
    at every knot (a = (oR, op, J, reference, parameters, r, Rx, Ru), see
    :mod:`.numba_residual`), in a generated module of its own: one per kernel, whatever
    the problems it serves."""
    return _phase_module([Step(None, knot_kernel=function)], None)._loop0


def _phase_module(steps, clear_at):
    """The generated module of ``steps`` (:func:`_source`), imported once per process."""
    source = _source(steps, clear_at)
    users = "".join(_kernel_fingerprint(s.knot_kernel) for s in steps
                    if s.knot_kernel is not None)
    # the package's modules it imports (the blocks' and their imports): a phase file
    # compiled against other blocks is never reused, and an edit elsewhere (solvers/,
    # a block the phase does not call) keeps it (its cache stamp follows the same modules)
    imported = _IMPORTED.get(source)
    if imported is None:  # once per source and process (knot_loop runs here every call)
        modules = imported_modules(source)
        imported = _IMPORTED[source] = (modules, imports_fingerprint(modules))
    key = hashlib.sha256((imported[1] + source + users).encode()).hexdigest()[:24]
    with _LOCK:
        module = _MODULES.get(key)
        if module is None:
            module = _import(key, source, imported[0])
            _MODULES[key] = module
    return module


def _import(key, source, imported):
    """Write the phase source (once: never rewritten, so Numba's cache stays valid) and
    import it (its kernels' cache stamp following the package's ``imported`` modules)."""
    folder = cache_folder()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"phase_{key}.py")
    if not os.path.exists(path):
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w") as handle:
            handle.write(source)
        os.replace(temporary, path)
    name = f"_geppetto_phase_{key}"
    declare_imports(name, imported)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class FusedPhase:
    """A phase evaluated by one compiled call: ``phase(xs, us, mode)`` (two: the
    dynamics or the kinematics pass first, see :class:`Step`); ``clear_at``: the step
    before which ``out`` is cleared (None: never, the phase adds to it); ``model``: the
    ModelArrays of the interpreter's program when no step uses one (a terminal knot's
    user residuals alone)."""

    def __init__(self, steps, out, clear_at, model=None):
        n = 0
        first_cleared = len(steps) if clear_at is None else min(len(steps), clear_at)
        while n < first_cleared and steps[n].separate:
            n += 1
        self.first = [(step.block, step.model, step.args, step.failed) for step in steps[:n]]
        # the separate blocks each mode runs (see Step.by_mode)
        self.first_by_mode = tuple(
            [(step.by_mode[mode], step.model, step.args, step.failed) for step in steps[:n]
             if step.by_mode[mode] is not None] for mode in (CALC, DIFF, COSTS, TRIAL))
        steps = steps[n:]
        self.out = out
        if clear_at is not None:
            clear_at -= n
        items = interpreted(steps, clear_at, model)
        self.program = self.items = None
        if items is not None:
            # the program for the kernels, and its (model, rows, floats, ints, arrays,
            # views, out) as Python objects for inspection (a Held is not read from
            # Python); read only: ``views`` holds the addresses of ``arrays``' memory, so
            # an entry of that List replaced would leave the kernel a freed address
            self.items = items + (out,)
            self.program = held(self.items)
        else:
            self.function = phase_function(steps, clear_at)
            self.models = _model_indices(steps)[0]
            self.args = tuple(step.args for step in steps)

    def __call__(self, xs, us, mode):
        for block, model, args, failed in self.first_by_mode[mode]:
            if model is None:
                regular = block(xs, us, args, mode)
            else:
                regular = block(xs, us, model, args, mode)
            if regular is False:
                failed()
        if self.program is not None:
            _interpret(xs, us, self.program, mode)
        else:
            self.function(xs, us, self.models, self.args, self.out, mode)


def output_arrays(outputs):
    """(cost, Lx, Lu, Lxx, Luu, Lxu) of a StageOutputs."""
    return tuple(getattr(outputs, name) for name in ("cost", "Lx", "Lu", "Lxx", "Luu", "Lxu"))


def outputs_tuple(outputs):
    """:func:`output_arrays`, or None when one is not contiguous (the phase then takes the
    per-term path)."""
    arrays = output_arrays(outputs)
    return arrays if all(array.flags.c_contiguous for array in arrays) else None


def lie_scratch(nv):
    """Scratch of the Lie-group kernels (s4, t4, s3, xi, W, S, D)."""
    from ..dynamics.liegroup_derivatives import _N_SCRATCH
    return (np.empty(4), np.empty(4), np.empty(3), np.empty(6), np.empty((6, 6)),
            np.empty((_N_SCRATCH, 3, 3)), np.empty((1, 6, 6)))


# --- the interpreter: one kernel for every composition of blocks -------------------------
#
# A generated phase function costs seconds of LLVM work for each new composition (the
# blocks' code is linked into it and compiled again).  The interpreter is compiled once
# (and cached): it runs a program of rows over a phase's operands laid out in four
# containers of fixed type, whatever the blocks and their number:
#
#   arrays  typed List of float64 4D arrays: every float array of the steps, as a view
#           with leading axes of length 1 (the blocks write into the Data's arrays); the
#           kernel does not read it: it holds the memory of
#   views   int64 (n arrays, 9): each array's data address, its 4D view's shape and
#           strides, from which ``_a1`` ... ``_a4`` make the operands (:func:`_array_at`,
#           C-contiguous arrays with no memory owner: a structure filled, where a List's
#           getitem was a call, a copy and an atomic reference count per operand)
#   floats  float64 (n floats,): the float scalars (dt, a cost's scale)
#   ints    int64 (n ints,): the entries of the int64 arrays (a contact's dofs)
#   rows    int64 (n rows, 1 + _WIDTH): block code (1 + index in _BLOCKS, 0: _clear),
#           then one column per operand of the block's argument tuple in
#           _SPECS order: an array's index in ``arrays`` and ``views``, an int or bool's value, a
#           float's index in ``floats``, an int array's (offset, length) in ``ints``
#
# The interpreter rebuilds each block's argument tuple from its row (:func:`_operands_*`;
# ``_a1`` ... ``_a4``: the operand as an array of 1 ... 4 dimensions) and calls the block.
# One typed-List item type (a float64 4D array) serves every block, where a List per block
# kind of argument tuples made eight, and a List of models a ninth (each item type
# compiles the List's methods again: 1-2.5 s each); the phase's steps share one model
# (ModelArrays), held in the holder's tuple.  Each kind's tuple type is fixed
# (``_SPECS``: the ndim of each float64 array, "i" int64, "I" an int64 array, "b" bool,
# "f" float); a step whose arguments have another type (a non-contiguous array) makes
# its phase take the generated function instead.

CLEAR_CODE = 0
_BLOCKS = ("_euler", "_state", "_control", "_frame", "_frame_velocity", "_com",
           "_contact_wrench", "_user", "_cost")
_SPECS = {
    "_euler": ("b", "i", "f", (2, 3, 3), (2, 3, 3, 2, 2, 2), (2, 3, 3), (1, 1, 1, 1, 2, 3, 3)),
    "_state": ("b", 2, 2, 2, 2, 2, 3, 3, 1, 2, 3),
    "_control": (2, 2),
    "_frame": (4, 3, 3, "i", 2, 1, "i", 3, 2, 2, 3),
    "_frame_velocity": (4, 3, 3, 2, "i", 2, 1, "i", 2, 2, 3),
    "_com": (4, 3, 3, 2, 2, 3),
    "_contact_wrench": (2, 3, 3, 4, 3, "i", 2, "i", "I", 2, 2, "i", 2, 3, 3, 2, 3, 3, 2),
    "_user": ("i", "i", 4, 3, 3, 2, 1, 2, 3, 3),
    "_cost": ("i", 2, 2, 1, 2, 3, 1, 1, "f", 3, 3, "b", "b", "b"),
}
_ITEM_TYPES = {}


def _leaves(spec):
    """The operands of a spec, nested tuples flattened, in order."""
    if isinstance(spec, tuple):
        return [leaf for s in spec for leaf in _leaves(s)]
    return [spec]


# columns of a row after its code: the most operands of a block ("I" takes two)
_WIDTH = max(sum(2 if leaf == "I" else 1 for leaf in _leaves(spec)) for spec in _SPECS.values())


def _prototype(spec):
    if isinstance(spec, tuple):
        return tuple(_prototype(s) for s in spec)
    return {"i": 0, "b": False, "f": 0.0, "I": np.zeros(1, dtype=np.int64)}.get(
        spec, None) if isinstance(spec, str) else np.zeros((1,) * spec)


def _item_type(name):
    if name not in _ITEM_TYPES:
        _ITEM_TYPES[name] = numba.typeof(_prototype(_SPECS[name]))
    return _ITEM_TYPES[name]


@intrinsic
def _array_at(typingctx, address, shape, strides):
    """The C-contiguous float64 array at ``address`` (an int64) with ``shape`` and
    ``strides`` (tuples of int64), with no memory owner (a null meminfo, as
    :func:`~geppetto.dynamics.borrowed.borrowed`): making it is filling a structure, no
    call and no atomic reference count; its owner is the program's ``arrays`` List."""
    if not isinstance(shape, types.UniTuple) or not isinstance(strides, types.UniTuple):
        return None
    array = types.Array(types.float64, len(shape), "C")

    def codegen(context, builder, signature, arguments):
        view = make_array(array)(context, builder)
        data = builder.inttoptr(arguments[0],
                                context.get_value_type(types.CPointer(types.float64)))
        populate_array(view, data=data, shape=arguments[1], strides=arguments[2],
                       itemsize=context.get_constant(types.intp, 8), meminfo=None,
                       parent=None)
        return view._getvalue()

    return array(types.int64, shape, strides), codegen


@intrinsic
def _borrowed_item(typingctx, holder):
    """``holder.item`` (a :class:`.held.Held`) with its arrays borrowed (see
    :func:`~geppetto.dynamics.borrowed.borrow_value`): reading it is copying a
    structure, where ``holder.item`` counts a reference to each of its arrays, an atomic
    increment and a decrement on a cache line of its own per array (a contact block's
    item holds about a hundred: cold lines at every call of a chunk's part, whose arrays
    are its own).  The holder, an argument, owns them for the whole call."""
    if not isinstance(holder, HeldType):
        return None
    typ = holder.field_dict["item"]

    def codegen(context, builder, signature, arguments):
        data = _StructUtils(context, builder, holder).get_data_struct(arguments[0])
        return borrow_value(context, builder, typ, data.item)

    return typ(holder), codegen


# the columns of a row of a program's ``views`` table (:meth:`_Operands.tables`): the
# address of the operand's data, then the shape and the strides of its 4D view
_VIEW_ADDRESS, _VIEW_SHAPE, _VIEW_STRIDES = 0, 1, 5


@inline_kernel
def _a1(views, i):
    v = views[i]
    return _array_at(v[0], (v[4],), (v[8],))


@inline_kernel
def _a2(views, i):
    v = views[i]
    return _array_at(v[0], (v[3], v[4]), (v[7], v[8]))


@inline_kernel
def _a3(views, i):
    v = views[i]
    return _array_at(v[0], (v[2], v[3], v[4]), (v[6], v[7], v[8]))


@inline_kernel
def _a4(views, i):
    v = views[i]
    return _array_at(v[0], (v[1], v[2], v[3], v[4]), (v[5], v[6], v[7], v[8]))


@kernel
def _interpret(xs, us, holder, mode):
    """Run the program of ``holder.item`` = (model, rows, floats, ints, arrays, views, out)
    (see the layout above).  One :class:`.held.Held` holds them all: a call unboxes one
    object instead of a dozen."""
    m, rows, floats, ints, _, views, out = _borrowed_item(holder)
    for i in range(rows.shape[0]):
        code, r = rows[i, 0], rows[i, 1:]
        if code == CLEAR_CODE:
            _clear(out, mode)
        elif code == 1:
            _euler(xs, us, m, _operands_euler(views, floats, r), mode)
        elif code == 2:
            _state(xs, us, m, _operands_state(views, r), mode)
        elif code == 3:
            _control(xs, us, (_a2(views, r[0]), _a2(views, r[1])), mode)
        elif code == 4:
            _frame(xs, us, m, _operands_frame(views, r), mode)
        elif code == 5:
            _frame_velocity(xs, us, m, _operands_frame_velocity(views, r), mode)
        elif code == 6:
            _com(xs, us, m, (_a4(views, r[0]), _a3(views, r[1]),
                             _a3(views, r[2]), _a2(views, r[3]),
                             _a2(views, r[4]), _a3(views, r[5])), mode)
        elif code == 7:
            _contact_wrench(xs, us, _operands_contact_wrench(views, ints, r), mode)
        elif code == 8:
            _user(xs, us, (r[0], r[1], _a4(views, r[2]), _a3(views, r[3]),
                           _a3(views, r[4]), _a2(views, r[5]), _a1(views, r[6]),
                           _a2(views, r[7]), _a3(views, r[8]), _a3(views, r[9])), mode)
        else:
            _cost(_operands_cost(views, floats, r), out, mode)


@inline_kernel
def _operands_euler(A, floats, r):
    """_euler's (flat, scheme, dt, (f, f_x, f_u), (w, w_x, w_u, qs, dq, qout), (xnext,
    Fx, Fu), (s4, t4, s3, xi, W, S, D))."""
    return (r[0] != 0, r[1], floats[r[2]],
            (_a2(A, r[3]), _a3(A, r[4]), _a3(A, r[5])),
            (_a2(A, r[6]), _a3(A, r[7]), _a3(A, r[8]), _a2(A, r[9]),
             _a2(A, r[10]), _a2(A, r[11])),
            (_a2(A, r[12]), _a3(A, r[13]), _a3(A, r[14])),
            (_a1(A, r[15]), _a1(A, r[16]), _a1(A, r[17]), _a1(A, r[18]),
             _a2(A, r[19]), _a3(A, r[20]), _a3(A, r[21])))


@inline_kernel
def _operands_state(A, r):
    """_state's (flat, ref, ref_q, qs, dq, r, Rx, block, xi, W, S)."""
    return (r[0] != 0, _a2(A, r[1]), _a2(A, r[2]), _a2(A, r[3]), _a2(A, r[4]),
            _a2(A, r[5]), _a3(A, r[6]), _a3(A, r[7]), _a1(A, r[8]), _a2(A, r[9]),
            _a3(A, r[10]))


@inline_kernel
def _operands_frame(A, r):
    """_frame's (oR, op, J, joint, fR, fp, kind, ref_R, ref_p, r, Rx)."""
    return (_a4(A, r[0]), _a3(A, r[1]), _a3(A, r[2]), r[3], _a2(A, r[4]),
            _a1(A, r[5]), r[6], _a3(A, r[7]), _a2(A, r[8]), _a2(A, r[9]),
            _a3(A, r[10]))


@inline_kernel
def _operands_frame_velocity(A, r):
    """_frame_velocity's (oR, op, J, vs, joint, fR, fp, reference, ref, r, Rx)."""
    return (_a4(A, r[0]), _a3(A, r[1]), _a3(A, r[2]), _a2(A, r[3]), r[4],
            _a2(A, r[5]), _a1(A, r[6]), r[7], _a2(A, r[8]), _a2(A, r[9]),
            _a3(A, r[10]))


@inline_kernel
def _operands_contact_wrench(A, ints, r):
    """_contact_wrench's (lam, lam_x, lam_u, oR, J, joint, R1, row0, dofs, A, ref, rotate,
    r, Rx, Ru, w, w_x, w_u, Rt); dofs: columns 8 and 9 (offset, length in ``ints``)."""
    return (_a2(A, r[0]), _a3(A, r[1]), _a3(A, r[2]), _a4(A, r[3]), _a3(A, r[4]),
            r[5], _a2(A, r[6]), r[7], ints[r[8]:r[8] + r[9]], _a2(A, r[10]),
            _a2(A, r[11]), r[12], _a2(A, r[13]), _a3(A, r[14]), _a3(A, r[15]),
            _a2(A, r[16]), _a3(A, r[17]), _a3(A, r[18]), _a2(A, r[19]))


@inline_kernel
def _operands_cost(A, floats, r):
    """_cost's (code, params, r, value, a_r, A_rr, weights, scaled, scale, Rx, Ru, with_u,
    with_x, smooth2)."""
    return (r[0], _a2(A, r[1]), _a2(A, r[2]), _a1(A, r[3]), _a2(A, r[4]),
            _a3(A, r[5]), _a1(A, r[6]), _a1(A, r[7]), floats[r[8]], _a3(A, r[9]),
            _a3(A, r[10]), r[11] != 0, r[12] != 0, r[13] != 0)


class _Operands:
    """The containers of a program's operands (see the layout above), filled step by
    step."""

    def __init__(self):
        self.arrays, self.floats, self.ints = [], [], []

    def columns(self, spec, value):
        """The row's columns of the operand ``value`` of type ``spec`` (nested tuples
        flattened)."""
        if isinstance(spec, tuple):
            return [c for s, v in zip(spec, value) for c in self.columns(s, v)]
        if spec in ("i", "b"):
            return [int(value)]
        if spec == "f":
            self.floats.append(float(value))
            return [len(self.floats) - 1]
        if spec == "I":
            self.ints += [int(i) for i in value]
            return [len(self.ints) - len(value), len(value)]
        self.arrays.append(value.reshape((1,) * (4 - value.ndim) + value.shape))   # a view
        return [len(self.arrays) - 1]

    def tables(self):
        """(floats, ints, arrays, views): ``views`` the int64 table (n arrays, 9) of each
        array's data address, shape and strides (its 4D view's), from which
        :func:`_interpret` makes its operands (:func:`_array_at`); ``arrays`` holds them
        (a typed List, not read by the kernel: the owner of the views' memory)."""
        views = np.zeros((len(self.arrays), 9), dtype=np.int64)
        for i, array in enumerate(self.arrays):
            # _array_at claims what it is not told: check it once here (rev22)
            if not (array.dtype == np.float64 and array.flags.c_contiguous and
                    array.flags.aligned and array.flags.writeable):
                raise ValueError("a fused operand must be a writable, aligned, C-contiguous "
                                 f"float64 array, got {array.dtype} {array.flags}")
            views[i, _VIEW_ADDRESS] = array.ctypes.data
            views[i, _VIEW_SHAPE:_VIEW_SHAPE + 4] = array.shape
            views[i, _VIEW_STRIDES:_VIEW_STRIDES + 4] = array.strides
        views.setflags(write=False)       # the kernel only reads it; an address is no input
        return (np.array(self.floats, dtype=float), np.array(self.ints, dtype=np.int64),
                typed_list(self.arrays), views)


def interpreted(steps, clear_at, model=None):
    """(model, rows, floats, ints, arrays, views) running ``steps`` in the interpreter,
    the outputs cleared before step ``clear_at`` (None: never; append ``out`` for the
    holder of :func:`_interpret`), or None when a step is not one
    of its blocks, has arguments of another type, or the steps use several models, or
    none and no ``model`` is given (the generated function takes them)."""
    if not steps or any(s.block is None or s.block.__name__ not in _SPECS for s in steps):
        return None
    models, _ = _model_indices(steps)
    if not models and model is not None:
        models = (model,)
    if len(models) != 1:
        return None
    if any(numba.typeof(s.args) != _item_type(s.block.__name__) for s in steps):
        return None
    operands = _Operands()
    rows = []
    for i, step in enumerate(steps):
        if i == clear_at:
            rows.append([CLEAR_CODE])
        name = step.block.__name__
        rows.append([1 + _BLOCKS.index(name)] + operands.columns(_SPECS[name], step.args))
    if clear_at == len(steps):
        rows.append([CLEAR_CODE])
    table = np.zeros((len(rows), 1 + _WIDTH), dtype=np.int64)
    for i, row in enumerate(rows):
        table[i, :len(row)] = row
    return (models[0], table) + operands.tables()
