"""matplotlib figures of solver results and MPC logs.

    fig = plot_trajectories(result.xs, result.us, dt, model, path="joints.png")
    fig = plot_end_effector(result.xs, model, "panda_hand", target=p, path="hand.png")
    fig = plot_convergence(result, path="convergence.png")
    fig = plot_solve_times(log, budget=1e-3, path="solve_times.png")
    fig = plot_tracking(log.times, errors, path="tracking.png")

Notation: ``xs (T+1, nx)`` states x = (q, v), ``us (T, nu)`` controls (a
solver's result or an MPC log's closed-loop record), ``dt`` the seconds
between two knots.  Each helper returns a :class:`matplotlib.figure.Figure`
and writes it to ``path`` when given.  The figures are built with
matplotlib's object API on the Agg canvas, so nothing needs a display and no
global backend is switched; ``show=True`` makes it a pyplot figure instead,
for ``plt.show()`` in an interactive session.  matplotlib is imported on
first use only.
"""
import os
import textwrap

import numpy as np

from ..dynamics.kinematics import frame_placement
from ..dynamics.model import FREE_FLYER, PRISMATIC, REVOLUTE, TRANSLATION

LIMIT_STYLE = dict(color="0.35", linestyle="--", linewidth=0.8)
VIOLATED_STYLE = dict(color="tab:red", linestyle="--", linewidth=1.0)
OFF_SCALE_STYLE = dict(fontsize=6, color="0.35", ha="right", va="bottom",
                       bbox=dict(facecolor="white", alpha=0.8, edgecolor="none", pad=1.0))
# units of (q, v, u) of a scalar coordinate, by joint type; u is the joint's effort
UNITS = {REVOLUTE: ("rad", "rad/s", "N m"), PRISMATIC: ("m", "m/s", "N"),
         TRANSLATION: ("m", "m/s", "N")}
BOUND_REACH = 2.0   # a bound is drawn when within this many motion ranges of the motion


def _figure(rows, columns, figsize, show, only=None, **kwargs):
    """(figure, axes array) on the Agg canvas, or from pyplot when ``show``; with
    ``only`` (a list of (row, column)), just those panels (None elsewhere: a panel
    costs its share of the drawing even when hidden)."""
    if show:
        import matplotlib.pyplot as plt
        figure = plt.figure(figsize=figsize)
    else:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        figure = Figure(figsize=figsize)
        FigureCanvasAgg(figure)
    if only is None:
        return figure, figure.subplots(rows, columns, squeeze=False, **kwargs)
    grid = figure.add_gridspec(rows, columns)
    axes = np.full((rows, columns), None, dtype=object)
    for row, column in only:
        axes[row, column] = figure.add_subplot(grid[row, column], **kwargs)
    return figure, axes


def _finish(figure, path, title, grid=None):
    """Title (wrapped to the figure's width), layout, and save to ``path``.  ``grid``
    (rows, columns) of small panels lays them out with fixed margins in inches
    instead of matplotlib's tight layout, which draws every label once more to
    measure it (over a second for the 27 panels of a 9-joint arm)."""
    top = 1.0
    width, height = figure.get_size_inches()
    if title:
        # about 13 characters per inch at 10 pt
        title = "\n".join(textwrap.fill(line, max(20, int(13 * width)))
                          for line in title.split("\n"))
        figure.suptitle(title, fontsize=10)
        top -= (0.02 + 0.17 * (title.count("\n") + 1)) / height
    if grid is None:
        figure.tight_layout(rect=(0.0, 0.0, 1.0, top))
    else:                                      # room for the panels' titles under it
        figure.subplots_adjust(left=0.75 / width, right=1.0 - 0.15 / width, bottom=0.45 / height,
                               top=top - 0.55 / height, wspace=0.55, hspace=0.75)
    if path is not None:
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        figure.savefig(path, dpi=110)
    return figure


def dof_labels(model):
    """One label per velocity coordinate: the joint name, indexed for multi-dof joints."""
    labels = []
    for i in range(1, model.njoints):
        n = int(model.nvs[i])
        labels += [model.names[i]] if n == 1 else [f"{model.names[i]}[{k}]" for k in range(n)]
    return labels


def _scalar_dofs(model):
    """[(label, q index, v index, (q unit, v unit, effort unit))] of the coordinates
    with nq_i == nv_i (a plot of q makes sense for them: revolute, prismatic,
    translation joints; not for quaternions or (cos, sin) pairs)."""
    labels, out = dof_labels(model), []
    for i in range(1, model.njoints):
        if model.nqs[i] == model.nvs[i]:
            units = UNITS.get(int(model.joint_types[i]), ("", "", ""))
            for k in range(int(model.nvs[i])):
                out.append((labels[model.idx_vs[i] + k], model.idx_qs[i] + k,
                            model.idx_vs[i] + k, units))
    return out


def _controls_are_joint_efforts(model, nu, dofs):
    """True when u is one effort per scalar coordinate, in their order: a fixed
    base (nu == nv) or a free-flyer base left unactuated (nu == nv - 6)."""
    if nu != len(dofs):
        return False
    return nu == model.nv or (model.joint_types[1] == FREE_FLYER and nu == model.nv - 6)


def _with_unit(name, unit):
    return f"{name} [{unit}]" if unit else name


def _range_and_bounds(ax, values, lower, upper):
    """Set the panel's y range on the motion, widened to take in a bound that lies
    within BOUND_REACH motion ranges of it, drawn dashed (red where the motion
    goes past it); a bound farther away is written in the panel, not drawn."""
    low, high = values.min(), values.max()
    margin = 0.3 * (high - low) + 1e-3 + 0.05 * np.abs(values).max()
    bottom, top = low - margin, high + margin
    reach = BOUND_REACH * (high - low + 2 * margin)
    off_scale = []
    for bound, violated in ((lower, lambda b: low < b - 1e-9 * max(1.0, abs(b))),
                            (upper, lambda b: high > b + 1e-9 * max(1.0, abs(b)))):
        if bound is None or not np.isfinite(bound):
            continue
        if low - reach <= bound <= high + reach:
            ax.axhline(bound, **(VIOLATED_STYLE if violated(bound) else LIMIT_STYLE))
            bottom, top = min(bottom, bound - 0.1 * margin), max(top, bound + 0.1 * margin)
        else:
            off_scale.append(f"{bound:.3g}")
    ax.set_ylim(bottom, top)
    if off_scale:
        ax.text(0.98, 0.03, f"bounds {', '.join(off_scale)}: off scale",
                transform=ax.transAxes, **OFF_SCALE_STYLE)


def plot_trajectories(xs, us, dt, model, u_bounds=None, u_labels=None, u_units=None, path=None,
                      title=None, show=False, max_columns=4):
    """Joint positions, velocities and controls against time, with their bounds.

    Parameters
    ----------
    xs : (T+1, nq + nv) states; us : (T, nu) controls; dt : seconds per knot.
    model : the dynamics Model: joint names and types (the units: rad, rad/s,
        N m for revolute joints; m, m/s, N for prismatic ones) and the limits
        (``lower/upper_position_limit``, ``+-velocity_limit``).
    u_bounds : (lower (nu,), upper (nu,)), optional. The control bounds; by
        default ``+-model.effort_limit`` when the controls are the joint
        torques (nu == nv).
    u_labels : nu names of the controls; by default the joint names when the
        controls are the joints' efforts (nu == nv, or nu == nv - 6 under a
        free flyer), else u[j].
    u_units : nu units of the controls (or one for all); by default the
        joints' effort units when the controls are the joints' efforts.
    Returns a Figure of three panels per coordinate (q, v, u), one column per
    coordinate, at most ``max_columns`` columns per row of panels.  A bound is
    drawn dashed (red where the motion goes past it) when it lies near the
    motion; one far off the motion's range is written in its panel instead.
    """
    xs, us = np.asarray(xs, dtype=float), np.asarray(us, dtype=float)
    nq, nv = model.nq, model.nv
    if xs.ndim != 2 or xs.shape[1] != nq + nv or us.ndim != 2 or len(us) not in (
            len(xs), len(xs) - 1):
        raise ValueError(f"expected xs (T+1, {nq + nv}) and us (T, nu), got {xs.shape} "
                         f"and {us.shape}")
    nu = us.shape[1]
    if u_bounds is None and nu == nv:
        u_bounds = (-model.effort_limit, model.effort_limit)
    dofs = _scalar_dofs(model)
    efforts = _controls_are_joint_efforts(model, nu, dofs)
    t_x, t_u = dt * np.arange(len(xs)), dt * np.arange(len(us))
    if u_labels is None:
        u_labels = [label for label, _, _, _ in dofs] if efforts else [
            f"u[{j}]" for j in range(nu)]
    if u_units is None:
        u_units = [units[2] for _, _, _, units in dofs] if efforts else [""] * nu
    elif isinstance(u_units, str):
        u_units = [u_units] * nu
    panels = [(f"q [{units[0]}]", label, t_x, xs[:, iq], model.lower_position_limit[iq],
               model.upper_position_limit[iq]) for label, iq, _, units in dofs]
    panels += [(f"v [{units[1]}]", label, t_x, xs[:, nq + iv], -model.velocity_limit[iv],
                model.velocity_limit[iv]) for label, _, iv, units in dofs]
    panels += [(_with_unit("u", u_units[j]), u_labels[j], t_u, us[:, j],
                None if u_bounds is None else u_bounds[0][j],
                None if u_bounds is None else u_bounds[1][j]) for j in range(nu)]
    columns = min(max_columns, max(len(dofs), nu, 1))
    rows_q = -(-len(dofs) // columns)
    rows_u = -(-nu // columns)
    rows = 2 * rows_q + rows_u
    block = [0] * len(dofs) + [1] * len(dofs) + [2] * nu     # q, v or u panel
    first = (0, len(dofs), 2 * len(dofs))                    # index of each block's first panel
    end = (len(dofs), 2 * len(dofs), len(panels))
    first_row = (0, rows_q, 2 * rows_q)
    places = [(first_row[b] + (n - first[b]) // columns, (n - first[b]) % columns)
              for n, b in enumerate(block)]                   # (row, column) of each panel
    figure, axes = _figure(rows, columns, (max(3.0 * columns, 5.0), 1.9 * rows), show,
                           only=places)
    for n, (ylabel, label, t, values, lower, upper) in enumerate(panels):
        ax = axes[places[n]]
        ax.plot(t, values, linewidth=1.2)
        _range_and_bounds(ax, values, lower, upper)
        ax.set_title(label, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.locator_params(nbins=4)
        ax.grid(alpha=0.3)
        if n + columns >= end[block[n]]:       # the lowest panel of its column in its block
            ax.set_xlabel("time [s]", fontsize=8)
    return _finish(figure, path, title or "joint positions, velocities and controls; "
                   "dashed: bounds (red: gone past), written in the panel when off scale",
                   grid=(rows, columns))


def end_effector_path(xs, model, frame):
    """Positions (T+1, 3) of ``frame`` (a name or an id) in the world along xs."""
    xs = np.asarray(xs, dtype=float)
    q = np.ascontiguousarray(xs[:, :model.nq])
    _, p = frame_placement(model, model.create_data(), frame, q)
    return np.array(p).reshape(len(xs), 3)


def plot_end_effector(xs, model, frame, target=None, path=None, title=None, show=False):
    """The 3D path of ``frame`` along xs (T+1, nx), with its start, end and ``target``
    (3,) or target path (T', 3) when given.  Returns the Figure."""
    p = end_effector_path(xs, model, frame)
    figure, axes = _figure(1, 1, (5.5, 5.0), show, subplot_kw=dict(projection="3d"))
    ax = axes[0, 0]
    ax.plot(p[:, 0], p[:, 1], p[:, 2], linewidth=1.5, label=f"{frame} path")
    ax.scatter(*p[0], marker="o", color="tab:green", label="start")
    ax.scatter(*p[-1], marker="s", color="tab:blue", label="end")
    points = [p]
    if target is not None:
        target = np.asarray(target, dtype=float)
        if target.ndim == 1:
            ax.scatter(*target, marker="*", s=120, color="tab:red", label="target")
        else:
            ax.plot(target[:, 0], target[:, 1], target[:, 2], "--", color="tab:red",
                    linewidth=1.0, label="target")
        points.append(target.reshape(-1, 3))
    points = np.concatenate(points)
    centre = 0.5 * (points.max(0) + points.min(0))
    half = 0.5 * max(np.ptp(points, axis=0).max(), 0.05)
    ax.set_xlim(centre[0] - half, centre[0] + half)    # equal scales on the three axes
    ax.set_ylim(centre[1] - half, centre[1] + half)
    ax.set_zlim(centre[2] - half, centre[2] + half)
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")
    ax.legend(fontsize=8, loc="upper left")
    return _finish(figure, path, title or f"end-effector path ({frame})")


def plot_convergence(result, path=None, title=None, show=False):
    """Cost, stopping criterion and gradient, step length and gaps per iteration.

    ``result`` is a :class:`~.ddp.SolverResult` (its ``history``) or a history
    dict with the keys cost, stop, grad, step, gaps.  Returns the Figure.
    """
    history = getattr(result, "history", result)
    cost = np.asarray(history["cost"], dtype=float)
    if len(cost) == 0:
        raise ValueError("the history is empty (no iteration ran)")
    it = np.arange(1, len(cost) + 1)

    def series(key):
        """|values| with the zeros left out (a log axis cannot show them)."""
        values = np.abs(np.asarray(history[key], dtype=float))
        return np.where(values > 0, values, np.nan)

    figure, axes = _figure(2, 2, (9.0, 6.0), show, sharex=True)
    axes[0, 0].plot(it, cost, "o-")
    axes[0, 0].set_ylabel("cost")
    axes[0, 1].semilogy(it, series("stop"), "o-", label="stop = sum |Qu|^2")
    axes[0, 1].semilogy(it, series("grad"), "s-", label="|grad|")
    axes[0, 1].set_ylabel("stopping criterion, gradient")
    axes[0, 1].legend(fontsize=8)
    axes[1, 0].plot(it, np.asarray(history["step"], dtype=float), "o-")
    axes[1, 0].set_ylabel("step length")
    axes[1, 0].set_ylim(0.0, 1.05)
    gaps = series("gaps")
    if np.all(np.isnan(gaps)):
        axes[1, 1].text(0.5, 0.5, "feasible at every iteration\n(all gaps 0)",
                        ha="center", va="center", transform=axes[1, 1].transAxes)
    else:
        axes[1, 1].semilogy(it, gaps, "o-")
    axes[1, 1].set_ylabel("max |gap| (before the step)")
    from matplotlib.ticker import MaxNLocator
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[1]:
        ax.set_xlabel("iteration")
    status = getattr(result, "status", None)
    return _finish(figure, path, title or "solver convergence" + (
        f" ({status}, cost {cost[-1]:.6g})" if status else ""))


def plot_solve_times(log, budget=None, path=None, title=None, show=False, cpu=True):
    """Histogram of solve times in milliseconds, with the 50/95/99th percentiles
    (solid, dashed, dotted) and the time ``budget`` (seconds) as vertical lines.

    ``log`` is an :class:`~.mpc.MPCLog` (its ``solve_times``, and its
    ``extra["cpu_times"]`` in CPU seconds when present and ``cpu``), an array
    of seconds, or a dict {label: array of seconds} of series to compare.
    Returns the Figure.
    """
    if isinstance(log, dict):
        series = {label: np.asarray(s, dtype=float) * 1e3 for label, s in log.items()}
    else:
        series = {"wall clock": np.asarray(getattr(log, "solve_times", log), dtype=float) * 1e3}
        extra = getattr(log, "extra", None) or {}
        if cpu and "cpu_times" in extra:
            series["CPU (process time)"] = np.asarray(extra["cpu_times"], dtype=float) * 1e3
    samples = len(next(iter(series.values())))
    figure, axes = _figure(1, 1, (8.0, 4.5), show)
    ax = axes[0, 0]
    everything = np.concatenate(list(series.values()))
    high = np.percentile(everything, 99.5) * 1.1 + 1e-9
    if budget is not None:
        high = max(high, 1.2e3 * budget)
    bins = np.linspace(0.0, high, 80)
    for n, (label, ms) in enumerate(series.items()):
        colour = f"C{n}"
        p50, p95, p99 = np.percentile(ms, [50, 95, 99])
        ax.hist(np.minimum(ms, high), bins=bins, alpha=0.5, color=colour,
                label=f"{label}: p50 {p50:.2f}, p95 {p95:.2f}, p99 {p99:.2f} ms")
        for value, style in ((p50, "-"), (p95, "--"), (p99, ":")):
            ax.axvline(value, color=colour, linestyle=style, linewidth=1.0)
    if budget is not None:
        ax.axvline(budget * 1e3, color="k", linewidth=1.5, label=f"budget {budget * 1e3:g} ms")
    ax.set_xlabel("solve time per control step [ms] (last bin: everything above)")
    ax.set_ylabel("control steps")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _finish(figure, path, title or f"MPC solve times ({samples} control steps; "
                   "lines: 50th, 95th, 99th percentiles)")


def plot_tracking(times, errors, path=None, title=None, ylabel="tracking error [m]",
                  show=False):
    """A tracking error (T,) against time (T,), e.g. the distance between an
    end effector and a moving target along a closed-loop run.  Returns the Figure."""
    figure, axes = _figure(1, 1, (7.0, 3.5), show)
    ax = axes[0, 0]
    ax.plot(np.asarray(times, dtype=float), np.asarray(errors, dtype=float))
    ax.set_xlabel("time [s]")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return _finish(figure, path, title or "closed-loop tracking")
