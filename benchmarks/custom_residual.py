"""A user residual written as a Numba kernel against the built-in residual of the same cost.

    python -m geppetto.benchmarks.custom_residual [--robots ur5 panda] [--blocks 7]
                                                  [--repeats 10] [--calls 10] [--out DIR]

The reaching task (:mod:`geppetto.examples.reaching`, 100 knots, symplectic Euler) built
twice: with the built-in FrameTranslationResidual and with the same residual written as
a Numba kernel of one knot (:mod:`geppetto.examples.custom_residual`, joined to the
stage's compiled call by :class:`geppetto.ocp.NumbaResidual`).  Both problems' calc_diff
outputs must agree to 1e-12 before timing.  Then ``--blocks`` interleaved blocks, each
timing both (``repeats`` samples of ``calls`` calls, CPU time of the thread, one Numba
thread); the figure is the median over the blocks of the ratio of the per-block medians,
user / built-in, with its spread (min, max), and whether each problem's calc_diff was
one compiled call over the horizon (:mod:`geppetto.ocp.horizon`; the user residual is a
block of the phases' programs, :func:`geppetto.ocp.fused._user`).  Writes
``results/custom_residual.json``.
"""
import argparse
import os
import statistics

import numpy as np

from geppetto.benchmarks import _common

_common.run_single_threaded("geppetto.benchmarks.custom_residual")

import geppetto as gp  # noqa: E402
from geppetto.examples import custom_residual, reaching  # noqa: E402

FRAMES = {"ur5": "tool0", "panda": "panda_hand"}
TARGET = (0.4, 0.2, 0.4)


def problems(name):
    """(built-in problem, user problem, xs, us) at a seeded random point."""
    robot = gp.robots.load(name)
    model, frame = robot.model, FRAMES[name]
    user = custom_residual.user_frame_translation(model, frame, TARGET)
    built_in, _ = reaching.reaching_problem(model, frame, TARGET, robot.q0)
    ours, _ = reaching.reaching_problem(model, frame, TARGET, robot.q0, reach=user)
    rng = np.random.default_rng(0)
    xs = np.tile(built_in.x0, (built_in.N + 1, 1))
    xs[:, :model.nq] = [gp.dynamics.random_configuration(model, rng)
                        for _ in range(built_in.N + 1)]
    us = rng.standard_normal((built_in.N, built_in.nu))
    return built_in, ours, xs, us


def agreement(built_in, user, xs, us):
    """The largest relative difference of the calc_diff outputs of the two problems."""
    names = ("costs", "Lx", "Lu", "Lxx", "Luu", "Lxu", "Fx", "Fu")
    built_in.calc_diff(xs, us)
    reference = [getattr(built_in, n).copy() for n in names]
    user.calc_diff(xs, us)
    return max(float(np.abs(getattr(user, n) - r).max() / max(1.0, np.abs(r).max()))
               for n, r in zip(names, reference))


def compare(name, blocks, repeats, calls):
    built_in, user, xs, us = problems(name)
    error = agreement(built_in, user, xs, us)
    if error > 1e-12:
        raise SystemExit(f"{name}: the two problems differ ({error:.3g})")

    def loop(problem):
        def run():
            for _ in range(calls):
                problem.calc_diff(xs, us)
        return run

    ratios, times = [], []
    for _ in range(blocks):
        t = _common.time_runs({"built-in": loop(built_in), "user": loop(user)}, calls, repeats)
        ratios.append(t["user"]["cpu_median"] / t["built-in"]["cpu_median"])
        times.append((t["built-in"]["cpu_median"], t["user"]["cpu_median"]))
    # whether each problem's calc_diff was one compiled call over the horizon
    one_call = [p.horizon_evaluation is not None for p in (built_in, user)]
    return dict(robot=name, agreement=error, one_call=one_call,
                ratio_median=statistics.median(ratios),
                ratio_min=min(ratios), ratio_max=max(ratios),
                built_in_ms=1e3 * statistics.median(b for b, _ in times),
                user_ms=1e3 * statistics.median(u for _, u in times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robots", nargs="+", default=["ur5", "panda"])
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    options = parser.parse_args(argv)
    info = _common.machine()
    rows = [compare(name, options.blocks, options.repeats, options.calls)
            for name in options.robots]
    print(_common.describe_machine(info))
    print(_common.format_table(
        ["robot", "built-in ms", "user ms", "user / built-in (median)", "min", "max",
         "agreement", "one call (built-in, user)"],
        [[r["robot"], f"{r['built_in_ms']:.3f}", f"{r['user_ms']:.3f}",
          f"{r['ratio_median']:.3f}", f"{r['ratio_min']:.3f}", f"{r['ratio_max']:.3f}",
          f"{r['agreement']:.1e}", f"{r['one_call'][0]}, {r['one_call'][1]}"] for r in rows]))
    _common.write_json(os.path.join(options.out, "custom_residual.json"),
                       dict(machine=info, blocks=options.blocks, repeats=options.repeats,
                            calls=options.calls, rows=rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
