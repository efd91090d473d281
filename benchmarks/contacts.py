"""Constrained dynamics and a legged OCP: geppetto beside Pinocchio and Crocoddyl.

Part 1, per call, CPU time of one thread (NUMBA_NUM_THREADS=1), K random
states per robot: ``constraint_dynamics`` (ddq, lambda) and
``constraint_dynamics_derivatives`` (their six partials) on solo12 (four 3D
point feet) and talos (two 6D soles), LOCAL frames, no Baumgarte gains;
ours as one batched call over the K states and one Python call per state,
Pinocchio's ``constraintDynamics`` and ``constraintDynamics`` +
``computeConstraintDynamicsDerivatives`` (``RigidConstraintModel``) one
Python call per state; beside them Pinocchio's C++ (``constraintDynamics``, and
``constraintDynamics`` + ``computeConstraintDynamicsDerivatives``) timed on the
same states in the same run by the harness of :mod:`.pinocchio_cpp` (left empty,
with the reason, where it cannot be built), its checksums checked against
Pinocchio's Python.  Beside them, their lanes forms ``constraint_dynamics_batch``
(:mod:`geppetto.dynamics.constraint_lanes`) and ``constraint_dynamics_derivatives_batch``
(:mod:`geppetto.dynamics.constraint_derivative_lanes`): the same (K, n) stacks, the
states across SIMD lanes.  ``--rounds`` rounds, each ours
interleaved then the C++: the medians, and the ratios to the C++ of the same round
(median and range).  The largest difference to Pinocchio is printed.  Then the
lanes forms' first calls with an empty NUMBA_CACHE_DIR (compile seconds) and the
packed double instructions of their kernels (``inspect_asm``, as
:mod:`.lanes`; ``--no-compile`` skips it).

Part 2: the solo12 trot: Crocoddyl 3.2's ``SimpleQuadrupedalGaitProblem
.createTrottingProblem`` (two diagonal steps, the first half as long, 25
swing knots, 2 support knots, dt = 10 ms, touchdown impulses of the landing
feet) solved by its SolverFDDP in its own environment (:mod:`.crocoddyl_env`),
beside the same OCP built term for term by ``examples/solo12_trot.py``'s
``trotting_problem`` and solved by our FDDP; both from the standing state
repeated with quasi-static controls.  Both sides print the cost of that
guess (equal when the problems are), the final cost, iterations, the
stopping value and the process CPU time per iteration (the least of
``--repeats`` solves), and ours its time split (calc_diff, backward pass,
line search).

    python -m geppetto.benchmarks.contacts [--states 1000] [--repeats 5] [--rounds 3]
        [--no-dynamics] [--no-trot] [--no-compile]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common, crocoddyl_env, pinocchio_cpp
from geppetto.dynamics import LOCAL
from geppetto.dynamics.constraints import CONTACT_3D

FEET = {"solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
        "talos": ("left_sole_link", "right_sole_link")}
STEP_KNOTS, SUPPORT_KNOTS, DT = 25, 2, 0.01
MAX_ITER = 100


def feet_constraints(model, name):
    make = gp.dynamics.contact_3d if name == "solo12" else gp.dynamics.contact_6d
    return gp.dynamics.ConstraintSet(model, [make(model, foot, reference=LOCAL)
                                             for foot in FEET[name]])


def pinocchio_side(pin, robot, constraints):
    """(model, data, constraint models, constraint datas, settings) in Pinocchio."""
    pin_model = pin.buildModelFromUrdf(robot.urdf_path, pin.JointModelFreeFlyer())
    models = []
    for c in constraints:
        kind = pin.ContactType.CONTACT_3D if c.kind == CONTACT_3D else pin.ContactType.CONTACT_6D
        models.append(pin.RigidConstraintModel(kind, pin_model, c.joint1, pin.SE3(c.R1, c.p1),
                                               c.joint2, pin.SE3(c.R2, c.p2),
                                               pin.ReferenceFrame.LOCAL))
    datas = [cm.createData() for cm in models]
    data = pin_model.createData()
    pin.initConstraintDynamics(pin_model, data, models, datas)
    return pin_model, data, models, datas, pin.ProximalSettings(1e-12, 1e-12, 0.0, 1)


def cpp_contacts(constraints):
    """The constraints as the C++ harness reads them: (size, joint, R, p) each."""
    return [(3 if c.kind == CONTACT_3D else 6, c.joint1, c.R1, c.p1) for c in constraints]


def benchmark_robot(name, K, timing, pin, rng, cpp=False, rounds=3):
    robot = gp.robots.load(name)
    model = robot.model
    cs = feet_constraints(model, name)
    Q = gp.dynamics.random_configuration(model, rng, size=K, lower=np.r_[-np.ones(3), np.full(
        model.nq - 3, -np.pi)], upper=np.r_[np.ones(3), np.full(model.nq - 3, np.pi)])
    Q = np.ascontiguousarray(Q)
    V, T = rng.standard_normal((K, model.nv)), rng.standard_normal((K, model.nv))
    batch_data, single = model.create_data(), model.create_data()
    ours = {"dynamics": gp.dynamics.constraint_dynamics,
            "derivatives": gp.dynamics.constraint_dynamics_derivatives}
    # the lanes forms (dynamics/constraint_lanes.py) on the same (K, n) stacks
    lanes = {"dynamics": gp.dynamics.constraint_dynamics_batch,
             "derivatives": lambda *args: gp.dynamics.constraint_dynamics_derivatives_batch(
                 *args)[2]}
    pm, pd, pcm, pcd, settings = pinocchio_side(pin, robot, cs)

    def pin_dynamics(q, v, tau):
        return pin.constraintDynamics(pm, pd, q, v, tau, pcm, pcd, settings)

    def pin_derivatives(q, v, tau):
        pin.constraintDynamics(pm, pd, q, v, tau, pcm, pcd, settings)
        pin.computeConstraintDynamicsDerivatives(pm, pd, pcm, pcd, settings)
        return (pd.ddq_dq, pd.ddq_dv, pd.ddq_dtau, pd.dlambda_dq, pd.dlambda_dv, pd.dlambda_dtau)

    theirs = {"dynamics": pin_dynamics, "derivatives": pin_derivatives}
    states = [(Q[k].copy(), V[k].copy(), T[k].copy()) for k in range(K)]
    rows = []
    for function in ("dynamics", "derivatives"):
        f, g, h = ours[function], theirs[function], lanes.get(function)
        worst, worst_lanes = 0.0, 0.0
        mine_lanes = h(model, Q[:10], V[:10], T[:10], cs) if h is not None else None
        for k, (q, v, tau) in enumerate(states[:10]):
            mine = f(model, single, q, v, tau, cs)
            other = g(q, v, tau)
            other = (other, pd.lambda_c) if function == "dynamics" else other
            worst = max(worst, max(float(np.max(np.abs(a - np.asarray(b))))
                                   for a, b in zip(mine, other)))
            if h is not None:
                worst_lanes = max(worst_lanes, max(float(np.max(np.abs(a[k] - np.asarray(b))))
                                                   for a, b in zip(mine_lanes, other)))

        def batch():
            f(model, batch_data, Q, V, T, cs)

        def ours_loop():
            for q, v, tau in states:
                f(model, single, q, v, tau, cs)

        def pin_loop():
            for q, v, tau in states:
                g(q, v, tau)

        runs = {"batch": batch, "python": ours_loop, "pin": pin_loop}
        if h is not None:
            runs["lanes"] = lambda: h(model, Q, V, T, cs)
        for run in runs.values():
            run()
        measured_rounds = {label: [] for label in runs}
        cpp_rounds = []
        cpp_name = pinocchio_cpp.CONSTRAINED_FUNCTIONS[function == "derivatives"]
        contacts = cpp_contacts(cs)
        checksum = None
        for _ in range(rounds):
            times = _common.time_side_by_side(runs, K, *timing)
            for label in runs:
                measured_rounds[label].append(times[label].best * 1e6)
            if cpp:  # right after ours, the same states, the same clock
                measured = pinocchio_cpp.time_cpp(pm, Q, V, T, T, (cpp_name,), *timing,
                                                  contacts=contacts)
                if checksum is None:
                    checksum = pinocchio_cpp.check(pin, pm, Q, V, T, T, measured,
                                                   contacts=contacts)
                cpp_rounds.append(measured[cpp_name]["best"])
        row = dict(robot=name, nv=model.nv, nc=cs.size, function=function, rounds=rounds,
                   batch_us=statistics.median(measured_rounds["batch"]),
                   python_us=statistics.median(measured_rounds["python"]),
                   pin_us=statistics.median(measured_rounds["pin"]),
                   lanes_us=statistics.median(measured_rounds["lanes"]) if h else None,
                   us_rounds=measured_rounds, max_abs_diff_vs_pin=worst,
                   lanes_max_abs_diff_vs_pin=worst_lanes if h else None,
                   cpp_us=statistics.median(cpp_rounds) if cpp_rounds else None,
                   cpp_us_rounds=cpp_rounds, cpp_checksum_rel_diff=checksum)
        for label in ("batch", "lanes"):
            if cpp_rounds and label in runs:  # per-round ratios: median and range
                ratios = [t / c for t, c in zip(measured_rounds[label], cpp_rounds)]
                row[f"{label}_over_cpp"] = dict(median=statistics.median(ratios),
                                                min=min(ratios), max=max(ratios))
        rows.append(row)
        print(f"  {name} {function} done", file=sys.stderr, flush=True)
    return rows


COMPILE_SCRIPT = """
import json, re, sys, time
import numpy as np
import geppetto as gp
from geppetto.dynamics import constraint_derivative_lanes, constraint_lanes
model = gp.robots.load("solo12").model
rng = np.random.default_rng(0)
Q = gp.dynamics.random_configuration(model, rng, size=40)
V = rng.standard_normal((40, model.nv))
cs = gp.dynamics.ConstraintSet(model, [gp.dynamics.contact_3d(model, foot) for foot in
                                       ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")])
function = getattr(gp.dynamics, sys.argv[2])
start, start_cpu = time.perf_counter(), time.thread_time()
function(model, Q, V, V, cs)
out = dict(first_call_cpu_s=time.thread_time() - start_cpu,
           first_call_s=time.perf_counter() - start)
if sys.argv[1] == "asm":
    operation = r"\\bv(?:fn?m(?:add|sub)\\d+|mul|add|sub|div|sqrt)"
    packed = re.compile(operation + r"pd\\s+[^\\n]*?%(zmm|ymm|xmm)")
    scalar = re.compile(operation + r"sd\\b")
    asm = {}
    for kernel in sys.argv[3:]:
        module, name = kernel.split(".")
        dispatcher = getattr(dict(constraint_lanes=constraint_lanes,
                                  constraint_derivative_lanes=constraint_derivative_lanes)[module],
                             name)
        text = "\\n".join(dispatcher.inspect_asm(s) for s in dispatcher.signatures)
        counts = dict(zmm=0, ymm=0, xmm=0)
        for match in packed.finditer(text):
            counts[match.group(1)] += 1
        counts["scalar_sd"] = len(scalar.findall(text))
        asm[kernel] = counts
    out["asm"] = asm
print(json.dumps(out))
"""
HOT_KERNELS = {
    "constraint_dynamics_batch": tuple("constraint_lanes." + k for k in (
        "_bias_lanes", "_contact_frames_lanes", "_contact_jacobian_lanes",
        "_contact_drift_lanes", "_ltl_factor_lanes", "_ltl_solves_lanes", "_delassus_lanes",
        "_proximal_iterations_lanes", "_cholesky_solve_lanes",
        "_constrained_acceleration_lanes", "_ltl_solve_lanes")),
    "constraint_dynamics_derivatives_batch": tuple("constraint_derivative_lanes." + k for k in (
        "_contact_wrenches_lanes", "_world_aligned_force_lanes",
        "_contact_acceleration_derivatives_lanes", "_remove_gravity_lanes",
        "_kkt_blocks_lanes", "_subtract_terms3_lanes"))}


def compile_and_assembly():
    """First call of each lanes form on solo12 with an empty NUMBA_CACHE_DIR (compile
    seconds, wall and thread CPU; the lanes passes it imports compile too: the
    derivatives' first call compiles the forward tile and the RNEA derivative passes),
    then from that cache, and the hot kernels' packed instruction counts (as
    benchmarks/lanes.py)."""
    out = {}
    for function, kernels in HOT_KERNELS.items():
        with tempfile.TemporaryDirectory(prefix="geppetto-contacts-") as cache:
            compiled = _common.first_call_latency(COMPILE_SCRIPT, cache, "asm", function,
                                                  *kernels)
            loaded = _common.first_call_latency(COMPILE_SCRIPT, cache, "load", function)
        out[function] = dict(compile_s=compiled["first_call_s"],
                             compile_cpu_s=compiled["first_call_cpu_s"],
                             cached_first_call_s=loaded["first_call_s"], asm=compiled["asm"])
    return out


def _ratio(row, label):
    ratio = row.get(f"{label}_over_cpp")
    if ratio is None:
        return "-"
    return f"{ratio['median']:.2f} [{ratio['min']:.2f}, {ratio['max']:.2f}]"


# Crocoddyl's trot for a task dict (urdf, q0, step_length, step_height, dt,
# step_knots, support_knots); tests/crocoddyl_problems.py uses it too.
CROCODDYL_TROTTING_PROBLEM = '''
import numpy as np
import pinocchio
import crocoddyl
from crocoddyl.utils.quadruped import SimpleQuadrupedalGaitProblem


def trotting_problem(task):
    """(problem, x0) of SimpleQuadrupedalGaitProblem.createTrottingProblem for task."""
    model = pinocchio.buildModelFromUrdf(task["urdf"], pinocchio.JointModelFreeFlyer())
    model.referenceConfigurations["standing"] = np.array(task["q0"])
    x0 = np.concatenate([np.array(task["q0"]), np.zeros(model.nv)])
    gait = SimpleQuadrupedalGaitProblem(model, "FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
    return gait.createTrottingProblem(x0, task["step_length"], task["step_height"], task["dt"],
                                      task["step_knots"], task["support_knots"]), x0
'''

CROCODDYL_TROT = CROCODDYL_TROTTING_PROBLEM + '''
import json, sys, time

task = json.load(sys.stdin)


def problem():
    return trotting_problem(task)[0]


trot, x0 = trotting_problem(task)
xs = [x0] * (trot.T + 1)
us = trot.quasiStatic(xs[:-1])
guess = trot.calc(xs, us)
crocoddyl.SolverFDDP(problem()).solve(xs, us, 1, False)            # warm up
elapsed = []
for _ in range(task["repeats"]):
    solver = crocoddyl.SolverFDDP(trot)
    start = time.process_time()
    solver.solve(xs, us, task["max_iter"], False)
    elapsed.append(time.process_time() - start)
converged = bool(solver.stop < solver.th_stop)
# solver.iter counts from 0 and stops at the converged iteration, or ends at max_iter
print(json.dumps(dict(crocoddyl=crocoddyl.__version__, knots=trot.T, guess_cost=guess,
                      iterations=solver.iter + 1 if converged else solver.iter,
                      cost=solver.cost, converged=converged, stop=solver.stop,
                      seconds=min(elapsed))))
'''


def trot(crocoddyl, repeats):
    """Rows of the trot solved by our FDDP and, when ``crocoddyl``, by Crocoddyl's; the
    least CPU time of ``repeats`` solves on each side."""
    from geppetto.examples import solo12_trot
    robot = gp.robots.load("solo12")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    problem = solo12_trot.trotting_problem(model, x0, 2, STEP_KNOTS, SUPPORT_KNOTS, DT)
    xs = np.repeat(x0[None], problem.N + 1, axis=0)
    us = problem.quasi_static(xs)
    guess = problem.calc(xs, us)
    gp.solvers.FDDP(problem).solve(xs, us, max_iter=1)           # warm up
    elapsed = []
    for _ in range(repeats):
        solver = gp.solvers.FDDP(problem)
        start = time.process_time()
        result = solver.solve(xs, us, max_iter=MAX_ITER)
        elapsed.append(time.process_time() - start)
    elapsed = min(elapsed)
    split = {key: 1e3 * float(np.mean(result.history["time_" + key]))
             for key in ("calc_diff", "backward", "forward")}
    rows = [dict(solver="geppetto FDDP", knots=problem.N, guess_cost=guess,
                 iterations=result.iterations, cost=result.cost,
                 converged=bool(result.converged), seconds=elapsed, stop=result.stop,
                 wall_ms_split=split)]
    reason = "not asked (--no-crocoddyl)"
    if crocoddyl:
        task = dict(urdf=robot.urdf_path, q0=robot.q0.tolist(), step_length=solo12_trot.STEP_LENGTH,
                    step_height=solo12_trot.STEP_HEIGHT, dt=DT, step_knots=STEP_KNOTS,
                    support_knots=SUPPORT_KNOTS, max_iter=MAX_ITER, repeats=repeats)
        theirs, reason = crocoddyl_env.run(CROCODDYL_TROT, task, timeout=900)
        if theirs is not None:
            theirs["solver"] = f"Crocoddyl {theirs.pop('crocoddyl')} SolverFDDP"
            rows.append(theirs)
            reason = None
    for row in rows:
        row["ms_per_iteration"] = 1e3 * row["seconds"] / max(row["iterations"], 1)
    return rows, reason


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--states", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3,
                        help="part 1: rounds of (ours interleaved, then the C++); medians and "
                             "the range of the per-round ratios")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the first-call compile and assembly counts of the lanes form")
    parser.add_argument("--no-crocoddyl", action="store_true")
    parser.add_argument("--no-trot", action="store_true")
    parser.add_argument("--no-dynamics", action="store_true", help="only the trot (part 2)")
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    options = parser.parse_args(argv)
    _common.run_single_threaded("geppetto.benchmarks.contacts")
    import pinocchio as pin
    info = _common.machine(pinocchio=pin.__version__)
    print(f"machine: {_common.describe_machine(info)}", flush=True)
    cpp_skipped = pinocchio_cpp.unavailable()
    if cpp_skipped:
        print(f"Pinocchio's C++ is not timed: {cpp_skipped}")
    rng = np.random.default_rng(0)
    rows = []
    for name in () if options.no_dynamics else FEET:
        rows += benchmark_robot(name, options.states, (options.repeats, "cpu"), pin, rng,
                                cpp=cpp_skipped is None, rounds=options.rounds)
    if rows:
        print(f"\nMicroseconds per state (thread CPU time), best of {options.repeats} repeats, "
              f"median of {options.rounds} rounds, K = {options.states} random states (load "
              f"average {os.getloadavg()[0]:.1f}); ratios to the C++ of the same round: median "
              "[range]; lanes: constraint_dynamics_batch (dynamics/constraint_lanes.py) and "
              "constraint_dynamics_derivatives_batch (dynamics/constraint_derivative_lanes.py)")
        print(_common.format_table(
            ["robot", "function", "ours batched", "ours lanes", "ours Python",
             "Pinocchio Python", "Pinocchio C++", "batched/C++", "lanes/C++", "max |diff|",
             "lanes max |diff|"],
            [[r["robot"], r["function"], f"{r['batch_us']:.2f}",
              "-" if r["lanes_us"] is None else f"{r['lanes_us']:.2f}", f"{r['python_us']:.2f}",
              f"{r['pin_us']:.2f}", "-" if r["cpp_us"] is None else f"{r['cpp_us']:.2f}",
              _ratio(r, "batch"), _ratio(r, "lanes"), f"{r['max_abs_diff_vs_pin']:.1e}",
              "-" if r["lanes_max_abs_diff_vs_pin"] is None
              else f"{r['lanes_max_abs_diff_vs_pin']:.1e}"] for r in rows]))
    compiled = None
    if rows and not options.no_compile:
        compiled = compile_and_assembly()
        for function, c in compiled.items():
            print(f"\n{function}'s first call, empty cache: {c['compile_s']:.1f} s wall, "
                  f"{c['compile_cpu_s']:.1f} s thread CPU; from the cache "
                  f"{c['cached_first_call_s']:.2f} s.  Packed double instructions:")
            print(_common.format_table(
                ["kernel", "zmm pd", "ymm pd", "xmm pd", "scalar sd"],
                [(k, n["zmm"], n["ymm"], n["xmm"], n["scalar_sd"])
                 for k, n in c["asm"].items()]))
    trot_rows, reason = (None, "not asked (--no-trot)") if options.no_trot else \
        trot(not options.no_crocoddyl, options.repeats)
    if trot_rows:
        print(f"\nsolo12 trot (Crocoddyl's createTrottingProblem), FDDP from the standing guess "
              f"(process CPU time, best of {options.repeats} solves, at most {MAX_ITER} "
              f"iterations, load average {os.getloadavg()[0]:.1f})")
        print(_common.format_table(
            ["solver", "knots", "cost at guess", "final cost", "iterations", "converged", "stop",
             "total s", "ms/iteration"],
            [[r["solver"], r["knots"], f"{r['guess_cost']:.10g}", f"{r['cost']:.8g}",
              r["iterations"], r["converged"], f"{r['stop']:.1e}", f"{r['seconds']:.2f}",
              f"{r['ms_per_iteration']:.1f}"] for r in trot_rows]))
        split = trot_rows[0]["wall_ms_split"]
        print("(ours per iteration, wall ms: calc_diff {calc_diff:.1f}, backward pass "
              "{backward:.1f}, line search {forward:.1f})".format(**split))
    if reason:
        print("\n" + crocoddyl_env.skipped(reason))
    path = os.path.join(options.out, "contacts.json")
    _common.write_json(path, dict(machine=info, load_average_1min_at_end=os.getloadavg()[0],
                                  states_per_robot=options.states, repeats=options.repeats,
                                  clock="cpu", unit="microseconds per state",
                                  rounds=options.rounds, timings=rows, lanes_compile=compiled,
                                  trot=trot_rows, crocoddyl_skipped=reason,
                                  cpp_flags=" ".join(pinocchio_cpp.FLAGS),
                                  cpp_skipped=cpp_skipped))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
