"""Solver callbacks: an iteration table like Crocoddyl's and a logger that plots.

A callback is any callable ``callback(solver, iteration, record)`` where
``record`` is the dict of that iteration: cost, stop, grad, preg, step, gaps
(max |f_t|), dV_exp, dV, time and its calc_diff / backward / forward split.
"""
import sys

import numpy as np


class CallbackVerbose:
    """Print one line per iteration (Crocoddyl's columns), a header every 10."""

    COLUMNS = ("iter", "cost", "stop", "grad", "preg", "step", "||gaps||", "dV-exp", "dV")

    def __init__(self, stream=None):
        self.stream = sys.stdout if stream is None else stream

    def __call__(self, solver, iteration, record):
        if iteration % 10 == 1:
            self.stream.write("".join(f"{c:>12}" for c in self.COLUMNS) + "\n")
        values = (record["cost"], record["stop"], record["grad"], record["preg"],
                  record["step"], record["gaps"], record["dV_exp"], record["dV"])
        self.stream.write(f"{iteration:>12d}" + "".join(f"{v:>12.4e}" for v in values) + "\n")
        self.stream.flush()


class CallbackLogger:
    """Keep every record; :meth:`plot` draws cost, gradient, step and gaps per iteration."""

    def __init__(self):
        self.records = []

    def __call__(self, solver, iteration, record):
        self.records.append(dict(record, iteration=iteration))

    def series(self, key):
        return np.array([r[key] for r in self.records], dtype=float)

    def plot(self, path=None, title="solver convergence"):
        """A 2x2 figure of cost, stop/grad, step and gaps; saved when ``path`` is given."""
        import matplotlib
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        it = self.series("iteration")
        fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharex=True)
        axes[0, 0].plot(it, self.series("cost"), "o-")
        axes[0, 0].set_ylabel("cost")
        axes[0, 1].semilogy(it, np.maximum(self.series("stop"), 1e-300), "o-", label="stop")
        axes[0, 1].semilogy(it, np.abs(self.series("grad")) + 1e-300, "s-", label="|grad|")
        axes[0, 1].legend()
        axes[1, 0].plot(it, self.series("step"), "o-")
        axes[1, 0].set_ylabel("step length")
        axes[1, 1].semilogy(it, np.maximum(self.series("gaps"), 1e-300), "o-")
        axes[1, 1].set_ylabel("max |gap|")
        for ax in axes[1]:
            ax.set_xlabel("iteration")
        fig.suptitle(title)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=100)
            plt.close(fig)
        return fig
