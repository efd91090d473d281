"""First-call (compile) latency of the main entry points, and which kernels cost it.

    python -m geppetto.benchmarks.compile [--isolated | --main-job] [--out DIR]

Every measurement runs in a fresh interpreter whose ``NUMBA_CACHE_DIR`` is a
new temporary folder, so nothing compiled before (by the tests, by another
engineer) is reused:

1. *cold*: one interpreter imports geppetto and calls, in this order, rnea,
   aba, crba, compute_minverse, rnea_derivatives, aba_derivatives (solo12,
   one state), constraint_dynamics and constraint_dynamics_derivatives
   (solo12, the four feet in 3D contact), then the Panda reaching problem of
   ``examples/reaching.py`` (100 knots, explicit Euler): its first
   ``calc_diff`` and one FDDP solve.  Each entry point's first call is timed
   (CPU and wall); it includes only what the entry points before it did not
   compile already.  Numba's event API (``numba:compile``) records every
   dispatcher compiled meanwhile: its own time (its callees' compiles
   subtracted; helpers inlined with ``inline='always'`` are not dispatchers
   and count in their callers) and its number of signatures.
2. *warm*: the same sequence again in a fresh interpreter on the cache the
   cold run filled: what every later run of a script pays to load it.
3. ``--isolated``: each entry point alone in its own interpreter with its own
   empty cache, what a user who calls only that one pays.
4. ``--main-job``: instead of the entry points above, the stages of ``python
   -m geppetto`` (``MAIN_JOB_STAGES`` of geppetto/__main__.py: the robot and
   the quasi-static guess, calc_costs, FDDP's line-search trial, a rollout, calc_diff,
   two FDDP iterations on the reduced problem, the kinematics of the plots, then the
   full job writing its files), cold and warm, one after the other in one process;
   then ``python -m geppetto`` itself as a user runs it (cold: a second process
   compiles the derivatives meanwhile, ``HELPER_STAGES``), cold and warm, wall and
   CPU of both processes; writes ``compile_main_job.{json,png}``.

Prints the tables, writes ``results/compile.json`` and ``results/compile.png``
(the costliest dispatchers) under ``--out`` (default: this folder).  The
machine, with its load average, is recorded: compile time is CPU-bound, so
the CPU seconds are the figures to compare on a shared machine.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from geppetto.benchmarks import _common

ENTRY_POINTS = ("rnea", "aba", "crba", "compute_minverse", "rnea_derivatives",
                "aba_derivatives", "constraint_dynamics", "constraint_dynamics_derivatives",
                "reaching_calc_diff", "reaching_fddp_solve")
TOP = 30

WORKER = r'''
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
import numba
from numba.core import event
import geppetto as gp
from geppetto.examples.reaching import reaching_problem
import_s, import_cpu_s = time.perf_counter() - t0, time.process_time() - c0
FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


def setups():
    """{entry point: a function of no argument that makes its first call}."""
    dyn = gp.dynamics
    solo = gp.robots.load("solo12").model
    rng = np.random.default_rng(0)
    q = dyn.neutral(solo)
    v, a = rng.standard_normal(solo.nv), rng.standard_normal(solo.nv)
    data = solo.create_data()
    feet = dyn.ConstraintSet(solo, [dyn.contact_3d(solo, f, Kd=2.0) for f in FEET])
    panda = gp.robots.load("panda")
    problem, _ = reaching_problem(panda.model, "panda_hand", np.array([0.5, 0.3, 0.4]), panda.q0)
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    us = np.zeros((problem.N, problem.nu))
    return dict(
        rnea=lambda: dyn.rnea(solo, data, q, v, a),
        aba=lambda: dyn.aba(solo, data, q, v, a),
        crba=lambda: dyn.crba(solo, data, q),
        compute_minverse=lambda: dyn.compute_minverse(solo, data, q),
        rnea_derivatives=lambda: dyn.rnea_derivatives(solo, data, q, v, a),
        aba_derivatives=lambda: dyn.aba_derivatives(solo, data, q, v, a),
        constraint_dynamics=lambda: dyn.constraint_dynamics(solo, data, q, v, a, feet),
        constraint_dynamics_derivatives=lambda: dyn.constraint_dynamics_derivatives(
            solo, data, q, v, a, feet),
        reaching_calc_diff=lambda: problem.calc_diff(xs, us),
        reaching_fddp_solve=lambda: gp.solvers.FDDP(problem).solve(max_iter=100))


def measure(calls):
    """Call each of ``calls`` ({entry: call}) in order, timing it and recording
    what Numba compiles meanwhile; print the JSON the parent reads."""
    rows, compiles = [], []
    for name, call in calls.items():
        with event.install_recorder("numba:compile") as recorder:
            t, c = time.perf_counter(), time.process_time()
            call()
            wall, cpu = time.perf_counter() - t, time.process_time() - c
        rows.append(dict(entry=name, wall_s=wall, cpu_s=cpu))
        compiles.extend(dict(c, entry=name) for c in _compiles(recorder.buffer))
    print(json.dumps(dict(import_s=import_s, import_cpu_s=import_cpu_s, rows=rows,
                          compiles=compiles)))


def main(names):
    if names == ["main-job"]:
        calls = main_job()
    else:
        everything = setups()
        calls = {name: everything[name] for name in names}
    measure(calls)


def main_job():
    """{stage: call}: the stages of ``python -m geppetto`` (geppetto/__main__.py),
    the last one the full job writing its files into a temporary folder."""
    import contextlib, io, tempfile
    from geppetto.__main__ import MAIN_JOB_STAGES, main_job_warm_up
    from geppetto.examples import panda_reaching

    def full_job():
        with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
            panda_reaching.main(out=out)

    return dict(main_job_warm_up() + [(MAIN_JOB_STAGES[-1], full_job)])


def _compiles(buffer):
    """One dict per dispatcher compile: name, signature, total and own seconds."""
    done, stack = [], []
    for stamp, ev in buffer:
        if ev.is_start:
            stack.append(dict(start=stamp, children=0.0, data=ev.data))
        else:
            top = stack.pop()
            total = stamp - top["start"]
            if stack:
                stack[-1]["children"] += total
            d = top["data"]["dispatcher"]
            done.append(dict(name=f"{d.py_func.__module__}.{d.py_func.__qualname__}",
                             signature=str(top["data"]["args"]), total_s=total,
                             self_s=total - top["children"]))
    return done


main(sys.argv[1:])
'''


def run_worker(cache_dir, names):
    """The worker's JSON, plus its CPU seconds (user + system) from getrusage."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    environment = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    finished = subprocess.run([sys.executable, "-c", WORKER, *names], env=environment,
                              capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(f"compile worker failed:\n{finished.stderr}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = wall
    result["process_cpu_s"] = (after.ru_utime - before.ru_utime
                               + after.ru_stime - before.ru_stime)
    return result


def run_command(cache_dir):
    """Wall and CPU seconds (its helper process included) of ``python -m geppetto``
    on the Numba cache ``cache_dir``, writing into a temporary folder."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="geppetto-demo-") as out:
        finished = subprocess.run([sys.executable, "-m", "geppetto", "--out", out],
                                  env=dict(os.environ, NUMBA_CACHE_DIR=cache_dir),
                                  capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(f"python -m geppetto failed:\n{finished.stderr}")
    return dict(wall_s=wall, cpu_s=after.ru_utime - before.ru_utime
                + after.ru_stime - before.ru_stime, output=finished.stdout)


def by_dispatcher(compiles):
    """[(name, own seconds, signatures)] costliest first."""
    table = {}
    for c in compiles:
        seconds, signatures = table.get(c["name"], (0.0, set()))
        signatures.add(c["signature"])
        table[c["name"]] = (seconds + c["self_s"], signatures)
    rows = [dict(name=name, self_s=s, signatures=len(sigs), signature_list=sorted(sigs))
            for name, (s, sigs) in table.items()]
    return sorted(rows, key=lambda r: -r["self_s"])


def measure(isolated, main_job=False):
    results = dict(machine=_common.machine(), main_job=main_job)
    names = ["main-job"] if main_job else ENTRY_POINTS
    with tempfile.TemporaryDirectory(prefix="geppetto-compile-") as cache:
        print("cold run (empty Numba cache) ...", file=sys.stderr, flush=True)
        results["cold"] = run_worker(cache, names)
        print("warm run (the cache the cold run filled) ...", file=sys.stderr, flush=True)
        results["warm"] = run_worker(cache, names)
    if main_job:
        with tempfile.TemporaryDirectory(prefix="geppetto-compile-") as cache:
            results["command"] = {}
            for run in ("cold", "warm"):
                print(f"python -m geppetto, {run} ...", file=sys.stderr, flush=True)
                results["command"][run] = run_command(cache)
    results["dispatchers"] = by_dispatcher(results["cold"]["compiles"])
    if isolated:
        results["isolated"] = {}
        singles = [n for n in ENTRY_POINTS if n != "reaching_fddp_solve"]
        for name in singles:
            names = [name, "reaching_fddp_solve"] if name == "reaching_calc_diff" else [name]
            with tempfile.TemporaryDirectory(prefix="geppetto-compile-") as cache:
                print(f"isolated {name} ...", file=sys.stderr, flush=True)
                run = run_worker(cache, names)
            results["isolated"][name] = dict(rows=run["rows"], process_cpu_s=run["process_cpu_s"],
                                             process_wall_s=run["process_wall_s"])
    results["machine"]["load_average_1min_after"] = os.getloadavg()[0]
    return results


def report(results):
    cold, warm = results["cold"], results["warm"]
    rows = [["import geppetto", f"{cold['import_cpu_s']:.2f}", f"{cold['import_s']:.2f}",
             f"{warm['import_cpu_s']:.2f}", f"{warm['import_s']:.2f}", "", ""]]
    for c_row, w_row in zip(cold["rows"], warm["rows"]):
        own = [c for c in cold["compiles"] if c["entry"] == c_row["entry"]]
        rows.append([c_row["entry"], f"{c_row['cpu_s']:.2f}", f"{c_row['wall_s']:.2f}",
                     f"{w_row['cpu_s']:.3f}", f"{w_row['wall_s']:.3f}", len(own),
                     f"{sum(c['self_s'] for c in own):.2f}"])
    rows.append(["whole process", f"{cold['process_cpu_s']:.1f}",
                 f"{cold['process_wall_s']:.1f}", f"{warm['process_cpu_s']:.2f}",
                 f"{warm['process_wall_s']:.2f}", len(cold["compiles"]),
                 f"{sum(c['self_s'] for c in cold['compiles']):.1f}"])
    print(f"machine: {_common.describe_machine(results['machine'])}, load average after "
          f"{results['machine']['load_average_1min_after']:.1f}")
    print("\nfirst call, in sequence, seconds (cold: empty cache; warm: loaded from the cache)")
    print(_common.format_table(["entry point", "cold cpu", "cold wall", "warm cpu", "warm wall",
                                "compiles", "compile s"], rows))
    if "command" in results:
        command = results["command"]
        print("\npython -m geppetto as a user runs it (a second process compiles the "
              "derivatives on a cold cache), seconds:")
        print(_common.format_table(["cache", "wall", "cpu (both processes)"],
                                   [[run, f"{command[run]['wall_s']:.1f}",
                                     f"{command[run]['cpu_s']:.1f}"] for run in command]))
    print(f"\nthe {TOP} costliest dispatchers (own compile seconds, callees' compiles excluded)")
    print(_common.format_table(
        ["dispatcher", "seconds", "signatures"],
        [[d["name"].replace("geppetto.", ""), f"{d['self_s']:.2f}", d["signatures"]]
         for d in results["dispatchers"][:TOP]]))
    if "isolated" in results:
        print("\neach entry point alone, empty cache, seconds (process: import included)")
        print(_common.format_table(
            ["entry point", "first call cpu", "first call wall", "process cpu"],
            [[name, f"{r['rows'][0]['cpu_s']:.2f}", f"{r['rows'][0]['wall_s']:.2f}",
              f"{r['process_cpu_s']:.1f}"] for name, r in results["isolated"].items()]))


def chart(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = results["dispatchers"][:TOP][::-1]
    figure, axis = plt.subplots(figsize=(9, 0.3 * len(top) + 1.5))
    axis.barh([f"{d['name'].replace('geppetto.', '')} ({d['signatures']})" for d in top],
              [d["self_s"] for d in top])
    axis.set_xlabel("own compile time, s (wall, empty cache)")
    axis.set_title(f"geppetto: costliest Numba compiles (signatures in brackets)\n"
                   f"{_common.describe_machine(results['machine'])}", fontsize=8)
    axis.tick_params(axis="y", labelsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--isolated", action="store_true",
                        help="also each entry point alone in a fresh interpreter (slow)")
    parser.add_argument("--main-job", action="store_true",
                        help="time the stages of `python -m geppetto` instead (the main job: "
                             "Panda reaching, its kernels compiled on a small problem first)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args(argv)
    results = measure(args.isolated and not args.main_job, args.main_job)
    report(results)
    name = "compile_main_job" if args.main_job else "compile"
    _common.write_json(os.path.join(args.out, f"{name}.json"), results)
    chart(results, os.path.join(args.out, f"{name}.png"))
    print(f"\nwrote {os.path.join(args.out, name + '.json')} and {name}.png")


if __name__ == "__main__":
    main()
