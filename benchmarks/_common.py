"""What every benchmark needs: one thread, timing, the machine, an in-jit loop,
first-call latency, tables, JSON and bar charts.

The rules they follow (DESIGN.md principle 8, STYLE.md point 10): compile
before timing and report compile time separately, time several repeats and
keep the best and the median, compare with the anchor in the same run as
ratios, and state the machine.
"""
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections import namedtuple

import numpy as np

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# Seconds per call: the best and the median of the repeats.
Timing = namedtuple("Timing", ["best", "median"])

# The clocks a benchmark may time with.  "cpu" is the CPU time of the calling
# thread: time the scheduler gives to other jobs on a shared machine does not
# count, so repeats agree far better under load (a Pinocchio loop on a busy
# 2-core machine: median 6.8 us wall, 2.8 us cpu, best 2.7 both); on a quiet
# machine the two agree for single-threaded code.
CLOCKS = {"cpu": time.thread_time_ns, "wall": time.perf_counter_ns}


def run_single_threaded(module):
    """Start ``python -m module`` again with NUMBA_NUM_THREADS=1 unless it is set.

    Numba reads the variable when it is imported, and importing geppetto
    imports Numba, so a benchmark can only be sure of one thread by setting it
    in the environment of a new interpreter.  Returns when already set.
    """
    if os.environ.get("NUMBA_NUM_THREADS") == "1":
        return
    environment = dict(os.environ, NUMBA_NUM_THREADS="1")
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]], environment)


def time_per_call(run, calls, repeats, clock="cpu"):
    """Time ``run()``, which makes ``calls`` calls, ``repeats`` times.

    Returns a :data:`Timing` in seconds per call, measured with
    ``CLOCKS[clock]``.  The garbage collector is off while timing; compile
    (call once) before.
    """
    return time_side_by_side({"run": run}, calls, repeats, clock)["run"]


def time_side_by_side(runs, calls, repeats, clock="cpu"):
    """:func:`time_per_call` for several ``{label: run}``, their repeats interleaved.

    Interleaving gives each contender the same share of whatever else the
    machine is doing, so their ratio stays fair on a busy machine.  Returns
    ``{label: Timing}`` on ``CLOCKS[clock]`` (from :func:`time_runs`).
    """
    prefix = {"cpu": "cpu_", "wall": ""}[clock]
    return {label: Timing(t[prefix + "best"], t[prefix + "median"])
            for label, t in time_runs(runs, calls, repeats).items()}


def time_runs(runs, calls, repeats):
    """Seconds per call of ``{label: run}`` (each ``run()`` makes ``calls`` calls).

    The repeats of the runs are interleaved, the garbage collector is off.
    Returns ``{label: {best, median, cpu_best, cpu_median}}``: wall-clock time
    (perf_counter) and CPU time of the calling thread (thread_time).  The CPU
    time leaves out the time the thread waited for a core, so on a loaded
    machine it is the better estimate of the single-threaded cost; with more
    than one thread it misses the other threads' work (use the wall clock).
    Self-contained (it imports what it uses): benchmarks/ocp and solvers send
    its source to Crocoddyl's side, which times with this same function.
    """
    import gc
    import statistics
    import time
    wall = {label: [] for label in runs}
    cpu = {label: [] for label in runs}
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            for label, run in runs.items():
                wall_start, cpu_start = time.perf_counter_ns(), time.thread_time_ns()
                run()
                cpu_stop, wall_stop = time.thread_time_ns(), time.perf_counter_ns()
                wall[label].append((wall_stop - wall_start) * 1e-9 / calls)
                cpu[label].append((cpu_stop - cpu_start) * 1e-9 / calls)
    finally:
        if enabled:
            gc.enable()
    return {label: dict(best=min(wall[label]), median=statistics.median(wall[label]),
                        cpu_best=min(cpu[label]), cpu_median=statistics.median(cpu[label]))
            for label in runs}


def git_commit():
    """The checkout's short commit, with "+dirty" when tracked files differ from it;
    None outside a git checkout.  Stamped into every benchmark's JSON so that a
    table rendered from it (render_readme.py) names the code it measured."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        status = subprocess.run(["git", "-C", root, "status", "--porcelain",
                                 "--untracked-files=no"], capture_output=True, text=True,
                                timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def machine(**versions):
    """The machine and the versions that matter, as a dict (extra versions by keyword).

    ``load_average_1min`` tells how busy the machine was when the benchmark
    started (compare it with ``usable_cores``): on a busy machine the best of
    the repeats is the figure to trust, and the ratios more than the times.
    """
    import numba

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return dict(cpu=cpu, logical_cores=os.cpu_count(), usable_cores=usable,
                platform=platform.platform(), python=platform.python_version(),
                numpy=np.__version__, numba=numba.__version__,
                numba_threads=numba.config.NUMBA_NUM_THREADS,
                load_average_1min=os.getloadavg()[0], commit=git_commit(),
                date=datetime.datetime.now().isoformat(timespec="seconds"), **versions)


def describe_machine(info):
    """One line for the printed output and the chart."""
    extra = ", ".join(f"{name} {value}" for name, value in info.items()
                      if name not in ("cpu", "logical_cores", "usable_cores", "platform",
                                      "python", "date", "numba_threads")
                      and not name.startswith("load_average"))
    return (f"{info['cpu']}, {info['usable_cores']} cores, Python {info['python']}, "
            f"{extra}, NUMBA_NUM_THREADS={info['numba_threads']}, "
            f"load average {info['load_average_1min']:.1f}")


def beside_pinocchio():
    """(pinocchio or None, the machine of :func:`machine` with its version, why
    Pinocchio's C++ is not timed or None) for a benchmark beside Pinocchio: prints the
    machine and what is left out (Pinocchio not installed: its columns stay empty),
    and builds the C++ harness (:mod:`.pinocchio_cpp`) when it can be."""
    from . import pinocchio_cpp
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    info = machine(pinocchio=pin.__version__ if pin else "not installed")
    load = os.getloadavg()
    print(f"machine: {describe_machine(info)}\nload average at start (1, 5, 15 min): "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)
    if pin is None:
        print("Pinocchio is not installed (pip install pin): its columns are left empty")
    cpp_skipped = pinocchio_cpp.unavailable()
    if cpp_skipped:
        print(f"Pinocchio's C++ is not timed: {cpp_skipped}")
    else:
        pinocchio_cpp.build()
    return pin, info, cpp_skipped


def capture_kernel_call(public_function, kernel_name, *args, **kwargs):
    """The kernel that ``public_function(*args, **kwargs)`` calls, and its arguments.

    Replaces ``kernel_name`` in the module that defines ``public_function`` by
    a recorder for one call, then puts it back.  This lets a benchmark call a
    kernel exactly as the public function does (validated inputs, the Data
    arrays it passes) without copying the kernel's signature, which changes
    as the kernels are tuned.  Returns ``(kernel, args_tuple)``.
    """
    module = sys.modules[public_function.__module__]
    kernel = getattr(module, kernel_name)
    calls = []

    def record(*kernel_args):
        calls.append(kernel_args)
        return kernel(*kernel_args)

    # validation.call_kernel passes a kernel marked model_kernel the model's ModelRef
    record.takes_model_ref = getattr(kernel, "takes_model_ref", False)
    setattr(module, kernel_name, record)
    try:
        public_function(*args, **kwargs)
    finally:
        setattr(module, kernel_name, kernel)
    if len(calls) != 1:
        raise RuntimeError(f"{module.__name__}.{public_function.__name__} called "
                           f"{kernel_name} {len(calls)} times, expected once")
    return kernel, calls[0]


def jit_loop(kernel, args, batch_size):
    """A jitted ``loop(n)`` that calls ``kernel`` n times on one state each.

    ``args`` are the kernel's arguments for a stack of ``batch_size`` states
    (from :func:`capture_kernel_call`); every array whose first axis has that
    length is sliced to ``[k:k + 1]``, so call j sees state ``k = j %
    batch_size`` alone, as a stack of one, in the same C layout.  The Python
    border is crossed once per ``loop(n)``, so ``time / n`` is the cost of
    one call made from compiled code (the kernel's scratch allocations
    included).

    Compiled with plain ``numba.njit``, not cached: a cached caller would
    keep running old copies of the kernels after they change, because
    Numba's cache does not look at callees in other files.
    """
    import numba

    names = [f"arg{i}" for i in range(len(args))]
    sliced = [f"{name}[k:k + 1]" if _is_batched(value, batch_size) else name
              for name, value in zip(names, args)]
    source = (f"def loop(n, {', '.join(names)}):\n"
              f"    for j in range(n):\n"
              f"        k = j % {batch_size}\n"
              f"        kernel({', '.join(sliced)})\n")
    namespace = {"kernel": kernel}
    exec(compile(source, f"<jit_loop of {kernel.__name__}>", "exec"), namespace)
    compiled = numba.njit(namespace["loop"])
    return lambda n: compiled(n, *args)


def _is_batched(value, batch_size):
    return isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == batch_size


def first_call_latency(script, cache_dir, *script_args):
    """Run ``python -c script *script_args`` with ``NUMBA_CACHE_DIR=cache_dir``.

    The script prints one JSON object on its last line, which is returned.
    An empty ``cache_dir`` measures compiling; the same one again, loading.
    """
    environment = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    finished = subprocess.run([sys.executable, "-c", script, *script_args], env=environment,
                              capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise RuntimeError(f"latency subprocess failed:\n{finished.stderr}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def format_table(headers, rows):
    """A plain-text table; the first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[c]) for row in cells) for c in range(len(headers))]

    def line(row):
        return "  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                         for c, (cell, w) in enumerate(zip(row, widths)))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(row) for row in cells[1:]])


def write_json(path, payload):
    """Write ``payload`` as indented JSON, creating the folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as out:
        json.dump(payload, out, indent=2, sort_keys=False)
        out.write("\n")


def grouped_bar_chart(path, panels, groups, series, title, ylabel, log=True):
    """A row of panels of grouped bars, written as a PNG (Agg backend).

    Parameters
    ----------
    panels : list of str
        One panel each (e.g. the functions).
    groups : list of str
        The groups along each panel's x axis (e.g. the robots).
    series : dict of label -> array (len(panels), len(groups))
        One bar per group and label; NaN leaves a gap.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    n = len(series)
    width = 0.8 / n
    x = np.arange(len(groups))
    columns = min(len(panels), 2)
    rows = (len(panels) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(6.2 * columns, 3.9 * rows),
                                squeeze=False)
    colours = plt.get_cmap("tab10").colors
    for p, (panel, axis) in enumerate(zip(panels, axes.flat)):
        for s, (label, values) in enumerate(series.items()):
            axis.bar(x - 0.4 + (s + 0.5) * width, np.asarray(values, dtype=float)[p],
                     width, label=label, color=colours[s % len(colours)])
        axis.set_title(panel)
        axis.set_xticks(x, groups)
        if log:
            axis.set_yscale("log")
            axis.yaxis.set_major_formatter(FuncFormatter(_plain_number))
            axis.yaxis.set_minor_formatter(FuncFormatter(_two_and_five))
        axis.set_ylabel(ylabel)
        axis.grid(axis="y", which="both", alpha=0.3)
    for axis in list(axes.flat)[len(panels):]:
        axis.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=min(n, 3), frameon=False)
    figure.suptitle(title, fontsize=10)
    legend_rows = (n + 2) // 3
    figure.tight_layout(rect=(0, 0.045 * legend_rows, 1, 1))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _plain_number(value, _position):
    return f"{value:g}"


def _two_and_five(value, _position):
    """Minor tick labels of a log axis: only at 2 and 5 times a power of ten."""
    mantissa = value / 10 ** np.floor(np.log10(value))
    return f"{value:g}" if np.isclose(mantissa, 2) or np.isclose(mantissa, 5) else ""
