"""Throughput of solve_batch on the UR5 reaching batch, beside a plain loop.

    python -m geppetto.benchmarks.batch [--n 40] [--knots 100] [--rounds 3] [--out DIR]
    python -m geppetto.benchmarks.batch --latency [--knots 100]

The batch: ``--n`` reaching targets of :mod:`geppetto.examples.batch_reaching`
(FDDP, ``--knots`` knots of 10 ms, quasi-static guess, max_iter 100).  Four
ways to solve it, their rounds interleaved so that each sees the same share
of whatever else runs on the machine:

- ``loop``: ``FDDP(build(target)).solve()`` for every target in this process;
- ``dask 1 worker`` and ``dask 2 workers``: :func:`solve_batch` on a
  LocalCluster of 1 and 2 single-threaded worker processes, started (and
  warmed by a first batch) before the rounds; their start-up is reported
  separately;
- ``dask 2 workers, chunks of 10``: the same with ``chunk_size=10`` (10
  items per Dask task);
- the per-item overhead of Dask: (batch wall time - the loop's) / n on one
  worker.

Solves per second are n / wall time, the best of the rounds, and the median.
CPU ms per item: the CPU time of this process (the client and the
scheduler) and of the worker processes during the batch, divided by n, the
least of the rounds; on a shared machine it is the steadier figure (time
the other jobs take from the workers does not count).  In-task CPU ms per
item: the CPU time of build + solve inside the tasks (the loop: its CPU
time per item); the difference is Dask's own work (scheduling, transfers,
the workers' periodic callbacks).  On a machine shared with other users'
sessions the kernel's autogroup scheduling gives each session one share of
the cores, however many processes it runs, so 2 workers cannot beat 1 there;
the table then also gives what the CPU times predict for idle cores: w
workers solve min(w / worker CPU per item, 1 / client+scheduler CPU per
item) items a second.

Batched in one process with the kernels' batch axis (many problems' knots in
one stack): the upper bound of what it could gain is measured on the
calc_diff of the reaching problem: one problem of ``k * knots`` knots against
``k`` calls on problems of ``knots`` knots, per knot.  The riccati and the
line search are sequential per problem and would not gain.

``--latency`` (instead): a worker's first solve in a fresh LocalCluster of
1 worker, with an empty Numba cache (``NUMBA_CACHE_DIR`` a new folder:
everything compiles) and again with the cache that run filled (everything
loads); minutes of CPU for the cold run.

Writes ``results/batch.json`` (``--latency``: ``results/batch_latency.json``)
beside this file.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from geppetto.benchmarks import _common

MAX_ITER = 100
CHUNK = 10

LATENCY_SCRIPT = """
import json, sys, time
start = time.perf_counter()
from distributed import Client
import geppetto as gp
from geppetto.examples import batch_reaching
from geppetto.solvers.batch import local_cluster
cluster = local_cluster(1)
client = Client(cluster)
up = time.perf_counter() - start
build = batch_reaching.reaching_builder(knots=int(sys.argv[1]), dt=0.01)
targets = batch_reaching.sample_targets(2, seed=1)
first = gp.solvers.solve_batch(build, targets[:1], client=client, max_iter=100)
second = gp.solvers.solve_batch(build, targets[1:], client=client, max_iter=100)
client.close()
cluster.close()
print(json.dumps(dict(cluster_start=up, first_batch_wall=first.wall_time,
                      first_solve=first.solve_times[0], first_solve_cpu=first.cpu_times[0],
                      second_solve=second.solve_times[0])))
"""


def local_client(n_workers):
    """(client, cluster, seconds to start them)."""
    from distributed import Client
    from geppetto.solvers.batch import local_cluster
    start = time.perf_counter()
    cluster = local_cluster(n_workers)
    client = Client(cluster)
    client.wait_for_workers(n_workers)
    return client, cluster, time.perf_counter() - start


def process_cpu():
    """CPU seconds (user + system) this process has used, all its threads."""
    times = os.times()
    return times.user + times.system


def throughput(build, targets, rounds):
    """Per configuration and round, interleaved: the wall seconds and the CPU
    seconds (this process, which hosts the scheduler, plus the worker
    processes) of the batch, and the CPU seconds per item inside the tasks
    (build + solve); the first batch of each cluster (warm Numba
    cache, cold worker); the largest relative cost difference to the loop."""
    import geppetto as gp
    clients = {f"dask {w} worker{'s' if w > 1 else ''}": local_client(w) for w in (1, 2)}
    runs = {label: (client, 1) for label, (client, _, _) in clients.items()}
    runs[f"dask 2 workers, chunks of {CHUNK}"] = (clients["dask 2 workers"][0], CHUNK)
    first = {}
    for label, (client, _, started) in clients.items():
        warm = gp.solvers.solve_batch(build, targets[:2], client=client, max_iter=MAX_ITER)
        first[label] = dict(cluster_start=started, first_batch_wall=warm.wall_time,
                            first_item_solve=float(np.max(warm.solve_times)))
    gp.solvers.FDDP(build(targets[0])).solve(max_iter=MAX_ITER)       # this process warm
    walls = {label: [] for label in ["loop", *runs]}
    cpus = {label: [] for label in walls}
    worker_cpus = {label: [] for label in walls}
    task_cpus = {label: [] for label in walls}
    costs = {}
    for _ in range(rounds):
        cpu, start = process_cpu(), time.perf_counter()
        results = [gp.solvers.FDDP(build(t)).solve(max_iter=MAX_ITER) for t in targets]
        walls["loop"].append(time.perf_counter() - start)
        cpus["loop"].append(process_cpu() - cpu)
        worker_cpus["loop"].append(cpus["loop"][-1])
        task_cpus["loop"].append(cpus["loop"][-1] / len(targets))
        costs["loop"] = np.array([r.cost for r in results])
        for label, (client, chunk_size) in runs.items():
            cpu, workers_cpu = process_cpu(), sum(client.run(process_cpu).values())
            result = gp.solvers.solve_batch(build, targets, client=client, max_iter=MAX_ITER,
                                            chunk_size=chunk_size)
            walls[label].append(result.wall_time)
            worker_cpus[label].append(sum(client.run(process_cpu).values()) - workers_cpu)
            cpus[label].append(process_cpu() - cpu + worker_cpus[label][-1])
            task_cpus[label].append(float(np.mean(result.cpu_times)))
            costs[label] = result.costs
    for client, cluster, _ in clients.values():
        client.close()
        cluster.close()
    agree = {label: float(np.max(np.abs(c - costs["loop"]) / np.abs(costs["loop"])))
             for label, c in costs.items()}
    return walls, dict(total=cpus, workers=worker_cpus, task=task_cpus), first, agree


def solve_split(knots):
    """Fractions of one FDDP solve of the reaching problem (``knots`` knots of
    10 ms) spent in calc_diff, the backward and the forward pass."""
    import geppetto as gp
    from geppetto.examples import batch_reaching
    problem = batch_reaching.reaching_builder(knots, 0.01)(np.array([0.4, 0.2, 0.4]))
    gp.solvers.FDDP(problem).solve(max_iter=MAX_ITER)
    start = time.perf_counter()
    result = gp.solvers.FDDP(problem).solve(max_iter=MAX_ITER)
    total = time.perf_counter() - start
    return dict(solve_s=total, iterations=result.iterations,
                **{key: float(np.sum(result.history[f"time_{key}"])) / total
                   for key in ("calc_diff", "backward", "forward")})


def stacked_calc_diff(knots, stacks, repeats):
    """Seconds per knot of calc_diff: one problem of ``k * knots`` knots for k in
    ``stacks`` (k = 1: one problem, called k times for the batch)."""
    import geppetto as gp
    from geppetto.examples.reaching import reaching_problem
    robot = gp.robots.load("ur5")
    per_knot = {}
    for k in stacks:
        problem, _ = reaching_problem(robot.model, "tool0", np.array([0.4, 0.2, 0.4]),
                                      robot.q0, knots=k * knots)
        xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
        us = problem.quasi_static(xs)
        problem.calc_diff(xs, us)
        timing = _common.time_per_call(lambda: problem.calc_diff(xs, us), 1, repeats)
        per_knot[k] = timing.best / (k * knots)
    return per_knot


def first_solve_latency(knots):
    """A worker's first solve with an empty Numba cache, then with the filled one."""
    with tempfile.TemporaryDirectory() as cache_dir:
        environment = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        runs = {}
        for label in ("cold cache", "warm cache"):
            finished = subprocess.run([sys.executable, "-c", LATENCY_SCRIPT, str(knots)],
                                      env=environment, capture_output=True, text=True)
            if finished.returncode != 0:
                raise RuntimeError(f"latency run failed:\n{finished.stderr}")
            runs[label] = json.loads(finished.stdout.strip().splitlines()[-1])
    return runs


def report_throughput(options, info):
    """The throughput table, the clusters' first batch; a dict for the JSON."""
    from geppetto.examples import batch_reaching
    build = batch_reaching.reaching_builder(knots=options.knots, dt=0.01)
    targets = batch_reaching.sample_targets(options.n, seed=2)
    walls, cpu, first, agree = throughput(build, targets, options.rounds)
    cpus, worker_cpus, task_cpus = cpu["total"], cpu["workers"], cpu["task"]
    rows, table = [], {}
    loop_best = min(walls["loop"])
    for label, seconds in walls.items():
        best, median = min(seconds), statistics.median(seconds)
        cpu_item, task_cpu = min(cpus[label]) / options.n, min(task_cpus[label])
        worker_cpu = min(worker_cpus[label]) / options.n
        table[label] = dict(walls=seconds, cpu_seconds=cpus[label],
                            worker_cpu_seconds=worker_cpus[label],
                            worker_cpu_seconds_per_item=worker_cpu,
                            task_cpu_seconds_per_item=task_cpus[label],
                            solves_per_second_best=options.n / best,
                            solves_per_second_median=options.n / median,
                            cpu_seconds_per_item=cpu_item,
                            max_relative_cost_difference_to_loop=agree[label])
        rows.append([label, f"{options.n / best:.1f}", f"{options.n / median:.1f}",
                     f"{loop_best / best:.2f}", f"{cpu_item * 1e3:.1f}", f"{worker_cpu * 1e3:.1f}",
                     f"{task_cpu * 1e3:.1f}",
                     f"{agree[label]:.1e}"])
    print(f"\nUR5 reaching, {options.n} targets, {options.knots} knots, FDDP; "
          f"best and median of {options.rounds} interleaved rounds; load average at the "
          f"start {info['load_average_1min']:.1f}, at the end {os.getloadavg()[0]:.1f}")
    print(_common.format_table(["", "solves/s best", "solves/s median", "vs loop",
                                "CPU ms/item", "workers", "in tasks", "cost diff"], rows))
    two_over_one = min(walls["dask 1 worker"]) / min(walls["dask 2 workers"])
    # on idle cores: each worker solves 1 / (its CPU per item) items a second, and
    # the client + scheduler process, one core, serves 1 / (its CPU per item)
    one = table["dask 1 worker"]
    client_cpu = one["cpu_seconds_per_item"] - one["worker_cpu_seconds_per_item"]
    idle_model = {w: min(w / one["worker_cpu_seconds_per_item"], 1 / client_cpu) for w in (1, 2)}
    overhead = (min(walls["dask 1 worker"]) - loop_best) / options.n
    cpu_overhead = (min(cpus["dask 1 worker"]) - min(cpus["loop"])) / options.n
    print(f"2 workers / 1 worker: {two_over_one:.2f}x; Dask overhead per item on 1 worker: "
          f"{overhead * 1e3:.2f} ms wall, {cpu_overhead * 1e3:.2f} ms CPU")
    print(f"CPU-bound model for idle cores (1 worker's CPU per item: workers "
          f"{one['worker_cpu_seconds_per_item'] * 1e3:.1f} ms, client + scheduler "
          f"{client_cpu * 1e3:.1f} ms): 1 worker {idle_model[1]:.1f}, 2 workers "
          f"{idle_model[2]:.1f} solves/s")
    for label, values in first.items():
        print(f"{label}: cluster start {values['cluster_start']:.2f} s, first batch "
              f"{values['first_batch_wall']:.2f} s (slowest first solve "
              f"{values['first_item_solve']:.2f} s)")
    return dict(n=options.n, knots=options.knots, rounds=options.rounds, throughput=table,
                two_workers_over_one=two_over_one, dask_overhead_per_item_s=overhead,
                dask_cpu_overhead_per_item_s=cpu_overhead, cluster_first_batch=first,
                idle_cores_model_solves_per_second={str(w): v for w, v in idle_model.items()},
                load_average_end=os.getloadavg()[0])


def report_stacking(options):
    """calc_diff per knot of stacked problems and the calc_diff share of a solve."""
    stacks = (1, 4, 16)
    small = {knots: stacked_calc_diff(knots, stacks, 20) for knots in (10, options.knots)}
    split = {knots: solve_split(knots) for knots in (10, options.knots)}
    print("\ncalc_diff per knot with k problems' knots in one stack (us), and the share "
          "of one solve in calc_diff:")
    for knots, per_knot in small.items():
        print(f"  {knots:4d} knots: " + ", ".join(f"k={k} {t * 1e6:.2f}"
                                                   for k, t in per_knot.items())
              + f"; solve {split[knots]['solve_s'] * 1e3:.1f} ms, calc_diff "
                f"{split[knots]['calc_diff']:.0%}, backward {split[knots]['backward']:.0%}, "
                f"forward {split[knots]['forward']:.0%}")
    return dict(solve_split=split,
                stacked_calc_diff_per_knot_s={str(k): {str(s): t for s, t in v.items()}
                                              for k, v in small.items()})


def report_latency(options):
    """A worker's first solve, cold and warm Numba cache."""
    latency = first_solve_latency(options.knots)
    for label, values in latency.items():
        print(f"worker first solve, {label}: {values['first_solve']:.2f} s wall "
              f"({values['first_solve_cpu']:.2f} s CPU), cluster start "
              f"{values['cluster_start']:.2f} s, second solve "
              f"{values['second_solve'] * 1e3:.1f} ms")
    return dict(knots=options.knots, first_solve_latency=latency,
                load_average_end=os.getloadavg()[0])


def main():
    _common.run_single_threaded("geppetto.benchmarks.batch")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=40, help="targets per batch")
    parser.add_argument("--knots", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", action="store_true",
                        help="only a worker's first solve with a cold and a warm Numba cache "
                             "(results/batch_latency.json)")
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    options = parser.parse_args()
    import distributed

    info = _common.machine(distributed=distributed.__version__)
    print(_common.describe_machine(info))
    if options.latency:
        payload, name = report_latency(options), "batch_latency.json"
    else:
        payload, name = report_throughput(options, info), "batch.json"
        payload.update(report_stacking(options))
    path = os.path.join(options.out, name)
    _common.write_json(path, dict(machine=info, **payload))
    print("wrote", path)


if __name__ == "__main__":
    main()
