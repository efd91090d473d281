"""A line-search trial of the whole horizon in one compiled call.

A DDP trial (:mod:`.trial`) rolls each phase out under the feedback law, then
costs the trial trajectory phase by phase.  When every running phase is a
:class:`~.dynamics.FreeDynamics` phase (any scheme), or a contact or
impulse phase with a jitted step (:func:`.trial.rollout_contact`), whose costs
run in the fused interpreter (:mod:`.fused`) without a block of their own in
TRIAL mode, and the terminal knot's costs do too, the whole trial is one
kernel, :func:`_trial`:

    for each phase:  its rollout (stores the knots' kinematics, and forces;   (.trial)
                     an RK phase its stage points and theirs)
                     the phase's cost program in TRIAL mode (an RK phase: the (.fused)
                     program of each cost point on its stored stage points)
    x_N^try = x_N^pred (+) (alpha - 1) f_N   (while infeasible, alpha < 1)
    the terminal knot: its kinematics pass and cost program (CALC mode)
    cost = sum of the knots' costs (in order, each phase's as it ends),
    dv = -sum_t f_t . Vxx_t (x_t (-) x_t^try)   (FDDP's gap term, when asked)

No Python per phase, no allocation: the same kernels, on the same arrays, as
the phase-by-phase trial (the same knots' costs; their sum is taken in order),
with the model, the programs and the scratch unboxed once per trial (held, and in
typed Lists) instead of once per kernel (for a contact horizon, twice per phase).
Measured (CPU time, interleaved blocks of 100-200 trials, load 8-11): the solo12
trot (6 contact and impulse phases), a feasible trial 0.79x (0.75-0.82) of the
phase-by-phase trial's time, an infeasible one with FDDP's gap term 0.74x
(0.63-0.75); ur5 and panda reaching (one free phase) 0.87x.
Other horizons (contact RK schemes, custom dynamics, residuals without a fused step,
actuation of another width than the problem's) keep the phase-by-phase trial (a
user's :class:`~.numba_residual.NumbaResidual` is a block of the programs:
:func:`.fused._user`):
:func:`horizon_trial` returns None for them.
:func:`_trial` reaches the rollouts, the cost programs and the terminal kinematics
pass by their addresses (:func:`~geppetto.dynamics.native.call_checked`), as
:func:`_evaluate` below does: linked into it, their code (ABA, the interpreter) was
optimized again at its compile (12.7 s of CPU at the first ur5 solve).  The addresses
are those of the callees' specializations for the types :func:`_trial` passes them,
which depend on the types of the solver's arrays: :meth:`HorizonTrial.plan` works
the types out and resolves them once per argument fingerprint, by :func:`_addresses`
as :class:`HorizonEvaluation` does; each address goes with the key of its callee's
signature, which the call compares with the types it passes (TypeError if they
differ: a wrong type worked out here fails clearly instead of misreading arguments).

The problem's ``calc`` and ``calc_diff`` of a horizon of FreeDynamics phases take the
same road (:func:`horizon_evaluation`, :func:`_evaluate`): each phase's lanes'
dynamics block and cost program, then the terminal knot's kinematics pass and
program, in one call, with the same kernels on the same arrays (equal to the bit).
:func:`_evaluate` reaches those kernels by their addresses
(:func:`~geppetto.dynamics.native.call_checked`): linked into it, their code was
generated and optimized again (31.9 s of CPU at the first solve in a process where
they were cached).  Called by address, its types do not depend on the robot, the
costs or the number of phases: it compiles once per machine (8.6 s of CPU at load 9,
then cached), and a new problem structure builds its evaluation in 0.07 s (panda
reaching, 80 knots, in a process where the blocks were cached).  On the ur5 MPC
horizon (50 knots, CPU time, interleaved blocks of 200 calls in one process)
calc_diff took 0.81x (0.71-0.89, load 6.5) and 0.87x (0.83-0.92, load 12) of the
phase-by-phase time: 179 us instead of 207 us at load 12.
"""
import numba
import numpy as np
from numba.core import types
from numba.core.registry import cpu_target
from numba.core.typing.arraydecl import get_array_index_type
from numba.extending import intrinsic

from ..dynamics.config import inline_kernel, kernel
from ..dynamics.native import _checked_call, call_checked, call_checked_int, callee_address
from ..dynamics.validation import _compiled_entry, all_finite, compute_fingerprint
from .dynamics import FreeDynamics
from .fused import (CALC, DIFF, TRIAL, _contact_field_diff, _free_field, _impulse_field_diff,
                    _interpret, _kinematics, kinematics_step)
from .held import Held, held, typed_list
from .parallel import (ACCEPTED, REJECTED, TRIAL_DECISION, TRIAL_PROGRESS, TRIAL_ROLLED,
                       UNDECIDED, load_acquire, new_trial_signal, store_release)
from .stage import fused_phase
from .step import SCHEME_CODES, step_workspace
from .trial import rollout_contact, rollout_free, state_difference, trial_state


FREE_PHASE, CONTACT_PHASE = 0, 1


@inline_kernel
def _window(inputs, start, stop):
    """The trial inputs of knots start..stop (the phase's window of :mod:`.trial`)."""
    xs, us, k, K, gaps, lower, upper, alpha, use_gaps, boxed = inputs
    return (xs[start:stop], us[start:stop], k[start:stop], K[start:stop], gaps[start:stop],
            lower[start:stop], upper[start:stop], alpha, use_gaps, boxed)


@inline_kernel
def _free_phase(m, entry, address, inputs, predicted, outputs, ws, signal):
    """The trial of a FreeDynamics phase ``entry`` = (start, stop, B, damping, scheme,
    dt, kinematics, programs, calls): its rollout from ``predicted`` (publishing each knot
    in ``signal``, :mod:`.trial`), then its costs, by the
    (address, key) rows of ``address`` = (:func:`.trial.rollout_free`,
    :func:`.fused._interpret`); returns (the knot that failed or -1, stop).  The costs
    are the cost programs ``programs`` (a typed List) in order, program c on the
    states of ``calls[c, 0]`` in ``mode`` ``calls[c, 1]``: -1 the knots' trial states,
    else the first row of a stage point's states among the stage points the rollout
    stored (``kinematics[6]``, an RK phase: :meth:`.stage.StageModel.trial_cost_programs`;
    an Euler phase has one program, on the knots, in TRIAL mode)."""
    start, stop, B, damping, scheme, dt, stored, programs, calls = entry
    xs_try, us_try, xnext = outputs
    out = (xs_try[start:stop], us_try[start:stop], xnext[start:stop])
    failed = call_checked_int(address[0, 0], address[0, 1], (
        m, B, damping, scheme, dt, _window(inputs, start, stop), predicted, out, ws, stored,
        signal, start))
    if failed >= 0:
        return start + failed, stop
    for t in range(start, stop):
        if not all_finite(us_try[t]):
            return t, stop
    points = stored[6]
    for c in range(calls.shape[0]):
        row = calls[c, 0]
        states = out[0] if row < 0 else points[row:row + stop - start]
        call_checked(address[1, 0], address[1, 1], (states, out[1], programs[c], calls[c, 1]))
    return -1, stop


@inline_kernel
def _contact_phase(entry, address, inputs, predicted, outputs, signal):
    """The trial of a contact or impulse phase ``entry`` = (start, stop, workspace (the
    held tuple of :func:`.trial.rollout_contact`), program, actuated, no_controls (K, 0)):
    its rollout (publishing each knot in ``signal``, :mod:`.trial`), then its costs (on
    ``no_controls`` when the knots have none: impulses), by the (address, key) rows of
    ``address`` = (:func:`.trial.rollout_contact`, :func:`.fused._interpret`); returns
    (the knot that failed or -1, stop)."""
    start, stop, workspace, program, actuated, no_controls = entry
    xs_try, us_try, xnext = outputs
    out = (xs_try[start:stop], us_try[start:stop], xnext[start:stop])
    failed = call_checked_int(address[0, 0], address[0, 1], (
        workspace, _window(inputs, start, stop), predicted, out, signal, start))
    if failed >= 0:
        return start + failed, stop
    for t in range(start, stop):
        if not all_finite(us_try[t]):
            return t, stop
    if actuated:
        call_checked(address[1, 0], address[1, 1], (xs_try[start:stop], us_try[start:stop],
                                                     program, TRIAL))
    else:
        call_checked(address[1, 0], address[1, 1], (xs_try[start:stop], no_controls, program,
                                                     TRIAL))
    return -1, stop


@kernel
def _trial(holder, free, contact, address, inputs, x0, outputs, Vxx, merit_gaps):
    """One trial (see the module docstring): returns (failed, cost, dv), failed -1 or the
    knot where the state or the controls became non-finite (or the contacts
    degenerate).  ``holder.item`` = (model, order (phases, 2): each phase's kind
    (FREE_PHASE, CONTACT_PHASE) and index in ``free`` or ``contact``, the terminal knot's
    kinematics step arguments, its no_controls, its cost program, the knots' costs
    (N+1,), scratch); ``free`` and ``contact`` typed Lists of the held entries of
    :func:`_free_phase` and :func:`_contact_phase`, or None when the horizon has no
    phase of that kind (the branch is then compiled out).  They hold what does not
    change between trials: a call unboxes three objects instead of ~80 arrays, and
    resolves no tuple types (measured on ur5: the dispatch of the same arguments as a
    tuple, 10 us and 12 kB of Python objects per call).  ``address`` (phases + 1, 2, 2):
    row p the (address, key) of phase p's rollout and cost program, the last row those
    of the terminal knot's kinematics pass and cost program, compiled for the types of
    these arguments (:meth:`HorizonTrial.plan`, :func:`_addresses`): linked into this
    kernel, their code was optimized again at its compile.

    ``holder.item`` ends with ``signal`` (int64 vector): after each phase (its rollout and
    costs, its knots' costs added to the total) ``signal[TRIAL_PROGRESS]`` = its stop, an
    atomic release store (:mod:`.parallel`): a worker evaluating calc_diff at this trial
    follows it (:meth:`.problem.ShootingProblem._speculate`).  That calc_diff rewrites
    those knots' costs (accumulating), hence the sum as each phase ends: the same
    additions in the same order as one sum at the end.  The rollouts publish each knot
    in ``signal[TRIAL_ROLLED]`` (:mod:`.trial`)."""
    m, order, kinematics, no_controls, terminal_program, costs, ws, signal = holder.item
    xs, us, k, K, gaps, lower, upper, alpha, use_gaps, boxed = inputs
    xs_try = outputs[0]
    xnext = outputs[2]
    N = xnext.shape[0]
    predicted = x0
    cost, summed = 0.0, 0
    for p in range(order.shape[0]):
        failed, stop = -1, 0
        if order[p, 0] == FREE_PHASE:
            if free is not None:
                failed, stop = _free_phase(m, free[order[p, 1]].item, address[p], inputs,
                                           predicted, outputs, ws, signal)
        elif contact is not None:
            failed, stop = _contact_phase(contact[order[p, 1]].item, address[p], inputs,
                                          predicted, outputs, signal)
        if failed >= 0:
            return failed, np.nan, 0.0
        predicted = xnext[stop - 1]
        for t in range(summed, stop):
            cost += costs[t]
        summed = stop
        store_release(signal, TRIAL_PROGRESS, stop)
    dx, w = ws[1][1], ws[1][2][:gaps.shape[1]]
    s4, t4, s3 = ws[3]
    trial_state(m, predicted, gaps[N], alpha, use_gaps, w, xs_try[N], s4, t4, s3)
    terminal = address[order.shape[0]]
    call_checked(terminal[0, 0], terminal[0, 1], (xs_try[N:], no_controls, kinematics, CALC))
    call_checked(terminal[1, 0], terminal[1, 1], (xs_try[N:], no_controls, terminal_program,
                                                  CALC))
    for t in range(summed, costs.shape[0]):
        cost += costs[t]
    dv = 0.0
    if merit_gaps:
        # nq = nv: no joint with nq > nv (free flyer, spherical, unbounded, planar), so
        # every coordinate's x_t (-) x_t^try is x_t - x_t^try, the subtraction
        # difference_state makes for such joints (the same bits): written here, not a
        # compiled call per knot that passes the model flattened (fc35: 5.6 of a 27 us
        # infeasible trial on the double pendulum, 16 knots, were these calls)
        vector_space = m.nq == m.nv
        for t in range(N + 1):
            if vector_space:
                for i in range(dx.shape[0]):
                    dx[i] = xs[t, i] - xs_try[t, i]
            else:
                state_difference(m, xs_try[t], xs[t], dx, s4, t4, s3)  # x_t (-) x_t^try
            for i in range(dx.shape[0]):
                s = 0.0
                for j in range(dx.shape[0]):
                    s += Vxx[t, i, j] * dx[j]
                dv -= gaps[t, i] * s
    return -1, cost, dv


def _indexed(array_type, index_type):
    """The Numba type of ``array[index]`` in compiled code (index an integer or a slice
    without step)."""
    return get_array_index_type(array_type, index_type).result


def _rows(array_type):
    """The Numba type of ``array[start:stop]`` in compiled code (a phase's window)."""
    return _indexed(array_type, types.slice2_type)


def _addresses(rows):
    """The (rows, callees, 2) int64 table of the (address, key) pairs
    (:func:`~geppetto.dynamics.native.callee_address`) of ``rows`` of calls (callee,
    argument types[, return type]), for a kernel that makes them by
    :func:`~geppetto.dynamics.native.call_checked`: a call whose types are not
    those worked out here raises TypeError instead of running the callee on misread
    arguments."""
    return np.array([[callee_address(*call) for call in row] for row in rows],
                    dtype=np.int64)


class HorizonTrial:
    """The trial of :func:`_trial` on ``problem`` (built by :func:`horizon_trial`):
    ``__call__(inputs, outputs, Vxx, merit_gaps)`` returns (failed, cost, dv) and
    leaves the knots' costs in ``problem.costs``."""

    def __init__(self, problem, order, free, contact, terminal, workspace, entries, signal):
        """``entries``: each phase's entry (of :func:`_free_phase` or
        :func:`_contact_phase`), in ``order``; ``signal``: see :func:`_trial`."""
        self.problem = problem
        plan = (problem.phases[0][0].dynamics.arrays, order) + terminal + (problem.costs,
                                                                          workspace, signal)
        self.holder = held(plan)
        self.free, self.contact = free, contact
        self.order, self.entries, self.terminal = order, entries, terminal
        self.arrays, self.workspace, self.signal = plan[0], workspace, signal
        self.plans = {}                # {fingerprint of the trial's arguments: plan}

    def __call__(self, inputs, outputs, Vxx, merit_gaps):
        arguments = (inputs, outputs, Vxx)
        key = compute_fingerprint(arguments)
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self.plan(inputs, outputs, Vxx, merit_gaps)
        entry, address = plan
        return entry(self.holder, self.free, self.contact, address, inputs, self.problem.x0,
                     outputs, Vxx, merit_gaps)

    def plan(self, inputs, outputs, Vxx, merit_gaps):
        """(:func:`_trial`'s compiled entry, its (address, key) table of :func:`_addresses`)
        for the types of these arguments: each callee's specialization for the types it
        is given in :func:`_trial` (windows of the inputs and outputs, the predicted
        state), worked out here and checked at each call."""
        typeof = numba.typeof
        input_types, output_types = typeof(inputs), typeof(outputs)
        window = types.Tuple([_rows(t) for t in input_types.types[:7]]
                             + list(input_types.types[7:]))
        out = types.Tuple([_rows(t) for t in output_types.types])
        predicted = cpu_target.typing_context.unify_types(
            typeof(self.problem.x0), _indexed(output_types.types[2], types.int64))
        xs_try, us_try = out.types[0], out.types[1]     # xs_try[N:] is of xs_try's type
        progress = (typeof(self.signal), types.int64)
        # the typed Lists' item types: their first entry's
        first = {kind: typeof(self.entries[index]).types for index, (kind, _) in
                 reversed(list(enumerate(self.order)))}
        calls = []
        for (kind, _), entry in zip(self.order, self.entries):
            entry_types = first[kind]
            if kind == FREE_PHASE:
                B, damping, scheme, dt, stored, programs = entry_types[2:8]
                rollout = (rollout_free, (typeof(self.arrays), B, damping, scheme, dt, window,
                                          predicted, out, typeof(self.workspace), stored)
                           + progress, types.int64)
                # a cost point's states: the knots' window or the stored stage points'
                states = cpu_target.typing_context.unify_types(xs_try, _rows(stored.types[6]))
                calls.append((rollout, (_interpret, (states, us_try, programs.item_type,
                                                     types.int64))))
                continue
            else:
                workspace, program, no_controls = (entry_types[2], entry_types[3],
                                                   entry_types[5])
                rollout = (rollout_contact, (workspace, window, predicted, out) + progress,
                           types.int64)
                controls = us_try if entry[4] else no_controls
            calls.append((rollout, (_interpret, (xs_try, controls, program, types.int64))))
        kinematics, no_controls, program = (typeof(a) for a in self.terminal)
        calls.append(((_kinematics, (xs_try, no_controls, kinematics, types.int64)),
                      (_interpret, (xs_try, no_controls, program, types.int64))))
        address = _addresses(calls)
        arguments = (self.holder, self.free, self.contact, address, inputs, self.problem.x0,
                     outputs, Vxx, merit_gaps)
        _trial.compile(tuple(typeof(a) for a in arguments))
        return _compiled_entry(_trial, arguments), address


def _trial_program(model, data):
    """The phase's cost program, or None when its costs need more than the interpreter in
    TRIAL mode (a generated phase function, or a block of their own)."""
    phase = fused_phase(model, data)
    if phase is None or phase.program is None or phase.first_by_mode[TRIAL]:
        return None
    return phase.program


def _free_entry(model, start, stop, data, workspace):
    """The entry of a FreeDynamics phase (see :func:`_free_phase`), or None when it needs
    the phase-by-phase trial."""
    dynamics = model.dynamics
    if model.nu != dynamics.nu:
        return None
    dynamics_workspace, stored = workspace
    if SCHEME_CODES[model.integrator.scheme] > 1:     # RK: the costs per cost point
        programs = model.trial_cost_programs(data, stored is not None)
        calls = None if programs is None else [(row, CALC) for row, _ in programs]
    else:
        program = _trial_program(model, data)
        programs = None if program is None else [(-1, program)]
        calls = [(-1, TRIAL)]
    if programs is None or (stored is None and model.kinematics_for_costs):
        return None               # the costs read kinematics the rollout does not store
    return (np.int64(start), np.int64(stop), np.ascontiguousarray(dynamics.actuation.B),
            np.ascontiguousarray(dynamics.damping), np.int64(SCHEME_CODES[
                model.integrator.scheme]), float(model.integrator.dt), dynamics_workspace[1],
            typed_list([program for _, program in programs]),
            np.array(calls, dtype=np.int64).reshape(-1, 2))


def _contact_entry(model, start, stop, data, workspace, nu):
    """The entry of a contact or impulse phase (see :func:`_contact_phase`), or None when
    it needs the phase-by-phase trial (no jitted step, costs on kinematics or forces the
    rollout does not store, or controls of another width than the problem's ``nu``)."""
    dynamics_workspace, stored = workspace
    if not isinstance(dynamics_workspace, Held) or model.nu not in (0, nu):
        return None               # RK schemes: stepped in Python
    program = _trial_program(model, data)
    if program is None or (stored is None and (
            model.kinematics_for_costs or getattr(data.kinematics, "contact", None))):
        return None
    return (np.int64(start), np.int64(stop), dynamics_workspace, program, model.nu == nu,
            np.zeros((stop - start, 0)))


def _entries(entries):
    """A typed List of ``entries`` (of one type), each held (its List methods then
    compile for one reference, not for the entry's arrays), or None when there are none."""
    if not entries:
        return None
    return typed_list([held(entry) for entry in entries])


def horizon_trial(problem, workspaces, signal=None):
    """A :class:`HorizonTrial` of ``problem`` (``workspaces`` the phases'
    ``trial_workspace``), or None when a stage needs the phase-by-phase trial (see
    :func:`_free_entry`, :func:`_contact_entry`), phases on different models, a
    terminal knot without fused costs.  The trial publishes each phase's stop in
    ``signal`` (default: a vector of its own; see :func:`_trial`)."""
    phases = problem.phases
    signal = new_trial_signal() if signal is None else signal
    arrays = getattr(problem.phases[0][0].dynamics, "arrays", None)
    if arrays is None:
        return None               # custom dynamics: stepped in Python
    order, kinds = [], ([], [])
    for (model, start, stop, data), workspace in zip(phases, workspaces):
        if getattr(model.dynamics, "arrays", None) is not arrays:
            return None
        if type(model.dynamics) is FreeDynamics:
            kind, entry = FREE_PHASE, _free_entry(model, start, stop, data, workspace)
        else:
            kind, entry = CONTACT_PHASE, _contact_entry(model, start, stop, data, workspace,
                                                        problem.nu)
        if entry is None:
            return None
        order.append((kind, len(kinds[kind])))
        kinds[kind].append(entry)
    terminal_model, terminal_data = problem.terminal_model, problem.terminal_data
    phase = fused_phase(terminal_model, terminal_data)
    if phase is None or phase.program is None or len(phase.first) > 1:
        return None
    if getattr(getattr(terminal_model.state, "model", None), "arrays", None) is not arrays:
        return None
    if phase.first:
        block, _, kinematics, _ = phase.first[0]    # kinematics: held((arrays, scratch))
        if block is not _kinematics:
            return None
    else:                          # no kinematic cost: a pass of level 0 (copies q only)
        kinematics = kinematics_step(arrays, terminal_data.kinematics, 0).args
    terminal = (kinematics, terminal_data.no_controls, phase.program)
    entries = [kinds[kind][index] for kind, index in order]
    return HorizonTrial(problem, np.array(order, dtype=np.int64), _entries(kinds[0]),
                        _entries(kinds[1]), terminal, step_workspace(arrays, problem.nx),
                        entries, signal)


# --- calc / calc_diff of the whole horizon in one compiled call ------------------------

@kernel
def _evaluate(holder, free, xs, us, mode):
    """CALC or DIFF (``mode``) of a horizon of FreeDynamics phases: for each phase
    ``free[p].item`` = (start, stop, the arguments of :func:`.fused._free_field`, the cost
    program), the lanes' dynamics then the program (Euler step and costs) on its knots;
    then the terminal knot's kinematics pass and program.  ``holder.item`` = (model, the
    terminal kinematics step's held arguments, its no_controls, its program, the
    (address, key) table (2, 2, 2) of _free_field and _interpret on a running phase,
    _kinematics and _interpret on the terminal knot, for these very argument types: see
    :class:`HorizonEvaluation`)."""
    m, kinematics, no_controls, terminal_program, address = holder.item
    running, terminal = address[0], address[1]
    for p in range(len(free)):
        start, stop, args, program = free[p].item
        call_checked(running[0, 0], running[0, 1], (xs[start:stop], us[start:stop], m, args,
                                                    mode))
        call_checked(running[1, 0], running[1, 1], (xs[start:stop], us[start:stop], program,
                                                    mode))
    _terminal_calls(terminal, kinematics, no_controls, terminal_program, xs, mode)


@inline_kernel
def _terminal_calls(address, kinematics, no_controls, program, xs, mode):
    """The terminal knot (``xs[-1]``) in ``mode``: its kinematics pass then its cost
    program, by the (address, key) rows ``address`` (2, 2) of _kinematics and _interpret,
    as its :class:`~.fused.FusedPhase` runs them."""
    N = xs.shape[0] - 1
    call_checked(address[0, 0], address[0, 1], (xs[N:], no_controls, kinematics, mode))
    call_checked(address[1, 0], address[1, 1], (xs[N:], no_controls, program, mode))


@kernel
def _terminal_knot(holder, xs, mode):
    """The terminal knot of ``xs`` (N + 1, nx) in ``mode`` (:class:`TerminalKnot`):
    ``holder.item`` = (its kinematics step's held arguments, its no_controls, its
    program, the (address, key) table (2, 2) of :func:`_terminal_calls`)."""
    kinematics, no_controls, program, address = holder.item
    _terminal_calls(address, kinematics, no_controls, program, xs, mode)


def _terminal_addresses(problem, terminal):
    """The (address, key) rows (2, 2) of :func:`_terminal_calls` for ``terminal`` =
    (kinematics, no_controls, program) on xs[N:] of the problem's stacks."""
    kinematics, no_controls, program = terminal
    typeof = numba.typeof
    rows = _rows(typeof(problem.xnext))
    return _addresses((((_kinematics, (rows, typeof(no_controls), typeof(kinematics),
                                       types.int64)),
                        (_interpret, (rows, typeof(no_controls), typeof(program),
                                      types.int64))),))[0]


class TerminalKnot:
    """calc (CALC) or calc_diff (DIFF) of ``problem``'s terminal knot by one compiled
    call (:func:`_terminal_knot`): ``__call__(xs, mode)``, xs (N+1, nx) float64
    C-contiguous; the kernels its fused phase runs (:meth:`.stage.TerminalModel.calc_diff`)
    without their dispatch from Python (the parallel calc_diff's calling thread: 1 call
    instead of 2-3, 8 us of Python)."""

    def __init__(self, problem, terminal):
        kinematics, no_controls, program = terminal
        address = _terminal_addresses(problem, terminal)
        self.holder = held((kinematics, no_controls, program, address))
        arguments = (self.holder, problem.xnext, DIFF)
        _terminal_knot.compile(tuple(numba.typeof(a) for a in arguments))
        self.entry = _compiled_entry(_terminal_knot, arguments)   # no dispatch per call

    def __call__(self, xs, mode):
        self.entry(self.holder, xs, mode)


def terminal_knot(problem):
    """A :class:`TerminalKnot` of ``problem``, or None when its terminal knot has no
    fused phase of a kinematics pass (or none) and a program (:func:`_fused_terminal`).
    Build it on one Numba thread."""
    arrays = getattr(problem.phases[0][0].dynamics, "arrays", None)
    terminal = None if arrays is None else _fused_terminal(problem, arrays)
    return None if terminal is None else TerminalKnot(problem, terminal)


def _fused_terminal(problem, arrays):
    """(kinematics, no_controls, program) of the terminal knot's fused phase, run the
    same in CALC and DIFF modes (a kinematics pass on ``arrays``, or none: then a pass of
    level 0, which copies q only), or None."""
    terminal_model, terminal_data = problem.terminal_model, problem.terminal_data
    phase = fused_phase(terminal_model, terminal_data)
    if phase is None or phase.program is None or \
            getattr(getattr(terminal_model.state, "model", None), "arrays", None) is not arrays:
        return None
    blocks = [phase.first_by_mode[mode] for mode in (CALC, DIFF)]
    if len(blocks[0]) != len(blocks[1]) or len(blocks[0]) > 1 or (blocks[0] and any(
            a is not b for a, b in zip(blocks[0][0][:3], blocks[1][0][:3]))):
        return None
    if blocks[0]:
        block, _, kinematics, _ = blocks[0][0]
        if block is not _kinematics:
            return None
    else:                          # no kinematic cost: a pass of level 0 (copies q only)
        kinematics = kinematics_step(arrays, terminal_data.kinematics, 0).args
    return kinematics, terminal_data.no_controls, phase.program


class HorizonEvaluation:
    """``problem``'s calc (CALC) or calc_diff (DIFF) by :func:`_evaluate`:
    ``__call__(xs, us, mode)`` fills the problem's arrays (the phases' integrators write
    into them) as the phase-by-phase evaluation does, with the same kernels; xs
    (N+1, nx) and us (N, nu) float64 C-contiguous (the types the addresses are for)."""

    def __init__(self, problem, entries, terminal):
        arrays = problem.phases[0][0].dynamics.arrays
        kinematics, no_controls, program = terminal
        entry = entries[0]        # (the typed List's items are not read from Python: its
        free = _entries(entries)  # getitem compiles in every process, a minute)
        typeof = numba.typeof
        rows = _rows(typeof(problem.xnext))    # xs[start:stop], us[start:stop], xs[N:]
        running = _addresses((
            ((_free_field, (rows, rows, typeof(arrays), typeof(entry[2]), types.int64)),
             (_interpret, (rows, rows, typeof(entry[3]), types.int64))),))[0]
        address = np.array([running, _terminal_addresses(problem, terminal)])
        plan = (arrays, kinematics, no_controls, program, address)
        self.address = address    # the table in the holder (the same array)
        self.holder = held(plan)
        self.free = free
        arguments = (self.holder, free, problem.xnext, problem.xnext, CALC)
        _evaluate.compile(tuple(typeof(a) for a in arguments))
        self.entry = _compiled_entry(_evaluate, arguments)   # no dispatch per call

    def __call__(self, xs, us, mode):
        self.entry(self.holder, self.free, xs, us, mode)


def horizon_evaluation(problem):
    """A :class:`HorizonEvaluation` of ``problem``, or None when a phase needs the
    phase-by-phase path: all running phases FreeDynamics stages on one model, whose
    fused phase runs :func:`.fused._free_field` then a cost program in CALC and DIFF
    modes, with controls of the problem's width written into its arrays; a terminal
    knot whose fused phase is a kinematics pass (or none) and a program.  Build it on
    one Numba thread (a free phase is fused only there: :func:`.stage.fused_phase`)."""
    arrays = getattr(problem.phases[0][0].dynamics, "arrays", None)
    if arrays is None:
        return None
    entries = []
    for model, start, stop, data in problem.phases:
        if type(model.dynamics) is not FreeDynamics or model.dynamics.arrays is not arrays \
                or model.nu != problem.nu:
            return None
        integrator = data.integrator
        if integrator.xnext.base is not problem.xnext or integrator.Fx.base is not problem.Fx \
                or integrator.Fu.base is not problem.Fu:
            return None
        phase = fused_phase(model, data)
        if phase is None or phase.program is None:
            return None
        blocks = [phase.first_by_mode[mode] for mode in (CALC, DIFF)]
        if any(len(first) != 1 or first[0][0] is not _free_field or first[0][1] is not arrays
               for first in blocks) or blocks[0][0][2] is not blocks[1][0][2]:
            return None
        entries.append((np.int64(start), np.int64(stop), blocks[0][0][2], phase.program))
    terminal = _fused_terminal(problem, arrays)
    if terminal is None:
        return None
    if any(numba.typeof(entry) != numba.typeof(entries[0]) for entry in entries):
        return None                # phases whose arguments differ in type: one by one
    return HorizonEvaluation(problem, entries, terminal)


# --- calc_diff of a parallel chunk's parts in one compiled call -------------------------

CONTACT_PART, IMPULSE_PART, FREE_PART = 0, 1, 2
_call_checked_bool = intrinsic(_checked_call(types.boolean))


# what :func:`_chunk_diff` returns when it follows a trial: the trial was dropped; it
# waited ``spins`` rounds (the part to go on from is FOLLOW_WAITED - the value)
FOLLOW_DROPPED, FOLLOW_WAITED = -2, -3


@inline_kernel
def _diff_block(m, contact, impulse, free, address, order, xs, us, p):
    """The dynamics block of part p of a chunk (see :func:`_chunk_diff`) in DIFF mode:
    whether its contacts were regular."""
    kind, i = order[p, 0], order[p, 1]
    block = address[p, 0]
    regular = True
    if kind == FREE_PART:
        if free is not None:
            start, stop, args, program = free[i].item
            call_checked(block[0], block[1], (xs[start:stop], us[start:stop], m, args, DIFF))
    elif kind == CONTACT_PART:
        if contact is not None:
            start, stop, step, program = contact[i].item
            regular = _call_checked_bool(block[0], block[1], (xs[start:stop], us[start:stop],
                                                              step, DIFF))
    elif impulse is not None:
        start, stop, step, program, no_controls, own_xnext, own_Fx = impulse[i].item
        regular = _call_checked_bool(block[0], block[1], (xs[start:stop], no_controls, step,
                                                          DIFF))
    return regular


@inline_kernel
def _diff_costs(xnext, Fx, contact, impulse, free, address, order, xs, us, p):
    """The cost program of part p of a chunk in DIFF mode (with the integrator's step),
    after its dynamics block; an impulse part then copies its predicted states and Fx
    from its integrator's own arrays into the problem's ``xnext``, ``Fx``."""
    kind, i = order[p, 0], order[p, 1]
    costs = address[p, 1]
    if kind == FREE_PART:
        if free is not None:
            start, stop, args, program = free[i].item
            call_checked(costs[0], costs[1], (xs[start:stop], us[start:stop], program, DIFF))
    elif kind == CONTACT_PART:
        if contact is not None:
            start, stop, step, program = contact[i].item
            call_checked(costs[0], costs[1], (xs[start:stop], us[start:stop], program, DIFF))
    elif impulse is not None:
        start, stop, step, program, no_controls, own_xnext, own_Fx = impulse[i].item
        call_checked(costs[0], costs[1], (xs[start:stop], no_controls, program, DIFF))
        for t in range(start, stop):
            xnext[t, :] = own_xnext[t - start]
            Fx[t, :, :] = own_Fx[t - start]


@kernel
def _chunk_diff(holder, contact, impulse, free, address, order, xs, us, signal, index,
                trial, follow, spins, rolled):
    """calc_diff of the parts of a chunk (:meth:`.problem.ShootingProblem.parallel_plan`),
    the last first: part p (row p of ``order``: its kind, its index in ``contact``,
    ``impulse`` or ``free``, typed Lists of held entries, None when the chunk has no part
    of that kind, its stop and its start) runs its dynamics block then its cost program
    in DIFF mode, as its :class:`~.fused.FusedPhase` does, by the (address, key) rows
    ``address[p]``; an impulse part copies its predicted states and Fx from its
    integrator's own arrays into the problem's (``holder.item`` = (model, xnext, Fx)).
    With ``index`` >= 0, after each part ``signal[index]`` = the knot from which the
    chunk's knots are ready (an atomic release store, :func:`.parallel.wait_below`).
    Returns -1, or the part whose contacts were not regular (``signal[-1]`` = 1 then: the
    waiting thread stops).

    ``follow`` >= 0: calc_diff at a line-search trial being rolled out
    (:meth:`.problem.ShootingProblem._speculate`), from the bottom up: part p's dynamics
    block once the rollout has passed its stop (``trial[rolled]`` >= ``order[p, 2]``,
    ``rolled`` TRIAL_ROLLED, published per knot; TRIAL_PROGRESS: per phase, once its
    costs are summed, for comparisons), its costs once the trial's costs have
    (``trial[TRIAL_PROGRESS]``, per phase: the trial's cost program writes the knots'
    costs too), the costs first when both can run; until the solver takes the trial
    (``trial[TRIAL_DECISION]`` = ACCEPTED): what is left then from the top down, as
    above, for the backward pass that follows.  ``follow`` = low + (n + 1) dyn: the
    parts below ``low`` are done, those below ``dyn`` have their dynamics block done (0
    at the start).  Returns FOLLOW_DROPPED when the solver dropped the trial (REJECTED),
    FOLLOW_WAITED - (low + (n + 1) dyn) when neither step could run in ``spins`` rounds
    of loads (the caller yields its core, then calls again from there)."""
    m, xnext, Fx = holder.item
    n = order.shape[0]
    low = 0                             # the parts below are done
    dyn = 0                             # the parts below have their dynamics block done
    if follow >= 0:
        low, dyn = follow % (n + 1), follow // (n + 1)
        waited = 0
        while low < n:
            decision = load_acquire(trial, TRIAL_DECISION)
            if decision == REJECTED:
                return FOLLOW_DROPPED
            if decision == ACCEPTED:
                break                   # the rest from the top down
            if dyn > low and load_acquire(trial, TRIAL_PROGRESS) >= order[low, 2]:
                _diff_costs(xnext, Fx, contact, impulse, free, address, order, xs, us, low)
                low += 1
                waited = 0
            elif dyn < n and load_acquire(trial, rolled) >= order[dyn, 2]:
                if not _diff_block(m, contact, impulse, free, address, order, xs, us, dyn):
                    store_release(signal, signal.shape[0] - 1, 1)
                    return dyn
                dyn += 1
                waited = 0
            else:
                waited += 1
                if waited > spins:
                    return FOLLOW_WAITED - (low + (n + 1) * dyn)
    for p in range(n - 1, low - 1, -1):
        if p >= dyn and not _diff_block(m, contact, impulse, free, address, order, xs, us,
                                        p):
            store_release(signal, signal.shape[0] - 1, 1)
            return p
        _diff_costs(xnext, Fx, contact, impulse, free, address, order, xs, us, p)
        if index >= 0:
            store_release(signal, index, order[p, 3] if p > low else order[0, 3])
    if index >= 0 and low == n and n > 0:
        store_release(signal, index, order[0, 3])
    return -1


class ChunkProgram:
    """calc_diff of a chunk's parts ``phases`` [(model, start, stop, data)] of ``problem``
    by one call of :func:`_chunk_diff` (built by :func:`chunk_program`):
    ``__call__(xs, us, signal, index)`` returns -1 or the index of the part whose contacts
    were not regular (its ``failed`` callback, :attr:`failed`, raises the error);
    ``follow(xs, us, signal, index, trial, first, spins, rolled)``: the parts from
    ``first`` on as the trial publishes them (see :func:`_chunk_diff`)."""

    _no_trial = new_trial_signal()

    def __init__(self, problem, order, lists, address, failed):
        self.problem = problem
        self.holder = held((problem.phases[0][0].dynamics.arrays, problem.xnext, problem.Fx))
        self.lists, self.address, self.order, self.failed = lists, address, order, failed
        self.entry = None

    def __call__(self, xs, us, signal, index):
        return self.follow(xs, us, signal, index, self._no_trial, -1, 0)

    def follow(self, xs, us, signal, index, trial, first, spins, rolled=TRIAL_ROLLED):
        arguments = (self.holder,) + self.lists + (self.address, self.order, xs, us, signal,
                                                   np.int64(index), trial, np.int64(first),
                                                   np.int64(spins), np.int64(rolled))
        if self.entry is None:
            _chunk_diff.compile(tuple(numba.typeof(a) for a in arguments))
            self.entry = _compiled_entry(_chunk_diff, arguments)     # no dispatch per call
        return self.entry(*arguments)


def chunk_program(problem, phases):
    """A :class:`ChunkProgram` of the parts ``phases``, or None when one needs the
    phase-by-phase path: every part a fused phase of one dynamics block (contact,
    impulse or FreeDynamics on the problem's model) and a cost program, with controls
    of the problem's width (impulses: none) written into the problem's arrays.  Build it
    on one Numba thread (a free phase is fused only there)."""
    arrays = getattr(problem.phases[0][0].dynamics, "arrays", None)
    if arrays is None or not phases:
        return None
    typeof = numba.typeof
    rows_x = rows_u = _rows(typeof(problem.xnext))    # xs, us: C-contiguous 2D stacks
    entries, order, calls, failed = ([], [], []), [], [], []
    for model, start, stop, data in phases:
        if getattr(model.dynamics, "arrays", None) is not arrays:
            return None
        phase = fused_phase(model, data)
        if phase is None or phase.program is None or len(phase.first_by_mode[DIFF]) != 1:
            return None
        block, block_model, args, fail = phase.first_by_mode[DIFF][0]
        integrator = data.integrator
        in_place = integrator.xnext.base is problem.xnext and \
            integrator.Fx.base is problem.Fx and integrator.Fu.base is problem.Fu
        program = phase.program
        if block is _free_field and block_model is arrays and model.nu == problem.nu \
                and in_place:
            kind, entry = FREE_PART, (np.int64(start), np.int64(stop), args, program)
            call = (block, (rows_x, rows_u, typeof(arrays), typeof(args), types.int64))
            controls = rows_u
        elif block is _contact_field_diff and block_model is None and model.nu == problem.nu \
                and in_place:
            kind, entry = CONTACT_PART, (np.int64(start), np.int64(stop), args, program)
            call = (block, (rows_x, rows_u, typeof(args), types.int64), types.boolean)
            controls = rows_u
        elif block is _impulse_field_diff and block_model is None and model.nu == 0:
            no_controls = np.zeros((stop - start, 0))
            kind, entry = IMPULSE_PART, (np.int64(start), np.int64(stop), args, program,
                                         no_controls, integrator.xnext, integrator.Fx)
            call = (block, (rows_x, typeof(no_controls), typeof(args), types.int64),
                    types.boolean)
            controls = typeof(no_controls)
        else:
            return None
        order.append((kind, len(entries[kind]), stop, start))
        entries[kind].append(entry)
        calls.append((call, (_interpret, (rows_x, controls, typeof(program), types.int64))))
        failed.append(fail)
    for kind in entries:
        if any(typeof(entry) != typeof(kind[0]) for entry in kind):
            return None             # parts whose arguments differ in type: one by one
    return ChunkProgram(problem, np.array(order, dtype=np.int64),
                        tuple(_entries(kind) for kind in entries), _addresses(calls), failed)
