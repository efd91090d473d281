"""The trial step of the DDP solvers' line search: the nonlinear rollout of a phase under the
feedback law, the stage side of the solver/stage seam.

For knot t of a trial with step alpha (Crocoddyl's SolverFDDP / SolverBoxFDDP
forward pass, Mastalli et al. ICRA 2020):

    x_t^try = x_t^pred (+) (alpha - 1) f_t    (x^pred = F of the previous knot, x_0^pred = x0;
                                               only while infeasible and alpha < 1)
    u_t^try = u_t - alpha k_t - K_t (x_t^try (-) x_t)     (clamped to the bounds when boxed)
    x_(t+1)^pred = F(x_t^try, u_t^try)

The control law is :func:`trial_control`, written once; each dynamics type
provides ``rollout_trial`` (a kernel per phase for the multibody dynamics:
:func:`rollout_free`, :func:`rollout_contact`; :func:`rollout_python` for the
others), which the stage model exposes to the solvers; :func:`free_rollout`, the
problem's rollout of a free phase, is :func:`rollout_free`'s trial with zero gains.

A trial is two tuples over the knots of one phase:

- ``inputs`` = (xs (n, nx), us (n, nu), k (n, nu), K (n, nu, ndx), gaps (n, ndx),
  u_lower (n, nu), u_upper (n, nu), alpha, use_gaps, boxed);
- ``outputs`` = (xs_try (n, nx), us_try (n, nu), xnext (n, nx)), written.

Knots with nu = 0 (impulses, control-free knots) have zero-width control
arrays: the law is then empty.  A rollout returns -1, or the knot where the
state became non-finite or the contacts degenerate.

The jitted rollouts publish their progress: after knot t (its trial state and
control, its predicted state, what its step stored) ``progress[TRIAL_ROLLED]`` =
``offset + t + 1``, an atomic release store (:mod:`.parallel`), so that a calc_diff
started at the trial on another thread (:func:`.horizon._chunk_diff` following it)
runs a part's dynamics block as soon as the rollout has passed its knots, before the
phase's costs are summed; ``offset`` < 0: nothing published (:data:`NO_PROGRESS`).
"""
import numpy as np

from ..dynamics.aba import _aba_state_borrowed
from ..dynamics.borrowed import borrowed, borrowed_all, keep_alive
from ..dynamics.config import inline_kernel, kernel
from ..dynamics.liegroups import difference_state, integrate_state
from ..dynamics.validation import all_finite
from .contact_step import (EMPTY, VALUES, contact_step_inline, impulse_step,
                           knot_workspace)
from .residuals import JACOBIANS
from .parallel import TRIAL_ROLLED, new_trial_signal, store_release
from .step import (actuated_torque, stage_count, stage_offset, state_integrate,
                   step_increment)

IMPULSE = -1
# the progress vector of a rollout that publishes nothing (offset -1)
NO_PROGRESS = new_trial_signal()


@inline_kernel
def trial_control(u, k, K, dx, alpha, boxed, lower, upper, out):
    """out = u - alpha k - K dx (Crocoddyl's signs), clamped to [lower, upper] when boxed."""
    for i in range(u.shape[0]):
        s = u[i] - alpha * k[i]
        for j in range(dx.shape[0]):
            s -= K[i, j] * dx[j]
        if boxed:
            s = min(max(s, lower[i]), upper[i])
        out[i] = s


@kernel
def state_difference(m, x0, x1, out, s4, t4, s3):
    """out = x1 (-) x0 for x = (q, v); s4, t4, s3 the Lie-group scratch."""
    nq, nv = m.nq, m.nv
    difference_state(m, x0[:nq], x1[:nq], out[:nv], s4, t4, s3)
    for i in range(nv):
        out[nv + i] = x1[nq + i] - x0[nq + i]


@kernel
def trial_state(m, predicted, gap, alpha, use_gaps, w, out, s4, t4, s3):
    """out = x_t^try = x_t^pred (+) (alpha - 1) f_t with use_gaps, else x_t^pred (the
    first line of the module docstring); ``gap`` = f_t (ndx,), ``w`` (ndx,) scratch."""
    if use_gaps:
        for i in range(w.shape[0]):
            w[i] = (alpha - 1.0) * gap[i]
        state_integrate(m, predicted, w, out, s4, t4, s3)
    else:
        for i in range(out.shape[0]):
            out[i] = predicted[i]


# _vector_space_note: where nq = nv no joint has nq > nv (free flyer, spherical, unbounded
# revolute, planar), so integrate_state / difference_state take their "else" branch for
# every coordinate, q + v and q1 - q0: written at the call site on the whole state (the
# same operations on the same values, the same bits), where the compiled call passed the
# model tuple flattened and tested each of its arrays' references, more than the sums cost
# on a small arm (fc35: the double pendulum's trial 20.8 -> 15.3 us).  The test is on the
# scalars nq, nv: an inlined helper given the model takes a reference to each of its
# arrays per use (3-4 % slower trials on solo12, whose free flyer gains nothing).  (The same
# test as the OCP's gaps, ocp.problem.)


@inline_kernel
def _trial_point(m, nq, nv, predicted, gaps, t, alpha, use_gaps, w, x, xs, dx, s4, t4, s3):
    """The bodies of :func:`trial_state` (x = the trial state of knot t) and
    :func:`state_difference` (dx = x (-) xs[t]) inlined into a rollout's knot loop: as
    compiled calls each took the model tuple flattened, ~200 scalar arguments (aba30,
    ctr30)."""
    if use_gaps:
        for i in range(w.shape[0]):
            w[i] = (alpha - 1.0) * gaps[t, i]
        if nq == nv:                # see _vector_space_note below
            for i in range(nq + nv):
                x[i] = predicted[i] + w[i]
        else:
            integrate_state(m, predicted[:nq], w[:nv], x[:nq], s4, t4, s3)
            for i in range(nv):
                x[nq + i] = predicted[nq + i] + w[nv + i]
    else:
        for i in range(x.shape[0]):
            x[i] = predicted[i]
    if nq == nv:
        for i in range(nq + nv):
            dx[i] = x[i] - xs[t, i]
    else:
        difference_state(m, xs[t, :nq], x[:nq], dx[:nv], s4, t4, s3)
        for i in range(nv):
            dx[nv + i] = x[nq + i] - xs[t, nq + i]


@inline_kernel
def _store_kinematics(s_liR, s_lip, s_oR, s_op, s_J, kinematics, t):
    """Row t's placements liR, lip, oR, op (level PLACEMENTS) and world Jacobians J
    (JACOBIANS) from the step's ABA (``s_*``, one state) into the phase's kinematics
    arrays ``kinematics`` = (level, liR, lip, oR, op, J, ...) (indexed: the free
    rollouts' tuple also carries the stage points)."""
    level, liR, lip, oR, op, J = (kinematics[0], kinematics[1], kinematics[2],
                                  kinematics[3], kinematics[4], kinematics[5])
    for j in range(1, s_liR.shape[0]):
        for a in range(3):
            lip[t, j, a] = s_lip[j, a]
            op[t, j, a] = s_op[j, a]
            for b in range(3):
                liR[t, j, a, b] = s_liR[j, a, b]
                oR[t, j, a, b] = s_oR[j, a, b]
    if level == JACOBIANS:
        for r in range(6):
            for c in range(s_J.shape[1]):
                J[t, r, c] = s_J[r, c]


def no_kinematics():
    """The ``kinematics`` argument of :func:`rollout_contact` that stores nothing (level 0)."""
    return (0, np.zeros((1, 1, 3, 3)), np.zeros((1, 1, 3)), np.zeros((1, 1, 3, 3)),
            np.zeros((1, 1, 3)), np.zeros((1, 6, 1)))


def no_points():
    """The ``points`` entry of :func:`rollout_free`'s ``kinematics`` that stores no stage
    points (no rows)."""
    return np.zeros((0, 0))


@kernel
def rollout_free(m, B, damping, scheme, dt, inputs, x_start, outputs, ws, kinematics,
                 progress, offset):
    """The trial of a phase of FreeDynamics knots (``scheme`` a SCHEME_CODES value);
    ``ws`` from :func:`~.step.step_workspace`.  ``kinematics`` = (level, liR, lip, oR,
    op, J, points): with level PLACEMENTS or JACOBIANS, the placements (and world
    Jacobians) that each ABA of a knot's step computed are stored there, row
    ``stage * n + t`` for stage ``stage`` of knot t of the n knots (an Euler step has
    one stage, at the knot: row t; the stages of an RK step are at its stage points),
    so that the trial's costs need no forward kinematics; level 0 stores nothing
    (:func:`no_kinematics`).  ``points`` with rows (stages * n, nx): the stage points
    themselves, the same rows (row t of stage 0 the knot), so that an RK stage's costs
    over its stage points (:meth:`.stage.StageModel.calc_costs`) need no second
    evaluation of the dynamics; no rows (:func:`no_points`): not stored.  Both hold the
    values of :meth:`.integrators.Integrator.calc` at the trial, to the bit: the
    stage points and fields are its formulas, and the same ABA.  ``progress``,
    ``offset``: see the module docstring.

    The knot loop reads the workspace's arrays unpacked, once, and writes out the
    bodies of :func:`trial_state`, :func:`state_difference` and
    :func:`.step.state_integrate` around the Lie-group kernels: an inlined helper
    given the model tuple or a tuple of tuples (``ws``, ``inputs``) takes a reference
    to each of their arrays at every knot, and as compiled calls they were no faster
    (measured on ur5, 100 knots, load 15, in one process: 2.55 -> 2.11 us per knot,
    the same bits).  The step is :func:`~.step.free_step`'s, written out the same way:
    its stages' fields at one call site of ABA (a call site per scheme inlined ABA
    five times into this kernel: its compile at the first ur5 solve took 35.3 s of CPU,
    9.2 s with one, measured in one run at load 10-12).  One inlined stage-loop
    function serving both, given the workspace's arrays unpacked (30 arguments), was
    slower: an inlined helper takes and releases a reference to each array it is
    given, unpacked or in a tuple, about 50 per knot; a 100-knot trial took 1.11x
    (1.05-1.28) of this kernel's time on ur5 with Euler, 1.07x (1.02-1.16) on solo12
    (free dynamics), 1.00x and 0.98x with RK4 (whose four ABAs share the cost; the
    same bits; thread CPU time, 15 interleaved blocks of 100 trials in one process,
    load 9-11).

    Every array it is given is borrowed (:func:`~geppetto.dynamics.borrowed.borrowed_all`,
    the caller owns them for the whole call): with their owners, the inlined ABA, the
    Lie-group calls and the model's fields counted about a hundred references per knot,
    atomic increments and decrements that cost more than ABA's arithmetic on small
    robots.  Borrowed, a 100-knot trial took 0.59x (0.58-0.60) of the time on ur5 with
    Euler, 0.64x on panda, 0.63x on kinova and z1, 0.76x on solo12's free flyer, 0.58x on
    ur5 with RK4, the same bits (thread CPU time, 21 interleaved blocks of 100 trials
    in one process, load 3-3.5).

    Its ABA is :func:`~geppetto.dynamics.aba._aba_state_borrowed` (placements and forward
    passes inlined, the backward pass a compiled call): each compiled call passed the
    model tuple flattened, 200-264 scalar arguments through the stack, four per knot;
    with one, a 100-knot trial took 0.68-0.77x of the time (ur5, panda, kinova, z1,
    ur5 RK4; the same bits; round aba30 of ``benchmarks/threads_notes.md``)."""
    m, B, damping, inputs, x_start, outputs, ws, kinematics, progress = borrowed_all((
        m, B, damping, inputs, x_start, outputs, ws, kinematics, progress))
    xs, us, k, K, gaps, lower, upper, alpha, use_gaps, boxed = inputs
    xs_try, us_try, xnext = outputs
    dyn, stages, aba_ws, lie = ws
    liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, uu, ddq, f_ext, tau = dyn
    s4, t4, s3 = lie
    fields, w, xi = stages
    nq, nv = m.nq, m.nv
    n_stages = stage_count(scheme)
    dx_owner = np.empty(gaps.shape[1])
    dx = borrowed(dx_owner)
    n = xnext.shape[0]
    store = kinematics[0] > 0
    points = kinematics[6]
    store_points = points.shape[0] > 0
    failed = -1
    predicted = x_start
    for t in range(xnext.shape[0]):
        x, u = xs_try[t], us_try[t]
        _trial_point(m, nq, nv, predicted, gaps, t, alpha, use_gaps, w, x, xs, dx, s4, t4, s3)
        trial_control(us[t], k[t], K[t], dx, alpha, boxed, lower[t], upper[t], u)
        # free_step, written out: the stages' fields at one call site of ABA
        for stage in range(n_stages):
            point = x
            if stage > 0:
                stage_offset(scheme, dt, stage, fields, w)
                if nq == nv:
                    for i in range(nq + nv):
                        xi[i] = x[i] + w[i]
                else:
                    integrate_state(m, x[:nq], w[:nv], xi[:nq], s4, t4, s3)
                    for i in range(nv):
                        xi[nq + i] = x[nq + i] + w[nv + i]
                point = xi
            actuated_torque(m, B, damping, point, u, tau)
            _aba_state_borrowed(m, point[:nq], point[nq:], tau, f_ext, liR, lip, oR, op, J, oY,
                                ov, oa, pA, U, Dinv, uu, ddq, aba_ws)
            for i in range(nv):
                fields[stage, i] = point[nq + i]
                fields[stage, nv + i] = ddq[i]
            if store:
                _store_kinematics(liR, lip, oR, op, J, kinematics, stage * n + t)
            if store_points:
                for i in range(point.shape[0]):
                    points[stage * n + t, i] = point[i]
        step_increment(scheme, dt, fields, w)
        xn = xnext[t]                       # state_integrate, written out
        if nq == nv:
            for i in range(nq + nv):
                xn[i] = x[i] + w[i]
        else:
            integrate_state(m, x[:nq], w[:nv], xn[:nq], s4, t4, s3)
            for i in range(nv):
                xn[nq + i] = x[nq + i] + w[nv + i]
        if not all_finite(xnext[t]):
            failed = t
            break
        if offset >= 0:
            store_release(progress, TRIAL_ROLLED, offset + t + 1)
        predicted = xnext[t]
    keep_alive((dx_owner,))
    return failed


def free_rollout(dynamics, integrator, us, xs):
    """xs[t+1] = F(xs[t], us[t]) for t < len(us) on a phase of FreeDynamics knots (xs
    (n+1, nx), xs[0] given): the trial of :func:`rollout_free` with zero gains, alpha = 1
    and no gaps (u_t^try = u_t - 1 k_t - K_t dx = u_t, the same bits), the trial states
    written in place (x_t^try = xs[t], x_(t+1)^pred = xs[t+1]), so that one compiled
    kernel, with the argument types of the solvers' trials, serves the line search and
    :meth:`~.problem.ShootingProblem.rollout`.  The states after the first non-finite
    one are NaN."""
    n, nu, ndx = us.shape[0], us.shape[1], dynamics.state.ndx
    zeros = np.zeros((n, nu))
    inputs = (xs[:n], us, zeros, np.zeros((n, nu, ndx)), np.zeros((n, ndx)), zeros, zeros,
              1.0, False, False)
    outputs = (xs[:n], np.empty((n, nu)), xs[1:])
    failed = dynamics.rollout_trial(integrator, inputs, xs[0], outputs,
                                    dynamics.trial_workspace(integrator))
    if failed >= 0:
        xs[failed + 2:] = np.nan


@kernel
def rollout_contact(holder, inputs, x_start, outputs, progress, offset):
    """The trial of a phase of contact knots or impacts; ``holder.item`` = (model arrays,
    constraint arrays, stage, ws, store) (see :func:`.held.held`);
    ``stage`` = (B, damping,
    (mu, max_iterations, accuracy), scheme, dt, restitution) with scheme a
    :data:`~.contact_step.CONTACT_SCHEMES` value or IMPULSE; ``ws`` from
    :func:`~.contact_step.contact_step_workspace`.  ``store`` = (kinematics, lam, xs,
    us, holding, solved): each knot's placements (and world Jacobians) that its step's
    solve computed go to ``kinematics`` (as :func:`rollout_free`; level 0 stores
    nothing), its contact forces (the impulses of an impact) to the rows of ``lam`` (K,
    nc), and the trial point to the stamp (xs, us (K, nu), holding = VALUES after a
    rollout that did not fail), the stamp of the phase's ContactDynamicsData; nothing of
    these when lam has no rows.  The trial's costs (and constraints) then need neither
    kinematics nor dynamics.  A contact step solves into knot t's arrays of ``solved``
    (:func:`~.contact_step.solved_store`, stamped with the knot's point; no knots: not
    kept), whose derivatives ``calc_diff`` then takes without solving again.

    Its arrays are borrowed, as :func:`rollout_free`'s: the solo12 trot's one-call
    trial at its FDDP solution took 0.667x (0.650-0.673) of the time, the same bits
    (thread CPU time, old and new in alternating processes, 3 rounds, load 3.6).

    Each compiled call per knot passed the model and constraint tuples flattened (LLVM IR:
    ``trial_state`` 209 scalar arguments, ``state_difference`` 200, ``contact_step`` 652):
    the first two are written out here as in :func:`rollout_free`, the step is
    :func:`~.contact_step.contact_step_inline` (its solve a compiled call); the trot's
    trial took 0.85x of the time, the same bits (round ctr30 of
    ``benchmarks/threads_notes.md``)."""
    m, ca, stage, ws, store = borrowed_all(holder.item)
    inputs, x_start, outputs, progress = borrowed_all((inputs, x_start, outputs, progress))
    B, damping, settings, scheme, dt, restitution = stage
    kinematics, lam, stamp_xs, stamp_us, holding, solved = store
    forces = lam.shape[0] > 0
    if forces:
        holding[0] = EMPTY
    xs, us, k, K, gaps, lower, upper, alpha, use_gaps, boxed = inputs
    xs_try, us_try, xnext = outputs
    keep = scheme != IMPULSE and solved[0].shape[0] == xnext.shape[0]
    solved_xs, solved_us, solved_iterations = solved[12], solved[13], solved[11]
    s4, t4, s3 = ws[3]
    dx_owner, w_owner = np.empty(gaps.shape[1]), np.empty(gaps.shape[1])
    dx, w = borrowed(dx_owner), borrowed(w_owner)
    failed = -1
    predicted = x_start
    nq, nv = m.nq, m.nv
    for t in range(xnext.shape[0]):
        x, u = xs_try[t], us_try[t]
        _trial_point(m, nq, nv, predicted, gaps, t, alpha, use_gaps, w, x, xs, dx, s4, t4, s3)
        trial_control(us[t], k[t], K[t], dx, alpha, boxed, lower[t], upper[t], u)
        step_ws = ws
        if keep:
            solved_xs[t, 0] = np.nan          # knot t's arrays change: no stamp
            step_ws = knot_workspace(ws, solved, t)
        if scheme == IMPULSE:
            regular = impulse_step(m, ca, restitution, settings, xs_try[t], xnext[t], ws)
        else:
            iterations, regular = contact_step_inline(m, ca, B, damping, settings, scheme, dt,
                                                      xs_try[t], us_try[t], xnext[t], step_ws)
            if keep and regular:
                solved_iterations[t] = iterations
                for i in range(solved_xs.shape[1]):
                    solved_xs[t, i] = x[i]
                for i in range(solved_us.shape[1]):
                    solved_us[t, i] = u[i]
        if not regular or not all_finite(xnext[t]):
            failed = t
            break
        s_liR, s_lip, s_oR, s_op, s_J = step_ws[0][:5]
        step_lam = step_ws[0][8]
        if kinematics[0] > 0:
            _store_kinematics(s_liR, s_lip, s_oR, s_op, s_J, kinematics, t)
        if forces:
            for i in range(lam.shape[1]):
                lam[t, i] = step_lam[i]
            for i in range(stamp_xs.shape[1]):
                stamp_xs[t, i] = xs_try[t, i]
            for i in range(stamp_us.shape[1]):
                stamp_us[t, i] = us_try[t, i]
        if offset >= 0:
            store_release(progress, TRIAL_ROLLED, offset + t + 1)
        predicted = xnext[t]
    keep_alive((dx_owner, w_owner))
    if forces and failed < 0:
        holding[0] = VALUES
    return failed


def rollout_python(integrator, inputs, x_start, outputs, idata):
    """The same trial knot by knot through ``integrator.calc`` (dynamics without a
    jitted step: CustomDynamics, the Runge-Kutta contact schemes); ``idata`` =
    ``integrator.create_data(1)``."""
    xs, us, k, K, gaps, lower, upper, alpha, use_gaps, boxed = inputs
    xs_try, us_try, xnext = outputs
    state = integrator.state
    predicted = x_start
    for t in range(xnext.shape[0]):
        x = predicted[None]
        if use_gaps:
            x = state.integrate(x, (alpha - 1.0) * gaps[t:t + 1])
        xs_try[t] = x[0]
        dx = state.difference(xs[t:t + 1], x)[0]
        trial_control(us[t], k[t], K[t], dx, alpha, boxed, lower[t], upper[t], us_try[t])
        xnext[t] = integrator.calc(idata, xs_try[t:t + 1], us_try[t:t + 1, :integrator.nu])[0]
        if not np.all(np.isfinite(xnext[t])):
            return t
        predicted = xnext[t]
    return -1
