"""``python -m geppetto`` / ``geppetto``: the command line.

    geppetto [demo] [--out DIR] [--live]
    geppetto dynamics [--robot panda] [--seed 0]
    geppetto check-derivatives [...]
    geppetto bench [--only NAME ...] [-- ARGS]

``demo`` (the default) is the main job: it solves the Panda reaching problem
of ``examples/panda_reaching.py`` with FDDP, printing the iteration table,
and writes the animation of the solution (a standalone HTML page, meshcat)
and the plots (joints, hand path, convergence) into ``--out``
(``./geppetto-demo``); ``--live`` also plays it in a meshcat viewer on
127.0.0.1.  ``dynamics`` loads a robot of example-robot-data, computes RNEA,
ABA, CRBA and M^-1 at its reference configuration and at a random state,
prints them with a few identity checks, the agreement with Pinocchio and the
time per call beside Pinocchio's when Pinocchio is installed.
``check-derivatives`` compares the analytical derivatives (RNEA, ABA, the
constrained and impulse dynamics on the robot's feet) with finite
differences and CasADi; ``bench`` runs the benchmarks of
``geppetto/benchmarks``.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import time

import numpy as np

import geppetto as gp
from geppetto.examples._common import CompileProgress, written_since
from geppetto.solvers.plots import dof_labels

TIMING_STATES = 200


def q_by_dof(model, q):
    """q next to the velocity coordinates it matches (blank where nq_i != nv_i)."""
    column = [""] * model.nv
    for i in range(1, model.njoints):
        if model.nqs[i] == model.nvs[i]:
            for k in range(int(model.nvs[i])):
                column[model.idx_vs[i] + k] = f"{q[model.idx_qs[i] + k]:+.4f}"
    return column


def print_table(headers, columns, labels):
    rows = [headers] + [[label] + [column[r] for column in columns]
                        for r, label in enumerate(labels)]
    widths = [max(len(row[c]) for row in rows) for c in range(len(headers))]
    for n, row in enumerate(rows):
        print("  " + "  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                               for c, (cell, w) in enumerate(zip(row, widths))))
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))


def numbers(vector):
    return [f"{x:+.4f}" for x in vector]


def random_states(model, rng, size=None):
    """Random configurations; a URDF free flyer's +-DBL_MAX translation limits
    are taken as [-1, 1], as example-robot-data's loaders do."""
    def bounded(limit, replacement):
        return np.where(np.abs(limit) > 1e10, replacement, limit)

    return gp.dynamics.random_configuration(
        model, rng, size=size, lower=bounded(model.lower_position_limit, -1.0),
        upper=bounded(model.upper_position_limit, 1.0))


def pinocchio_twin(robot):
    """The same robot in Pinocchio, or None when Pinocchio is not installed."""
    try:
        import pinocchio as pin
    except ImportError:
        return None
    if robot.model.joint_types[1] == gp.dynamics.FREE_FLYER:
        pin_model = pin.buildModelFromUrdf(robot.urdf_path, pin.JointModelFreeFlyer())
    else:
        pin_model = pin.buildModelFromUrdf(robot.urdf_path)
    return pin, pin_model, pin_model.createData()


def microseconds(call, states, repeats=5):
    """Best over ``repeats`` of the time per call of call(q, v, a) over the states."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for q, v, a in states:
            call(q, v, a)
        best = min(best, (time.perf_counter() - start) / len(states) * 1e6)
    return best


def compile_kernels(model, data, q0):
    """Call each algorithm once, saying what is compiled if anything is (first run)."""
    zero = np.zeros(model.nv)
    calls = {"rnea": lambda: gp.dynamics.rnea(model, data, q0, zero, zero),
             "aba": lambda: gp.dynamics.aba(model, data, q0, zero, zero),
             "crba": lambda: gp.dynamics.crba(model, data, q0),
             "compute_minverse": lambda: gp.dynamics.compute_minverse(model, data, q0)}
    progress = CompileProgress(calls)
    for n, call in enumerate(calls.values()):
        with progress.stage(n):
            call()
    if progress.announced:
        print()


def show_reference(model, data, q0):
    zero = np.zeros(model.nv)
    gravity = gp.dynamics.rnea(model, data, q0, zero, zero)
    fall = gp.dynamics.aba(model, data, q0, zero, zero)
    M = gp.dynamics.crba(model, data, q0)
    Minv = gp.dynamics.compute_minverse(model, data, q0)
    print("At the reference configuration q0, at rest (v = 0):")
    print_table(["dof", "q0", "g(q0) = rnea(q0,0,0)", "aba(q0,0,0)", "diag M", "diag M^-1"],
                [q_by_dof(model, q0), numbers(gravity), numbers(fall), numbers(np.diag(M)),
                 numbers(np.diag(Minv))], dof_labels(model))


def show_random_state(model, data, rng, seed):
    q = random_states(model, rng)
    v, a = rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    tau = gp.dynamics.rnea(model, data, q, v, a)
    ddq = gp.dynamics.aba(model, data, q, v, tau)
    M = gp.dynamics.crba(model, data, q)
    Minv = gp.dynamics.compute_minverse(model, data, q)
    print(f"\nAt a random state (seed {seed}):")
    print_table(["dof", "q", "v", "a", "tau = rnea(q,v,a)", "aba(q,v,tau)"],
                [q_by_dof(model, q), numbers(v), numbers(a), numbers(tau), numbers(ddq)],
                dof_labels(model))
    print("\nChecks at that state:")
    print(f"  max |aba(q, v, rnea(q, v, a)) - a|   = {np.max(np.abs(ddq - a)):.1e}")
    print(f"  max |compute_minverse(q) crba(q) - I| = "
          f"{np.max(np.abs(Minv @ M - np.eye(model.nv))):.1e}")
    print(f"  smallest eigenvalue of M(q)           = {np.linalg.eigvalsh(M)[0]:.3e}")


def show_timing(robot, rng):
    """Time per call, one state from Python and per state of a stack, beside Pinocchio."""
    model, dyn = robot.model, gp.dynamics
    data, stack_data = model.create_data(), model.create_data()
    Q = random_states(model, rng, TIMING_STATES)
    V, A = (rng.standard_normal((TIMING_STATES, model.nv)) for _ in range(2))
    states = list(zip(Q, V, A))
    # each as f(data, q, v, a): one state (q (nq,)) or a stack (Q (K, nq))
    ours = {"rnea": lambda d, q, v, a: dyn.rnea(model, d, q, v, a),
            "aba": lambda d, q, v, a: dyn.aba(model, d, q, v, a),
            "crba": lambda d, q, v, a: dyn.crba(model, d, q),
            "compute_minverse": lambda d, q, v, a: dyn.compute_minverse(model, d, q)}
    twin = pinocchio_twin(robot)
    headers = ["function", "one state from Python", f"stack of {TIMING_STATES}, per state"]
    if twin is not None:
        pin, pin_model, pin_data = twin
        theirs = {"rnea": lambda q, v, a: pin.rnea(pin_model, pin_data, q, v, a),
                  "aba": lambda q, v, a: pin.aba(pin_model, pin_data, q, v, a),
                  "crba": lambda q, v, a: pin.crba(pin_model, pin_data, q),
                  "compute_minverse": lambda q, v, a: pin.computeMinverse(pin_model,
                                                                          pin_data, q)}
        headers += [f"Pinocchio {pin.__version__}", "one state / pin", "max |ours - pin|"]
    rows = []
    for name, function in ours.items():
        def call(q, v, a):
            return function(data, q, v, a)

        single = microseconds(call, states)
        batch = microseconds(lambda q, v, a: function(stack_data, q, v, a), [(Q, V, A)])
        row = [f"{single:.1f}", f"{batch / TIMING_STATES:.2f}"]
        if twin is not None:
            theirs_us = microseconds(theirs[name], states)
            difference = max(np.max(np.abs(np.triu(np.atleast_2d(call(q, v, a)))
                                           - np.triu(np.atleast_2d(theirs[name](q, v, a)))))
                             for q, v, a in states[:20])
            row += [f"{theirs_us:.1f}", f"{single / theirs_us:.1f}", f"{difference:.0e}"]
        rows.append(row)
    print(f"\nMicroseconds per call, {TIMING_STATES} random states, best of 5 "
          "(Python calls of both libraries):")
    print_table(headers, [list(column) for column in zip(*rows)], list(ours))
    if twin is None:
        print("  Pinocchio is not installed (pip install pin): no comparison.")
    print("  A stack (K, nq) is one call: the Python border is crossed once for K states "
          "(benchmarks/dynamics.py measures more).")


def dynamics(options):
    robot = gp.robots.load(options.robot)
    model = robot.model
    data = model.create_data()
    print(f"geppetto {gp.__version__}: {robot.name} (nq = {model.nq}, nv = {model.nv}, "
          f"{model.njoints - 1} joints, {model.total_mass():.2f} kg)\n")
    compile_kernels(model, data, robot.q0)
    show_reference(model, data, robot.q0)
    rng = np.random.default_rng(options.seed)
    show_random_state(model, data, rng, options.seed)
    show_timing(robot, rng)
    return 0


def dynamics_arguments(parser):
    parser.add_argument("--robot", default="panda",
                        help="one of geppetto.robots.available_robots() (default: panda)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random state")


# the main job's stages: its kernels compiled on the reduced problem, then the job itself
# (benchmarks/compile.py --main-job times the same stages)
MAIN_JOB_STAGES = ("the robot and the quasi-static guess", "costs (calc_costs)",
                   "the line search's trial (forward pass)",
                   "the dynamics' step (rollout)",
                   "dynamics, costs and their derivatives (calc_diff)",
                   "FDDP (backward pass, forward pass)",
                   "kinematics of the animation and the plots", "the full problem")
# compiled by a second process on a cold cache, in this order, beside the stages before
# the first of them: calc_costs compiles the phases' holders, the kinematics and the
# cost interpreter, the trial its one-call kernel over them and the one-state ABA rollout
# (ShootingProblem.rollout runs the same compiled rollout: stage 3 stays here, where the
# trial compiled it); calc_diff the lanes' ABA and its derivatives; the plots' kinematics
# (a stack of states) need nothing of the others: the second process compiles them too
HELPER_STAGES = (4, 6)
HELPER = ("from geppetto.__main__ import HELPER_STAGES, main_job_warm_up\n"
          "stages = main_job_warm_up()\n"
          "stages[0][1]()\n"
          "for n in HELPER_STAGES:\n"
          "    stages[n][1]()\n")


def main_job_warm_up():
    """[(label, call)] of the first len(MAIN_JOB_STAGES) - 1 stages, in order: each
    call (no argument) runs a part of the main job on its reduced problem (20
    knots), compiling that part's kernels on a cold cache; stage 0 builds what the
    others use."""
    from geppetto.examples import panda_reaching, reaching
    job = {}

    def guess():
        job["robot"] = robot = gp.robots.load("panda")
        job["problem"], _ = reaching.reaching_problem(
            robot.model, "panda_hand", np.array(panda_reaching.TARGET), robot.q0, knots=20,
            dt=0.05)
        job["xs"] = np.repeat(job["problem"].x0[None], job["problem"].N + 1, axis=0)
        job["us"] = np.ascontiguousarray(job["problem"].quasi_static(job["xs"]))

    def trial():
        """FDDP's line-search trial from the guess (zero gains, infeasible, alpha 1/2): the
        one-call horizon trial, with the argument types FDDP's iterations pass."""
        solver = gp.solvers.FDDP(job["problem"])
        solver.try_step(job["xs"], job["us"], solver.gaps, 0.5, False)

    def kinematics():
        model = job["robot"].model
        gp.dynamics.forward_kinematics(model, model.create_data(),
                                       np.ascontiguousarray(job["xs"][:, :model.nq]))
        gp.solvers.plots.end_effector_path(job["xs"], model, "panda_hand")

    calls = (guess, lambda: job["problem"].calc_costs(job["xs"], job["us"]), trial,
             lambda: job["problem"].rollout(job["us"]),
             lambda: job["problem"].calc_diff(job["xs"], job["us"]),
             lambda: gp.solvers.FDDP(job["problem"]).solve(job["xs"], job["us"], max_iter=2),
             kinematics)
    return list(zip(MAIN_JOB_STAGES, calls))


def compile_main_job(progress, helper=True):
    """Run :func:`main_job_warm_up`'s stages under ``progress`` (a CompileProgress
    of MAIN_JOB_STAGES): the kernels land in Numba's cache.  When stage 0 had to
    compile (a cold cache) and ``helper``, a second process compiles the stages
    HELPER_STAGES (independent of the stages before them) meanwhile, into the same
    cache, on the machine's other core; this process then loads them."""
    stages = main_job_warm_up()
    with progress.stage(0):
        stages[0][1]()
    second = None
    if helper and progress.compiled[0] and (os.cpu_count() or 1) > 1:
        second = subprocess.Popen([sys.executable, "-c", HELPER], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        for n in HELPER_STAGES:
            progress.say(n, "compiling in a second process")
    errors = None
    for n, (_, call) in enumerate(stages[1:], start=1):
        with progress.stage(n):
            if n in HELPER_STAGES and second is not None:
                start = time.perf_counter()
                if errors is None:              # the first of them: wait for the process
                    if second.poll() is None:
                        progress.say(n, "waiting for the second process ...")
                    _, errors = second.communicate()
                if second.returncode != 0:      # this process compiles what it did not
                    progress.say(n, f"the second process failed ({errors.strip()[-200:]})")
                else:
                    progress.say(n, "compiled by the second process (waited "
                                 f"{time.perf_counter() - start:.0f} s)")
            call()


def report_limits(model, xs):
    """Say which joints go past a position limit along xs (T+1, nx), and by how much:
    FDDP enforces no state bounds, and the reaching problem has no cost on them."""
    q = xs[:, :model.nq]
    lower, upper = model.lower_position_limit, model.upper_position_limit
    past = np.maximum(lower - q, q - upper).max(axis=0)
    for i in range(1, model.njoints):
        k = model.idx_qs[i]
        if model.nqs[i] == model.nvs[i] and past[k] > 0.0:
            start = "starts on it" if min(abs(q[0, k] - lower[k]),
                                          abs(q[0, k] - upper[k])) < 1e-12 else "starts inside"
            unit = gp.solvers.plots.UNITS[int(model.joint_types[i])][0]
            print(f"{model.names[i]} goes {past[k]:.1e} {unit} past a position limit ({start}): "
                  "FDDP enforces no joint limits and this problem has no cost on them.")


def demo(options):
    """Panda reaching with FDDP, end to end (examples/panda_reaching.py)."""
    from geppetto.examples import panda_reaching
    out = os.path.abspath(options.out)
    print(f"geppetto {gp.__version__}: the Panda's hand reaches {list(panda_reaching.TARGET)} "
          "in 1 s (100 knots of 10 ms, symplectic Euler), solved by FDDP from a quasi-static "
          "guess.\n", flush=True)
    started = time.time()
    progress = CompileProgress(MAIN_JOB_STAGES)
    compile_main_job(progress)
    if progress.announced:
        print(flush=True)
    with progress.stage(len(MAIN_JOB_STAGES) - 1):
        problem, result = panda_reaching.main(out=out, live=options.live)
    model = problem.state.model
    hand = gp.solvers.plots.end_effector_path(result.xs[-1:], model, "panda_hand")[0]
    miss = np.linalg.norm(hand - np.array(panda_reaching.TARGET))
    print(f"\n{result.iterations} iterations ({result.status}), "
          f"{1e3 * sum(result.history['time']):.0f} ms in the solver; the hand ends "
          f"{1e3 * miss:.1f} mm from the target.")
    report_limits(model, result.xs)
    print(f"Written to {out}:")
    for name in written_since(out, started):
        print(f"  {os.path.join(out, name)}")
    print("Open the .html file in a browser to watch the motion"
          + ("." if options.live else " (or run again with --live)."))
    return 0 if result.converged else 1


def demo_arguments(parser):
    parser.add_argument("--out", default="geppetto-demo", metavar="DIR",
                        help="folder for the animation and the plots (default: %(default)s)")
    parser.add_argument("--live", action="store_true",
                        help="also play the solution in a live meshcat viewer (127.0.0.1 only)")


# benchmarks/<name>.py, in the order `bench` runs them
BENCHMARKS = ("dynamics", "derivatives", "compare", "ocp", "solvers", "mpc")


def available_benchmarks():
    return [name for name in BENCHMARKS
            if importlib.util.find_spec(f"geppetto.benchmarks.{name}") is not None]


def bench(options):
    """Run each chosen benchmark in its own interpreter (they pin their Numba threads)."""
    names = options.only or available_benchmarks()
    extra = options.args[1:] if options.args[:1] == ["--"] else options.args
    failed = []
    for name in names:
        command = [sys.executable, "-m", f"geppetto.benchmarks.{name}", *extra]
        print(f"== {name}: {' '.join(command[1:])}", flush=True)
        if subprocess.run(command, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


def bench_arguments(parser):
    names = available_benchmarks()
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME",
                        help=f"run only these, out of {', '.join(names)} (default: all; "
                             "python -m geppetto.benchmarks.NAME --help says what each "
                             "measures)")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="after --: arguments passed to each benchmark "
                             "(e.g. geppetto bench --only mpc -- --duration 2)")


def check_derivatives_arguments(parser):
    from geppetto.dynamics import derivative_check
    derivative_check.add_arguments(parser)


def check_derivatives(options):
    """Partial derivatives of RNEA or ABA four ways (geppetto.dynamics.derivative_check)."""
    from geppetto.dynamics import derivative_check
    return derivative_check.main(options, gp.robots.load(options.robot))


# name -> (help, function adding its arguments, function running it)
COMMANDS = {
    "demo": ("solve Panda reaching with FDDP; write the animation and the plots "
             "(the default)", demo_arguments, demo),
    "dynamics": ("load a robot and print its dynamics beside Pinocchio's",
                 dynamics_arguments, dynamics),
    "check-derivatives": ("compare the analytical derivatives of rnea, aba, "
                          "constraint_dynamics or impulse_dynamics with finite "
                          "differences, CasADi AD and CasADi codegen",
                          check_derivatives_arguments, check_derivatives),
    "bench": ("run the benchmarks (timing tables and plots beside Pinocchio and Crocoddyl)",
              bench_arguments, bench),
}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv = ["demo"] + argv
    parser = argparse.ArgumentParser(
        prog="geppetto", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="geppetto [-h] [demo] [--out DIR] [--live]\n       geppetto COMMAND [options]",
        description="Rigid-body dynamics and trajectory optimization in Numba. "
        "Without a command: demo.")
    subparsers = parser.add_subparsers(dest="command", metavar="command", prog="geppetto")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        add_arguments(subparsers.add_parser(name, help=help_text))
    demo_options = subparsers.choices["demo"].format_help().split("\n\n", 1)[1]
    demo_options = [line for line in demo_options.split("\n")[1:] if "--help" not in line]
    parser.epilog = ("geppetto [demo] takes these options (geppetto COMMAND --help: those "
                     "of the others):\n" + "\n".join(demo_options))
    options = parser.parse_args(argv)
    return COMMANDS[options.command][2](options)


if __name__ == "__main__":
    sys.exit(main())
