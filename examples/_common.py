"""What the example scripts share: their command line, their output folder,
and viewable versions of the built-in pendulum and cartpole (primitive shapes
for meshcat; those models come without a URDF).

Every example is ``main(reduced=False, out=..., live=False)``: ``reduced``
runs a smaller version of it (fewer knots, iterations or control steps) for
the tests; ``out`` is the folder of the HTML animation and the plots (None:
nothing written); ``live`` plays the solution in a meshcat viewer bound to
127.0.0.1.  From the shell::

    python -m geppetto.examples.<name> [--out DIR] [--live] [--reduced]
"""
import argparse
import contextlib
import os
import sys
import threading
import time

import numpy as np
from numba.core import event

from .. import robots

ROD = (0.85, 0.85, 0.85, 1.0)
BOB = (0.85, 0.33, 0.1, 1.0)
CART = (0.2, 0.4, 0.8, 1.0)


def run(main, name, doc, argv=None):
    """Parse ``--out --live --reduced`` (``argv``, default the command line), call
    ``main``, then list the files it wrote; returns the exit status 0."""
    parser = argparse.ArgumentParser(prog=f"python -m geppetto.examples.{name}",
                                     description=doc.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("geppetto-examples", name),
                        help="folder of the HTML animation and the plots "
                             "(default: %(default)s)")
    parser.add_argument("--live", action="store_true",
                        help="also play the solution in a live meshcat viewer (127.0.0.1)")
    parser.add_argument("--reduced", action="store_true",
                        help="the small version the tests run")
    options = parser.parse_args(argv)
    started = time.time()
    main(reduced=options.reduced, out=options.out, live=options.live)
    written = written_since(options.out, started)
    if written:
        print(f"written to {os.path.abspath(options.out)}:")
        for name in written:
            print(f"  {name}")
    return 0


def written_since(out, started):
    """Names of the files in ``out`` (sorted) written at or after the time ``started``
    (seconds since the epoch): what this run wrote, not what an earlier run left."""
    if not os.path.isdir(out):
        return []
    return sorted(name for name in os.listdir(out)
                  if os.path.isfile(os.path.join(out, name))
                  and os.path.getmtime(os.path.join(out, name)) >= started - 1.0)


def output(out, filename):
    """``out/filename``, creating ``out``; None when ``out`` is None."""
    if out is None:
        return None
    os.makedirs(out, exist_ok=True)
    return os.path.join(out, filename)


def show(robot, xs, dt, out, name, live, camera_position=None):
    """Export the animation of xs to ``out/<name>.html`` and, when ``live``, play
    it in a meshcat viewer on 127.0.0.1 (kept open until Enter is pressed)."""
    from ..robots.visualize import MeshcatVisualizer
    path = output(out, name + ".html")
    if path is not None:
        viewer = MeshcatVisualizer(robot, server=False)
        print("animation:", viewer.export_html(xs, dt, path, camera_position=camera_position))
    if live:
        with MeshcatVisualizer(robot) as viewer:
            print("meshcat viewer:", viewer.web_url)
            viewer.play(xs, dt)
            input("press Enter to close the viewer ")


def standing_guess(problem):
    """(xs, us): every knot at the problem's x0 and the quasi-static controls holding
    it there, the legged examples' initial guess."""
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    return xs, problem.quasi_static(xs)


def show_and_plot(robot, result, dt, out, name, live, reduced, camera_position, end_effector,
                  end_effector_plot, u_bounds=None):
    """What the legged examples do with a solution: print it, export (and play) the
    animation, and write into ``out`` the joint trajectories (``joints.png``, not in
    the reduced form: a hundred panels), the path of ``end_effector`` (a frame name)
    as ``end_effector_plot`` and the convergence (``convergence.png``)."""
    from ..solvers import plots
    print(result)
    show(robot, result.xs, dt, out, name, live, camera_position=camera_position)
    if out is None:
        return
    if not reduced:
        plots.plot_trajectories(result.xs, result.us, dt, robot.model, u_bounds=u_bounds,
                                path=output(out, "joints.png"))
    plots.plot_end_effector(result.xs, robot.model, end_effector,
                            path=output(out, end_effector_plot))
    plots.plot_convergence(result, path=output(out, "convergence.png"))


def _visual(model, name, joint, kind, size, p, rgba):
    return robots.VisualGeometry(name=name, link=name, frame_id=0, joint=joint, R=np.eye(3),
                                 p=np.asarray(p, dtype=float), kind=kind, size=size, rgba=rgba)


def pendulum_robot(length=1.0, mass=1.0):
    """:func:`geppetto.robots.pendulum` as a Robot with a rod and a bob to draw."""
    model = robots.pendulum(length, mass)
    visuals = [_visual(model, "rod", 1, "cylinder", (0.02, length), (0, 0, -length / 2), ROD),
               _visual(model, "bob", 1, "sphere", (0.08,), (0, 0, -length), BOB)]
    return robots.Robot(model, visuals=visuals, q0=np.zeros(model.nq))


def cartpole_robot(cart_mass=1.0, pole_mass=0.1, pole_length=0.5):
    """:func:`geppetto.robots.cartpole` as a Robot: a rail, the cart, the pole and its tip."""
    model = robots.cartpole(cart_mass, pole_mass, pole_length)
    visuals = [_visual(model, "rail", 0, "box", (4.0, 0.02, 0.02), (0, 0, -0.06), ROD),
               _visual(model, "cart", 1, "box", (0.2, 0.1, 0.1), (0, 0, 0), CART),
               _visual(model, "pole", 2, "cylinder", (0.01, pole_length),
                       (0, 0, pole_length / 2), ROD),
               _visual(model, "tip", 2, "sphere", (0.03,), (0, 0, pole_length), BOB)]
    return robots.Robot(model, visuals=visuals, q0=np.zeros(model.nq))


class CompileProgress(event.Listener):
    """Says what Numba compiles while it compiles: a line per stage, and on a
    terminal the kernel being compiled, updated every second.  Silent on a warm
    cache: it listens to Numba's ``numba:compile`` event, which a dispatcher
    fires only when it compiles a signature (a cache miss), never when it loads
    one from the on-disk cache.

        progress = CompileProgress(["the dynamics", "their derivatives"])
        with progress.stage(0):
            problem.calc(xs, us)
        with progress.stage(1):
            problem.calc_diff(xs, us)

    ``stream`` defaults to sys.stdout at construction; ``compiled`` counts the
    dispatchers compiled in each stage and ``seconds`` the stage's wall time.
    """

    def __init__(self, stages, stream=None, refresh=1.0):
        self.stages = list(stages)
        self.stream = sys.stdout if stream is None else stream
        self.live = self.stream.isatty()
        self.refresh = refresh
        self.compiled = [0] * len(self.stages)
        self.seconds = [0.0] * len(self.stages)
        self.announced = False
        self._current, self._compiling, self._started = None, [], 0.0
        self._lock, self._output = threading.Lock(), threading.Lock()

    def on_start(self, ev):
        dispatcher = ev.data["dispatcher"]
        with self._lock:
            self._compiling.append(dispatcher.py_func.__qualname__)
            first = self.compiled[self._current] == 0
            self.compiled[self._current] += 1
        self._announce()
        if first and not self.live:
            self._write(f"  {self._prefix()}: compiling ...\n")
        self._redraw()

    def on_end(self, ev):
        with self._lock:
            self._compiling.pop()

    def _prefix(self, index=None):
        index = self._current if index is None else index
        return f"[{index + 1}/{len(self.stages)}] {self.stages[index]}"

    def _announce(self):
        if not self.announced:
            self.announced = True
            self._write("compiling the kernels (first run only; cached for the next runs):\n")

    def say(self, index, text):
        """Write a line about stage ``index`` (e.g. compiled elsewhere)."""
        self._announce()
        self._write(("\r\x1b[K" if self.live else "") + f"  {self._prefix(index)}: {text}\n")

    def _write(self, text):
        with self._output:
            self.stream.write(text)
            self.stream.flush()

    def _redraw(self):
        if not self.live or self.compiled[self._current] == 0:
            return
        with self._lock:
            name = self._compiling[-1] if self._compiling else "..."
            count = self.compiled[self._current]
        elapsed = time.perf_counter() - self._started
        self._write(f"\r\x1b[K  {self._prefix()}: compiling {name} "
                    f"({count} kernels, {elapsed:.0f} s)")

    @contextlib.contextmanager
    def stage(self, index):
        """Run the block as stage ``index``, reporting what it compiles."""
        self._current, self._started = index, time.perf_counter()
        done = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(done,), daemon=True)
        with event.install_listener("numba:compile", self):
            if self.live:
                ticker.start()
            try:
                yield self
            finally:
                done.set()
                if self.live:
                    ticker.join()
        self.seconds[index] = time.perf_counter() - self._started
        if self.compiled[index]:
            self._write(("\r\x1b[K" if self.live else "") + f"  {self._prefix()}: "
                        f"{self.compiled[index]} kernels compiled in {self.seconds[index]:.0f} s\n")

    def _tick(self, done):
        while not done.wait(self.refresh):
            self._redraw()
