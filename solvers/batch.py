"""Many problems at once: :func:`solve_batch` solves ``build(param)`` for every
parameter of a batch on Dask workers and gathers the results in the order of
the parameters.

Notation (B items, item b = ``params[b]``; N knots, nx, nu as in
:class:`~geppetto.ocp.ShootingProblem`)::

    xs (B, N+1, nx)   us (B, N, nu)   costs (B,)   statuses (B,)   iterations (B,)

Execution.  Each item is one call ``_solve_item(param, build, cls, options)``
in a Dask task (one task per item, or per ``chunk_size`` items): the worker
builds the problem, solves it with the public solver
API (``Solver(problem).solve(**options)``) and returns plain arrays.  An
exception raised by ``build`` or ``solve`` is caught in the task and returned
as that item's error, so it costs no other item anything.  A worker that dies
(killed, out of memory) is Dask's business: the scheduler reruns its tasks on
the workers that remain (``distributed.scheduler.allowed-failures``, default
3, after which the item reports ``KilledWorker``).  A solve is deterministic
(unless its ``time_limit`` stops it), so a rerun gives the same result; the
item the dead worker was solving is then solved twice within that call.

``client=None`` starts an embedded ``distributed.LocalCluster``: one worker
process per core, one thread each (the solvers run one Numba thread per
problem, and process workers do not share the GIL), no dashboard, ports
chosen by the OS; it is closed when the batch ends.  A ``distributed.Client``
runs the batch on that cluster instead (geppetto must be importable on its
workers).  Workers import the compiled kernels from Numba's on-disk cache
(``cache=True``, :mod:`geppetto.dynamics.config`), so only the first process
that needs a kernel on a machine compiles it.

The store.  ``store=PATH`` is a folder the client (not the workers: a
cluster needs no shared file system) writes as results arrive::

    PATH/batch.json          the batch: size, solver, options, a token per param
    PATH/items/000017.npz    item 17: xs, us, cost, status, iterations, ...

An item's file is written under a temporary name and renamed into place
(``os.replace``, atomic on POSIX file systems), so a file that exists is
whole, and a crash loses at most the items in flight.  Why not Zarr: the
items arrive one at a time in any order and each is a few kilobytes;
a file per item needs no lock, no extra dependency, and is readable with
NumPy alone (``np.load``); the folder is append-only.  Called again with the
same store, :func:`solve_batch` loads the items there and solves only the
missing ones.  Items that failed in ``build`` or ``solve`` are stored with
their error (the same parameter fails the same way again); items lost to
the cluster (a killed worker past the retries, the batch ``timeout``) are
not stored and are solved again by the next call.
"""
import inspect
import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from .ddp import DDP, FDDP, BoxFDDP

SOLVERS = {"fddp": FDDP, "boxfddp": BoxFDDP, "ddp": DDP}

STORE_FORMAT = "geppetto-batch-1"

# the fields of an item that raised, in the store and between worker and client
_ERROR = ("error_type", "error_message", "error_traceback")


@dataclass
class BatchResult:
    """What :func:`solve_batch` returns, in the order of ``params``.

    ``xs (B, N+1, nx)``, ``us (B, N, nu)``: the solutions, NaN for an item
    that failed (object arrays of per-item arrays when items differ in
    shape); ``costs``, ``gaps`` (B,) float (NaN where failed);
    ``solve_times``, ``cpu_times`` (B,) the wall and CPU seconds of
    ``build`` + ``solve`` on the worker (NaN for an item lost to the
    cluster); ``iterations`` (B,) int (-1 where failed); ``converged`` (B,)
    bool; ``statuses`` (B,) the solver's status strings ("error" where
    failed); ``errors`` a list of B entries, None or ``(type name, message,
    traceback text)`` of the exception that item raised; ``loaded`` (B,)
    bool, True for the items read from the store rather than solved by this
    call; ``store`` its path; ``wall_time`` the seconds of the call;
    ``stats`` the counts of items ``solved`` and ``loaded``.
    """

    xs: np.ndarray
    us: np.ndarray
    costs: np.ndarray
    statuses: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    gaps: np.ndarray
    solve_times: np.ndarray
    cpu_times: np.ndarray
    errors: list
    loaded: np.ndarray
    store: str = None
    wall_time: float = np.nan
    stats: dict = field(default_factory=dict)

    @property
    def failed(self):
        """Indices of the items that raised."""
        return np.array([b for b, error in enumerate(self.errors) if error is not None], int)

    def __len__(self):
        return len(self.costs)

    def __repr__(self):
        return (f"BatchResult(items={len(self)}, converged={int(self.converged.sum())}, "
                f"failed={len(self.failed)}, loaded={int(self.loaded.sum())}, "
                f"wall_time={self.wall_time:.3g} s)")


def solver_class(solver):
    """The solver class named by ``solver`` (a key of :data:`SOLVERS`, any case)
    or ``solver`` itself when it is a class with a ``solve`` method."""
    if isinstance(solver, str):
        if solver.lower() not in SOLVERS:
            raise ValueError(f"solver: unknown solver {solver!r}; expected one of "
                             f"{', '.join(SOLVERS)} or a solver class")
        return SOLVERS[solver.lower()]
    if not (inspect.isclass(solver) and callable(getattr(solver, "solve", None))):
        raise TypeError(f"solver: expected a name ({', '.join(SOLVERS)}) or a solver class "
                        f"with a solve method, got {solver!r}")
    return solver


def _check_solve_options(cls, options):
    """TypeError at the API border for an option ``cls.solve`` does not take."""
    try:
        inspect.signature(cls.solve).bind(None, **options)
    except TypeError as error:
        raise TypeError(f"solve_options: {cls.__name__}.solve does not accept "
                        f"{sorted(options)}: {error}") from None


def _solve_item(param, build, cls, options):
    """One item on a worker: build, solve, and the result as plain arrays and
    scalars; an exception of ``build`` or ``solve`` becomes the item's error."""
    start, start_cpu = time.perf_counter(), time.thread_time()
    try:
        problem = build(param)
        result = cls(problem).solve(**options)
    except Exception as error:   # the item's failure, reported, never the batch's
        item = dict(error_type=type(error).__name__, error_message=str(error),
                    error_traceback=traceback.format_exc())
    else:
        item = dict(xs=np.asarray(result.xs), us=np.asarray(result.us),
                    cost=float(result.cost), iterations=int(result.iterations),
                    converged=bool(result.converged), status=str(result.status),
                    gaps=float(result.gaps))
    item.update(solve_time=time.perf_counter() - start, cpu_time=time.thread_time() - start_cpu)
    return item


def solve_batch(build, params, solver="fddp", client=None, store=None, progress=None,
                timeout=None, chunk_size=1, **solve_options):
    """Solve ``build(param)`` for every ``param`` of ``params`` on Dask workers.

    Parameters
    ----------
    build : callable
        ``build(param) -> ShootingProblem``; anything Dask can ship
        (cloudpickle: closures, lambdas, functions of ``__main__``).
    params : sequence
        The B parameters (targets, masses, initial states ...).
    solver : str or class
        "fddp", "boxfddp", "ddp" (:data:`SOLVERS`) or a solver class
        ``Solver(problem).solve(**solve_options) -> SolverResult``.
    client : distributed.Client, optional
        The cluster to run on; None: an embedded LocalCluster, one process
        per core, started and closed by this call.
    store : str or os.PathLike, optional
        A folder where each result is written as it arrives (see the module
        docstring); when it already holds items of this batch, they are
        returned and only the missing items are solved.
    progress : bool, optional
        A progress bar on stderr (items done, failures, rate); None: when
        stderr is a terminal.
    timeout : float, optional
        Seconds to wait for the batch; items not done by then are reported
        with a ``TimeoutError`` (and not stored).
    chunk_size : int
        Items per Dask task.  Each task costs a few milliseconds of CPU in
        the scheduler and the worker, which matters for problems that solve
        in milliseconds (``benchmarks/batch.py``, UR5 reaching with 10
        knots, 2 workers: 28 ms of CPU per item one per task, 22 ms in
        chunks of 10, 17 ms of them in build + solve).  A killed worker
        loses its whole chunk in flight (solved again elsewhere); results
        reach the store as their chunk completes.
    **solve_options
        Passed to ``solve`` (``max_iter``, ``time_limit``, ...).

    Returns
    -------
    BatchResult
    """
    start = time.perf_counter()
    if not callable(build):
        raise TypeError(f"build: expected a callable build(param) -> ShootingProblem, "
                        f"got {build!r}")
    if isinstance(params, (str, bytes)) or not hasattr(params, "__len__"):
        raise TypeError(f"params: expected a sequence of parameters, got {type(params).__name__}")
    params = list(params)
    cls = solver_class(solver)
    _check_solve_options(cls, solve_options)
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size < 1:
        raise ValueError(f"chunk_size: expected a positive integer, got {chunk_size!r}")
    if client is not None and not callable(getattr(client, "map", None)):
        raise TypeError(f"client: expected a distributed.Client or None, got {client!r}")
    items = [None] * len(params)
    batch_store = None
    if store is not None:
        batch_store = BatchStore(store, params, cls, solve_options)
        for b, item in batch_store.load().items():
            items[b] = item
    loaded = np.array([item is not None for item in items], dtype=bool)
    todo = [b for b, item in enumerate(items) if item is None]
    if todo:
        show = sys.stderr.isatty() if progress is None else bool(progress)
        collector = _Collector(items, batch_store, _Progress(len(params), int(loaded.sum()),
                                                             sys.stderr if show else None))
        task = dict(build=build, cls=cls, options=solve_options)
        if client is None:
            with _local_client() as local:
                _run(local, params, todo, task, collector, timeout, chunk_size)
        else:
            _run(client, params, todo, task, collector, timeout, chunk_size)
        collector.bar.close()
    result = _gather(items, loaded)
    result.store = None if store is None else os.fspath(store)
    result.wall_time = time.perf_counter() - start
    result.stats = dict(solved=len(todo), loaded=int(loaded.sum()))
    return result


class _Collector:
    """Where an item goes when it arrives: ``items[b]``, the store (unless the
    item was lost to the cluster) and the progress bar."""

    def __init__(self, items, store, bar):
        self.items, self.store, self.bar = items, store, bar

    def add(self, b, item):
        self.items[b] = item
        if self.store is not None and not item.get("lost", False):
            self.store.write(b, item)
        self.bar.update("error_type" in item)


def _solve_chunk(chunk, build, cls, options):
    """:func:`_solve_item` on each parameter of ``chunk`` (one Dask task)."""
    return [_solve_item(param, build, cls, options) for param in chunk]


def _run(client, params, todo, task, collector, timeout, chunk_size):
    """Submit ``_solve_chunk`` on the items ``todo``, ``chunk_size`` items per
    task, to ``client`` and hand each result to ``collector`` as its task
    completes; after ``timeout`` seconds, the items not done are lost with a
    TimeoutError and their tasks cancelled."""
    from distributed import as_completed
    chunks = [todo[i:i + chunk_size] for i in range(0, len(todo), chunk_size)]
    futures = client.map(_solve_chunk, [[params[b] for b in chunk] for chunk in chunks],
                         pure=False, **task)
    pending = {future.key: (future, chunk) for future, chunk in zip(futures, chunks)}
    try:
        for future in as_completed(futures, timeout=timeout):
            _, chunk = pending.pop(future.key)
            for b, item in zip(chunk, _collected(future, len(chunk))):
                collector.add(b, item)
            future.release()
    except TimeoutError:
        message = f"not done within the batch timeout of {timeout} s"
        for _, chunk in pending.values():
            for b in chunk:
                collector.add(b, dict(error_type="TimeoutError", error_message=message,
                                      error_traceback="", lost=True))
        client.cancel([future for future, _ in pending.values()])


def _collected(future, size):
    """The ``size`` items a finished future holds; a task that failed in Dask
    itself (a worker killed past the retries, a build that cannot be
    unpickled) makes them errors marked ``lost``: not stored, solved again by
    the next call."""
    try:
        return future.result()
    except Exception as error:
        lost = dict(error_type=type(error).__name__, error_message=str(error),
                    error_traceback=traceback.format_exc(), lost=True)
        return [lost] * size


def _gather(items, loaded):
    """Stack the per-item dicts into a :class:`BatchResult`."""
    B = len(items)
    good = [item for item in items if "error_type" not in item]
    shapes = {(item["xs"].shape, item["us"].shape) for item in good}
    if len(shapes) <= 1:
        xs_shape, us_shape = shapes.pop() if shapes else ((0, 0), (0, 0))
        xs = np.full((B,) + xs_shape, np.nan)
        us = np.full((B,) + us_shape, np.nan)
    else:                       # items of different horizons or sizes
        xs, us = np.empty(B, dtype=object), np.empty(B, dtype=object)
    costs, gaps = np.full(B, np.nan), np.full(B, np.nan)
    times, cpu_times = np.full(B, np.nan), np.full(B, np.nan)
    iterations, converged = np.full(B, -1, dtype=int), np.zeros(B, dtype=bool)
    statuses, errors = np.empty(B, dtype=object), [None] * B
    for b, item in enumerate(items):
        times[b] = item.get("solve_time", np.nan)
        cpu_times[b] = item.get("cpu_time", np.nan)
        if "error_type" in item:
            statuses[b] = "error"
            errors[b] = tuple(item.get(key, "") for key in _ERROR)
            continue
        xs[b], us[b] = item["xs"], item["us"]
        costs[b], gaps[b] = item["cost"], item["gaps"]
        iterations[b], converged[b] = item["iterations"], item["converged"]
        statuses[b] = item["status"]
    return BatchResult(xs=xs, us=us, costs=costs, statuses=statuses, iterations=iterations,
                       converged=converged, gaps=gaps, solve_times=times, cpu_times=cpu_times,
                       errors=errors,
                       loaded=loaded)


def local_cluster(n_workers=None):
    """The embedded default: a ``distributed.LocalCluster`` of ``n_workers``
    (default: one per usable core) single-threaded worker processes, without a
    dashboard, its ports (scheduler and HTTP) chosen by the OS, so that several
    clusters live side by side (pytest-xdist workers)."""
    from distributed import LocalCluster
    n_workers = n_workers or len(os.sched_getaffinity(0))
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                        scheduler_port=0, dashboard_address=None,
                        scheduler_kwargs=dict(dashboard_address=":0"))


class _local_client:
    """A :func:`local_cluster` and its Client, closed on exit."""

    def __enter__(self):
        from distributed import Client
        self.cluster = local_cluster()
        self.client = Client(self.cluster)
        return self.client

    def __exit__(self, *exc):
        self.client.close()
        self.cluster.close()


class BatchStore:
    """The store of one batch: ``batch.json`` and one ``items/<b>.npz`` per item.

    Opening an existing store checks that it holds the same batch (size,
    solver, options and, where the parameters can be tokenized
    deterministically, each parameter) and raises ValueError otherwise.
    """

    def __init__(self, path, params, cls, options):
        self.path = os.fspath(path)
        self.items_path = os.path.join(self.path, "items")
        header = dict(format=STORE_FORMAT, size=len(params),
                      solver=f"{cls.__module__}.{cls.__qualname__}",
                      options=repr(sorted(options.items())),
                      params=[_token(param) for param in params])
        header_path = os.path.join(self.path, "batch.json")
        if os.path.exists(header_path):
            with open(header_path) as file:
                stored = json.load(file)
            self._check(stored, header)
        else:
            os.makedirs(self.items_path, exist_ok=True)
            _write_atomically(header_path, lambda f: f.write(json.dumps(header).encode()))
        os.makedirs(self.items_path, exist_ok=True)
        self.size = len(params)

    def _check(self, stored, header):
        for key in ("format", "size", "solver", "options"):
            if stored.get(key) != header[key]:
                raise ValueError(f"store: {self.path} holds another batch ({key} "
                                 f"{stored.get(key)!r}, this call {header[key]!r})")
        for b, (old, new) in enumerate(zip(stored["params"], header["params"])):
            if old is not None and new is not None and old != new:
                raise ValueError(f"store: {self.path} holds another batch (params[{b}] "
                                 "differs from the stored one)")

    def _item_path(self, b):
        return os.path.join(self.items_path, f"{b:06d}.npz")

    def load(self):
        """{b: item} for the items in the store."""
        items = {}
        for name in os.listdir(self.items_path):
            stem, ext = os.path.splitext(name)
            if ext != ".npz" or not stem.isdigit() or int(stem) >= self.size:
                continue       # temporary files of an interrupted write
            with np.load(os.path.join(self.items_path, name), allow_pickle=False) as data:
                items[int(stem)] = {key: data[key].item() if data[key].ndim == 0 else data[key]
                                    for key in data.files}
        return items

    def write(self, b, item):
        """Write item b under a temporary name, then rename it into place."""
        arrays = {key: np.asarray(value) for key, value in item.items()}
        _write_atomically(self._item_path(b), lambda f: np.savez(f, **arrays))


def _write_atomically(path, write):
    """``write(file)`` into a temporary file beside ``path``, flushed to disk,
    then renamed to ``path``: readers see the whole file or none."""
    folder = os.path.dirname(path)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def _token(param):
    """A deterministic token of ``param`` (Dask's tokenize), None when it has none."""
    from dask.base import tokenize
    try:
        return tokenize(param, ensure_deterministic=True)
    except Exception:
        return None


class _Progress:
    """``solve_batch: 37/100 items, 2 failed, 12.3 items/s, 5 s left`` on ``stream``
    (None: silent), redrawn in place at most 10 times a second."""

    def __init__(self, total, done, stream):
        self.total, self.done, self.failed, self.stream = total, done, 0, stream
        self.start, self.solved, self.last = time.perf_counter(), 0, 0.0
        self._draw(force=True)

    def update(self, failed):
        self.done += 1
        self.solved += 1
        self.failed += int(failed)
        self._draw(force=self.done == self.total)

    def _draw(self, force=False):
        now = time.perf_counter()
        if self.stream is None or (not force and now - self.last < 0.1):
            return
        self.last = now
        elapsed = now - self.start
        rate = self.solved / elapsed if elapsed > 0 else 0.0
        left = f", {(self.total - self.done) / rate:.0f} s left" if rate > 0 else ""
        self.stream.write(f"\rsolve_batch: {self.done}/{self.total} items, {self.failed} "
                          f"failed, {rate:.1f} items/s{left}   ")
        self.stream.flush()

    def close(self):
        if self.stream is not None:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
