"""Per-call time of rnea, aba, crba and compute_minverse, beside Pinocchio.

    python -m geppetto.benchmarks.dynamics [--robots ur5 panda ...] [--functions crba ...]
                                           [--repeats 3] [--rounds 7] [--clock cpu|wall]
                                           [--no-latency] [--out DIR]

One thread (the script restarts itself with NUMBA_NUM_THREADS=1), K = 1000
random states drawn once per robot (seeded), every function called once to
compile before anything is timed.  Microseconds per call of the thread's
CPU time (``--clock wall`` for wall-clock time; see ``_common.CLOCKS``), the
best of the repeats (the JSON also keeps the median):

(a) batch    one public call on the stack of K states, divided by K.  The
             checks at the API border (shapes, finiteness, quaternion norms)
             are included, spread over the K states.
(b) in-jit   a jitted loop calls the kernel that the public function calls,
             with the same arguments sliced to one state (a stack of one),
             K times: the cost of one call from compiled code, the kernel's
             scratch allocation included and no Python.
(c) python   one state per public call, from a Python loop over the K states;
             beside it Pinocchio's Python call (``pin.rnea``, ``pin.aba``,
             ``pin.crba``, ``pin.computeMinverse``) over the same states in
             the same kind of loop, repeats interleaved with ours, and the
             ratios ours / Pinocchio.
C++          Pinocchio's C++ (g++ -O3 -DNDEBUG against the pin wheel's headers,
             see pinocchio_cpp.py) on the same K states in the same run, one
             state per call, on the same clock, its checksums checked against
             Pinocchio's Python.  Ours (a) and the C++ alternate in ``--rounds``
             rounds of ``--repeats`` repeats each; (a)/C++ is the median over the
             rounds of the ratio of the two bests of a round, printed with its
             range.  The target: (a) <= Pinocchio's C++ time per call.  Left
             empty, with the reason printed, where no compiler or headers are there.

             Why rounds: a single C++ run lasts tens of milliseconds, and on the
             2-core machine shared with other jobs the same binary on the same
             states gives 1.22 or 1.89 us per state for solo12's crba from one
             process to the next (computeMinverse 3.27 or 4.36 in the same two
             processes: both slower together, with or without address-space
             randomization, load 6), so a ratio of two separate runs jumped by
             up to 1.5x; alternating short rounds pairs each C++ time with ours
             taken within a second of it.

``pin.crba`` and ``pin.computeMinverse`` fill the upper triangle only; ours
return the full symmetric matrix.  The largest difference from Pinocchio over
the states is reported beside the times, as a check that both computed the
same thing.

First-call latency: in a fresh interpreter, the first call of each function
(ur5, one state; the kernels do not depend on the robot) with an empty
NUMBA_CACHE_DIR (compile), then again with the cache that run filled (load),
in wall-clock and CPU seconds.

Writes ``results/dynamics.json`` and ``results/dynamics.png`` beside this file.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common, pinocchio_cpp

FUNCTIONS = ("rnea", "aba", "crba", "compute_minverse")
ROBOTS = ("ur5", "panda", "solo12", "hyq", "talos")
# Floating-base robots of example-robot-data the kernels were not tuned on, on request
MORE_ROBOTS = ("bolt", "anymal", "go1")
K = 1000
STATISTIC = "best"  # of the repeats, shown in the table and the chart

# The kernel each public function calls (see _common.capture_kernel_call).
KERNELS = {"rnea": "_rnea", "aba": "_aba", "crba": "_crba",
           "compute_minverse": "_compute_minverse"}

# Pinocchio's C++ function timed by pinocchio_cpp for each of ours
CPP_FUNCTIONS = {"rnea": "rnea", "aba": "aba", "crba": "crba",
                 "compute_minverse": "computeMinverse"}

SHORT = {"rnea": "rnea", "aba": "aba", "crba": "crba", "compute_minverse": "minv"}

LATENCY_SCRIPT = """
import json, sys, time
start = time.perf_counter()
import numpy as np
import geppetto as gp
imported = time.perf_counter()
robot = gp.robots.load("ur5")
model = robot.model; data = model.create_data()
q, zero = robot.q0, np.zeros(model.nv)
calls = {"rnea": lambda: gp.dynamics.rnea(model, data, q, zero, zero),
         "aba": lambda: gp.dynamics.aba(model, data, q, zero, zero),
         "crba": lambda: gp.dynamics.crba(model, data, q),
         "compute_minverse": lambda: gp.dynamics.compute_minverse(model, data, q)}
first, first_cpu = time.perf_counter(), time.process_time()
calls[sys.argv[1]]()
done, done_cpu = time.perf_counter(), time.process_time()
calls[sys.argv[1]]()
print(json.dumps({"import_s": imported - start, "first_call_s": done - first,
                  "first_call_cpu_s": done_cpu - first_cpu,
                  "second_call_s": time.perf_counter() - done}))
"""


def ours(model, data, function, q, v, a):
    """Our public call; ``a`` is the acceleration for rnea, the torque for aba."""
    if function == "rnea":
        return gp.dynamics.rnea(model, data, q, v, a)
    if function == "aba":
        return gp.dynamics.aba(model, data, q, v, a)
    if function == "crba":
        return gp.dynamics.crba(model, data, q)
    return gp.dynamics.compute_minverse(model, data, q)


def pinocchio_call(pin, pin_model, pin_data, function):
    """Pinocchio's Python call for ``function``, as f(q, v, a)."""
    if function == "rnea":
        return lambda q, v, a: pin.rnea(pin_model, pin_data, q, v, a)
    if function == "aba":
        return lambda q, v, a: pin.aba(pin_model, pin_data, q, v, a)
    if function == "crba":
        return lambda q, v, a: pin.crba(pin_model, pin_data, q)
    return lambda q, v, a: pin.computeMinverse(pin_model, pin_data, q)


def pinocchio_model(pin, robot):
    """The same model in Pinocchio: the robot's URDF with the same root joint."""
    free_flyer = robot.model.joint_types[1] == gp.dynamics.FREE_FLYER
    if free_flyer:
        return pin.buildModelFromUrdf(robot.urdf_path, pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(robot.urdf_path)


def largest_difference(model, function, states, pin_function):
    """max |ours - Pinocchio| over the first 20 states (upper triangle of matrices)."""
    worst = 0.0
    data = model.create_data()
    for q, v, a in states[:20]:
        mine = ours(model, data, function, q, v, a)
        theirs = np.array(pin_function(q, v, a))
        if mine.ndim == 2:
            mine, theirs = np.triu(mine), np.triu(theirs)
        worst = max(worst, float(np.max(np.abs(mine - theirs))))
    return worst


def _bounded(limit, replacement):
    """Position limits with the URDF free flyer's +-DBL_MAX replaced, as
    example-robot-data's loaders do (translation within [-1, 1])."""
    return np.where(np.abs(limit) > 1e10, replacement, limit)


def random_states(model, rng):
    """K random (q, v, a): q within the position limits (free flyer translation in
    [-1, 1]), v and a standard normal."""
    Q = gp.dynamics.random_configuration(model, rng, size=K, lower=_bounded(
        model.lower_position_limit, -1.0), upper=_bounded(model.upper_position_limit, 1.0))
    V = rng.standard_normal((K, model.nv))
    A = rng.standard_normal((K, model.nv))
    return Q, V, A


def benchmark_robot(name, timing, pin, rng, cpp=False, functions=FUNCTIONS):
    """All timings for one robot: a list of dicts, one per function."""
    robot = gp.robots.load(name)
    model = robot.model
    # jit_loop slices the arrays whose first axis has length K: no model size may be K
    assert K not in (model.nq, model.nv, model.njoints, model.nframes), name
    Q, V, A = random_states(model, rng)
    stack = (Q, V, A)
    states = [(Q[k].copy(), V[k].copy(), A[k].copy()) for k in range(K)]
    pin_side = None
    if pin is not None:
        pin_model = pinocchio_model(pin, robot)
        assert (pin_model.nq, pin_model.nv) == (model.nq, model.nv), name
        pin_side = (pin, pin_model, pin_model.createData())
    rows = []
    for function in functions:
        row = dict(robot=name, nq=model.nq, nv=model.nv, function=function)
        row.update(benchmark_function(model, function, stack, states, pin_side, timing,
                                      cpp and pin_side is not None))
        rows.append(row)
        print(f"  {name:7s} {function:17s} done", file=sys.stderr, flush=True)
    return rows


def benchmark_function(model, function, stack, states, pin_side, timing, cpp=False):
    """(a), (b) and (c) for one function, in microseconds per call, and with ``cpp``
    Pinocchio's C++ in rounds alternating with (a).

    ``timing`` = (repeats, clock, rounds): ``repeats`` for
    :func:`_common.time_side_by_side`, in each of ``rounds`` rounds for (a)."""
    repeats, clock, rounds = timing
    timing = (repeats * rounds, clock)  # for (b) and (c)
    # (a) one public call on the stack of K states, alternating with the C++
    data = model.create_data()
    ours(model, data, function, *stack)
    batch, cpp = _alternating_rounds(
        lambda: ours(model, data, function, *stack), function, stack,
        pin_side[:2] if cpp else None, (repeats, clock), rounds)
    # (b) the kernel the public function calls, from compiled code, one state per call
    arguments = stack if function in ("rnea", "aba") else stack[:1]
    kernel, kernel_args = _common.capture_kernel_call(
        getattr(gp.dynamics, function), KERNELS[function], model, data, *arguments)
    loop = _common.jit_loop(kernel, kernel_args, K)
    loop(K)
    in_jit = _common.time_per_call(lambda: loop(K), K, *timing)
    # (c) one state per public call from Python, ours and Pinocchio's interleaved
    single = model.create_data()
    calls = {"ours": lambda q, v, a: ours(model, single, function, q, v, a)}
    if pin_side is not None:
        calls["pin"] = pinocchio_call(*pin_side, function)
    runs = {label: _python_loop(call, states) for label, call in calls.items()}
    for run in runs.values():
        run()
    python = _common.time_side_by_side(runs, K, *timing)
    return dict(batch_us=batch, in_jit_us=_micro(in_jit), **cpp,
                python_us=_micro(python["ours"]),
                pin_python_us=_micro(python["pin"]) if pin_side else None,
                max_abs_diff_vs_pin=(largest_difference(model, function, states, calls["pin"])
                                     if pin_side else None))


def _alternating_rounds(run, function, stack, pin_cpp, timing, rounds):
    """(a) in microseconds per state (best and median of every repeat of every round)
    and, with ``pin_cpp`` = (pin, pin_model), Pinocchio's C++ on the same states in
    rounds alternating with it: ``cpp_us`` (best, median), ``batch_over_cpp`` (the
    median, min and max over the rounds of the ratio of the two bests of a round) and
    the C++ checksum's relative difference from Pinocchio's Python."""
    Q, V, A = stack
    ours_rounds, cpp_rounds, cpp_repeats, checksum = [], [], [], None
    for _ in range(rounds):
        timed = _common.time_runs({"run": run}, K, timing[0])["run"]
        prefix = {"cpu": "cpu_", "wall": ""}[timing[1]]
        ours_rounds.append((timed[prefix + "best"] * 1e6, timed[prefix + "median"] * 1e6))
        if pin_cpp is None:
            continue
        pin, pin_model = pin_cpp
        cpp_name = CPP_FUNCTIONS[function]  # a is the torque of aba
        measured = pinocchio_cpp.time_cpp(pin_model, Q, V, A, A, (cpp_name,), *timing)
        if checksum is None:
            checksum = pinocchio_cpp.check(pin, pin_model, Q, V, A, A, measured)
        cpp_rounds.append(measured[cpp_name]["best"])
        cpp_repeats += measured[cpp_name]["us"]
    best = [b for b, _ in ours_rounds]
    batch = dict(best=min(best), median=float(np.median([m for _, m in ours_rounds])),
                 rounds=best)
    extra = dict(cpp_us=None, batch_over_cpp=None, cpp_checksum_rel_diff=checksum)
    if cpp_rounds:
        ratios = [b / c for b, c in zip(best, cpp_rounds)]
        extra.update(cpp_us=dict(best=min(cpp_rounds), median=float(np.median(cpp_repeats)),
                                 rounds=cpp_rounds),
                     batch_over_cpp=dict(median=float(np.median(ratios)), min=min(ratios),
                                         max=max(ratios)))
    return batch, extra


def _python_loop(call, states):
    def run():
        for q, v, a in states:
            call(q, v, a)
    return run


def _micro(timing):
    return dict(best=timing.best * 1e6, median=timing.median * 1e6)


def first_call_latencies():
    """{function: {compile: ..., load: ...}} seconds, each in fresh interpreters."""
    latencies = {}
    for function in FUNCTIONS:
        with tempfile.TemporaryDirectory(prefix="geppetto-numba-cache-") as cache:
            compiled = _common.first_call_latency(LATENCY_SCRIPT, cache, function)
            loaded = _common.first_call_latency(LATENCY_SCRIPT, cache, function)
        latencies[function] = dict(compile_s=compiled["first_call_s"],
                                   compile_cpu_s=compiled["first_call_cpu_s"],
                                   load_s=loaded["first_call_s"],
                                   load_cpu_s=loaded["first_call_cpu_s"],
                                   import_s=loaded["import_s"])
        print(f"  first call of {function}: compile {compiled['first_call_s']:.1f} s, "
              f"load {loaded['first_call_s']:.2f} s", file=sys.stderr, flush=True)
    return latencies


def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(numerator, denominator):
    return None if numerator is None or denominator is None else numerator / denominator


def timing_table(rows):
    headers = ["robot", "nv", "function", "(a) batch", "(b) in-jit", "(c) python",
               "pin python", "(a)/pin", "(c)/pin", "C++", "(a)/C++", "max|diff|"]
    lines = []
    for row in rows:
        a, b, c = (row[key][STATISTIC] for key in ("batch_us", "in_jit_us", "python_us"))
        pin_python = row["pin_python_us"][STATISTIC] if row["pin_python_us"] else None
        cpp = row["cpp_us"][STATISTIC] if row["cpp_us"] else None
        over = row.get("batch_over_cpp")
        diff = row["max_abs_diff_vs_pin"]
        lines.append([row["robot"], row["nv"], SHORT[row["function"]], _fmt(a), _fmt(b),
                      _fmt(c), _fmt(pin_python), _fmt(_ratio(a, pin_python)),
                      _fmt(_ratio(c, pin_python)), _fmt(cpp),
                      "-" if over is None else
                      f"{over['median']:.2f} [{over['min']:.2f}, {over['max']:.2f}]",
                      "-" if diff is None else f"{diff:.0e}"])
    return _common.format_table(headers, lines)


def latency_table(latencies):
    headers = ["function", "empty cache (compile): wall s", "cpu s",
               "warm cache (load): wall s", "cpu s"]
    lines = [[f, f"{latencies[f]['compile_s']:.1f}", f"{latencies[f]['compile_cpu_s']:.1f}",
              f"{latencies[f]['load_s']:.2f}", f"{latencies[f]['load_cpu_s']:.2f}"]
             for f in FUNCTIONS]
    import_s = np.median([latencies[f]["import_s"] for f in FUNCTIONS])
    return (_common.format_table(headers, lines)
            + f"\n(import geppetto with a warm cache: {import_s:.2f} s)")


def chart(path, rows, robots, machine_line, clock):
    functions = [f for f in FUNCTIONS if any(row["function"] == f for row in rows)]

    def values(extract):
        out = np.full((len(functions), len(robots)), np.nan)
        for row in rows:
            value = extract(row)
            if value is not None:
                out[functions.index(row["function"]), robots.index(row["robot"])] = value
        return out

    series = {
        "geppetto (a) batch of 1000, per state": values(lambda r: r["batch_us"][STATISTIC]),
        "geppetto (b) in a jitted loop": values(lambda r: r["in_jit_us"][STATISTIC]),
        "geppetto (c) one state from Python": values(lambda r: r["python_us"][STATISTIC]),
        "Pinocchio, Python call": values(
            lambda r: r["pin_python_us"][STATISTIC] if r["pin_python_us"] else None),
        "Pinocchio C++ (same run)": values(
            lambda r: r["cpp_us"][STATISTIC] if r["cpp_us"] else None),
    }
    _common.grouped_bar_chart(path, functions, list(robots), series,
                              f"Time per call ({clock} time, best of the repeats, one "
                              f"thread; lower is better)\n{machine_line}",
                              "microseconds per call (log)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS), choices=ROBOTS + MORE_ROBOTS)
    parser.add_argument("--functions", nargs="+", default=list(FUNCTIONS), choices=FUNCTIONS)
    parser.add_argument("--repeats", type=int, default=3,
                        help="repeats per round (of (a) and of the C++)")
    parser.add_argument("--rounds", type=int, default=7,
                        help="rounds of (a) alternating with Pinocchio's C++")
    parser.add_argument("--clock", choices=sorted(_common.CLOCKS), default="cpu",
                        help="cpu: the thread's CPU time (default), wall: wall-clock time")
    parser.add_argument("--no-latency", action="store_true",
                        help="skip the first-call latency (8 fresh interpreters, minutes)")
    parser.add_argument("--out", default=_common.RESULTS_DIR,
                        help="folder for dynamics.json and dynamics.png")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)
    _common.run_single_threaded("geppetto.benchmarks.dynamics")
    pin, info, cpp_skipped = _common.beside_pinocchio()
    machine_line = _common.describe_machine(info)
    rng = np.random.default_rng(options.seed)
    rows = []
    for name in options.robots:
        rows += benchmark_robot(name, (options.repeats, options.clock, options.rounds), pin, rng,
                                cpp=cpp_skipped is None, functions=options.functions)
    print(f"\nMicroseconds per call ({options.clock} time), best of {options.rounds} rounds "
          f"of {options.repeats} repeats ((a)/C++: the median over the rounds of the "
          f"ratio of the round's bests [range]), K = {K} random states per robot (load average "
          f"{os.getloadavg()[0]:.1f} at the end)")
    print(timing_table(rows))
    latencies = None
    if not options.no_latency:
        print("\nmeasuring first-call latency in fresh interpreters...", file=sys.stderr)
        latencies = first_call_latencies()
        print("\nFirst call of each function (ur5, one state, fresh interpreter)")
        print(latency_table(latencies))
    json_path = os.path.join(options.out, "dynamics.json")
    png_path = os.path.join(options.out, "dynamics.png")
    _common.write_json(json_path, dict(machine=info,
                                       load_average_1min_at_end=os.getloadavg()[0],
                                       states_per_robot=K,
                                       repeats=options.repeats, rounds=options.rounds,
                                       seed=options.seed,
                                       unit="microseconds per call",
                                       clock=options.clock, timings=rows,
                                       cpp_flags=" ".join(pinocchio_cpp.FLAGS),
                                       cpp_skipped=cpp_skipped,
                                       first_call=latencies))
    chart(png_path, rows, options.robots, machine_line, options.clock)
    print(f"\nwrote {json_path} and {png_path}")


if __name__ == "__main__":
    main()
