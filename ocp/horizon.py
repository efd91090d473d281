"""A line-search trial of the whole horizon in one compiled call.

A DDP trial (:mod:`.trial`) rolls each phase out under the feedback law, then
costs the trial trajectory phase by phase.  When every running phase is a
:class:`~.dynamics.FreeDynamics` phase with an Euler scheme whose costs run in
the fused interpreter (:mod:`.fused`), and the terminal knot's costs do too,
the whole trial is one kernel, :func:`_trial`:

    for each phase:  rollout_free (stores the knots' kinematics)      (.trial)
                     the phase's cost program in TRIAL mode             (.fused)
    x_N^try = x_N^pred (+) (alpha - 1) f_N   (while infeasible, alpha < 1)
    the terminal knot: its kinematics pass and cost program (CALC mode)
    cost = sum of the knots' costs,
    dv = -sum_t f_t . Vxx_t (x_t (-) x_t^try)   (FDDP's gap term, when asked)

No Python per phase, no allocation: the same kernels, on the same arrays, as
the phase-by-phase trial (the same knots' costs; their sum is taken in order),
with the model, the programs and the scratch unboxed once per trial (from one
typed List) instead of once per kernel.  Other
horizons (contacts, impulses, RK schemes, custom dynamics or residuals, more
than one thread) keep the phase-by-phase trial: :func:`horizon_trial` returns
None for them.
"""
import numpy as np

from ..dynamics.config import kernel
from .dynamics import FreeDynamics
from .fused import CALC, TRIAL, _interpret, _kinematics, _push, _typed_list, kinematics_step
from .stage import fused_phase
from .step import SCHEME_CODES
from .trial import _finite, rollout_free, state_difference, trial_state


@kernel
def _trial(holder, inputs, x0, outputs, Vxx, merit_gaps):
    """One trial (see the module docstring): returns (failed, cost, dv), failed -1 or the
    knot where the state or the controls became non-finite.  ``holder[0]`` = (model,
    phases, the terminal knot's kinematics step arguments, its no_controls, its cost
    program, the knots' costs (N+1,), scratch): ``phases`` a typed List of (start, stop,
    B, damping, scheme, dt, kinematics, program).  One typed List holds what does not
    change between trials: a call unboxes one object instead of ~80 arrays, and
    resolves no tuple types (measured on ur5: the dispatch of the same arguments as a
    tuple, 10 us and 12 kB of Python objects per call)."""
    m, phases, kinematics, no_controls, terminal_program, costs, ws = holder[0]
    xs, us, k, K, gaps, lower, upper, alpha, use_gaps, boxed = inputs
    xs_try, us_try, xnext = outputs
    N = xnext.shape[0]
    predicted = x0
    for p in range(len(phases)):
        start, stop, B, damping, scheme, dt, stored, program = phases[p]
        window = (xs[start:stop], us[start:stop], k[start:stop], K[start:stop],
                  gaps[start:stop], lower[start:stop], upper[start:stop], alpha, use_gaps,
                  boxed)
        out = (xs_try[start:stop], us_try[start:stop], xnext[start:stop])
        failed = rollout_free(m, B, damping, scheme, dt, window, predicted, out, ws, stored)
        if failed >= 0:
            return start + failed, np.nan, 0.0
        for t in range(start, stop):
            if not _finite(us_try[t]):
                return t, np.nan, 0.0
        _interpret(xs_try[start:stop], us_try[start:stop], program, TRIAL)
        predicted = xnext[stop - 1]
    dx, w = ws[1][1], ws[1][2][:gaps.shape[1]]
    s4, t4, s3 = ws[3]
    trial_state(m, predicted, gaps[N], alpha, use_gaps, w, xs_try[N], s4, t4, s3)
    _kinematics(xs_try[N:], no_controls, kinematics, CALC)
    _interpret(xs_try[N:], no_controls, terminal_program, CALC)
    cost = 0.0
    for t in range(costs.shape[0]):
        cost += costs[t]
    dv = 0.0
    if merit_gaps:
        for t in range(N + 1):
            state_difference(m, xs_try[t], xs[t], dx, s4, t4, s3)      # x_t (-) x_t^try
            for i in range(dx.shape[0]):
                s = 0.0
                for j in range(dx.shape[0]):
                    s += Vxx[t, i, j] * dx[j]
                dv -= gaps[t, i] * s
    return -1, cost, dv


class HorizonTrial:
    """The trial of :func:`_trial` on ``problem`` (built by :func:`horizon_trial`):
    ``__call__(inputs, outputs, Vxx, merit_gaps)`` returns (failed, cost, dv) and
    leaves the knots' costs in ``problem.costs``."""

    def __init__(self, problem, phases, terminal, workspace):
        self.problem = problem
        plan = (problem.phases[0][0].dynamics.arrays, phases) + terminal + (problem.costs,
                                                                           workspace)
        self.holder = _typed_list(plan)
        _push(self.holder, plan)

    def __call__(self, inputs, outputs, Vxx, merit_gaps):
        return _trial(self.holder, inputs, self.problem.x0, outputs, Vxx, merit_gaps)


def _phase_entry(model, start, stop, data, workspace):
    """The plan's tuple of a running phase, or None when it needs the phase-by-phase trial."""
    dynamics = model.dynamics
    if type(dynamics) is not FreeDynamics or SCHEME_CODES[model.integrator.scheme] > 1 \
            or model.nu != dynamics.nu:
        return None
    phase = fused_phase(model, data)
    if phase is None or phase.program is None:
        return None
    if any(first[0].__name__ != "_free_field" for first in phase.first):
        return None
    dynamics_workspace, stored = workspace
    if stored is None and model.kinematics_for_costs:
        return None               # the costs read kinematics the rollout does not store
    return (np.int64(start), np.int64(stop), np.ascontiguousarray(dynamics.actuation.B),
            np.ascontiguousarray(dynamics.damping), np.int64(SCHEME_CODES[
                model.integrator.scheme]), float(model.integrator.dt), dynamics_workspace[1],
            phase.program)


def horizon_trial(problem, workspaces):
    """A :class:`HorizonTrial` of ``problem`` (``workspaces`` the phases'
    ``trial_workspace``), or None when a stage needs the phase-by-phase trial: a phase
    that is not FreeDynamics with an Euler scheme and fused costs, phases on different
    models, a terminal knot without fused costs, or more than one Numba thread."""
    if problem.nthreads != 1:
        return None
    entries = []
    for (model, start, stop, data), workspace in zip(problem.phases, workspaces):
        entry = _phase_entry(model, start, stop, data, workspace)
        if entry is None or model.dynamics.arrays is not problem.phases[0][0].dynamics.arrays:
            return None
        entries.append(entry)
    terminal_model, terminal_data = problem.terminal_model, problem.terminal_data
    phase = fused_phase(terminal_model, terminal_data)
    if phase is None or phase.program is None or len(phase.first) > 1:
        return None
    arrays = problem.phases[0][0].dynamics.arrays
    if getattr(getattr(terminal_model.state, "model", None), "arrays", None) is not arrays:
        return None
    if phase.first:
        block, _, kinematics, _ = phase.first[0]    # kinematics: held((arrays, scratch))
        if block is not _kinematics:
            return None
    else:                          # no kinematic cost: a pass of level 0 (copies q only)
        kinematics = kinematics_step(arrays, terminal_data.kinematics, 0).args
    phases = _typed_list(entries[0])
    for entry in entries:
        _push(phases, entry)
    terminal = (kinematics, terminal_data.no_controls, phase.program)
    return HorizonTrial(problem, phases, terminal, workspaces[0][0][0])

