"""Derivatives of inverse (dID = d RNEA) and forward (dFD = d ABA) dynamics, four ways.

    python -m geppetto.benchmarks.compare [--robots ur5 solo12 talos] [--samples 100]
                                          [--methods ...] [--out DIR]

For each robot and each of dID, dFD, the harness of
:mod:`geppetto.dynamics.derivative_check` computes the three partials
(d/dq in the tangent space, d/dv, d/d(a or tau)) on the same seeded random
states with

    analytical       Numba (Carpentier & Mansard, RSS 2018)
    central          central finite differences on the manifold, Numba
    forward          forward finite differences on the manifold, Numba
    casadi_ad        CasADi AD of the CasADi twin, SX virtual machine
    casadi_codegen   the same Function as C, gcc -O3 (-O1 above 50k instructions)

and reports, per method, microseconds per state (the CPU time of the thread
for one call on the whole stack, divided by the number of states: the Python
border is crossed once per stack for every method), its ratio to the fastest,
the largest error over the states against the analytical result (the
analytical row: against CasADi AD), and the setup time (Numba compile or
cache load, building the SX graph, compiling the C; the C libraries are
cached, so a second run loads them).  One thread (the script restarts itself
with NUMBA_NUM_THREADS=1).

Writes ``compare.json``, ``compare.md``, ``compare_time.png`` and
``compare_error.png`` into ``results/`` beside this file.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common
from geppetto.dynamics import derivative_check

ROBOTS = ("ur5", "solo12", "talos")
LABELS = {"rnea": "dID", "aba": "dFD"}


def compiler_version():
    from geppetto.dynamics import symbolic
    compiler = symbolic.find_compiler()
    if compiler is None:
        return "none"
    finished = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                              check=False)
    return finished.stdout.splitlines()[0] if finished.stdout else compiler


def run(robots, samples, methods):
    """{robot: {"rnea"/"aba": DerivativeCheck}}."""
    results = {}
    for name in robots:
        robot = gp.robots.load(name)
        results[name] = {}
        for function in LABELS:
            result = derivative_check.check_derivatives(robot, function, samples, methods)
            print(result.table(), "\n", flush=True)
            results[name][function] = result
    return results


def markdown(results):
    """One markdown table: robot, function, then per method the time and the max errors."""
    lines = ["| robot | nv | | method | us / state | x fastest | max abs error | "
             "max rel error | setup s |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for name, by_function in results.items():
        for function, result in by_function.items():
            fastest = min(r.seconds_per_evaluation for r in result.ran())
            for r in result.methods.values():
                if r.skipped is not None:
                    lines.append(f"| {name} | {result.nv} | {LABELS[function]} | {r.method} | "
                                 f"skipped: {r.skipped} | | | | |")
                    continue
                lines.append(
                    f"| {name} | {result.nv} | {LABELS[function]} | {r.method} | "
                    f"{r.seconds_per_evaluation * 1e6:.1f} | "
                    f"{r.seconds_per_evaluation / fastest:.1f} | {r.max_abs:.1e} | "
                    f"{r.max_rel:.1e} | {r.setup_seconds:.1f} |")
    return "\n".join(lines)


def summary(results):
    """Which method is fastest for each robot and function, and by how much."""
    lines = []
    for name, by_function in results.items():
        for function, result in by_function.items():
            times = {r.method: r.seconds_per_evaluation for r in result.ran()}
            method, speedup = result.fastest()
            others = ", ".join(f"{other} {times[other] / times[method]:.1f}x"
                               for other in sorted(times, key=times.get) if other != method)
            lines.append(f"- {name} {LABELS[function]}: fastest is {method} "
                         f"({times[method] * 1e6:.1f} us/state); slower by: {others}.")
    return "\n".join(lines)


def charts(results, methods, out, machine_line):
    robots = list(results)
    panels = [LABELS[f] for f in LABELS]

    def series(value):
        return {m: np.array([[value(results[r][f].methods[m]) for r in robots]
                             for f in LABELS]) for m in methods}

    def time_of(r):
        return np.nan if r.skipped else r.seconds_per_evaluation * 1e6

    def error_of(r):
        return np.nan if r.skipped else max(r.max_rel, 1e-17)

    _common.grouped_bar_chart(os.path.join(out, "compare_time.png"), panels, robots,
                              series(time_of), f"Derivatives four ways: time per state\n"
                              f"{machine_line}", "microseconds per state (log)")
    _common.grouped_bar_chart(os.path.join(out, "compare_error.png"), panels, robots,
                              series(error_of), "Derivatives four ways: largest relative "
                              "error (analytical: against CasADi AD; others: against "
                              "analytical)", "max relative error (log)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS))
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--methods", nargs="+", choices=derivative_check.METHODS,
                        default=list(derivative_check.METHODS))
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    options = parser.parse_args(argv)
    _common.run_single_threaded("geppetto.benchmarks.compare")
    import casadi
    info = _common.machine(casadi=casadi.__version__, compiler=compiler_version())
    machine_line = _common.describe_machine(info)
    print(f"Machine: {machine_line}\n", flush=True)
    results = run(options.robots, options.samples, options.methods)
    methods = ["analytical"] + [m for m in derivative_check.METHODS
                                if m in options.methods and m != "analytical"]
    table, verdict = markdown(results), summary(results)
    print(table, "\n", verdict, sep="\n")
    with open(os.path.join(_ensure(options.out), "compare.md"), "w") as out:
        out.write(f"Machine: {machine_line}\n\n{table}\n\n{verdict}\n")
    _common.write_json(os.path.join(options.out, "compare.json"), dict(
        machine=info, samples=options.samples, results={
            name: {LABELS[f]: {m: dict(seconds_per_state=r.seconds_per_evaluation,
                                       max_abs=None if r.skipped else r.max_abs,
                                       max_rel=None if r.skipped else r.max_rel,
                                       median_rel=None if r.skipped else r.median_rel,
                                       reference=r.reference, setup_seconds=r.setup_seconds,
                                       note=r.note, skipped=r.skipped)
                               for m, r in result.methods.items()}
                   for f, result in by_function.items()}
            for name, by_function in results.items()}))
    charts(results, methods, options.out, machine_line)
    print(f"\nwrote compare.md, compare.json, compare_time.png, compare_error.png "
          f"into {options.out}")
    return 0


def _ensure(folder):
    os.makedirs(folder, exist_ok=True)
    return folder


if __name__ == "__main__":
    sys.exit(main())
