"""One parallel region per horizon evaluation: the knots in contiguous chunks, one thread
per chunk, each running the same serial fused phase code on its chunk.

Every kernel of the package is compiled with ``nogil=True``, so plain Python threads run
them at once: a chunk is a list of phases (a phase that straddles a chunk boundary is cut
in two, each part with its own data, see :meth:`.problem.ShootingProblem.parallel_plan`),
the calling thread runs the first chunk and one persistent worker thread per other chunk
runs the rest.  No Numba threading layer is involved (Numba's parallel kernels stay on
one thread): no OpenMP threads spinning between regions, no workqueue launch, nothing to
install; a worker waits on a lock (the kernel's futex, passive) and the region costs two
lock hand-offs (measured 14 us for an empty region, idle machine).

The workers set their Numba thread count to one, so that the stages they evaluate take
the fused (serial) phase, as on the calling thread (:func:`.stage.fused_phase`).
"""
import threading
import time

import numba
from numba.core import cgutils, types
from numba.extending import intrinsic

from ..dynamics.config import kernel


class _Worker:
    """A daemon thread that runs one task at a time: ``start(task)`` then ``wait()``."""

    def __init__(self):
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._task = None
        self.error = None
        self.cpu = 0.0                  # CPU seconds of the last task (its thread's)
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name="geppetto-horizon")
        self._thread.start()

    def _loop(self):
        numba.set_num_threads(1)        # the fused serial phases (thread-local setting)
        while True:
            self._go.acquire()
            task, self._task = self._task, None
            if task is None:            # close()
                return
            cpu = time.thread_time()
            try:
                task()
            except BaseException as error:      # raised again by wait()
                self.error = error
            self.cpu = time.thread_time() - cpu
            task = None                 # kept, it would keep its problem alive
            self._done.release()

    def start(self, task):
        self._task, self.error = task, None
        self._go.release()

    def close(self):
        self._task = None
        self._go.release()

    def wait(self):
        self._done.acquire()
        if self.error is not None:
            error, self.error = self.error, None
            raise error


class ParallelRegion:
    """Runs ``tasks[0]`` on the calling thread and ``tasks[i]`` on worker i - 1 (threads
    made at the first call, kept), returns when all have ended; an exception of a task
    is raised again (the first chunk's first).  ``cpu``: each task's CPU seconds in the
    last region (its thread's ``time.thread_time``): the critical path is their maximum,
    the work their sum."""

    def __init__(self, n):
        self.n = int(n)
        self._workers = []
        self.cpu = [0.0] * self.n

    def __del__(self):
        for worker in self._workers:
            worker.close()

    def _ensure_workers(self):
        while len(self._workers) < self.n - 1:
            self._workers.append(_Worker())

    def start(self, i, task):
        """Start ``task`` on worker i (chunk i + 1 of a region) ahead of the region: the
        region's ``tasks[i + 1]`` is then None (waited for by :meth:`wait`)."""
        self._ensure_workers()
        self._workers[i].start(task)

    def wait(self, i):
        """Wait for the task started on worker i by :meth:`start` (its exception raised
        again)."""
        self._workers[i].wait()

    def __call__(self, tasks):
        """``tasks[i]`` None (i > 0): worker i - 1 runs a task started by :meth:`start`,
        not waited for here (its ``cpu`` entry is left as it is)."""
        if len(tasks) != self.n:
            raise ValueError(f"tasks: expected {self.n}, got {len(tasks)}")
        self._ensure_workers()
        for worker, task in zip(self._workers, tasks[1:]):
            if task is not None:        # else started ahead (:meth:`start`)
                worker.start(task)
        cpu = time.thread_time()
        error = None
        try:
            tasks[0]()
        except BaseException as raised:
            error = raised
        self.cpu[0] = time.thread_time() - cpu
        for i, worker in enumerate(self._workers):
            if tasks[i + 1] is None:
                continue
            try:
                worker.wait()
            except BaseException as raised:
                error = error or raised
            self.cpu[i + 1] = worker.cpu
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
        self.waited = 0.0       # wall-clock seconds the consumer waited
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
                start = time.perf_counter()
                while not self.aborted and self._frontier() >= knot:
                    self._condition.wait()
                self.waited += time.perf_counter() - start
            return knot if self.aborted else self._frontier()


# -- a calc_diff started during the line-search trial it evaluates ---------------------
#
# The trial's one compiled call (:func:`.horizon._trial`) publishes in ``signal[PROGRESS]``
# the knot below which its rollout and costs are done (after each of its phases); a
# worker evaluating calc_diff on those knots waits on it, and on ``signal[DECISION]``,
# which the solver sets when it takes or drops the trial.  The store is an atomic release
# and the loads acquire: what the trial wrote for those knots (states, controls, the
# contact solves' store) is visible to the worker once it sees the knot (and the compiler
# cannot move the store across the opaque calls of the phases around it).
PROGRESS, DECISION, STOP = 0, 1, 2
UNDECIDED, ACCEPTED, REJECTED, PARKED = 0, 1, 2, 3


def _item_pointer(context, builder, array_type, array, index):
    return cgutils.get_item_pointer(context, builder, array_type,
                                    context.make_array(array_type)(context, builder, array),
                                    [index])


def _int64_vector(array):
    return isinstance(array, types.Array) and array.ndim == 1 and array.dtype == types.int64


@intrinsic
def store_release(typingctx, array, index, value):
    """array[index] = value, an atomic store with release ordering (an int64 vector)."""
    if not _int64_vector(array):
        return None

    def codegen(context, builder, signature, args):
        pointer = _item_pointer(context, builder, signature.args[0], args[0], args[1])
        builder.store_atomic(args[2], pointer, "release", 8)
        return context.get_dummy_value()
    return types.void(array, types.intp, types.int64), codegen


@intrinsic
def load_acquire(typingctx, array, index):
    """array[index], an atomic load with acquire ordering (an int64 vector)."""
    if not _int64_vector(array):
        return None

    def codegen(context, builder, signature, args):
        pointer = _item_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(pointer, "acquire", 8)
    return types.int64(array, types.intp), codegen


@kernel
def wait_for_knot(signal, knot):
    """Spin (without the GIL) until the trial published ``knot``, the solver decided or
    the worker is stopped; returns the knot published last."""
    while load_acquire(signal, DECISION) == UNDECIDED and load_acquire(signal, STOP) == 0:
        if load_acquire(signal, PROGRESS) >= knot:
            break
    return load_acquire(signal, PROGRESS)


@kernel
def wait_while_parked(signal):
    """Spin (without the GIL) while the worker is parked: until the next trial has
    published its first part (the calling thread is then in the trial's compiled call,
    without the GIL, which the worker then takes at once: returning at the trial's start
    instead, it waited for the GIL behind the calling thread's Python, asleep, and woke
    up milliseconds later on a loaded machine), the solver decided, or the worker is
    stopped."""
    while load_acquire(signal, STOP) == 0:
        decision = load_acquire(signal, DECISION)
        if decision == PARKED:
            continue
        if decision != UNDECIDED or load_acquire(signal, PROGRESS) > 0:
            break


class Speculation:
    """A calc_diff at a line search's trial (xs, us) started while the trial is rolled
    out (:meth:`.problem.ShootingProblem.speculate`), or a region's calc_diff whose
    worker 0 then waits for the next trial (``accepted`` from the start): ``plan`` the
    parallel plan it follows, ``parts`` the phases of its first chunk (worker 0's),
    ``progress`` the region's :class:`Progress`; set by the worker: ``done`` the parts
    evaluated before the decision, ``error`` what one raised, ``cpu`` its CPU seconds
    after the decision (the region's share, for the chunk balance)."""

    def __init__(self, xs, us, plan, progress, accepted=False):
        self.xs, self.us, self.plan, self.progress = xs, us, plan, progress
        self.parts = plan[0][0]
        self.done, self.error, self.cpu = 0, None, 0.0
        self.accepted = accepted
