"""solve_batch on a real LocalCluster of two worker processes: results equal to
sequential solves, per-item errors, the store and its resume (no item solved
twice, counted by the builds), a worker killed in the middle of a batch, the
embedded default cluster, and the batch example.

The clusters choose their ports (no dashboard), so xdist workers running this
module at the same time do not collide; every wait is bounded by the solvers'
``max_iter``/``time_limit`` and the batch ``timeout``.
"""
import os
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
import cloudpickle


import geppetto as gp
from geppetto.examples import batch_reaching
from geppetto.solvers import solve_batch
from geppetto.solvers.batch import local_cluster

KNOTS = 12
OPTIONS = dict(max_iter=50, time_limit=30.0)
BATCH_TIMEOUT = 600.0

# the workers need not import this module: its functions and classes travel by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client(build, targets):
    """A LocalCluster of 2 single-threaded worker processes and its Client, started
    once this process has compiled the solvers' kernels: on an empty Numba cache
    (CI's clean checkout) the workers then load them from the cache instead of
    compiling them twice more beside the other test processes."""
    for solver in (gp.solvers.FDDP, gp.solvers.BoxFDDP, gp.solvers.DDP):
        solver(build(targets[0])).solve(max_iter=2)
    cluster = local_cluster(n_workers=2)
    with distributed.Client(cluster) as dask_client:
        yield dask_client
    cluster.close()


@pytest.fixture(scope="module")
def build():
    return batch_reaching.reaching_builder(knots=KNOTS, dt=0.05)


@pytest.fixture(scope="module")
def targets():
    return batch_reaching.sample_targets(6, seed=4)


def sequential(build, params, solver=gp.solvers.FDDP, **options):
    return [solver(build(param)).solve(**options) for param in params]


def assert_equal_to_sequential(result, expected):
    costs = np.array([r.cost for r in expected])
    np.testing.assert_allclose(result.costs, costs, rtol=1e-12, atol=0)
    np.testing.assert_allclose(result.xs, np.stack([r.xs for r in expected]), rtol=0,
                               atol=1e-12)
    np.testing.assert_allclose(result.us, np.stack([r.us for r in expected]), rtol=0,
                               atol=1e-10)
    assert list(result.iterations) == [r.iterations for r in expected]
    assert list(result.statuses) == [r.status for r in expected]


class CountingBuild:
    """``build`` that leaves one file per call in ``folder`` (any process), to count
    the builds, after sleeping ``delay`` seconds; raises for ``fail_on``."""

    def __init__(self, build, folder, delay=0.0, fail_on=()):
        self.build, self.folder, self.delay, self.fail_on = build, folder, delay, fail_on

    def __call__(self, param):
        index, target = param
        open(os.path.join(self.folder, f"{index}-{uuid.uuid4().hex}"), "w").close()
        time.sleep(self.delay)
        if index in self.fail_on:
            raise ValueError(f"no problem for item {index}")
        return self.build(target)

    def counts(self):
        names = os.listdir(self.folder)
        return sorted(int(name.split("-")[0]) for name in names)


def test_results_equal_sequential_solves(client, build, targets):
    result = solve_batch(build, targets, client=client, timeout=BATCH_TIMEOUT, **OPTIONS)
    expected = sequential(build, targets, **OPTIONS)
    assert result.xs.shape == (6, KNOTS + 1, 12) and result.us.shape == (6, KNOTS, 6)
    assert result.errors == [None] * 6 and result.converged.all()
    assert_equal_to_sequential(result, expected)


@pytest.mark.parametrize("solver, cls", [("boxfddp", gp.solvers.BoxFDDP),
                                         (gp.solvers.DDP, gp.solvers.DDP)])
def test_solver_by_name_or_class_and_a_lambda(client, build, targets, solver, cls):
    # a lambda of this module travels by value (cloudpickle)
    result = solve_batch(lambda target: build(target), targets[:3], solver=solver,
                         client=client, timeout=BATCH_TIMEOUT, max_iter=5)
    assert_equal_to_sequential(result, sequential(build, targets[:3], cls, max_iter=5))


def test_an_item_that_raises_loses_nothing_else(client, build, targets, tmp_path, capsys):
    counting = CountingBuild(build, str(tmp_path), fail_on=(1,))
    params = [(0, targets[0]), (1, targets[1]), (2, "not a target"), (3, targets[3])]
    result = solve_batch(counting, params, client=client, progress=True,
                         timeout=BATCH_TIMEOUT, **OPTIONS)
    assert list(result.failed) == [1, 2]
    assert result.errors[1][:2] == ("ValueError", "no problem for item 1")
    assert result.errors[2][0] == "ValueError" and "target" in result.errors[2][2]
    assert list(result.statuses[[1, 2]]) == ["error", "error"]
    assert np.isnan(result.xs[1]).all() and np.isnan(result.costs[2])
    assert list(result.iterations[[1, 2]]) == [-1, -1]
    expected = sequential(build, targets[[0, 3]], **OPTIONS)
    np.testing.assert_allclose(result.costs[[0, 3]], [r.cost for r in expected], rtol=1e-12)
    assert "solve_batch: 4/4 items, 2 failed" in capsys.readouterr().err


def test_chunks_of_items_per_task(client, build, targets, tmp_path):
    counting = CountingBuild(build, str(tmp_path), fail_on=(2,))
    params = list(enumerate(targets[:5]))
    result = solve_batch(counting, params, client=client, chunk_size=3,
                         timeout=BATCH_TIMEOUT, **OPTIONS)
    assert list(result.failed) == [2] and result.errors[2][0] == "ValueError"
    expected = sequential(build, targets[[0, 1, 3, 4]], **OPTIONS)
    np.testing.assert_allclose(result.costs[[0, 1, 3, 4]], [r.cost for r in expected],
                               rtol=1e-12)
    np.testing.assert_allclose(result.xs[[0, 1, 3, 4]], np.stack([r.xs for r in expected]),
                               rtol=0, atol=1e-12)
    assert counting.counts() == list(range(5))


def test_store_resumes_without_solving_an_item_twice(client, build, targets, tmp_path):
    store = tmp_path / "store"
    count_dir = tmp_path / "builds"
    count_dir.mkdir()
    counting = CountingBuild(build, str(count_dir), fail_on=(5,))
    params = list(enumerate(targets))
    first = solve_batch(counting, params, client=client, store=store, timeout=BATCH_TIMEOUT,
                        **OPTIONS)
    assert counting.counts() == list(range(6))
    assert sorted(os.listdir(store / "items")) == [f"{b:06d}.npz" for b in range(6)]
    # everything there: nothing built, the same arrays (the stored error too)
    again = solve_batch(counting, params, client=client, store=store, timeout=BATCH_TIMEOUT,
                        **OPTIONS)
    assert counting.counts() == list(range(6)) and again.loaded.all()
    for name in ("xs", "us", "costs", "iterations", "converged"):
        np.testing.assert_array_equal(getattr(again, name), getattr(first, name))
    assert list(again.statuses) == list(first.statuses) and again.errors == first.errors
    # a run killed after items 0, 2, 5 were written (and one write interrupted):
    # the next call solves exactly the three missing items
    for b in (1, 3, 4):
        os.remove(store / "items" / f"{b:06d}.npz")
    (store / "items" / ".tmp-abc.part").write_bytes(b"half a file")
    resumed = solve_batch(counting, params, client=client, store=store,
                          timeout=BATCH_TIMEOUT, **OPTIONS)
    assert counting.counts() == sorted(list(range(6)) + [1, 3, 4])
    assert list(resumed.loaded) == [True, False, True, False, False, True]
    np.testing.assert_allclose(resumed.costs[:5], first.costs[:5], rtol=1e-12)
    # the store holds this batch only
    with pytest.raises(ValueError, match="params\\[0\\]"):
        solve_batch(counting, params[::-1], client=client, store=store, **OPTIONS)
    with pytest.raises(ValueError, match="options"):
        solve_batch(counting, params, client=client, store=store, max_iter=3)


def test_a_killed_worker_loses_no_result(client, build, targets, tmp_path):
    store = tmp_path / "store"
    count_dir = tmp_path / "builds"
    count_dir.mkdir()
    params = list(enumerate(np.concatenate([targets, targets[::-1]])))
    counting = CountingBuild(build, str(count_dir), delay=0.3)
    returned = {}

    def run():
        returned["result"] = solve_batch(counting, params, client=client, store=store,
                                         timeout=BATCH_TIMEOUT, **OPTIONS)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + BATCH_TIMEOUT
    items = store / "items"
    while time.monotonic() < deadline and not (items.is_dir() and len(os.listdir(items)) >= 2):
        time.sleep(0.05)
    killed = sorted(client.scheduler_info()["workers"])[0]
    assert len(os.listdir(items)) < len(params) - 2   # in the middle of the batch
    try:
        client.run(os._exit, 1, workers=[killed])
    except Exception:                                  # the worker dies before answering
        pass
    thread.join(BATCH_TIMEOUT)
    result = returned["result"]
    assert result.errors == [None] * len(params)
    expected = sequential(build, [target for _, target in params], **OPTIONS)
    assert_equal_to_sequential(result, expected)
    # the item the killed worker was solving was built again on the other one
    assert set(counting.counts()) == set(range(len(params)))
    assert len(counting.counts()) > len(params)
    client.wait_for_workers(2, timeout=60)            # the nanny restarts it


KILLED_RUN = """
import os, sys, time, uuid
from distributed import Client
from geppetto.examples import batch_reaching
from geppetto.solvers import solve_batch
address, store, count_dir = sys.argv[1:4]
inner = batch_reaching.reaching_builder(knots=%d, dt=0.05)

def build(param):
    index, target = param
    open(os.path.join(count_dir, f"{index}-{uuid.uuid4().hex}"), "w").close()
    time.sleep(0.3)
    return inner(target)

params = list(enumerate(batch_reaching.sample_targets(8, seed=4)))
with Client(address) as client:
    solve_batch(build, params, client=client, store=store, max_iter=50)
""" % KNOTS


def test_a_killed_run_resumes_from_its_store(client, build, tmp_path):
    store, count_dir = tmp_path / "store", tmp_path / "builds"
    count_dir.mkdir()
    run = subprocess.Popen([sys.executable, "-c", KILLED_RUN, client.scheduler.address,
                            str(store), str(count_dir)], stderr=subprocess.DEVNULL)
    items = store / "items"

    def stored():
        names = os.listdir(items) if items.is_dir() else []
        return sorted(int(name[:6]) for name in names if name.endswith(".npz"))

    deadline = time.monotonic() + BATCH_TIMEOUT
    while time.monotonic() < deadline and len(stored()) < 3:
        time.sleep(0.05)
    run.kill()                                        # SIGKILL: no clean-up in the client
    run.wait(60)
    stored = stored()
    assert 3 <= len(stored) < 8
    builds_before = CountingBuild(build, str(count_dir)).counts()
    params = list(enumerate(batch_reaching.sample_targets(8, seed=4)))
    counting = CountingBuild(build, str(count_dir))
    result = solve_batch(counting, params, client=client, store=store, timeout=BATCH_TIMEOUT,
                         max_iter=50)
    builds_after = counting.counts()
    assert list(np.flatnonzero(result.loaded)) == stored
    for b in stored:                                  # what the killed run wrote is kept
        assert builds_after.count(b) == builds_before.count(b)
    for b in set(range(8)) - set(stored):
        assert builds_after.count(b) > builds_before.count(b)
    assert_equal_to_sequential(result, sequential(build, [t for _, t in params], max_iter=50))


def test_batch_timeout_reports_unfinished_items(client, build, targets, tmp_path):
    slow = CountingBuild(build, str(tmp_path), delay=2.0)
    result = solve_batch(slow, list(enumerate(targets[:4])), client=client, timeout=0.5,
                         store=tmp_path / "store", **OPTIONS)
    assert all(error[0] == "TimeoutError" for error in result.errors)
    assert os.listdir(tmp_path / "store" / "items") == []


def test_embedded_cluster_by_default(build, targets):
    result = solve_batch(build, targets[:2], timeout=BATCH_TIMEOUT, **OPTIONS)
    assert_equal_to_sequential(result, sequential(build, targets[:2], **OPTIONS))


def test_bad_arguments_are_named(build, targets):
    with pytest.raises(ValueError, match="solver"):
        solve_batch(build, targets, solver="ilqr")
    with pytest.raises(TypeError, match="solve_options"):
        solve_batch(build, targets, max_iters=3)
    with pytest.raises(TypeError, match="build"):
        solve_batch("ur5", targets)
    with pytest.raises(TypeError, match="params"):
        solve_batch(build, iter(targets))
    with pytest.raises(ValueError, match="timeout"):
        solve_batch(build, targets, timeout=0)
    with pytest.raises(ValueError, match="chunk_size"):
        solve_batch(build, targets, chunk_size=0)
    with pytest.raises(TypeError, match="client"):
        solve_batch(build, targets, client="tcp://127.0.0.1:8786")


def test_batch_example(client, tmp_path, capsys):
    targets, result = batch_reaching.main(n=4, out=str(tmp_path), client=client, knots=10,
                                          dt=0.05, max_iter=50)
    assert result.errors == [None] * 4 and result.converged.sum() >= 3
    model = gp.robots.load("ur5").model
    for b, target in enumerate(targets):
        start, end = gp.solvers.plots.end_effector_path(result.xs[b][[0, -1]], model, "tool0")
        assert np.linalg.norm(end - target) < 0.1 * np.linalg.norm(start - target)
    printed = capsys.readouterr().out
    for name in ("batch_reaching.png", "reaching_dataset_n4.npz", "store_n4_knots10"):
        assert os.path.join(str(tmp_path), name) in printed
    assert os.path.getsize(tmp_path / "batch_reaching.png") > 10000
    with np.load(tmp_path / "reaching_dataset_n4.npz") as data:
        np.testing.assert_array_equal(data["costs"], result.costs)
