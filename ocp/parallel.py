"""One parallel region per horizon evaluation: the knots in contiguous chunks, one thread
per chunk, each running the same serial fused phase code on its chunk.

Every kernel of the package is compiled with ``nogil=True``, so plain Python threads run
them at once: a chunk is a list of phases (a phase that straddles a chunk boundary is cut
in two, each part with its own data, see :meth:`.problem.ShootingProblem.parallel_plan`),
the calling thread runs the first chunk and one persistent worker thread per other chunk
runs the rest.  No Numba threading layer is involved (Numba's parallel kernels stay on
one thread): no OpenMP threads spinning between regions, no workqueue launch, nothing to
install; a worker waits on a lock (the kernel's futex, passive) and the region costs two
lock hand-offs (measured 14 us for an empty region, idle machine; in this 2-core VM
waking a sleeping worker costs the starting thread 16-22 us).  Between a speculative
calc_diff and the next (:meth:`.problem.ShootingProblem._speculate`), under a real-time
policy, worker 0 instead lingers: it spins about 0.5 ms without the GIL
(:func:`_spin_for_task`) and a task posted meanwhile is taken by a compare-exchange of
its state word.

The workers set their Numba thread count to one, so that the stages they evaluate take
the fused (serial) phase, as on the calling thread (:func:`.stage.fused_phase`).

Where every part of a chunk is a fused phase of one dynamics block and a cost program,
the chunk is one compiled call (:class:`.horizon.ChunkProgram`, the parts reached by
address): a worker runs no Python between its parts and reports each by an atomic
release store into a progress vector, which the calling thread's backward pass reads in
a compiled wait (:func:`wait_below`, acquire loads, without the GIL); the GIL is taken
twice per region instead of at every part, and no lock or condition changes hands per
part (:class:`Progress` serves the chunks run phase by phase from Python).
"""
import threading
import time

import numba
import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic

from ..dynamics.config import kernel


# a worker's state word (:class:`_Worker`): asleep on its lock, lingering (spinning
# without the GIL after a task), a task posted to it while it lingered (run at once, or
# once the line-search trial it follows is under way, :func:`_spin_for_task`)
SLEEPING, LINGERING, POSTED, POSTED_AFTER_TRIAL = 0, 1, 2, 3
# rounds of loads a lingering worker spins before it sleeps (about 0.5 ms)
LINGER_SPINS = 2000000
# the weight of each task in a worker's ``off_core`` average
OFF_CORE_SMOOTHING = 0.1


class _Worker:
    """A daemon thread that runs one task at a time: ``start(task)`` then ``wait()``.

    With ``lingers`` set, after a task it spins for the next one without the GIL
    (:func:`_spin_for_task`) before it sleeps on its lock: a task posted meanwhile
    starts without a lock hand-off (waking a sleeping thread costs the starting thread
    16-22 us here, the futex wake of an idle core)."""

    def __init__(self, trial_signal=None):
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._task = None
        self.error = None
        self.cpu = 0.0                  # CPU seconds of the last task (its thread's)
        # the share of its tasks' wall-clock time the thread spent off its core (moving
        # average): the machine's other work took the core (0.002-0.03 on the solo12
        # trot with a core to itself, under a real-time policy; 0.02-0.17, median about
        # 0.06, beside another busy process on 2 cores)
        self.off_core = 0.0
        self.lingers = False
        self.taken_lingering = 0        # tasks started while it lingered
        self._owed = False              # a task's end not waited for (wait interrupted)
        # the state word, alone on its cache line, and the signal of the trial a task
        # posted with ``after_trial`` waits for (see _spin_for_task)
        self._state = np.zeros(24, dtype=np.int64)[8:9]
        self._trial = new_trial_signal() if trial_signal is None else trial_signal
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name="geppetto-horizon")
        self._thread.start()

    def _loop(self):
        numba.set_num_threads(1)        # the fused serial phases (thread-local setting)
        lingering = False
        while True:
            if not (lingering and _spin_for_task(self._state, self._trial, LINGER_SPINS)):
                self._go.acquire()
            task, self._task = self._task, None
            if task is None:            # close()
                return
            cpu = time.thread_time()
            wall = time.perf_counter()
            try:
                task()
            except BaseException as error:      # raised again by wait()
                self.error = error
            self.cpu = time.thread_time() - cpu
            wall = time.perf_counter() - wall
            if wall > 0.0:
                self.off_core += OFF_CORE_SMOOTHING * (max(0.0, 1.0 - self.cpu / wall)
                                                       - self.off_core)
            task = None                 # kept, it would keep its problem alive
            lingering = self.lingers
            if lingering:
                self._state[0] = LINGERING
            self._done.release()

    def start(self, task, after_trial=False):
        """Run ``task`` (the last one waited for); ``after_trial``: a lingering worker
        takes the GIL once the trial it follows has published a part (the calling thread
        is then in the compiled trial: no GIL hand-off)."""
        if self._owed:                  # the end of a task whose wait was interrupted
            self._done.acquire()
            self._owed = False
        self._task, self.error = task, None
        # a worker that did not linger after its last task (its state word set before
        # the end that was waited for) sleeps on its lock: no compare-exchange
        if self._state[0] != LINGERING:
            self._go.release()
            return
        posted = POSTED_AFTER_TRIAL if after_trial else POSTED
        if _compare_exchange_at(self._state, 0, LINGERING, posted) != LINGERING:
            self._go.release()          # asleep: its linger ended first
        else:
            self.taken_lingering += 1

    def close(self):
        self.lingers = False
        self._task = None
        self._go.release()          # a lingering worker takes it once it sleeps

    def wait(self):
        try:
            self._done.acquire()
        except BaseException:           # KeyboardInterrupt: the next start waits for it
            self._owed = True
            raise
        # an end still owed was this one: start() was interrupted before posting (no task
        # posted since the interrupted wait), so nothing else will release _done
        self._owed = False
        if self.error is not None:
            error, self.error = self.error, None
            raise error


class ParallelRegion:
    """Runs ``tasks[0]`` on the calling thread and ``tasks[i]`` on worker i - 1 (threads
    made at the first call, kept), returns when all have ended; an exception of a task
    is raised again (the first chunk's first).  ``cpu``: each task's CPU seconds in the
    last region (its thread's ``time.thread_time``): the critical path is their maximum,
    the work their sum."""

    def __init__(self, n, trial_signal=None):
        self.n = int(n)
        self._trial_signal = trial_signal       # see _Worker.start(after_trial=)
        self._workers = []
        self._started = [False] * (self.n - 1)     # worker i runs a task not waited for
        self.cpu = [0.0] * self.n

    def __del__(self):
        for worker in self._workers:
            worker.close()

    def _make_workers(self):
        """The worker threads, made at the first use."""
        while len(self._workers) < self.n - 1:
            self._workers.append(_Worker(self._trial_signal))

    def start(self, i, task, after_trial=False):
        """Start ``task`` on worker i ahead of a region (a calc_diff started during the
        line search, :meth:`.problem.ShootingProblem._speculate`; ``after_trial``: see
        :meth:`_Worker.start`): the region's ``tasks[i + 1]`` is then None, and the
        region waits for it.  :meth:`wait`: for one started so, when no region follows."""
        self._make_workers()
        if self._started[i]:            # one started before and not waited for
            self.wait(i)
        self._started[i] = True         # first: waited for even if start is interrupted
        self._workers[i].start(task, after_trial)

    def off_core(self):
        """The largest share of wall-clock time a worker spent off its core in its recent
        tasks (:class:`_Worker`; 0 before any): above a few percent the machine's other
        work takes the cores the region counts on."""
        return max([worker.off_core for worker in self._workers], default=0.0)

    def set_lingering(self, i, lingers):
        """Whether worker i spins for its next task after each (:class:`_Worker`)."""
        self._make_workers()
        self._workers[i].lingers = bool(lingers)

    def wait(self, i):
        """Wait for the task started on worker i by :meth:`start` (its error raised);
        its CPU seconds then in ``cpu[i + 1]``."""
        if not self._started[i]:
            return
        self._started[i] = False
        worker = self._workers[i]
        try:
            worker.wait()
        finally:
            self.cpu[i + 1] = worker.cpu

    def __call__(self, tasks):
        if len(tasks) != self.n:
            raise ValueError(f"tasks: expected {self.n}, got {len(tasks)}")
        self._make_workers()
        for i, (worker, task) in enumerate(zip(self._workers, tasks[1:])):
            if task is None:
                if not self._started[i]:
                    raise ValueError(f"tasks[{i + 1}]: None, but no task started there")
                continue
            if self._started[i]:        # one started by start() and not waited for
                self.wait(i)
            self._started[i] = True
            worker.start(task)
        cpu = time.thread_time()
        error = None
        try:
            tasks[0]()
        except BaseException as raised:
            error = raised
        self.cpu[0] = time.thread_time() - cpu
        for i in range(len(self._workers)):
            try:
                self.wait(i)
            except BaseException as raised:
                error = error or raised
        if error is not None:
            raise error


class Progress:
    """What the chunks below the last have evaluated so far, for a consumer on the
    calling thread that needs the knots from the top down (the backward pass): chunk i
    (knots ``starts[i]`` .. ``starts[i + 1]``) evaluates its phases from the last down
    and reports ``done(i, knot)`` after each (its knots from ``knot`` up are ready);
    :meth:`wait_below` returns the lowest knot b such that every knot from b to the
    last chunk is ready, once it is below a given knot."""

    def __init__(self, starts):
        self.starts = list(starts)                 # first knot of each chunk, and the last's
        self.ready = list(self.starts[1:])         # nothing evaluated yet
        self.aborted = False
        self.waited = 0.0       # CPU seconds the consumer spent waiting (blocked: ~0)
        self._condition = threading.Condition()

    def done(self, i, knot):
        with self._condition:
            self.ready[i] = knot
            self._condition.notify()

    def abort(self):
        """A chunk failed: the consumer stops waiting."""
        with self._condition:
            self.aborted = True
            self._condition.notify()

    def _frontier(self):
        for i in range(len(self.ready) - 1, -1, -1):
            if self.ready[i] > self.starts[i]:
                return self.ready[i]
        return self.starts[0]

    def wait_below(self, knot):
        """The frontier, once below ``knot`` (or ``knot`` itself if a chunk failed)."""
        with self._condition:
            if not self.aborted and self._frontier() >= knot:
                start = time.thread_time()
                while not self.aborted and self._frontier() >= knot:
                    self._condition.wait()
                self.waited += time.thread_time() - start
            return knot if self.aborted else self._frontier()


# -- progress published by compiled code ----------------------------------------------
#
# A chunk evaluated by one compiled call (:class:`.horizon.ChunkProgram`) publishes, after
# each of its parts, the knot from which its knots are ready in ``signal[i]`` (chunk i,
# below the last), by an atomic store with release ordering; the calling thread waits
# for it in :func:`wait_below`, a compiled loop of acquire loads (without the GIL).
# What the chunk wrote for those knots (their derivatives, costs, predicted states) is
# then visible to the backward pass.  ``signal[-1]``: nonzero when a chunk failed.

def _item_pointer(context, builder, array_type, array, index):
    return cgutils.get_item_pointer(context, builder, array_type,
                                    context.make_array(array_type)(context, builder, array),
                                    [index])


def _int64_vector(array):
    return isinstance(array, types.Array) and array.ndim == 1 and array.dtype == types.int64


@intrinsic
def store_release(typingctx, array, index, value):
    """array[index] = value, an atomic store with release ordering (an int64 vector)."""
    if not (_int64_vector(array) and isinstance(index, types.Integer)
            and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        pointer = _item_pointer(context, builder, signature.args[0], args[0], args[1])
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, pointer, "release", 8)
        return context.get_dummy_value()
    return types.void(array, types.intp, types.int64), codegen


@intrinsic
def load_acquire(typingctx, array, index):
    """array[index], an atomic load with acquire ordering (an int64 vector)."""
    if not (_int64_vector(array) and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        pointer = _item_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(pointer, "acquire", 8)
    return types.int64(array, types.intp), codegen


# -- a calc_diff that follows the line-search trial it evaluates -------------------------
#
# The one-call trial (:func:`.horizon._trial`) publishes in ``trial[TRIAL_PROGRESS]`` the
# knot below which its rollout and costs are done (after each phase, a release
# store), and in ``trial[TRIAL_ROLLED]`` the knot below which its rollout is done (after
# each knot, :mod:`.trial`); a worker's chunk program following it
# (:func:`.horizon._chunk_diff`) runs each part's dynamics block once the rollout has
# passed the part's stop and its costs once the trial's costs have (acquire loads: the
# trial's cost program writes the knots' costs, which calc_diff's rewrites), stops at
# the next step when the solver drops the trial (``trial[TRIAL_DECISION]`` = REJECTED)
# and evaluates what is left from the top down once it takes it (ACCEPTED).
TRIAL_PROGRESS, TRIAL_DECISION, TRIAL_ROLLED = 0, 1, 2
UNDECIDED, REJECTED, ACCEPTED = 0, 1, 2


def new_trial_signal():
    """A trial's signal vector, zeroed: one int64 per entry above (TRIAL_PROGRESS,
    TRIAL_DECISION, TRIAL_ROLLED), the one shape every publisher and reader takes."""
    return np.zeros(3, dtype=np.int64)


@kernel
def wait_below(signal, starts, knot, spins):
    """The lowest knot b such that the knots from b up are ready (as
    :meth:`Progress.wait_below`: ``starts`` the first knot of each chunk below the last,
    ``signal[i]`` what chunk i published), once it is below ``knot``; ``knot`` itself when
    a chunk failed (``signal[-1]`` nonzero); -1 when neither happened in ``spins`` rounds
    of loads (the caller yields its core, then waits again).  Spins without the GIL."""
    n = starts.shape[0]
    for _ in range(spins):
        if load_acquire(signal, signal.shape[0] - 1) != 0:
            return knot
        frontier = starts[0]
        for i in range(n - 1, -1, -1):
            ready = load_acquire(signal, i)
            if ready > starts[i]:
                frontier = ready
                break
        if frontier < knot:
            return frontier
    return -1


@intrinsic
def compare_exchange(typingctx, array, index, expected, value):
    """array[index] = value if it equals ``expected`` (one atomic operation, sequentially
    consistent); returns the value it held (an int64 vector)."""
    if not (_int64_vector(array) and isinstance(index, types.Integer)
            and isinstance(expected, types.Integer) and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        pointer = _item_pointer(context, builder, signature.args[0], args[0], args[1])
        old = context.cast(builder, args[2], signature.args[2], types.int64)
        new = context.cast(builder, args[3], signature.args[3], types.int64)
        result = builder.cmpxchg(pointer, old, new, "seq_cst", "seq_cst")
        return builder.extract_value(result, 0)
    return types.int64(array, types.intp, types.int64, types.int64), codegen


@kernel
def _compare_exchange_at(array, index, expected, value):
    """:func:`compare_exchange` from Python (``index`` checked)."""
    if index < 0 or index >= array.shape[0]:
        raise IndexError("compare_exchange: index out of range")
    return compare_exchange(array, index, expected, value)


@kernel
def store_release_at(array, index, value):
    """:func:`store_release` from Python (``index`` checked): the solver's decision on
    the trial a worker follows (``trial[TRIAL_DECISION]``), published with release
    ordering after what the calling thread wrote before it."""
    if index < 0 or index >= array.shape[0]:
        raise IndexError("store_release: index out of range")
    store_release(array, index, value)


@kernel
def _spin_for_task(state, trial, spins):
    """A worker's wait for its next task after one (:class:`_Worker`), without the GIL:
    ``state[0]`` LINGERING until a task is posted (POSTED, or POSTED_AFTER_TRIAL: then
    also until ``trial`` shows the trial under way, its first knot or part published or a
    decision taken, so that the GIL the worker takes next is free); True then, the state
    back to SLEEPING.  After ``spins`` rounds of loads without a post the state goes
    LINGERING -> SLEEPING by a compare-exchange and False is returned (the worker sleeps
    on its lock; a post that came first wins: True).  The wait for the trial is bounded
    by ``spins`` rounds too (at most twice the linger then, ~1 ms)."""
    posted = SLEEPING
    for _ in range(spins):
        posted = load_acquire(state, 0)
        if posted != LINGERING:
            break
    if posted == LINGERING:
        posted = compare_exchange(state, 0, LINGERING, SLEEPING)
        if posted == LINGERING:
            return False
    if posted == POSTED_AFTER_TRIAL:
        for _ in range(spins):
            if load_acquire(trial, TRIAL_ROLLED) > 0 or \
                    load_acquire(trial, TRIAL_PROGRESS) > 0 or \
                    load_acquire(trial, TRIAL_DECISION) != UNDECIDED:
                break
    store_release(state, 0, SLEEPING)
    return True
