"""The derivative comparison harness: one function's partials computed four ways.

    >>> from geppetto.dynamics.derivative_check import check_derivatives
    >>> result = check_derivatives(robot, function="aba", samples=100)
    >>> print(result)                    # the table
    >>> result.methods["central"].max_abs

For ``function`` = "rnea" the partials are (dtau_dq, dtau_dv, dtau_da) of
tau = RNEA(q, v, a); for "aba", (dddq_dq, dddq_dv, dddq_dtau) of ddq =
ABA(q, v, tau); for "constraint_dynamics", (ddq_dq, ddq_dv, ddq_dtau,
dlambda_dq, dlambda_dv, dlambda_dtau) of (ddq, lambda) =
constraint_dynamics(q, v, tau) (rows nv or nc); for "impulse_dynamics",
(dv_after_dq, dv_after_dv, dimpulse_dq, dimpulse_dv) of (v_after, impulse) =
impulse_dynamics(q, v).  Derivatives in q are in the tangent space.  The
constrained functions take ``constraints=``, by default the robot's feet
(``robot.contact_frames``: point feet as 3D contacts, soles as 6D) with the
given reference frame and Baumgarte gains.  The methods:

- ``analytical``      Numba, :func:`rnea_derivatives` / :func:`aba_derivatives`
                      (Carpentier & Mansard, RSS 2018),
                      :func:`constraint_dynamics_derivatives` /
                      :func:`impulse_dynamics_derivatives` (Kudruss, Manns &
                      Kirches 2019);
- ``central``, ``forward``   finite differences on the manifold, Numba
                      (:mod:`.finite_differences`);
- ``casadi_ad``       CasADi AD of the CasADi twin, run by the SX virtual
                      machine (:mod:`.symbolic`);
- ``casadi_codegen``  the same Function generated as C and compiled
                      (skipped, saying why, when there is no C compiler).

Every method gets the same seeded random states (configurations uniform in
the limits, v and a or tau standard normal).  Errors are measured against
the analytical result; the analytical row is measured against CasADi AD (the
other exact method), or against central differences when AD is not run.  Per
state and per partial X (each of its own row count), with reference X_ref:

    abs error = max |X - X_ref|,   rel error = abs error / max |X_ref|

and the table gives, per method, the max and the median over the states of
the worst partial.  Time per evaluation: every method evaluates a stack of
states in one call (a Numba kernel, or ``casadi.Function.map``), so the
Python border is crossed once per stack; the time is the CPU time of the
calling thread (what other processes of a shared machine do is not counted),
the best of the chunked run and of whole-stack repeats, divided by the
number of states.  Setup (Numba compile or cache load, building the SX graph, compiling C) is
reported separately.
"""
import dataclasses
import sys
import time

import numpy as np

from .aba_derivatives import aba_derivatives
from .constrained_dynamics import constraint_dynamics_derivatives, impulse_dynamics_derivatives
from .constraints import ConstraintSet, RigidConstraint, as_constraint_set
from .finite_differences import (aba_derivatives_fd, constraint_dynamics_derivatives_fd,
                                 impulse_dynamics_derivatives_fd, rnea_derivatives_fd)
from .kinematics import LOCAL, LOCAL_WORLD_ALIGNED
from .liegroups import random_configuration
from .rnea_derivatives import rnea_derivatives

METHODS = ("analytical", "central", "forward", "casadi_ad", "casadi_codegen")
PARTIALS = {"rnea": ("dtau_dq", "dtau_dv", "dtau_da"),
            "aba": ("dddq_dq", "dddq_dv", "dddq_dtau"),
            "constraint_dynamics": ("ddq_dq", "ddq_dv", "ddq_dtau", "dlambda_dq", "dlambda_dv",
                                    "dlambda_dtau"),
            "impulse_dynamics": ("dv_after_dq", "dv_after_dv", "dimpulse_dq", "dimpulse_dv")}
CONSTRAINED = ("constraint_dynamics", "impulse_dynamics")
REFERENCES = {"LOCAL": LOCAL, "LOCAL_WORLD_ALIGNED": LOCAL_WORLD_ALIGNED}
CHUNK_SECONDS = 0.25     # a chunk between two updates of the progress bar
TIMING_SECONDS = 0.2     # whole-stack repeats of a fast method, for a stable time


@dataclasses.dataclass
class MethodResult:
    """The errors and the time of one method.

    ``abs_error``, ``rel_error`` : (samples, number of partials) arrays, per state
    and partial;
    ``reference`` : the method the errors are measured against;
    ``seconds_per_evaluation`` : all the partials of one state;
    ``setup_seconds`` : compile, build or load, before the first evaluation;
    ``note`` : how it was run (e.g. the compiler flags);
    ``skipped`` : None, or why the method could not run (then errors are empty).
    """
    method: str
    reference: str
    abs_error: np.ndarray
    rel_error: np.ndarray
    seconds_per_evaluation: float
    setup_seconds: float
    note: str = ""
    skipped: str = None

    def _worst(self, errors):
        return errors.max(axis=1) if errors.size else np.array([np.nan])

    max_abs = property(lambda self: float(np.max(self._worst(self.abs_error))))
    median_abs = property(lambda self: float(np.median(self._worst(self.abs_error))))
    max_rel = property(lambda self: float(np.max(self._worst(self.rel_error))))
    median_rel = property(lambda self: float(np.median(self._worst(self.rel_error))))


@dataclasses.dataclass
class DerivativeCheck:
    """What :func:`check_derivatives` returns; ``str()`` is the table.
    ``nc`` and ``constraints`` (a description) for the constrained functions."""
    model: str
    function: str
    nv: int
    samples: int
    seed: int
    partials: tuple
    methods: dict
    nc: int = 0
    constraints: str = ""

    def ran(self):
        """The results of the methods that ran, in order."""
        return [r for r in self.methods.values() if r.skipped is None]

    def fastest(self):
        """(method, how many times faster than the next fastest), or (method, nan) alone."""
        ranked = sorted(self.ran(), key=lambda r: r.seconds_per_evaluation)
        if len(ranked) < 2:
            return (ranked[0].method if ranked else None), float("nan")
        return ranked[0].method, ranked[1].seconds_per_evaluation / ranked[0].seconds_per_evaluation

    def table(self):
        headers = ["method", "vs", "max abs", "median abs", "max rel", "median rel",
                   "us/eval", "x fastest", "setup s", "note"]
        fastest = min((r.seconds_per_evaluation for r in self.ran()), default=np.nan)
        rows = []
        for r in self.methods.values():
            if r.skipped is not None:
                rows.append([r.method, "", "", "", "", "", "", "", "", f"skipped: {r.skipped}"])
                continue
            rows.append([r.method, r.reference, f"{r.max_abs:.1e}", f"{r.median_abs:.1e}",
                         f"{r.max_rel:.1e}", f"{r.median_rel:.1e}",
                         f"{r.seconds_per_evaluation * 1e6:.1f}",
                         f"{r.seconds_per_evaluation / fastest:.1f}",
                         f"{r.setup_seconds:.1f}", r.note])
        widths = [max(len(str(row[c])) for row in [headers] + rows) for c in range(len(headers))]
        lines = [f"{self.model} (nv = {self.nv}): {self.function} derivatives "
                 f"({', '.join(self.partials)}), {self.samples} random states (seed {self.seed})"]
        if self.constraints:
            lines.append(f"constraints (nc = {self.nc}): {self.constraints}")
        lines.append("")
        for n, row in enumerate([headers] + rows):
            lines.append("  ".join(str(cell).ljust(w) if c in (0, 1, len(row) - 1)
                                   else str(cell).rjust(w)
                                   for c, (cell, w) in enumerate(zip(row, widths))).rstrip())
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        method, speedup = self.fastest()
        if method is not None and np.isfinite(speedup):
            lines.append(f"\nfastest: {method}, {speedup:.1f}x faster than the next.")
        return "\n".join(lines)

    __str__ = table


class _Skipped(Exception):
    """A method that cannot run here (no casadi, no C compiler); the message says why."""


class _Progress:
    """A one-line progress bar on stderr: ``label [#####.....] k/n``."""

    def __init__(self, enabled, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = self.stream.isatty() if enabled is None else bool(enabled)

    def status(self, text):
        if self.enabled:
            self.stream.write(f"\r\033[K{text}")
            self.stream.flush()

    def bar(self, label, done, total, elapsed):
        filled = int(20 * done / max(total, 1))
        self.status(f"{label:<16} [{'#' * filled}{'.' * (20 - filled)}] {done}/{total}  "
                    f"{elapsed:.1f} s")

    def done(self):
        self.status("")


def _numba_functions(model, function, cs, settings):
    """(analytical(q, v, u), finite(method) -> fd(q, v, u)) for ``function``; u is a
    or tau, unused by impulse_dynamics."""
    data = model.create_data()
    if function == "constraint_dynamics":
        return ((lambda q, v, u: constraint_dynamics_derivatives(model, data, q, v, u, cs,
                                                                  **settings)),
                lambda method: (lambda q, v, u: constraint_dynamics_derivatives_fd(
                    model, data, q, v, u, cs, **settings, method=method)))
    if function == "impulse_dynamics":
        return ((lambda q, v, u: impulse_dynamics_derivatives(model, data, q, v, cs,
                                                               **settings)),
                lambda method: (lambda q, v, u: impulse_dynamics_derivatives_fd(
                    model, data, q, v, cs, **settings, method=method)))
    analytical = rnea_derivatives if function == "rnea" else aba_derivatives
    fd = rnea_derivatives_fd if function == "rnea" else aba_derivatives_fd
    return ((lambda q, v, u: analytical(model, data, q, v, u)),
            lambda method: (lambda q, v, u: fd(model, data, q, v, u, method=method)))


def _evaluators(model, function, methods, progress, cs=None, settings=None):
    """{method: (setup() -> note, evaluate(q, v, u) -> the partials, each (K, rows, nv))}."""
    analytical, finite = _numba_functions(model, function, cs, settings)
    name = f"{function}_derivatives"
    casadi_functions = {}

    def casadi_setup(compiled):
        def setup():
            try:
                from . import symbolic
            except ImportError as error:
                raise _Skipped(f"casadi cannot be imported ({error})") from None
            functions = symbolic.symbolic_functions(model)
            progress.status(f"building the CasADi {name} of {model.name} ...")
            f = getattr(functions, name)
            if function in CONSTRAINED:
                f = f(cs, **settings)
            if not compiled:
                casadi_functions["casadi_ad"] = f
                return f"SX VM, {f.n_instructions()} instructions"
            flags = symbolic.default_flags(f)
            progress.status(f"compiling the C of {name} of {model.name} ({' '.join(flags)}, "
                            f"{f.n_instructions()} instructions; cached for the next runs) ...")
            try:
                casadi_functions["casadi_codegen"] = functions.compiled(f, flags=flags)
            except symbolic.CodegenUnavailable as error:
                raise _Skipped(str(error)) from None
            seconds = functions.compile_seconds[f.name(), flags]
            return (f"C, gcc {' '.join(flags)}, "
                    + (f"compiled in {seconds:.0f} s" if seconds else "library from cache"))
        return setup

    def casadi_evaluate(method):
        def evaluate(q, v, u):
            from .symbolic import evaluate as evaluate_stack
            inputs = (q, v) if function == "impulse_dynamics" else (q, v, u)
            blocks = evaluate_stack(casadi_functions[method], *inputs)
            # a (K, rows) block is a (K, rows, 1) one whose column evaluate dropped
            return [block.reshape(q.shape[0], -1, model.nv) for block in blocks]
        return evaluate

    table = {"analytical": (lambda: "Numba", analytical),
             "central": (lambda: "Numba", finite("central")),
             "forward": (lambda: "Numba", finite("forward")),
             "casadi_ad": (casadi_setup(False), casadi_evaluate("casadi_ad")),
             "casadi_codegen": (casadi_setup(True), casadi_evaluate("casadi_codegen"))}
    return {method: table[method] for method in methods}


def _run(label, setup, evaluate, q, v, u, progress):
    """(values: the partials, each (K, rows, nv), seconds per evaluation, setup
    seconds, note) of one method.

    Evaluations are timed by the CPU time of this thread (every method runs in
    it: serial Numba kernels, ``Function.map`` serial), so other processes of
    a shared machine do not count; setup is wall-clock time (a compiler runs
    in its own process).
    """
    K = q.shape[0]
    start = time.perf_counter()
    note = setup()
    evaluate(q[:1], v[:1], u[:1])    # compile or load the Numba kernels
    setup_seconds = time.perf_counter() - start
    values = []
    done, cpu, wall, chunk = 0, 0.0, time.perf_counter(), 1
    while done < K:
        progress.bar(label, done, K, time.perf_counter() - wall)
        stop = min(K, done + chunk)
        start = time.thread_time()
        values.append(evaluate(q[done:stop], v[done:stop], u[done:stop]))
        seconds = max(time.thread_time() - start, 1e-9)
        cpu += seconds
        chunk = max(1, int(CHUNK_SECONDS / (seconds / (stop - done))))
        done = stop
    progress.bar(label, done, K, time.perf_counter() - wall)
    best, repeats = cpu, 0
    while repeats < 5 and repeats * best < TIMING_SECONDS:
        start = time.thread_time()
        evaluate(q, v, u)
        best = min(best, time.thread_time() - start)
        repeats += 1
    stacked = [np.concatenate([np.asarray(chunk[b]).reshape(-1, *chunk[b].shape[-2:])
                               for chunk in values]) for b in range(len(values[0]))]
    return stacked, best / K, setup_seconds, note


def _errors(values, reference):
    """(abs, rel) errors (K, number of partials) per state and partial; each partial
    (K, rows, nv), rows differing between partials."""
    absolute = np.stack([np.abs(x - r).max(axis=(1, 2)) if x.size else np.zeros(len(x))
                         for x, r in zip(values, reference)], axis=1)
    scale = np.stack([np.abs(r).max(axis=(1, 2)) if r.size else np.zeros(len(r))
                      for r in reference], axis=1)
    return absolute, absolute / np.where(scale > 0.0, scale, 1.0)


def check_derivatives(robot_or_model, function="rnea", samples=100, methods=METHODS, seed=0,
                      progress=None, constraints=None, reference=None, Kp=None, Kd=None,
                      restitution=0.0, mu=0.0, max_iterations=1):
    """Compute the partials of ``function`` four ways and compare them.

    Parameters
    ----------
    robot_or_model : a Model, or an object with a ``model`` (a Robot).
    function : "rnea", "aba", "constraint_dynamics" or "impulse_dynamics".
    samples : number of random states.
    methods : subset of :data:`METHODS`; "analytical" (the reference) is
        always run.
    seed : seeds the random states.
    progress : True, False, or None (the default: on when stderr is a terminal),
        a progress bar on stderr.
    constraints : for the constrained functions, a ConstraintSet or a list of
        RigidConstraint; by default the robot's ``contact_frames`` (a ValueError
        when it has none).
    reference, Kp, Kd : the reference frame ("LOCAL", "LOCAL_WORLD_ALIGNED" or
        their codes; default LOCAL) and the Baumgarte gains (default 0) of the
        default contacts; refused with ``constraints``, which carry their own.
    restitution : impulse_dynamics' restitution coefficient.
    mu, max_iterations : the proximal settings of the constrained functions.

    Returns
    -------
    DerivativeCheck, whose ``methods[name]`` is a :class:`MethodResult`.
    """
    model = getattr(robot_or_model, "model", robot_or_model)
    if function not in PARTIALS:
        raise ValueError(f"function must be one of {tuple(PARTIALS)}, got {function!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; expected a subset of {METHODS}")
    if int(samples) < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    methods = ["analytical"] + [m for m in METHODS if m in methods and m != "analytical"]
    name = getattr(robot_or_model, "name", model.name)
    cs, settings = _constrained_arguments(robot_or_model, name, function, constraints, reference,
                                          Kp, Kd, restitution, mu, max_iterations)
    rng = np.random.default_rng(seed)
    K = int(samples)
    q = random_configuration(model, rng, size=K)
    v, u = rng.standard_normal((K, model.nv)), rng.standard_normal((K, model.nv))
    bar = _Progress(progress)
    npartials = len(PARTIALS[function])
    values, results = {}, {}
    for method, (setup, evaluate) in _evaluators(model, function, methods, bar, cs,
                                                 settings).items():
        try:
            values[method], seconds, setup_seconds, note = _run(
                f"{name} {function} {method}", setup, evaluate, q, v, u, bar)
        except _Skipped as error:
            results[method] = MethodResult(method, "", np.empty((0, npartials)),
                                           np.empty((0, npartials)), np.nan, np.nan,
                                           skipped=str(error))
            continue
        results[method] = MethodResult(method, "", None, None, seconds, setup_seconds, note)
    bar.done()
    for method, result in results.items():
        if result.skipped is not None:
            continue
        if method == "analytical":
            result.reference = next((m for m in ("casadi_ad", "casadi_codegen", "central")
                                     if m in values), "analytical")
        else:
            result.reference = "analytical"
        result.abs_error, result.rel_error = _errors(values[method], values[result.reference])
    return DerivativeCheck(name, function, model.nv, K, seed, PARTIALS[function], results,
                           cs.size if cs is not None else 0, _describe(cs, settings))


def _constrained_arguments(robot_or_model, name, function, constraints, reference, Kp, Kd,
                           restitution, mu, max_iterations):
    """(ConstraintSet or None, settings dict or None) of ``function``."""
    model = getattr(robot_or_model, "model", robot_or_model)
    defaults = {"reference": reference, "Kp": Kp, "Kd": Kd}
    given = [key for key, value in defaults.items() if value is not None]
    if function not in CONSTRAINED:
        if constraints is not None or given or restitution != 0.0 or mu != 0.0 \
                or max_iterations != 1:
            raise ValueError(f"constraints, reference, Kp, Kd, restitution, mu and "
                             f"max_iterations apply to {CONSTRAINED}, not to {function!r}")
        return None, None
    if constraints is not None:
        if given:
            raise ValueError(f"{', '.join(given)} set the default contacts; the given "
                             "constraints carry their own")
        cs = as_constraint_set(model, constraints)
    else:
        contacts = getattr(robot_or_model, "contact_frames", ())
        if not contacts:
            raise ValueError(f"{name} has no default contacts (robot.contact_frames): pass "
                             "constraints=[...] (geppetto.dynamics.constraints.contact_3d, "
                             "contact_6d, loop_closure)")
        if isinstance(reference, str):
            if reference.upper() not in REFERENCES:
                raise ValueError(f"reference must be one of {tuple(REFERENCES)}, got "
                                 f"{reference!r}")
            reference = REFERENCES[reference.upper()]
        cs = ConstraintSet(model, [
            RigidConstraint(model, size, frame, reference=LOCAL if reference is None else
                            reference, Kp=0.0 if Kp is None else Kp, Kd=0.0 if Kd is None
                            else Kd) for frame, size in contacts])
    settings = {"mu": mu, "max_iterations": max_iterations}
    if function == "impulse_dynamics":
        settings["restitution"] = restitution
    elif restitution != 0.0:
        raise ValueError("restitution applies to impulse_dynamics")
    return cs, settings


def _describe(cs, settings):
    """One line on the constraints and the settings, for the table."""
    if cs is None:
        return ""
    names = {v: k for k, v in REFERENCES.items()}
    parts = [f"{c.name} {c.kind}D {names.get(c.reference, c.reference)}"
             + (f" Kp {c.Kp:g} Kd {c.Kd:g}" if c.Kp or c.Kd else "") for c in cs]
    extra = []
    if "restitution" in settings:
        extra.append(f"restitution {settings['restitution']:g}")
    if settings["mu"] > 0.0:
        extra.append(f"mu {settings['mu']:g}, {settings['max_iterations']} iterations")
    return ", ".join(parts) + ("; " + ", ".join(extra) if extra else "")


# --- Command line: geppetto check-derivatives ---------------------------------------

def add_arguments(parser):
    """The options of ``geppetto check-derivatives``."""
    parser.add_argument("--robot", default="ur5",
                        help="one of geppetto.robots.available_robots() (default: ur5)")
    parser.add_argument("--function", choices=tuple(PARTIALS), default="rnea",
                        help="whose partial derivatives (default: rnea)")
    parser.add_argument("--samples", type=int, default=100,
                        help="number of random states (default: 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random states")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                        metavar="METHOD",
                        help=f"subset of {', '.join(METHODS)} (default: all)")
    group = parser.add_argument_group(
        "constrained functions", "constraint_dynamics and impulse_dynamics, on the robot's "
        "feet (point feet: 3D contacts, soles: 6D)")
    group.add_argument("--reference", choices=tuple(REFERENCES), default=None,
                       help="the frame of the contacts (default: LOCAL)")
    group.add_argument("--Kp", type=float, default=None,
                       help="Baumgarte position gain of the contacts (default: 0)")
    group.add_argument("--Kd", type=float, default=None,
                       help="Baumgarte velocity gain of the contacts (default: 0)")
    group.add_argument("--restitution", type=float, default=0.0,
                       help="impulse_dynamics' restitution coefficient (default: 0)")
    group.add_argument("--mu", type=float, default=0.0,
                       help="proximal damping (default: 0, the exact KKT solve)")
    group.add_argument("--max-iterations", type=int, default=1,
                       help="proximal iterations (default: 1)")


def main(options, robot):
    """Run the check for ``robot`` with the parsed ``options``; print the table
    (exit status 0), or the reason the options are refused (status 2)."""
    extra = {}
    if options.function in CONSTRAINED:
        extra = dict(reference=options.reference, Kp=options.Kp, Kd=options.Kd,
                     mu=options.mu, max_iterations=options.max_iterations)
        if options.function == "impulse_dynamics":
            extra["restitution"] = options.restitution
    try:
        result = check_derivatives(robot, options.function, options.samples, options.methods,
                                   options.seed, **extra)
    except ValueError as error:
        print(f"geppetto check-derivatives: error: {error}", file=sys.stderr)
        return 2
    print(result.table())
    return 0
