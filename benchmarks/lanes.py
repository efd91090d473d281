"""Stacks laid out across SIMD lanes (dynamics/batch_lanes.py, derivative_lanes.py) beside the stack
kernels and Pinocchio's C++, in the same run.

    python -m geppetto.benchmarks.lanes [--robots ur5 panda ...] [--rounds 5]
                                        [--repeats 5] [--clock cpu|wall] [--no-compile]
                                        [--fresh-pages] [--out DIR]

One thread (the script restarts itself with NUMBA_NUM_THREADS=1), K = 1000
random states per robot (seeded, as benchmarks/dynamics.py draws them),
microseconds per state:

stack    ``rnea(model, data, Q, V, A)``: the stack kernel, one state per
         iteration (the public call on the (K, nq) stack, checks included);
batch    ``rnea_batch(model, Q, V, A)``: the lanes kernels on the same (K, nq)
         stacks, transposed tile by tile inside the kernel (checks included);
lanes    ``rnea_lanes(model, Q.T, V.T, A.T)``: the lanes layout (nq, K) given
         directly;
C++      Pinocchio's C++ on the same states, one state per call
         (benchmarks/pinocchio_cpp.py, g++ -O3, its checksums checked against
         Pinocchio's Python).
The same for ``aba``, ``crba``, ``minv`` (``compute_minverse``, ``compute_minverse_batch``,
``compute_minverse_lanes``), ``d_rnea`` (``rnea_derivatives``, ...) and ``d_aba``
(``aba_derivatives``, ...: the batch and lanes functions also return ddq).  Each round
times ours (the eighteen runs, repeats interleaved) and then the C++ harness (the same
repeats); a round's figure is the best of its repeats; the table gives the median over
the rounds of each time and of each ratio to C++, with the ratios' range over the rounds.

Freed memory is kept: the script restarts itself with glibc's
MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_ at 4 GB, so that a call's
outputs reuse the memory the previous calls freed, as in a process that calls
the same functions in a loop (and as the C++ harness, which rewrites one Data).
Without it (``--fresh-pages``), the eighteen calls of a round, interleaved,
leave glibc returning freed memory to the system, and the next call's outputs
are fresh pages that the kernel zeroes on first touch: talos, where each (nv,
nv) output holds 11.5 MB for 1000 states, measured 3-10 us more per state for
M^-1 and the derivatives (stack and lanes alike), which is the operating
system's cost, not the kernels'.

Compile and assembly: in a fresh interpreter with an empty NUMBA_CACHE_DIR, the
first call of each ``*_batch`` function on ur5 (in this order: the later ones reuse
kernels the earlier ones compiled) (compile seconds, wall and thread CPU), then
the compiled assembly of each hot kernel (``dispatcher.inspect_asm``, which works
only on code compiled in that process): the packed double arithmetic
(v{add,sub,mul,div,fmadd...}pd) on zmm / ymm / xmm registers against the scalar
(...sd) instructions.  The counts are static: each vectorized loop keeps a scalar
copy that runs when LLVM's run-time alias check fails, so scalar instructions
remain in the binary beside the packed ones.

Writes ``results/lanes.json`` beside this file.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common, pinocchio_cpp
from geppetto.benchmarks.dynamics import K, pinocchio_model, random_states

ROBOTS = ("ur5", "panda", "solo12", "talos")
FUNCTIONS = ("rnea", "aba", "crba", "minv", "d_rnea", "d_aba")
CPP_FUNCTIONS = {"rnea": "rnea", "aba": "aba", "crba": "crba", "minv": "computeMinverse",
                 "d_rnea": "computeRNEADerivatives", "d_aba": "computeABADerivatives"}
HOT_KERNELS = ("_rnea_forward_pass_lanes", "_rnea_backward_pass_lanes", "placement_lanes",
               "_aba_forward_pass_1_lanes", "_articulated_projection_lanes",
               "_articulated_inertia_lanes", "_hand_to_parent_lanes",
               "_aba_forward_pass_2_lanes", "_add_congruence_lanes",
               "_crba_forward_pass_lanes", "_crba_backward_pass_lanes",
               "_velocities_lanes", "_projection_lanes", "_hand_to_parent_world_lanes",
               "_aba_forward_world_lanes", "_minverse_backward_lanes", "_minverse_forward_lanes",
               "_ltl_factor_lanes", "_ltl_inverse_lanes", "_ltl_products_lanes",
               "_derivative_columns_lanes", "_supported_rows_lanes",
               "_supporting_columns_lanes", "_rnea_derivatives_backward_lanes",
               "_negative_products_lanes")

COMPILE_SCRIPT = """
import json, re, sys, time
import numpy as np
import geppetto as gp
from geppetto.dynamics import batch_lanes, derivative_lanes, lane_tiles
robot = gp.robots.load("ur5")
model = robot.model
rng = np.random.default_rng(0)
Q = gp.dynamics.random_configuration(model, rng, size=40)
V = rng.standard_normal((40, model.nv))
out = {}
for name in ("rnea_batch", "aba_batch", "crba_batch", "compute_minverse_batch",
             "rnea_derivatives_batch", "aba_derivatives_batch"):
    start, start_cpu = time.perf_counter(), time.thread_time()
    if name in ("crba_batch", "compute_minverse_batch"):
        getattr(gp.dynamics, name)(model, Q)
    else:
        getattr(gp.dynamics, name)(model, Q, V, V)
    out[name + "_first_call_cpu_s"] = time.thread_time() - start_cpu
    out[name + "_first_call_s"] = time.perf_counter() - start
if sys.argv[1] == "asm":
    packed = re.compile(r"\\bv(?:fn?m(?:add|sub)\\d+|mul|add|sub|div)pd\\s+[^\\n]*?%(zmm|ymm|xmm)")
    scalar = re.compile(r"\\bv(?:fn?m(?:add|sub)\\d+|mul|add|sub|div)sd\\b")
    asm = {}
    for kernel in sys.argv[2:]:
        dispatcher = (getattr(batch_lanes, kernel, None) or getattr(derivative_lanes, kernel, None)
                      or getattr(lane_tiles, kernel))
        text = "\\n".join(dispatcher.inspect_asm(s) for s in dispatcher.signatures)
        counts = {"zmm": 0, "ymm": 0, "xmm": 0}
        for match in packed.finditer(text):
            counts[match.group(1)] += 1
        counts["scalar_sd"] = len(scalar.findall(text))
        counts["specializations"] = len(dispatcher.signatures)
        asm[kernel] = counts
    out["asm"] = asm
print(json.dumps(out))
"""


def runs_for(model, data, Q, V, A, TAU):
    """{(function, variant): run} for the six timed calls."""
    QT, VT, AT, TT = (np.ascontiguousarray(x.T) for x in (Q, V, A, TAU))
    d = gp.dynamics
    return {("rnea", "stack"): lambda: d.rnea(model, data, Q, V, A),
            ("rnea", "batch"): lambda: d.rnea_batch(model, Q, V, A),
            ("rnea", "lanes"): lambda: d.rnea_lanes(model, QT, VT, AT),
            ("aba", "stack"): lambda: d.aba(model, data, Q, V, TAU),
            ("aba", "batch"): lambda: d.aba_batch(model, Q, V, TAU),
            ("aba", "lanes"): lambda: d.aba_lanes(model, QT, VT, TT),
            ("crba", "stack"): lambda: d.crba(model, data, Q),
            ("crba", "batch"): lambda: d.crba_batch(model, Q),
            ("crba", "lanes"): lambda: d.crba_lanes(model, QT),
            ("minv", "stack"): lambda: d.compute_minverse(model, data, Q),
            ("minv", "batch"): lambda: d.compute_minverse_batch(model, Q),
            ("minv", "lanes"): lambda: d.compute_minverse_lanes(model, QT),
            ("d_rnea", "stack"): lambda: d.rnea_derivatives(model, data, Q, V, A),
            ("d_rnea", "batch"): lambda: d.rnea_derivatives_batch(model, Q, V, A),
            ("d_rnea", "lanes"): lambda: d.rnea_derivatives_lanes(model, QT, VT, AT),
            ("d_aba", "stack"): lambda: d.aba_derivatives(model, data, Q, V, TAU),
            ("d_aba", "batch"): lambda: d.aba_derivatives_batch(model, Q, V, TAU),
            ("d_aba", "lanes"): lambda: d.aba_derivatives_lanes(model, QT, VT, TT)}


def largest_relative_difference(pin, pin_model, model, Q, V, A, TAU, states=20):
    """max |ours - Pinocchio| / max(1, |Pinocchio|) over the first states, per function
    (the upper triangle of M, which Pinocchio fills)."""
    pd = pin_model.createData()
    tau = gp.dynamics.rnea_batch(model, Q[:states], V[:states], A[:states])
    ddq = gp.dynamics.aba_batch(model, Q[:states], V[:states], TAU[:states])
    M = gp.dynamics.crba_batch(model, Q[:states])
    Minv = gp.dynamics.compute_minverse_batch(model, Q[:states])
    dq, dv, _ = gp.dynamics.rnea_derivatives_batch(model, Q[:states], V[:states], A[:states])
    _, ddq_dq, ddq_dv, _ = gp.dynamics.aba_derivatives_batch(model, Q[:states], V[:states],
                                                             TAU[:states])
    worst = dict.fromkeys(FUNCTIONS, 0.0)
    for k in range(states):
        pin_dq, pin_dv, _ = (x.copy() for x in pin.computeRNEADerivatives(
            pin_model, pd, Q[k], V[k], A[k]))
        pin_ddq_dq, pin_ddq_dv, _ = (x.copy() for x in pin.computeABADerivatives(
            pin_model, pd, Q[k], V[k], TAU[k]))
        for function, ours, theirs in (
                ("rnea", tau[k], pin.rnea(pin_model, pd, Q[k], V[k], A[k])),
                ("aba", ddq[k], pin.aba(pin_model, pd, Q[k], V[k], TAU[k])),
                ("crba", np.triu(M[k]), np.triu(pin.crba(pin_model, pd, Q[k]))),
                ("minv", np.triu(Minv[k]), np.triu(pin.computeMinverse(pin_model, pd, Q[k]))),
                ("d_rnea", np.hstack([dq[k], dv[k]]), np.hstack([pin_dq, pin_dv])),
                ("d_aba", np.hstack([ddq_dq[k], ddq_dv[k]]),
                 np.hstack([pin_ddq_dq, pin_ddq_dv]))):
            scale = max(1.0, float(np.max(np.abs(theirs))))
            worst[function] = max(worst[function], float(np.max(np.abs(ours - theirs))) / scale)
    return worst


def benchmark_robot(name, rounds, repeats, clock, pin, cpp_reason, rng):
    """Rows (one per function) for one robot."""
    robot = gp.robots.load(name)
    model = robot.model
    Q, V, A = random_states(model, rng)
    TAU = rng.standard_normal(V.shape)
    runs = runs_for(model, model.create_data(), Q, V, A, TAU)
    for run in runs.values():
        run()
    pin_model = pinocchio_model(pin, robot) if pin is not None else None
    labelled = {f"{f}/{v}": run for (f, v), run in runs.items()}
    ours = {key: [] for key in runs}
    cpp = {function: [] for function in FUNCTIONS}
    checksum = None
    for _ in range(rounds):
        timed = _common.time_side_by_side(labelled, K, repeats, clock)
        for (function, variant) in runs:
            ours[(function, variant)].append(timed[f"{function}/{variant}"].best * 1e6)
        if cpp_reason is None:
            measured = pinocchio_cpp.time_cpp(pin_model, Q, V, A, TAU,
                                              tuple(CPP_FUNCTIONS.values()), repeats, clock)
            if checksum is None:
                checksum = pinocchio_cpp.check(pin, pin_model, Q, V, A, TAU, measured)
            for function in FUNCTIONS:
                cpp[function].append(measured[CPP_FUNCTIONS[function]]["best"])
    difference = (largest_relative_difference(pin, pin_model, model, Q, V, A, TAU)
                  if pin is not None else dict.fromkeys(FUNCTIONS))
    rows = []
    for function in FUNCTIONS:
        row = dict(robot=name, nq=model.nq, nv=model.nv, function=function,
                   max_rel_diff_vs_pin=difference[function], cpp_checksum_rel_diff=checksum)
        for variant in ("stack", "batch", "lanes"):
            times = ours[(function, variant)]
            row[f"{variant}_us"] = statistics.median(times)
            row[f"{variant}_us_rounds"] = times
            if cpp[function]:
                ratios = [t / c for t, c in zip(times, cpp[function])]
                row[f"{variant}_over_cpp"] = dict(median=statistics.median(ratios),
                                                  min=min(ratios), max=max(ratios))
        row["cpp_us"] = statistics.median(cpp[function]) if cpp[function] else None
        row["cpp_us_rounds"] = cpp[function]
        rows.append(row)
    return rows


def compile_and_assembly():
    """First-call compile seconds (empty cache) and the hot kernels' instruction counts."""
    with tempfile.TemporaryDirectory(prefix="geppetto-lanes-") as cache:
        compiled = _common.first_call_latency(COMPILE_SCRIPT, cache, "asm", *HOT_KERNELS)
        loaded = _common.first_call_latency(COMPILE_SCRIPT, cache, "load")
    return dict(compile_s={k[:-len("_first_call_s")]: v for k, v in compiled.items()
                           if k.endswith("_first_call_s")},
                compile_cpu_s={k[:-len("_first_call_cpu_s")]: v for k, v in compiled.items()
                               if k.endswith("_first_call_cpu_s")},
                cached_first_call_s={k[:-len("_first_call_s")]: v for k, v in loaded.items()
                                     if k.endswith("_first_call_s")},
                asm=compiled["asm"])


def _ratio(row, variant):
    ratio = row.get(f"{variant}_over_cpp")
    if ratio is None:
        return "-"
    return f"{ratio['median']:.2f} [{ratio['min']:.2f}, {ratio['max']:.2f}]"


def timing_table(rows):
    headers = ("robot", "function", "stack", "batch", "lanes", "C++", "stack/C++",
               "batch/C++", "lanes/C++", "max rel diff")
    body = [(r["robot"], r["function"], f"{r['stack_us']:.2f}", f"{r['batch_us']:.2f}",
             f"{r['lanes_us']:.2f}", "-" if r["cpp_us"] is None else f"{r['cpp_us']:.2f}",
             _ratio(r, "stack"), _ratio(r, "batch"), _ratio(r, "lanes"),
             "-" if r["max_rel_diff_vs_pin"] is None else f"{r['max_rel_diff_vs_pin']:.0e}")
            for r in rows]
    return _common.format_table(headers, body)


def assembly_table(asm):
    headers = ("kernel", "zmm pd", "ymm pd", "xmm pd", "scalar sd")
    body = [(kernel, c["zmm"], c["ymm"], c["xmm"], c["scalar_sd"]) for kernel, c in asm.items()]
    return _common.format_table(headers, body)


KEEP_FREED_MEMORY = {"MALLOC_TRIM_THRESHOLD_": "4000000000",
                     "MALLOC_MMAP_THRESHOLD_": "4000000000"}


def keep_freed_memory():
    """Start this benchmark again with :data:`KEEP_FREED_MEMORY` in the environment
    (glibc reads it at start) unless it is there or ``--fresh-pages`` is given."""
    if "--fresh-pages" in sys.argv[1:] or all(os.environ.get(k) == v
                                              for k, v in KEEP_FREED_MEMORY.items()):
        return
    environment = dict(os.environ, **KEEP_FREED_MEMORY)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "geppetto.benchmarks.lanes", *sys.argv[1:]],
              environment)


def main(argv=None):
    if argv is None:
        keep_freed_memory()
    _common.run_single_threaded("geppetto.benchmarks.lanes")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=sorted(_common.CLOCKS), default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the compile-time and assembly subprocesses")
    parser.add_argument("--fresh-pages", action="store_true",
                        help="let glibc return freed memory to the system (outputs on fresh "
                             "pages, zeroed by the kernel on first touch)")
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    options = parser.parse_args(argv)
    freed_memory_kept = all(os.environ.get(k) == v for k, v in KEEP_FREED_MEMORY.items())
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    cpp_reason = pinocchio_cpp.unavailable() if pin is not None else "Pinocchio is not installed"
    if cpp_reason:
        print(f"C++ columns left empty: {cpp_reason}")
    info = _common.machine(pinocchio=getattr(pin, "__version__", None),
                           tile=gp.dynamics.lane_tiles.TILE,
                           freed_memory_kept=freed_memory_kept)
    print(_common.describe_machine(info))
    rng = np.random.default_rng(options.seed)
    rows = []
    for name in options.robots:
        rows += benchmark_robot(name, options.rounds, options.repeats, options.clock, pin,
                                cpp_reason, rng)
        print(f"  {name} done", file=sys.stderr, flush=True)
    print(f"\nMicroseconds per state, K = {K}, 1 thread, {options.clock} time; best of "
          f"{options.repeats} repeats per round, median of {options.rounds} rounds "
          "(ratios: median [min, max] over the rounds)")
    print(timing_table(rows))
    payload = dict(machine=info, K=K, rounds=options.rounds, repeats=options.repeats,
                   clock=options.clock, cpp_unavailable=cpp_reason, rows=rows,
                   load_average_end=os.getloadavg()[0])
    path = os.path.join(options.out, "lanes.json")
    _common.write_json(path, payload)  # the timings are kept if the compile run fails
    if not options.no_compile:
        payload.update(compile_and_assembly())
        print("\nFirst call on ur5 with an empty cache (compile, wall s): "
              + ", ".join(f"{k} {v:.1f}" for k, v in payload["compile_s"].items())
              + "; thread CPU s: "
              + ", ".join(f"{k} {v:.1f}" for k, v in payload["compile_cpu_s"].items())
              + "; from the cache: "
              + ", ".join(f"{k} {v:.2f}" for k, v in payload["cached_first_call_s"].items()))
        print("\nPacked (pd) and scalar (sd) double arithmetic in the compiled hot kernels:")
        print(assembly_table(payload["asm"]))
    print(f"\nload average at the end {payload['load_average_end']:.1f}")
    _common.write_json(path, payload)


if __name__ == "__main__":
    main()
