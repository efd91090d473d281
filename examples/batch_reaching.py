"""A dataset of UR5 reaching trajectories: 1,000 targets solved on Dask workers.

Samples reaching targets in the UR5's workspace (a cylindrical shell sector in
front of the base), builds the reaching problem of ``reaching.py`` for each
(100 knots of 10 ms, FDDP from the quasi-static guess; Mastalli et al.,
"Crocoddyl", ICRA 2020) and solves them all with
:func:`geppetto.solvers.solve_batch`: on an embedded LocalCluster (one worker
process per core) or on the cluster of ``--scheduler``.  Every result goes
to a store as it arrives, so a run that is stopped resumes where it was;
run it twice and the second run solves nothing.  Writes the store, the
dataset in one .npz and a figure of the tool paths and of cost and
iterations over the workspace.

    python -m geppetto.examples.batch_reaching [--n 1000] [--out DIR] [--scheduler ADDRESS]
"""
import argparse
import functools
import os

import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.examples.reaching import reaching_problem
from geppetto.solvers.plots import end_effector_path

FRAME = "tool0"
N_TARGETS = 1000


def sample_targets(n, seed=0, radius=(0.35, 0.75), angle=(-np.pi / 2, np.pi / 2),
                   height=(0.0, 0.6)):
    """(n, 3) targets uniform in the volume of a cylindrical shell sector around
    the base's z axis: ``radius`` and ``height`` in m, ``angle`` from the x axis."""
    rng = np.random.default_rng(seed)
    r = np.sqrt(rng.uniform(radius[0] ** 2, radius[1] ** 2, n))
    phi = rng.uniform(*angle, n)
    z = rng.uniform(*height, n)
    return np.column_stack([r * np.cos(phi), r * np.sin(phi), z])


def build_reaching(model, q0, knots, dt, target):
    """The reaching ShootingProblem of ``model`` towards ``target`` (3,)."""
    problem, _ = reaching_problem(model, FRAME, np.asarray(target, dtype=float), q0,
                                  knots=knots, dt=dt)
    return problem


def reaching_builder(knots=100, dt=0.01):
    """``build(target) -> ShootingProblem`` for the UR5: a partial that carries
    the model (about 12 kB pickled) to the workers."""
    robot = gp.robots.load("ur5")
    return functools.partial(build_reaching, robot.model, robot.q0, knots, dt)


def plot_dataset(model, targets, result, path):
    """Tool paths (3D, at most 200) and the final cost and the iterations over the
    workspace (top and side views) of the solved items."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    solved = np.flatnonzero(np.isfinite(result.costs))
    figure = plt.figure(figsize=(15, 4.8))
    ax = figure.add_subplot(1, 3, 1, projection="3d")
    shown = solved[:200]
    T = result.xs.shape[1]
    paths = end_effector_path(result.xs[shown].reshape(-1, result.xs.shape[2]), model, FRAME)
    for path_b in paths.reshape(len(shown), T, 3):
        ax.plot(*path_b.T, linewidth=0.5, alpha=0.6)
    ax.scatter(*targets[shown].T, s=4, color="k", label="targets")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")
    ax.set_title(f"{FRAME} paths ({len(shown)} of {len(targets)})")
    ax.legend(fontsize=8)
    ax = figure.add_subplot(1, 3, 2)
    scatter = ax.scatter(targets[solved, 0], targets[solved, 1], s=8,
                         c=np.log10(result.costs[solved]), cmap="viridis")
    figure.colorbar(scatter, ax=ax, label="log10 cost")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_aspect("equal")
    ax.set_title("final cost over the workspace (top view)")
    ax = figure.add_subplot(1, 3, 3)
    radius = np.hypot(targets[solved, 0], targets[solved, 1])
    scatter = ax.scatter(radius, targets[solved, 2], s=8, c=result.iterations[solved],
                         cmap="plasma")
    figure.colorbar(scatter, ax=ax, label="FDDP iterations")
    ax.set_xlabel("distance from the base axis [m]")
    ax.set_ylabel("z [m]")
    ax.set_title("iterations over the workspace (side view)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(n=N_TARGETS, out="geppetto-examples/batch_reaching", client=None, knots=100, dt=0.01,
         max_iter=100):
    """Solve ``n`` reaching targets into ``out``; returns (targets, BatchResult)."""
    targets = sample_targets(n)
    build = reaching_builder(knots, dt)
    store = _common.output(out, f"store_n{n}_knots{knots}")
    result = gp.solvers.solve_batch(build, targets, "fddp", client=client, store=store,
                                    progress=True, max_iter=max_iter)
    print(result)
    print(f"solves per second: {result.stats['solved'] / result.wall_time:.1f} "
          f"({result.stats['solved']} solved, {result.stats['loaded']} loaded from the store)")
    for b in result.failed[:5]:
        print(f"item {b} failed: {result.errors[b][0]}: {result.errors[b][1]}")
    print("store:", store, f"(batch.json and {len(os.listdir(os.path.join(store, 'items')))} "
          "items/*.npz)")
    dataset = _common.output(out, f"reaching_dataset_n{n}.npz")
    np.savez(dataset, targets=targets, xs=result.xs, us=result.us, costs=result.costs,
             iterations=result.iterations, converged=result.converged,
             statuses=result.statuses.astype(str))
    print("dataset:", dataset)
    figure = _common.output(out, "batch_reaching.png")
    print("figure:", plot_dataset(build.args[0], targets, result, figure))
    return targets, result


def _parse():
    parser = argparse.ArgumentParser(prog="python -m geppetto.examples.batch_reaching",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=N_TARGETS,
                        help="number of targets (default: %(default)s)")
    parser.add_argument("--out", default=os.path.join("geppetto-examples", "batch_reaching"),
                        help="folder of the store, the dataset and the figure "
                             "(default: %(default)s)")
    parser.add_argument("--scheduler", default=None,
                        help="address of a Dask scheduler (default: an embedded "
                             "LocalCluster, one worker process per core)")
    return parser.parse_args()


if __name__ == "__main__":
    options = _parse()
    if options.scheduler is None:
        main(options.n, options.out)
    else:
        from distributed import Client
        with Client(options.scheduler) as scheduler_client:
            main(options.n, options.out, client=scheduler_client)
