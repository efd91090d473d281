"""The shooting problem: N running knots and a terminal knot, evaluated phase by phase.

Notation (trajax's, Crocoddyl's names): ``xs (N+1, nx)``, ``us (N, nu)``;
``Fx (N, ndx, ndx)``, ``Fu (N, ndx, nu)`` the discrete dynamics Jacobians;
``Lx (N+1, ndx)``, ``Lu (N, nu)``, ``Lxx (N+1, ndx, ndx)``, ``Luu (N, nu, nu)``,
``Lxu (N, ndx, nu)`` the cost derivatives; ``costs (N+1,)``; ``xnext (N, nx)``
the predicted states F(x_k, u_k); ``gaps (N+1, ndx)``: gaps[0] = x0 (-) xs[0]
and gaps[k+1] = F(x_k, u_k) (-) xs[k+1] (Crocoddyl's ``fs``).

Consecutive knots whose stage models have the same structure (the same
object, or objects that differ only by their costs' weights and residuals'
references: :meth:`~.stage.StageModel.structure_key`) form a phase; each phase
is evaluated by one kernel call per term for all its knots, each knot with its
own weights and references.  ``phases`` lists (model, start, stop, data): the
phase's first model object (its structure) and ``data.runs`` the knots of
each object.

Running models may have different numbers of controls (an impulse knot has
nu = 0, as in Crocoddyl): ``nu`` is the widest, ``nus (N,)`` the controls of
each knot, and the control arrays are padded, ``us (N, nu)`` with knot k's
controls in ``us[k, :nus[k]]`` and zeros after them (``Lu``, ``Luu``,
``Lxu``, ``Fu`` likewise; the solvers' Riccati recursion leaves the padding
out).  The padding of a warm start is ignored (set to zero).
"""
from bisect import bisect_right
import os
import time
from functools import cached_property, partial

import numba
import numba.np.ufunc.parallel as _numba_parallel
import numpy as np

from ..dynamics.config import kernel, num_threads
from ..dynamics.liegroups import difference_state
from ..dynamics.model_ref import model_arrays, model_ref
from ..dynamics.validation import as_count, as_float_array
from .dynamics import FreeDynamics
from .fused import CALC, DIFF
from .horizon import FOLLOW_WAITED, chunk_program, horizon_evaluation, terminal_knot
from .parallel import (ACCEPTED, REJECTED, TRIAL_DECISION, TRIAL_PROGRESS, TRIAL_ROLLED,
                       UNDECIDED, ParallelRegion, Progress, new_trial_signal,
                       store_release_at, wait_below)
from .residuals import knot_window
from .stage import StageOutputs
from .state import StateMultibody
from .trial import free_rollout


def _set_num_threads(n):
    """``numba.set_num_threads(n)`` for a count n known valid (1, or one read from
    :func:`num_threads`): once the threading layer is up, its setting of the calling
    thread alone (Numba's function first takes the layer's launch lock and checks the
    count: 1.6 us against 0.3 us, twice per parallel calc_diff)."""
    if getattr(_numba_parallel, "_is_initialized", False):
        _numba_parallel._set_num_threads(n)
    else:
        numba.set_num_threads(n)


class _numba_threads:
    """Run the enclosed kernels on n Numba threads (restored afterwards).  A class: the
    generator-based context manager it replaces cost 2.0 us per use with a switch, this
    one 1.2 us (each calc_diff on several threads makes one)."""

    __slots__ = ("n", "previous")

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.previous = num_threads()
        if self.n != self.previous:
            _set_num_threads(self.n)

    def __exit__(self, *exception):
        if self.n != self.previous:
            _set_num_threads(self.previous)
        return False


@kernel
def _multibody_gaps(model, x0, xnext, xs, out, scratch):
    """out[0] = x0 (-) xs[0], out[k+1] = xnext[k] (-) xs[k+1] for x = (q, v); ``model``
    a ModelRef (one object to unbox: the ModelArrays tuple cost ~8 us per call from
    Python, on ur5)."""
    m = model_arrays(model)
    s4, t4, s3 = scratch
    nq, nv = m.nq, m.nv
    for t in range(xs.shape[0]):
        x1 = x0 if t == 0 else xnext[t - 1]
        if nq == nv:        # no joint with nq > nv: every joint's q1 (-) q0 is q1 - q0
            for i in range(nq):
                out[t, i] = x1[i] - xs[t, i]
        else:
            difference_state(m, xs[t, :nq], x1[:nq], out[t, :nv], s4, t4, s3)
        for i in range(nv):
            out[t, nv + i] = x1[nq + i] - xs[t, nq + i]


def _chunk_starts(plan, N):
    """The first knot of each chunk of ``plan`` (:meth:`ShootingProblem.parallel_plan`);
    an empty chunk starts where the next one does (the last, where the terminal knot is),
    so that it reads as done to the frontier of :class:`.parallel.Progress` and
    :func:`.parallel.wait_below` (an empty chunk 0 once read as never done)."""
    starts = [N] * len(plan)
    for i in range(len(plan) - 1, -1, -1):
        phases = plan[i][0]
        starts[i] = phases[0][1] if phases else (starts[i + 1] if i + 1 < len(plan) else N)
    return starts


class _Speculation:
    """A calc_diff started at a line-search trial (:meth:`ShootingProblem._speculate`): the
    trial's (xs, us), the plan it follows and the region whose worker 0 runs it (those
    of its thread count: waited for there even after the count changed), the trial's
    wall-clock seconds."""

    def __init__(self, xs, us, plan, region):
        self.xs, self.us, self.plan, self.region = xs, us, plan, region
        self.trial_seconds = 0.0

    def takes(self, xs, us, plan):
        """Whether a calc_diff at (xs, us) by ``plan`` takes this speculation up."""
        return xs is self.xs and us is self.us and plan is self.plan


def _real_time():
    """Whether the calling thread runs under a real-time policy (SCHED_FIFO, SCHED_RR:
    ``chrt``; the threads it starts inherit it): no other process's work takes its core,
    so a worker spinning for its next task costs nothing.  Measured on the solo12 trot
    (2 cores, two threads over one, interleaved, 5-7 rounds): under ``chrt -f 1`` a
    lingering worker 1.39-1.49x against 1.34-1.45x without it (the speculation's start
    10.6 us instead of 26 us on the calling thread, 16 us of it the futex wake-up of a
    sleeping thread); without it, beside another busy process, 0.83x against 0.88x."""
    policy = getattr(os, "sched_getscheduler", None)
    return policy is not None and policy(0) in (os.SCHED_FIFO, os.SCHED_RR)


def _own_stack(array, shape):
    """Whether ``array`` can go to a kernel as it is: float64, C-contiguous, of ``shape``."""
    return isinstance(array, np.ndarray) and array.dtype == np.float64 and \
        array.flags.c_contiguous and array.shape == shape


def _phases(models):
    """[(runs, start, stop)] for runs of consecutive knots of equal structure, ``runs``
    [(model, a, b)] the runs of one model object (a, b relative to ``start``)."""
    phases, start, key = [], 0, None
    for k, model in enumerate(models):
        if k > 0 and model is models[k - 1]:
            runs[-1][2] += 1
            continue
        model_key = model.structure_key()
        if k > 0 and model_key == key:
            runs.append([model, k - start, k - start + 1])
            continue
        if k > 0:
            phases.append((runs, start, k))
        runs, start, key = [[model, 0, 1]], k, model_key
    phases.append((runs, start, len(models)))
    return [([tuple(run) for run in runs], start, stop) for runs, start, stop in phases]


def _copy_part_references(whole, part, a, b):
    """The references of knots a:b of the residual data ``whole`` into ``part``."""
    source = getattr(whole, "reference", None)
    if source is None:
        return
    target = part.reference
    for s, t in zip(source if isinstance(source, tuple) else (source,),
                    target if isinstance(target, tuple) else (target,)):
        t[:] = s[a:b]


# rounds of loads of the calling thread's compiled wait for the other chunks' parts before
# it yields its core (os.sched_yield) and waits again (a round is a few acquire loads)
WAIT_SPINS = 1000

# rounds of loads of worker 0's compiled wait for the next part of the trial it follows
# (:meth:`ShootingProblem._speculate`) before it yields its core and waits again
FOLLOW_SPINS = 20000
# speculate only where the first trial of the line search was taken in at least this share
# of the recent line searches (a moving average, weight SPECULATION_SMOOTHING per line
# search): a speculation at a refused trial is work dropped, and worker 0 waited for
# before the next trial.  Measured on one plan in one process (forced on against off,
# benchmarks/threads_notes.md, round of thr32b): speculating faster where most first
# trials are taken (the solo12 trot 85 % taken 1.078x, ur5 and panda reaching 85-100 %
# 1.09x, the hyq walk 80 % 1.03x, the talos squat 93 % 0.99x), slower where few are
# (talos_arm_se3, 3 % taken: 0.93x).  The previous rule, the backward pass's share of
# calc_diff's CPU time per knot (at most 0.5), put the trot at 0.50-0.54 (flickering)
# and the arm at 0.485 (speculating), and an online choice between the arms from timed
# line searches got neither arm's time (its spans mix the arms' regimes)
SPECULATE_MIN_TAKEN = 0.5
SPECULATION_SMOOTHING = 0.25
# nor where the worker threads spend more than this share of their tasks' wall-clock
# time off their core (ParallelRegion.off_core: the machine's other work takes it): a
# worker busy during the trial, or spinning for the next one, then delays the calling
# thread (the trot beside another busy process on 2 cores: two threads over one 0.72x
# with speculation and lingering, 0.88x with speculation, 0.91x without)
SPECULATE_MAX_OFF_CORE = 0.05

# worker 0 lingers after a calc_diff that took up a speculation (:class:`.parallel._Worker`)
# under a real-time policy, and off one where the workers kept their cores: at most this
# share of their tasks' wall-clock time off core (ParallelRegion.off_core, a moving
# average).  A lingering worker takes the next speculation without a futex wake-up (16-22
# us of the calling thread, and the worker's own start); with its core to itself (as on
# an idle machine: under `chrt -f 1` at load 4.5 its off-core share was 0.000-0.007) the
# solo12 trot's two-thread solve was 1.02x as fast (benchmarks/threads_notes.md, round
# of thr33); beside another busy process the share is 0.02-0.17 (median about 0.06,
# the solo12 trot), where a spinning worker takes time from the calling thread's
# process (two threads over one 0.83x with lingering against 0.88x without)
LINGER_MAX_OFF_CORE = 0.02

# calls a rebalance waits at most for a parallel calc_diff that took up no speculation
# (:meth:`ShootingProblem._rebalance`; a solver forced to speculate takes up none)
REBALANCE_DEFERRAL = 16

PIECES = 4        # parts of each chunk below the last (see ShootingProblem._build_plan)


def _pieces_next_to_last(knots, last_knots):
    """The parts of the chunk of ``knots`` knots next to the calling thread's last chunk
    of ``last_knots`` (the terminal knot included): ``PIECES``, or more where parts of
    ``knots / PIECES`` knots would be longer than that last chunk.  The worker starts
    on its top part as the calling thread starts its chunk, so its head start over the
    backward pass that follows it down is about that chunk's knots; a part longer than
    the head start keeps the backward pass waiting for its bottom knot where the two run
    at about the same pace per knot (the talos squat: a knot's Riccati step about as
    long as its calc_diff, the balance leaving the calling thread 3 knots of 31; parts
    of 7 knots kept the sweep waiting 50-210 us per iteration, parts of at most 3 knots
    0-3 us; thr32).  The balance (:func:`_balanced_bounds`, the backward pass counted in
    the last chunk's time) leaves the last chunk that short where the backward pass is
    about as slow per knot as calc_diff; where it is much faster the last chunk is
    longer than PIECES parts (the solo12 trot: 9-10 knots, parts of 4-5) or somewhat
    shorter (the hyq and anymal walks, 88 knots: 10-14 knots, 6 parts instead of 4,
    measured neutral: 1.005-1.007x), and the parts stay about
    PIECES (each part costs its thread a fixed 8-22 us).  Parts of one knot are not
    made (a last chunk of the terminal knot alone: parts of two): that fixed cost, a
    third of a talos knot's calc_diff, would make the worker slower per knot than the
    backward pass it feeds."""
    if last_knots <= 0:
        return PIECES
    return max(PIECES, -(-knots // max(2, last_knots)))


def _can_cut(model):
    """Whether a phase of ``model`` can be cut in parts with their own data: no
    constraints (:meth:`ShootingProblem.constraints` reads the phase's data), and every
    cost's residual keeps its references (a part takes the rows of its knots of those
    given per knot: :func:`.residuals.knot_window`)."""
    return not model.constraints and all(
        getattr(term.residual, name, None) is not None
        for term in model.costs for name in term.residual.reference_attributes)


def _share_trial_solves(whole, part, a, b):
    """The contact data of ``part`` (knots a:b of the phase of ``whole``, relative to its
    first) read the whole phase's store of the trial rollout's solves (views of its rows,
    :func:`.contact_step.solved_store`): the line search's rollout writes the whole
    phase's store, and calc_diff at the accepted trial then reuses each knot's solve on
    the part as on the whole phase (Crocoddyl's calcDiff reusing its calc)."""
    forces = getattr(whole.kinematics, "contact", None)
    if forces is not None and forces.solved[0].shape[0]:
        part.kinematics.contact.solved = tuple(rows[a:b] for rows in forces.solved)


def _balanced_bounds(knots, cpu):
    """Chunk boundaries over the knots 0..N (the terminal one N) that share out the work
    equally, the work of each knot the CPU time of its chunk ``cpu[i]`` over its knots
    ``knots[i]`` = (first, stop)."""
    n, total = len(knots), knots[-1][1]
    rate = np.zeros(total)
    for (a, b), seconds in zip(knots, cpu):
        if b > a:
            rate[a:b] = seconds / (b - a)
    work = np.concatenate([[0.0], np.cumsum(rate)])
    bounds = [0]
    for i in range(1, n):
        target = work[-1] * i / n
        k = int(np.searchsorted(work, target))
        if k > 0 and target - work[k - 1] < work[k] - target:
            k -= 1
        bounds.append(max(k, bounds[-1]))
    return bounds + [total]


def _reference_values(values):
    """The values of :meth:`ShootingProblem.set_reference` as a tuple of finite float
    arrays (one per part of a reference: a placement's rotation and translation)."""
    value_list = values if isinstance(values, tuple) else (values,)
    checked = tuple(as_float_array(value, "reference") for value in value_list)
    if not all(np.isfinite(value).all() for value in checked):
        raise ValueError("reference: contains NaN or inf")
    return checked


def _write_reference(rdata, values, a, b, knot, n_knots):
    """rdata.reference[a:b] = ``values`` (a tuple from :func:`_reference_values`: the
    reference's shape, or (n_knots,) + that shape, read from row ``knot``)."""
    references = rdata.reference if isinstance(rdata.reference, tuple) else (rdata.reference,)
    for ref, value in zip(references, values):
        if value.shape == ref.shape[1:]:
            ref[a:b] = value
        elif value.shape == (n_knots,) + ref.shape[1:]:
            ref[a:b] = value[knot:knot + b - a]
        else:
            raise ValueError(f"reference: expected shape {ref.shape[1:]} or "
                             f"{(n_knots,) + ref.shape[1:]}, got {value.shape}")


class ShootingProblem:
    """min sum_k l_k(x_k, u_k) + l_N(x_N)  s.t.  x_{k+1} = F_k(x_k, u_k), x_0 = x0.

    Parameters
    ----------
    x0 : (nx,) initial state.
    running_models : list of N :class:`~.stage.StageModel`: the same object
        repeated (``[model] * N``) or one object per knot; consecutive knots of
        equal structure form one phase either way (their weights and
        references are gathered into the phase's arrays).
    terminal_model : :class:`~.stage.TerminalModel`.
    nthreads : threads of :meth:`calc_diff` (Crocoddyl's name).  Default 1.  On n > 1
        one parallel region per calc_diff: the knots in n contiguous chunks
        (:meth:`parallel_plan`), each thread running the serial fused phases of its
        chunk (:mod:`.parallel`: Python threads over the package's ``nogil`` kernels;
        Numba's threading layer is not used, its kernels stay on one thread), each chunk
        in one compiled call when every chunk's parts allow it
        (:class:`.horizon.ChunkProgram`; else all chunks phase by phase); the
        DDP solvers start their backward pass on the calling thread's chunk (the
        last) and follow the other threads' parts down (``then``).  The results are
        those of one thread, to the bit.  The other evaluations (calc, calc_costs, the
        line search's one-call trial, the rollout) stay serial; where most recent line
        searches took their first trial (:meth:`_speculation_pays`) the solvers start
        calc_diff at that trial while it is rolled out (:meth:`_speculate`).  Measured
        on 2 cores (one thread's solve over two threads', wall clock, interleaved in one
        process, best of 3 in each of 20 rounds, each mode on its own problem, rounds
        where no other process ran, no real-time scheduling, load 0.7-0.9): solo12 trot
        1.46-1.47x, talos squat (BoxFDDP, no speculation) 1.50-1.52x against 1.44-1.49x
        with the backward pass one knot behind the worker on feasible iterates too (the
        previous rule); earlier runs, under real-time scheduling: trot 1.49x, squat
        1.51x, ur5 and panda reaching 0.93x and 0.92x (one thread stays the default).
        Beside another busy process two threads are slower than one (0.9x): the second
        core is not free.
    """

    def __init__(self, x0, running_models, terminal_model, nthreads=1):
        try:
            running_models = list(running_models)
        except TypeError:
            raise ValueError("running_models: expected a list of StageModel objects, got "
                             f"{type(running_models).__name__}") from None
        if not running_models:
            raise ValueError("a shooting problem needs at least one running model")
        for k, model in enumerate(running_models):
            if getattr(model, "terminal", True) is not False:
                raise ValueError(f"running_models[{k}]: expected a StageModel, got "
                                 f"{type(model).__name__}")
        if getattr(terminal_model, "terminal", False) is not True:
            raise ValueError("terminal_model must be a TerminalModel (it has no controls)")
        first = running_models[0]
        self.state = first.state
        self.nx, self.ndx = self.state.nx, self.state.ndx
        for model in running_models:
            if getattr(model, "terminal", True):
                raise ValueError("running models must be StageModel objects")
            if model.state.nx != self.nx:
                raise ValueError("all running models must share the state")
        # controls: padded to the widest knot, nus[k] of them at knot k (see the module doc)
        self.nus = np.array([model.nu for model in running_models], dtype=np.int64)
        self.nu = int(self.nus.max())
        if terminal_model.state.nx != self.nx:
            raise ValueError("the terminal model's state differs from the running models'")
        self.running_models = running_models
        self.terminal_model = terminal_model
        self.nthreads = nthreads
        self.N = N = len(running_models)
        self.x0 = self._validate_states(x0, "x0", single=True)
        nx, ndx, nu = self.nx, self.ndx, self.nu
        self.costs = np.zeros(N + 1)
        self.Lx = np.zeros((N + 1, ndx))
        self.Lxx = np.zeros((N + 1, ndx, ndx))
        self.Lu = np.zeros((N, nu))
        self.Luu = np.zeros((N, nu, nu))
        self.Lxu = np.zeros((N, ndx, nu))
        self.Fx = np.zeros((N, ndx, ndx))
        self.Fu = np.zeros((N, ndx, nu))
        self.xnext = np.zeros((N, nx))
        self._x0_and_next = np.zeros((N + 1, nx))      # gaps(): one difference of N+1 pairs
        self._lie_scratch = (np.empty(4), np.empty(4), np.empty(3))
        self.solver_plans = {}     # what solvers build once per problem and share
        # calc / calc_diff of the whole horizon in one compiled call where the stages allow
        # it (:attr:`horizon_evaluation`); False: phase by phase always (for comparisons)
        self.one_call = True
        self.phases = [(runs[0][0], start, stop, self._phase_data(runs, start, stop))
                       for runs, start, stop in _phases(running_models)]
        # by thread count (parallel_plan): the plans, their chunk boundaries, regions and
        # calls so far
        self._plans, self._bounds, self._regions, self._parallel_calls = {}, {}, {}, {}
        # set_reference's (residual, [(data, a, b, knot)]) by id(residual), dropped when a
        # plan's parts (their own data) are built
        self._reference_targets = {}
        # by thread count: each chunk's ChunkProgram (or None when the plan has a chunk
        # that needs the phase-by-phase path), the progress signal they publish
        self._programs, self._signals = {}, {}
        # by thread count: the first knot of each chunk of the plan (_chunk_starts, int64)
        self._starts = {}
        # False: the chunks phase by phase from Python (for comparisons)
        self.chunk_programs = True
        # CPU seconds the last parallel calc_diff's ``then`` spent waiting for the knots below
        self.pipeline_wait = 0.0
        # the line-search trial's progress and the solver's decision (.parallel
        # TRIAL_PROGRESS, TRIAL_DECISION, TRIAL_ROLLED), published to the calc_diff
        # started at it (:meth:`_speculate`), and that calc_diff while it runs
        self.trial_signal = new_trial_signal()
        # a speculative calc_diff runs a part's dynamics block once the trial's rollout
        # has passed its knots (TRIAL_ROLLED); False: once the trial's costs have
        # (TRIAL_PROGRESS, per phase, as before this round; for comparisons)
        self.follow_rollout = True
        self._speculation = None
        # speculations started, and taken up by calc_diff (:meth:`_speculate`)
        self.speculations = [0, 0]
        # worker 0 spins between a speculation's calc_diff and the next where the threads
        # run under a real-time policy (False: it sleeps; see _calc_diff_programs)
        self.linger = True
        # the share of recent line searches whose first trial was taken (a moving
        # average, see _speculation_pays; 1 before any)
        self._taken = 1.0
        # by thread count: the call of a rebalance deferred past regions that took up a
        # speculation (_rebalance)
        self._rebalance_due = {}
        terminal_out = StageOutputs(self.costs[N:], self.Lx[N:], np.zeros((1, 0)),
                                    self.Lxx[N:], np.zeros((1, 0, 0)), np.zeros((1, ndx, 0)))
        self.terminal_data = terminal_model.create_data(1, terminal_out)
        # the block structure of the symplectic Euler knots' Fx, Fu for the backward pass
        # (:attr:`euler_structure`): "auto" where it pays, True at every Euler knot,
        # False dense products at every knot (for comparisons)
        self.structured_backward = "auto"
        self._euler_structure = _euler_structure(self.state, running_models)

    @property
    def euler_structure(self):
        """(dts (N,), lie_rows) for :func:`~geppetto.solvers.riccati.backward_range`:
        dts[t] the step of knot t when it is a symplectic Euler knot of a multibody
        (FreeDynamics or ContactDynamics, scheme "euler"), else 0 (dense products);
        lie_rows the state's tangent rows of its free-flyer, spherical and planar
        joints.  With ``structured_backward`` False, or no such knot, dts is empty:
        dense products everywhere, in the same compiled specialization (no None:
        another one would compile).  With "auto" (the default) also when the state
        has fewer than :data:`STRUCTURED_MIN_ROWS` tangent rows of v outside the Lie
        rows: there the products are too small for the saving to pay for the extra
        ones; True marks the Euler knots whatever the size."""
        if self._euler_structure is None or self._structured_backward is False:
            return _DENSE_STRUCTURE
        if self._structured_backward == "auto":
            nv = self.state.nv
            if nv - self._euler_structure[1].shape[0] < STRUCTURED_MIN_ROWS:
                return _DENSE_STRUCTURE
        return self._euler_structure

    @property
    def structured_backward(self):
        """"auto" (default), True or False: see :attr:`euler_structure`."""
        return self._structured_backward

    @structured_backward.setter
    def structured_backward(self, value):
        if isinstance(value, str) and value == "auto":
            self._structured_backward = "auto"
        elif isinstance(value, (bool, np.bool_)):
            self._structured_backward = bool(value)
        else:
            raise ValueError(f"structured_backward: expected True, False or 'auto', "
                             f"got {value!r}")

    def _phase_data(self, runs, start, stop):
        """The StageData of knots start:stop made of ``runs`` [(model, a, b)] (a, b
        relative to ``start``), its outputs views of the problem's arrays (its own
        control buffers when its stage has fewer controls than the widest)."""
        model, K, ndx, nu = runs[0][0], stop - start, self.ndx, self.nu
        if model.nu == nu:
            control_outputs = (self.Lu[start:stop], self.Luu[start:stop], self.Lxu[start:stop])
        else:           # its own buffers, copied into the padded arrays after calc_diff
            m = model.nu
            control_outputs = (np.zeros((K, m)), np.zeros((K, m, m)), np.zeros((K, ndx, m)))
        out = StageOutputs(self.costs[start:stop], self.Lx[start:stop], control_outputs[0],
                           self.Lxx[start:stop], control_outputs[1], control_outputs[2])
        data = model.create_data(K, out, runs)
        if model.nu == nu:  # the integrator writes x', Fx, Fu into the problem's arrays
            integrator = data.integrator
            integrator.xnext, integrator.Fx, integrator.Fu = (
                self.xnext[start:stop], self.Fx[start:stop], self.Fu[start:stop])
        return data

    # -- validation ---------------------------------------------------------
    def _validate_states(self, xs, name, single=False):
        arr, is_single = self.state.validate(xs, name)
        if single:
            if not is_single:
                raise ValueError(f"{name}: expected one state of shape ({self.nx},)")
            return arr[0].copy()
        if arr.shape[0] != self.N + 1:
            raise ValueError(f"{name}: expected {self.N + 1} states (N + 1), got {arr.shape}")
        return arr

    def _validate(self, xs, us):
        xs = self._validate_states(xs, "xs")
        us = as_float_array(us, "us")
        if us.shape != (self.N, self.nu):
            raise ValueError(f"us: expected shape ({self.N}, {self.nu}), got {us.shape}")
        if not np.all(np.isfinite(us)):
            raise ValueError("us: contains NaN or inf")
        if np.any(self.nus < self.nu):
            us = us.copy()
            us[np.arange(self.nu)[None, :] >= self.nus[:, None]] = 0.0   # the padding
        return xs, np.ascontiguousarray(us)

    def _controls(self, us, model, start, stop):
        """The controls of knots start:stop as their stage sees them: (K, model.nu)."""
        if model.nu == self.nu:
            return us[start:stop]
        return np.ascontiguousarray(us[start:stop, :model.nu])

    # -- evaluation ---------------------------------------------------------
    def calc(self, xs, us, validate=True):
        """Total cost of (xs, us); fills ``costs`` and ``xnext``.  A horizon of free-dynamics
        phases is evaluated in one compiled call (:meth:`_evaluation`), as by
        :meth:`calc_diff` on one thread.  ``validate=False``: no input checks, as for
        :meth:`calc_diff` (a solver's own trial points: C-contiguous, finite, padding
        zero)."""
        if validate:
            xs, us = self._validate(xs, us)
        if self._speculation is not None:       # its worker writes the same arrays
            self._discard_speculation()
        with _numba_threads(1):
            evaluation = self._evaluation(xs, us)
            if evaluation is not None:
                evaluation(xs, us, CALC)
                return float(self.costs.sum())
            for model, start, stop, data in self.phases:
                model.calc(data, xs[start:stop], self._controls(us, model, start, stop))
                self._copy_prediction(data, start, stop, False)
            self.terminal_model.calc(self.terminal_data, xs[self.N:])
        return float(self.costs.sum())

    def calc_costs(self, xs, us, xnext=None):
        """Total cost of (xs, us) without the dynamics (for line searches whose rollout
        already computed the predicted states ``xnext``, stored when given).
        No input checks: for solvers that built xs and us themselves."""
        if self._speculation is not None:       # its worker writes the same arrays
            self._discard_speculation()
        with _numba_threads(1):
            for model, start, stop, data in self.phases:
                model.calc_costs(data, xs[start:stop], self._controls(us, model, start, stop))
            self.terminal_model.calc(self.terminal_data, xs[self.N:])
        if xnext is not None:
            self.xnext[:] = xnext
        return float(self.costs.sum())

    @property
    def nthreads(self):
        """Threads of calc_diff (:meth:`parallel_plan`); a change drops a running
        speculation (:meth:`_discard_speculation`)."""
        return self._nthreads

    @nthreads.setter
    def nthreads(self, value):
        # an integer >= 1 (2.5 was truncated to 2, "2" parsed, None a TypeError: fz35)
        count = as_count(value, "nthreads", 1)
        if getattr(self, "_speculation", None) is not None:
            self._discard_speculation()
        self._nthreads = count

    def calc_diff(self, xs, us, validate=True, then=None):
        """Fill Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, costs and xnext at (xs, us); returns the cost.
        ``validate=False``: no input checks, for solvers whose iterates are their own
        (C-contiguous, finite, padding zero).  On ``nthreads`` > 1: one parallel region,
        the chunks of :meth:`parallel_plan` on as many threads, the calling thread on the
        last chunk; ``then``: called there as ``then(b)`` once the knots b..N (that
        chunk, the terminal knot included) are evaluated, while the other chunks may
        still run (a solver's backward pass starts on them, see
        :func:`~geppetto.solvers.riccati.backward_range`); on one thread, after all
        knots, with b = 0.  On one thread a horizon of free-dynamics phases is evaluated
        in one compiled call (:meth:`_evaluation`): the same kernels, the same arrays to
        the bit."""
        if validate:
            xs, us = self._validate(xs, us)
        with _numba_threads(1):
            evaluation = self._evaluation(xs, us) if self.nthreads == 1 else None
            if evaluation is not None:
                evaluation(xs, us, DIFF)
                if then is not None:
                    then(0)
            elif self.nthreads == 1:
                self._calc_diff_chunk(self.phases, True, xs, us, then)
            else:
                plan = self.parallel_plan(self.nthreads)
                if self._speculation is not None and not self._speculation.takes(xs, us,
                                                                                 plan):
                    self._discard_speculation()
                if self._speculation is not None:       # started at this very trial
                    self._accept_speculation()
                    self.speculations[1] += 1
                    self._calc_diff_programs(plan, xs, us, then)
                    self._rebalance(self.nthreads, speculated=True)
                    return float(self.costs.sum())
                if self.chunk_programs and self._programs[self.nthreads] is not None and _own_stack(
                        xs, (self.N + 1, self.nx)) and _own_stack(us, (self.N, self.nu)):
                    self._calc_diff_programs(plan, xs, us, then)
                    self._rebalance(self.nthreads)
                    return float(self.costs.sum())
                progress = None
                if then is not None:
                    progress = Progress(_chunk_starts(plan, self.N))
                tasks = [partial(self._calc_diff_chunk, phases, False, xs, us, None, progress, i)
                         for i, (phases, _) in enumerate(plan[:-1])]
                self._regions[self.nthreads](
                    [partial(self._calc_diff_chunk, plan[-1][0], True, xs, us, then, progress)]
                    + tasks)
                self.pipeline_wait = progress.waited if progress is not None else 0.0
                self._rebalance(self.nthreads)
        return float(self.costs.sum())

    @cached_property
    def horizon_evaluation(self):
        """The one-call calc / calc_diff of the horizon (:func:`.horizon.horizon_evaluation`),
        built at its first use (calc and calc_diff use it on one Numba thread), or None
        when a stage needs the phase-by-phase evaluation."""
        return horizon_evaluation(self)

    @cached_property
    def _terminal_knot(self):
        """The terminal knot's calc_diff in one compiled call (:func:`.horizon.terminal_knot`)
        for the parallel calc_diff's calling thread, or None (its fused phase from Python):
        the same kernels, the same bits."""
        with _numba_threads(1):
            return terminal_knot(self)

    def _evaluation(self, xs, us):
        """:attr:`horizon_evaluation` when ``one_call`` is set, else None: phase by phase
        (also for (xs, us) not C-contiguous float64 stacks, the types it is compiled for).
        Measured on the ur5 MPC horizon (50 knots, CPU time): see the module
        :mod:`.horizon`."""
        if not self.one_call:
            return None
        evaluation = self.horizon_evaluation
        if evaluation is None or not (_own_stack(xs, (self.N + 1, self.nx))
                                      and _own_stack(us, (self.N, self.nu))):
            return None
        return evaluation

    def _calc_diff_programs(self, plan, xs, us, then):
        """The parallel calc_diff of ``plan`` whose chunks are each one compiled call
        (:class:`.horizon.ChunkProgram`): worker i - 1 runs chunk i < n - 1, its parts from
        the last down, publishing each in ``signal[i]`` (:mod:`.parallel`); the calling
        thread runs the last chunk and the terminal knot, then ``then(b)`` as the knots
        from b up are ready (:func:`.parallel.wait_below`, a compiled wait without the GIL:
        no Python on the workers, no lock per part)."""
        n = self.nthreads
        programs, signal, starts = self._programs[n], self._signals[n], self._starts[n]
        terminal = self._terminal_knot
        speculation, self._speculation = self._speculation, None
        if speculation is None:         # else set when the speculation started
            self._reset_signal(n, starts)
        below = starts[:n - 1]
        self.pipeline_wait = 0.0

        def worker(i):
            if programs[i] is None:         # no knots
                return
            try:
                failed = programs[i](xs, us, signal, i)
            except BaseException:
                signal[n - 1] = 1
                raise
            if failed >= 0:
                programs[i].failed[failed]()        # raises
                raise FloatingPointError("calc_diff: the contacts of a part are degenerate")

        def caller():
            failed = -1 if programs[-1] is None else programs[-1](xs, us, signal, -1)
            if failed >= 0:
                programs[-1].failed[failed]()       # raises
                raise FloatingPointError("calc_diff: the contacts of a part are degenerate")
            if terminal is not None:
                terminal(xs, DIFF)
            else:
                self.terminal_model.calc_diff(self.terminal_data, xs[self.N:])
            if then is None:
                return
            knot = int(starts[-1])
            then(knot)
            waited = 0.0
            while knot > 0:
                # knots ready already (the other thread ahead): no wait to clock (the
                # thread's CPU clock is a system call here, ~1 us)
                lower = wait_below(signal, below, knot, 1)
                if lower < 0:
                    clock = time.thread_time()  # CPU spent spinning (a yield costs none)
                    lower = wait_below(signal, below, knot, WAIT_SPINS)
                    while lower < 0:            # the other thread is slow: give up the core
                        os.sched_yield()
                        lower = wait_below(signal, below, knot, WAIT_SPINS)
                    waited += time.thread_time() - clock
                if lower >= knot:           # a chunk failed: the region raises its error
                    break
                knot = int(lower)
                then(knot)
            self.pipeline_wait = waited

        region = self._regions[n]
        # worker 0 on its chunk since the trial started where a speculation runs
        tasks = [None if i == 0 and speculation is not None else partial(worker, i)
                 for i in range(n - 1)]
        # worker 0 spins for the next speculation after this calc_diff where this one
        # took one up (the next start then costs no wake-up, see parallel._Worker), if
        # no other process takes its core: the threads run under a real-time policy, or
        # the workers kept their cores (LINGER_MAX_OFF_CORE)
        region.set_lingering(0, speculation is not None and self.linger and (
            _real_time() or region.off_core() <= LINGER_MAX_OFF_CORE))
        region([caller] + tasks)
        # the calling thread's wait spins: its CPU time without it, for the balance
        region.cpu[0] = max(0.0, region.cpu[0] - self.pipeline_wait)
        if speculation is not None:     # worker 0's work after the trial, for the balance
            region.cpu[1] = max(0.0, region.cpu[1] - speculation.trial_seconds)

    def _reset_signal(self, n, starts):
        """The chunks' progress signal before a region: nothing evaluated, no failure."""
        signal = self._signals[n]
        signal[:n - 1] = starts[1:]
        signal[n - 1] = 0

    # -- calc_diff during the line search ----------------------------------------------
    def _can_speculate(self, xs, us):
        """Whether :meth:`_speculate` would start at the trial (xs, us)."""
        n = self.nthreads
        if n < 2 or not self.chunk_programs:
            return False
        self.parallel_plan(n)
        programs = self._programs[n]
        return programs is not None and programs[0] is not None and _own_stack(
            xs, (self.N + 1, self.nx)) and _own_stack(us, (self.N, self.nu))

    def _speculation_pays(self):
        """Whether the solvers speculate at their next line search (:meth:`_speculate`): the
        first trial was taken in at least SPECULATE_MIN_TAKEN of the recent line searches
        (:meth:`_first_trial_taken`; none recorded yet: speculate) and the workers had
        their cores (SPECULATE_MAX_OFF_CORE)."""
        region = self._regions.get(self.nthreads)
        return self._taken >= SPECULATE_MIN_TAKEN and (
            region is None or region.off_core() <= SPECULATE_MAX_OFF_CORE)

    def _first_trial_taken(self, taken):
        """Record whether a line search's first trial was taken (a solver on several
        threads, speculating or not), for :meth:`_speculation_pays`."""
        self._taken += SPECULATION_SMOOTHING * (float(bool(taken)) - self._taken)

    def _speculate(self, xs, us):
        """Start calc_diff at the line-search trial (xs, us) about to be rolled out by the
        one-call trial (:class:`.horizon.HorizonTrial`, which publishes its rollout knot
        by knot and its costs phase by phase in ``trial_signal``): worker 0 evaluates
        the first chunk of the parallel plan, its parts from the bottom up, each part's
        dynamics block once the rollout has passed its knots and its costs once the
        trial's costs have (:func:`.horizon._chunk_diff` following it, without Python or
        the GIL; ``follow_rollout`` False: the blocks wait for the costs too); once the
        solver takes the trial (:meth:`_accept_speculation`) the parts left from the top
        down, and the next :meth:`calc_diff` at these very (xs, us)
        finds that chunk under way or done: the calling thread evaluates the last chunk
        and runs ``then`` down as worker 0 publishes its parts.  Otherwise
        :meth:`_discard_speculation` stops it at its next part (the derivative arrays of
        the parts it evaluated are then the trial's: the solver evaluates its iterate
        again).  The same kernels on the same inputs as calc_diff: the same bits.
        Returns whether it started (:meth:`_can_speculate`)."""
        if self._speculation is not None:
            self._discard_speculation()
        if not self._can_speculate(xs, us):
            return False
        n = self.nthreads
        plan = self._plans[n]       # made by _can_speculate
        self._reset_signal(n, self._starts[n])
        trial = self.trial_signal
        trial[TRIAL_PROGRESS] = 0
        trial[TRIAL_ROLLED] = 0
        trial[TRIAL_DECISION] = UNDECIDED
        speculation = self._speculation = _Speculation(xs, us, plan, self._regions[n])
        program, signal = self._programs[n][0], self._signals[n]
        rolled = TRIAL_ROLLED if self.follow_rollout else TRIAL_PROGRESS

        def follow():
            first = 0
            try:
                while True:
                    failed = program.follow(xs, us, signal, 0, trial, first, FOLLOW_SPINS,
                                            rolled)
                    if failed > FOLLOW_WAITED:
                        break
                    first = FOLLOW_WAITED - failed     # the trial is slow: give up the core
                    os.sched_yield()
            except BaseException:
                signal[n - 1] = 1
                raise
            if failed >= 0:
                program.failed[failed]()        # raises
                raise FloatingPointError("calc_diff: the contacts of a part are degenerate")

        self._regions[n].start(0, follow, after_trial=True)
        self.speculations[0] += 1
        return True

    def _speculating(self, xs, us):
        """Whether a calc_diff started by :meth:`_speculate` at the trial (xs, us) runs (and
        a calc_diff there would take it up)."""
        return self._speculation is not None and self._speculation.takes(
            xs, us, self._plans.get(self.nthreads))

    def _accept_speculation(self):
        """The trial of the running speculation is the next iterate: worker 0 evaluates the
        parts of its chunk left from the top down (the backward pass follows them)."""
        if self._speculation is not None and self.trial_signal[TRIAL_DECISION] != ACCEPTED:
            store_release_at(self.trial_signal, TRIAL_DECISION, ACCEPTED)

    def _trial_ended(self, seconds):
        """The trial the running speculation follows took ``seconds`` (wall clock): worker 0's
        CPU time beyond it counts for the chunk balance."""
        if self._speculation is not None:
            self._speculation.trial_seconds = seconds

    def _discard_speculation(self):
        """Drop the running speculation, if any: worker 0 stops at its next part and is
        waited for (another trial would rewrite what it reads); returns whether there
        was one (the derivative arrays of the parts it evaluated are then the trial's)."""
        speculation, self._speculation = self._speculation, None
        if speculation is None:
            return False
        store_release_at(self.trial_signal, TRIAL_DECISION, REJECTED)
        try:
            speculation.region.wait(0)
        except Exception:     # the worker's, at a point no iterate takes: nothing to report
            pass
        return True

    def _calc_diff_chunk(self, phases, terminal, xs, us, then=None, progress=None, index=0):
        """calc_diff of ``phases`` [(model, start, stop, data)], and of the terminal knot
        when ``terminal``.  The last chunk (``then`` given) then calls ``then(b)`` each time
        the knots from b up are ready (its own first, then the other chunks' as
        ``progress`` reports them, down to knot 0).  The other chunks with a ``progress``
        evaluate their phases from the last down and report each (``index``: theirs)."""
        if progress is not None and then is None:
            try:
                for model, start, stop, data in reversed(phases):
                    self._calc_diff_phase(model, start, stop, data, xs, us)
                    progress.done(index, start)
            except BaseException:
                progress.abort()
                raise
            return
        for model, start, stop, data in phases:
            self._calc_diff_phase(model, start, stop, data, xs, us)
        if terminal:
            self.terminal_model.calc_diff(self.terminal_data, xs[self.N:])
        if then is None:
            return
        knot = phases[0][1] if phases else self.N
        then(knot)
        while progress is not None and knot > 0:
            below = progress.wait_below(knot)
            if below >= knot:             # a chunk failed: the region raises its error
                return
            knot = below
            then(knot)

    def _calc_diff_phase(self, model, start, stop, data, xs, us):
        model.calc_diff(data, xs[start:stop], self._controls(us, model, start, stop))
        self._copy_prediction(data, start, stop, True)
        m = model.nu
        if m < self.nu:
            out = data.outputs
            self.Lu[start:stop, :m] = out.Lu
            self.Luu[start:stop, :m, :m] = out.Luu
            self.Lxu[start:stop, :, :m] = out.Lxu

    def parallel_plan(self, n):
        """[(phases, terminal)] of ``n`` chunks of contiguous knots, the terminal knot in
        the last: ``phases`` [(model, start, stop, data)] are the problem's phases, or
        parts of a phase cut at a chunk boundary (each part its own data, its references
        copied from the phase's, those given per knot its knots' rows, its weights bound
        to the costs, its contact data reading the phase's store of the trial's solves).
        A phase with constraints, or with a residual that keeps no reference, is not cut
        (:func:`_can_cut`): it goes whole to the chunk of its middle knot.  A chunk below
        the last is also cut in ``PIECES`` parts (the one next to the last in parts no
        longer than the last chunk, :func:`_pieces_next_to_last`) and a small top part
        (the backward pass waits for it first).  The N + 1 knots are first shared
        equally, then by work: after the 2nd, 4th, 8th ... 256th parallel calc_diff the
        boundaries move so that each chunk gets the same share of the CPU time its
        thread measured (:func:`_balanced_bounds`; with ``then``, the last chunk carries
        what ``then`` did: the solvers' backward pass starts there).  The results do not
        depend on the boundaries: every knot is evaluated by the same kernels."""
        if n not in self._plans:
            self._build_plan(n, [round(i * (self.N + 1) / n) for i in range(n + 1)])
            self._regions[n] = ParallelRegion(n, self.trial_signal)
            self._parallel_calls[n] = 0
        return self._plans[n]

    def _build_plan(self, n, bounds):
        """The plan of ``n`` chunks with boundaries ``bounds`` (n + 1 knots, 0 ... N + 1)."""
        def chunk(knot):
            return min(bisect_right(bounds, knot) - 1, n - 1)

        # the chunks below the last in PIECES parts too: the backward pass started on
        # the last chunk goes on down as the other threads finish each part
        cut_at = set(bounds[1:-1])
        for i, (lo, hi) in enumerate(zip(bounds[:-2], bounds[1:-1])):
            pieces = PIECES if i < n - 2 else _pieces_next_to_last(hi - lo,
                                                                   bounds[-1] - bounds[-2])
            cut_at.update(lo + (hi - lo) * j // pieces for j in range(1, pieces))
            # and a small top part, which the backward pass waits for first
            cut_at.add(hi - max(1, (hi - lo) // (4 * PIECES)))
        chunks = [[] for _ in range(n)]
        for model, start, stop, data in self.phases:
            cuts = sorted(b for b in cut_at if start < b < stop)
            if not cuts or not _can_cut(model):
                chunks[chunk((start + stop - 1) // 2)].append((model, start, stop, data))
                continue
            edges = [start] + cuts + [stop]
            for a, b in zip(edges[:-1], edges[1:]):
                chunks[chunk(a)].append((model, a, b, self._part_data(data, start, stop, a,
                                                                      b)))
        self._plans[n] = [(phases, i == n - 1) for i, phases in enumerate(chunks)]
        self._reference_targets = {}        # the parts' data hold references too
        self._bounds[n] = bounds
        with _numba_threads(1):
            programs = [chunk_program(self, phases) if phases else None for phases in chunks]
        self._programs[n] = None if any(p is None and phases for p, phases in
                                         zip(programs, chunks)) else programs
        self._signals[n] = np.zeros(n, dtype=np.int64)
        self._starts[n] = np.array(_chunk_starts(self._plans[n], self.N), dtype=np.int64)

    def _rebalance(self, n, speculated=False):
        """Move the chunk boundaries by the CPU time of the last region (see
        :meth:`parallel_plan`), at its 2nd, 4th ... 256th call, or at the first call after
        it that did not take up a speculation (``speculated``), REBALANCE_DEFERRAL calls
        at most: the plan is the one without speculation, whether the solver speculates
        or not.  (Balanced on speculating regions too, where worker 0's chunk started
        during the trial counts as shorter, the plan follows whichever ran at the
        rebalance: the ur5 reaching, speculating in most line searches, settled at [0,
        86, 101] against [0, 42-53, 101] without, two threads over one 0.70-0.81x
        against 0.85-0.91x; benchmarks/threads_notes.md, round of thr32b.)"""
        calls = self._parallel_calls[n] = self._parallel_calls[n] + 1
        if 2 <= calls <= 256 and not calls & (calls - 1):
            self._rebalance_due.setdefault(n, calls)    # (one deferred already: its call)
        due = self._rebalance_due.get(n)
        if due is None or (speculated and calls - due < REBALANCE_DEFERRAL):
            return
        del self._rebalance_due[n]
        cpu = self._regions[n].cpu
        knots, first = [], 0
        for phases, terminal in self._plans[n]:
            stop = max([first] + [phase[2] for phase in phases]) + (1 if terminal else 0)
            knots.append((first, stop))
            first = stop
        bounds = _balanced_bounds(knots, cpu[1:] + cpu[:1])
        if bounds != self._bounds[n]:
            self._build_plan(n, bounds)

    def chunk_cpu(self):
        """CPU seconds of each chunk of the last parallel calc_diff (its thread's), the
        last chunk's (the calling thread's, with ``then``) first: the critical path is
        their maximum, the work their sum (empty before one)."""
        region = self._regions.get(self.nthreads)
        return list(region.cpu) if region is not None else []

    def _part_data(self, data, start, stop, a, b):
        """The data of knots a:b of the phase of ``data`` (knots start:stop), its
        references those of ``data``, its store of the trial's solves a view of
        ``data``'s (:func:`_share_trial_solves`)."""
        runs = [(model, max(ra + start, a) - a, min(rb + start, b) - a)
                for model, ra, rb in data.runs if ra + start < b and rb + start > a]
        with knot_window(a - start, stop - start):
            part = self._phase_data(runs, a, b)
        for whole, piece in zip(data.costs, part.costs):
            _copy_part_references(whole.residual, piece.residual, a - start, b - start)
        _share_trial_solves(data, part, a - start, b - start)
        return part

    def _copy_prediction(self, data, start, stop, with_derivatives):
        """x' (and Fx, Fu) of knots start:stop into the problem's arrays, unless the
        integrator wrote them there (its arrays are views of the problem's, see __init__)."""
        integrator = data.integrator
        if integrator.xnext.base is not self.xnext:
            self.xnext[start:stop] = integrator.xnext
        if with_derivatives and integrator.Fx.base is not self.Fx:
            self.Fx[start:stop] = integrator.Fx
        if with_derivatives and integrator.Fu.base is not self.Fu:
            self.Fu[start:stop, :, :integrator.Fu.shape[2]] = integrator.Fu

    def gaps(self, xs, out=None):
        """gaps (N+1, ndx) from the last calc: x0 (-) xs[0], F(x_k, u_k) (-) xs[k+1]
        (into ``out`` when given)."""
        out = np.empty((self.N + 1, self.ndx)) if out is None else out
        if isinstance(self.state, StateMultibody) and _own_stack(xs, (self.N + 1, self.nx)) \
                and _own_stack(out, (self.N + 1, self.ndx)):
            if self.nx == self.ndx:
                # nq = nv: every joint's q1 (-) q0 is q1 - q0, the kernel's subtractions
                # done by numpy (the same bits): 1.1 us against the kernel call's 2.8 us
                # (its ModelRef and scratch unboxed), per FDDP iteration on ur5
                np.subtract(self.x0, xs[0], out=out[0])
                np.subtract(self.xnext, xs[1:], out=out[1:])
                return out
            _multibody_gaps(model_ref(self.state.model), self.x0, self.xnext, xs, out,
                            self._lie_scratch)
            return out
        self._x0_and_next[0] = self.x0
        self._x0_and_next[1:] = self.xnext
        out[:] = self.state.difference(xs, self._x0_and_next)
        return out

    def gaps_from(self, xs, out, first, stop=None):
        """Rows first..stop - 1 of the gaps (:meth:`gaps`) into ``out``, 0 <= first,
        stop <= N + 1 (default N + 1; all rows where the state is not a multibody's):
        the same kernel on the same pairs as :meth:`gaps`, the same bits."""
        stop = self.N + 1 if stop is None else stop
        if first >= stop:
            return out
        if isinstance(self.state, StateMultibody) and _own_stack(xs, (self.N + 1, self.nx)) \
                and _own_stack(out, (self.N + 1, self.ndx)):
            _multibody_gaps(model_ref(self.state.model),
                            self.x0 if first == 0 else self.xnext[first - 1],
                            self.xnext[first:stop - 1], xs[first:stop], out[first:stop],
                            self._lie_scratch)
            return out
        return self.gaps(xs, out)

    def constraints(self, xs, us, with_derivatives=False, refresh=True):
        """Constraint residual data per phase: [(model, start, stop, [residual data])].
        ``refresh=False``: right after :meth:`calc_costs` at the same (xs, us) (a line
        search's trial), whose kinematics the constraints read (no input checks)."""
        if refresh:
            xs, us = self._validate(xs, us)
        out = []
        with _numba_threads(1):
            for model, start, stop, data in self.phases:
                if model.constraints:
                    out.append((model, start, stop,
                                model.calc_constraints(data, xs[start:stop],
                                                       self._controls(us, model, start, stop),
                                                       with_derivatives, refresh)))
            if self.terminal_model.constraints:
                out.append((self.terminal_model, self.N, self.N + 1,
                            self.terminal_model.calc_constraints(
                                self.terminal_data, xs[self.N:], None, with_derivatives,
                                refresh)))
        return out

    def set_reference(self, residual, values):
        """Set the reference of ``residual`` (a residual object used by costs or
        constraints) at every knot where it appears: ``values`` has the
        reference's shape (same at every knot) or (N+1,) + that shape (knot k
        reads values[k]; the terminal knot reads values[N])."""
        values = _reference_values(values)
        if self._speculation is not None:       # its worker reads the references
            self._discard_speculation()
        targets = self._reference_targets.get(id(residual))
        if targets is None or targets[0] is not residual:
            targets = self._reference_targets[id(residual)] = (
                residual, self._find_reference_targets(residual))
        if not targets[1]:
            raise ValueError("this residual is not used by any cost or constraint of the problem")
        n_knots = self.N + 1
        for rdata, a, b, knot in targets[1]:
            _write_reference(rdata, values, a, b, knot, n_knots)

    def _find_reference_targets(self, residual):
        """[(residual data, a, b, first knot)] of every run where ``residual`` appears, in
        the phases, the terminal knot and the parts of the phases cut by a parallel plan:
        :meth:`set_reference` writes rows a:b of each.  Looked up once per residual
        (dropped when a plan is built: :attr:`_reference_targets`): the search over the
        stages and their terms cost ~7 us of the ~11 us a call took on the ur5 MPC
        horizon (51 moving targets), each MPC step."""
        found = []
        stages = list(self.phases) + [(self.terminal_model, self.N, self.N + 1,
                                       self.terminal_data)]
        for plan in self._plans.values():       # the parts of phases cut by a plan
            stages += [phase for phases, _ in plan for phase in phases
                       if not any(phase[3] is data for _, _, _, data in self.phases)]
        for _, start, stop, data in stages:
            for model, a, b in data.runs:
                terms = [(c, cd.residual) for c, cd in zip(model.costs, data.costs)]
                terms += list(zip(model.constraints, data.constraints))
                for term, rdata in terms:
                    if term.residual is residual:
                        found.append((rdata, a, b, start + a))
        return found

    # -- trajectories -------------------------------------------------------
    def rollout(self, us, x0=None):
        """xs (N+1, nx) from x0 applying us: one sequential kernel per phase."""
        if self._speculation is not None:       # its worker reads the phases' data
            self._discard_speculation()
        us = as_float_array(us, "us")
        if us.shape != (self.N, self.nu) or not np.all(np.isfinite(us)):
            raise ValueError(f"us: expected finite values of shape ({self.N}, {self.nu})")
        xs = np.empty((self.N + 1, self.nx))
        xs[0] = self.x0 if x0 is None else self._validate_states(x0, "x0", single=True)
        for model, start, stop, data in self.phases:
            dynamics = model.dynamics
            if isinstance(dynamics, FreeDynamics):
                free_rollout(dynamics, model.integrator,
                             self._controls(us, model, start, stop), xs[start:stop + 1])
            else:
                idata = model.integrator.create_data(1)
                with _numba_threads(1):
                    controls = self._controls(us, model, start, stop)
                    for k in range(start, stop):
                        xs[k + 1] = model.integrator.calc(idata, xs[k:k + 1],
                                                          controls[k - start:k - start + 1])[0]
        return xs

    def quasi_static(self, xs):
        """Controls us (N, nu) that hold each xs[k] still (zero acceleration at v = 0).

        For actuation B: the least-squares solution of B u = g(q_k) (exact when
        fully actuated; for a floating base it is the actuated part of g).
        Phases with custom (non-multibody) dynamics get zero controls.
        """
        from ..dynamics.rnea import generalized_gravity
        xs = np.asarray(xs, dtype=float)
        us = np.zeros((self.N, self.nu))
        for model, start, stop, data in self.phases:
            dynamics = model.dynamics
            if hasattr(dynamics, "quasi_static"):     # e.g. contact dynamics: B u + Jc^T lambda = g
                us[start:stop, :model.nu] = dynamics.quasi_static(xs[start:stop])
                continue
            if not isinstance(dynamics, FreeDynamics):
                continue                      # no gravity model: zero controls
            q = xs[start:stop, :dynamics.model.nq]
            g = generalized_gravity(dynamics.model, dynamics.model.create_data(), q)
            Bpinv = np.linalg.pinv(dynamics.actuation.B)
            us[start:stop, :model.nu] = g @ Bpinv.T
        return us

    def __repr__(self):
        return (f"ShootingProblem(N={self.N}, nx={self.nx}, nu={self.nu}, "
                f"phases={len(self.phases)})")


_DENSE_STRUCTURE = (np.zeros(0), np.zeros(0, dtype=np.int64))

# The Euler block structure replaces each (2n)^3 product of the backward pass by a
# 2n x (n + |L|) x 2n one plus a few small ones: it saves 4 n^2 (n - |L|) flops a product
# against fixed costs per call.  Backward pass structured / dense per knot (one thread,
# interleaved, median of 7 rounds, load 1-6): n - |L| = 4: 1.08, 6 (ur5): 1.04, 6 (chain of
# 6 on a free flyer, nv 12): 1.03, 7: 1.01, 8: 1.005, 9 (panda): 0.99, 9 (chain): 0.93,
# 10 (nv 16 with a free flyer): 0.97, 12 (solo12): 0.96, 14: 0.89, 32 (talos): 0.80.
# Since the recursion borrows its arrays (no atomic reference counts per product) and
# stacks the products that share an operand (three BLAS calls a structured knot, four a
# dense one), the structure pays from 3 rows (50 knots of random data, 21 interleaved
# rounds, load 4-5; structured / dense): without Lie rows nv = 1: 0.89, 2: 0.85, 3: 0.98,
# 4: 0.86, 5: 0.83, 6: 0.85 (ur5 at its MPC point: 0.85), 7: 0.81, 9: 0.78; with 6 Lie
# rows n - |L| = 0: 1.07-1.10, 1: 1.04-1.08, 2: 0.98-1.01, 3: 0.97-0.99, 6: 0.87-0.89;
# with 9: n - |L| = 2: 1.00, 3: 0.96, 4: 0.97.
STRUCTURED_MIN_ROWS = 3


def _euler_structure(state, running_models):
    """:attr:`ShootingProblem.euler_structure` of these knots (None when none is an
    Euler knot of a multibody): Fx's top rows are e + dt B outside the Lie rows only
    when q' = q (+) dt v' and the field's q-rows are v (a multibody's dynamics)."""
    if not isinstance(state, StateMultibody):
        return None
    # a knot whose own state has other Lie rows (a model of equal nx but another joint
    # layout) keeps the dense products: the rows L are the first state's
    dts = np.array([model.dt if model.integrator.scheme == "euler"
                    and getattr(model.dynamics, "multibody", False)
                    and isinstance(model.state, StateMultibody)
                    and np.array_equal(model.state.lie_rows, state.lie_rows) else 0.0
                    for model in running_models])
    if not np.any(dts > 0.0):
        return None
    return dts, state.lie_rows
