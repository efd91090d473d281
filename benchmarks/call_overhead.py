"""What a one-state call from Python costs beyond its kernel.

    python -m geppetto.benchmarks.call_overhead [--robots ur5 talos] [--states 200]
                                                [--repeats 9] [--functions ...] [--out DIR]

For each robot and public function (rnea, aba, crba, compute_minverse,
rnea_derivatives, aba_derivatives, forward_kinematics with v and a,
frame_jacobian of the last frame in LOCAL_WORLD_ALIGNED, center_of_mass,
integrate), one thread, CPU time of the thread, ``--states`` random states
(seeded), in microseconds per call:

- kernel   the kernel the public function calls, from a jitted loop, one state
           per call (:func:`._common.jit_loop`): no Python, no checks;
- python   the public function called from a Python loop, one state (vectors
           (nq,), (nv,)) per call;
- overhead python - kernel: what the public function adds: for one state as
           float64 vectors, one compiled call (dynamics/one_state.py: the checks of
           the inputs and the kernel by its address, the Data's arrays as one
           DataRef, the model as one ModelRef), the Python around it and the copy of
           the result.

The two are timed in interleaved blocks (:func:`._common.time_side_by_side`);
the medians of the repeats are reported.  The target (issue 15): overhead
under 5 us.  Writes ``results/call_overhead.json`` beside this file.
"""
import argparse
import os
import sys

import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common

# public function -> (its kernel, its arguments from (model, data, q, v, u))
FUNCTIONS = {
    "rnea": ("_rnea", lambda m, d, q, v, u: (m, d, q, v, u)),
    "aba": ("_aba", lambda m, d, q, v, u: (m, d, q, v, u)),
    "crba": ("_crba", lambda m, d, q, v, u: (m, d, q)),
    "compute_minverse": ("_compute_minverse", lambda m, d, q, v, u: (m, d, q)),
    "rnea_derivatives": ("_rnea_derivatives", lambda m, d, q, v, u: (m, d, q, v, u)),
    "aba_derivatives": ("_aba_derivatives", lambda m, d, q, v, u: (m, d, q, v, u)),
    "forward_kinematics": ("_forward_kinematics", lambda m, d, q, v, u: (m, d, q, v, u)),
    "frame_jacobian": ("_frame_jacobian", lambda m, d, q, v, u: (
        m, d, q, m.nframes - 1, gp.dynamics.LOCAL_WORLD_ALIGNED)),
    "center_of_mass": ("_center_of_mass", lambda m, d, q, v, u: (m, d, q)),
    "integrate": ("_integrate", lambda m, d, q, v, u: (m, q, v)),
}


def benchmark_robot(name, states, repeats, functions):
    """One row per function: {robot, function, kernel_us, python_us, overhead_us}."""
    model = gp.robots.load(name).model
    rng = np.random.default_rng(0)
    inputs = [(gp.dynamics.random_configuration(model, rng), rng.standard_normal(model.nv),
               rng.standard_normal(model.nv)) for _ in range(states)]
    rows = []
    for function in functions:
        kernel_name, arguments_of = FUNCTIONS[function]
        public = getattr(gp.dynamics, function)
        data = model.create_data()
        arguments = [arguments_of(model, data, *x) for x in inputs]
        # the kernel's arguments for a stack of one (one state as vectors goes through
        # dynamics/one_state.py's trampoline, which calls the kernel by its address)
        q, v, u = inputs[0]
        kernel, kernel_args = _common.capture_kernel_call(
            public, kernel_name, *arguments_of(model, data, q[None], v[None], u[None]))
        loop = _common.jit_loop(kernel, kernel_args, 1)
        loop(1)

        def python():
            for x in arguments:
                public(*x)

        python()
        timing = _common.time_side_by_side({"kernel": lambda: loop(states), "python": python},
                                           states, repeats)
        kernel_us, python_us = timing["kernel"].median * 1e6, timing["python"].median * 1e6
        rows.append(dict(robot=name, function=function, kernel_us=kernel_us,
                         python_us=python_us, overhead_us=python_us - kernel_us))
        print(f"  {name:6s} {function:18s} kernel {kernel_us:6.2f}  python {python_us:6.2f}  "
              f"overhead {python_us - kernel_us:5.2f} us", file=sys.stderr, flush=True)
    return rows


def main(argv=None):
    _common.run_single_threaded("geppetto.benchmarks.call_overhead")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=["ur5", "talos"])
    parser.add_argument("--states", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--functions", nargs="+", default=list(FUNCTIONS), choices=FUNCTIONS)
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    args = parser.parse_args(argv)
    info = _common.machine()
    print(_common.describe_machine(info))
    rows = [row for name in args.robots
            for row in benchmark_robot(name, args.states, args.repeats, args.functions)]
    print(_common.format_table(
        ["robot", "function", "kernel us", "python us", "overhead us"],
        [[r["robot"], r["function"], f"{r['kernel_us']:.2f}", f"{r['python_us']:.2f}",
          f"{r['overhead_us']:.2f}"] for r in rows]))
    os.makedirs(args.out, exist_ok=True)
    _common.write_json(os.path.join(args.out, "call_overhead.json"),
                       dict(machine=info, states=args.states, repeats=args.repeats,
                            clock="cpu", statistic="median", rows=rows))


if __name__ == "__main__":
    main()
