"""Compile time of a new problem structure when the building blocks are cached.

    python -m geppetto.benchmarks.phase_compile [--robot ur5] [--seed S] [--out DIR]

A stage model's phase runs its sequence of terms in compiled code (:mod:`geppetto.ocp.
fused`): built-in terms in one interpreter kernel compiled once for every composition.
This benchmark draws a composition of cost terms that this machine has not compiled
(a random subset and order of the built-in residuals with random activations, seeded by
``--seed``, default the clock), builds the problem on ``--robot`` (explicit or symplectic
Euler) and, in a fresh interpreter on the project's Numba cache (warm blocks), times:

- ``first calc_diff``: building and running the phases of the running and terminal
  stages (what a new composition costs: loading the cached kernels);
- ``first solve``: one FDDP solve (10 iterations) after it (the solver's kernels are
  cached too);
- ``second process``: the same structure again in another fresh interpreter.

CPU seconds of the process (compile time is CPU-bound; the machine is shared), and
wall seconds.  Writes ``results/phase_compile.json``.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from geppetto.benchmarks import _common

SCRIPT = r'''
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
import geppetto as gp
robot_name, seed = sys.argv[1], int(sys.argv[2])
robot = gp.robots.load(robot_name)
model = robot.model
rng = np.random.default_rng(seed)
dynamics = gp.ocp.FreeDynamics(model)
state, nu = dynamics.state, dynamics.nu
fid = int(rng.integers(1, model.nframes))
x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
R = np.eye(3)
makers = [
    lambda: gp.ocp.FrameTranslationResidual(model, fid, [0.3, 0.2, 0.4]),
    lambda: gp.ocp.FrameRotationResidual(model, fid, R),
    lambda: gp.ocp.FramePlacementResidual(model, fid, R, [0.3, 0.2, 0.4]),
    lambda: gp.ocp.FrameVelocityResidual(model, fid, reference_frame=int(rng.integers(3))),
    lambda: gp.ocp.CenterOfMassResidual(model, [0.0, 0.0, 0.3]),
    lambda: gp.ocp.StateResidual(state, x0),
    lambda: gp.ocp.ControlResidual(nu),
]
activations = [lambda n: None, lambda n: gp.ocp.WeightedQuadratic(np.ones(n)),
               lambda n: gp.ocp.Smooth1Norm(), lambda n: gp.ocp.Smooth2Norm()]
picked = rng.permutation(len(makers))[:int(rng.integers(3, len(makers) + 1))]
costs = []
for i in picked:
    residual = makers[i]()
    costs.append(gp.ocp.Cost(residual, activations[int(rng.integers(4))](residual.nr),
                             weight=1e-2))
if not any(isinstance(c.residual, gp.ocp.ControlResidual) for c in costs):
    costs.append(gp.ocp.Cost(gp.ocp.ControlResidual(nu), weight=1e-4))
scheme = ("euler", "explicit_euler")[int(rng.integers(2))]
running = gp.ocp.StageModel(dynamics, costs, dt=0.01, integrator=scheme)
terminal = gp.ocp.TerminalModel(state, [c for c in costs
                                        if not isinstance(c.residual, gp.ocp.ControlResidual)])
problem = gp.ocp.ShootingProblem(x0, [running] * 50, terminal)
xs = np.tile(x0, (51, 1)); us = np.zeros((50, nu))
t1, c1 = time.perf_counter(), time.process_time()
problem.calc_diff(xs, us)
t2, c2 = time.perf_counter(), time.process_time()
gp.solvers.FDDP(problem).solve(max_iter=10)
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps(dict(terms=[type(c.residual).__name__ for c in costs], scheme=scheme,
                      import_and_build_cpu=c1 - c0, first_calc_diff_cpu=c2 - c1,
                      first_calc_diff_wall=t2 - t1, first_solve_cpu=c3 - c2,
                      first_solve_wall=t3 - t2)))
'''


def run(robot, seed):
    finished = subprocess.run([sys.executable, "-c", SCRIPT, robot, str(seed)],
                              env=dict(os.environ, NUMBA_NUM_THREADS="1"),
                              capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise RuntimeError(f"subprocess failed:\n{finished.stderr}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", default="ur5")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    options = parser.parse_args(argv)
    seed = options.seed if options.seed is not None else time.time_ns() % 2**31
    info = _common.machine()
    new = run(options.robot, seed)
    again = run(options.robot, seed)
    print(_common.describe_machine(info))
    print(f"{options.robot}, seed {seed}: {new['scheme']}, terms {', '.join(new['terms'])}")
    print(_common.format_table(
        ["", "first calc_diff cpu s", "wall s", "first FDDP solve cpu s", "wall s"],
        [[label, f"{r['first_calc_diff_cpu']:.2f}", f"{r['first_calc_diff_wall']:.2f}",
          f"{r['first_solve_cpu']:.2f}", f"{r['first_solve_wall']:.2f}"]
         for label, r in (("new structure", new), ("second process", again))]))
    _common.write_json(os.path.join(options.out, "phase_compile.json"),
                       dict(machine=info, robot=options.robot, seed=seed, new=new,
                            second_process=again))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
