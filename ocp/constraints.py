"""The constraint residuals of a ShootingProblem over the horizon in one compiled call.

A constraint is a residual with bounds (:class:`~.costs.Constraint`): its residual hands
out the same fused step as when a cost uses it (:mod:`.fused`), so the constraints of a
stage form a program of the phase interpreter (:func:`.fused._interpret`, residual
blocks only, no accumulation; one per model object their residuals use), and
:func:`_evaluate` runs the programs of all stages
(running phases and the terminal knot) in one call.  The values (and, in DIFF mode, the
Jacobians) land in the constraint data, ``data.constraints[j].r`` (K, nr), ``.Rx`` (K,
nr, ndx), ``.Ru`` (K, nr, nu), where :meth:`.stage.StageModel.calc_constraints` writes
them too; a contact stage's friction pyramids evaluated as one group
(:class:`.contacts.LinearForceRows`) land in the group's arrays instead, which
:attr:`HorizonConstraints.sources` names for each constraint (the solvers read them
there).

Preconditions, as for :meth:`.stage.StageModel.calc_constraints` with ``refresh=False``:
the residuals read the knots' kinematics as the last :meth:`.problem.ShootingProblem.
calc_diff` (DIFF), ``calc`` or ``calc_costs`` (a line search's trial) at the same (xs,
us) left them (those refresh what the costs and the constraints read).

The constraints of a stage that cannot join a program (a residual without a fused
step, one that reads the stage's dynamics, such as a contact force; all of a phase the
interpreter does not take) are evaluated from Python after the call, one constraint at
a time as its ``calc_constraints`` does, and the others of that stage join the program
(go1 "cones": the centre-of-mass row beside the feet's pyramids).  The linear force
rows of one contact dynamics (the friction pyramids of a stage's feet: residuals of
equal ``group_key()``) are evaluated together, one call for all of them
(:class:`.contacts.LinearForceRows`), their values side by side in the group's arrays
(``sources``).  Both on go1 "cones": the rows' DIFF 330 -> 121 us per call, a trial's
CALC 170 -> 54 us (qp22, benchmarks/constrained_notes.md).
"""
import numba
import numpy as np

from ..dynamics.config import kernel
from .fused import DIFF, _interpret, _model_indices, interpreted
from .held import held, typed_list
from .problem import _numba_threads


@kernel
def _evaluate(xs, us, programs, windows, mode):
    """Run program p on the knots windows[p, 0]:windows[p, 1] of xs and us (us rows past
    N: none, the terminal knot)."""
    for p in range(windows.shape[0]):
        start, stop = windows[p, 0], windows[p, 1]
        _interpret(xs[start:stop], us[start:min(stop, us.shape[0])], programs[p], mode)


def _steps(model, data):
    """The fused steps of a stage's constraints that have one and, per such constraint,
    where its values land: ([step], [(constraint data, (r, Rx, Ru, rows))]) with r[:,
    rows] the constraint's rows (a residual that keeps some rows of a larger one,
    ``fused_rows``, leaves them all); and the (constraint, data) pairs without one (a
    residual that reads the stage's dynamics, such as a contact force, or has no fused
    step), left to Python."""
    steps, sources, rest = [], [], []
    for c, cd in zip(model.constraints, data.constraints):
        residual = c.residual
        if getattr(residual, "reads_dynamics", False):
            rest.append((c, cd))
            continue
        make = getattr(residual, "fused_rows", None)
        selected = None if make is None else make(cd, data.kinematics, model.state)
        if selected is not None:
            step, source, rows = selected
        else:
            make = getattr(residual, "fused_step", None)
            step = None if make is None else make(cd, data.kinematics, model.state)
            source, rows = cd, np.arange(cd.r.shape[1])
        if step is None:
            rest.append((c, cd))
            continue
        steps.append(step)
        sources.append((cd, (source.r, source.Rx, source.Ru,
                             np.asarray(rows, dtype=np.int64))))
    return steps, sources, rest


def _model_groups(steps, sources):
    """``steps`` and their ``sources`` (:func:`_steps`) split by the model they use (by
    identity, :func:`.fused._model_indices`): [(steps, sources)], one pair per model in
    the order of first use, the steps without a model in the first; one pair of all
    where they use at most one model; none without steps."""
    if not steps:
        return []
    models, indices = _model_indices(steps)
    if len(models) <= 1:
        return [(steps, sources)]
    groups = [([], []) for _ in models]
    for step, source, j in zip(steps, sources, indices):
        groups[max(j, 0)][0].append(step)
        groups[max(j, 0)][1].append(source)
    return groups


def _program(steps):
    """The interpreter program of ``steps`` (its tuple held: :func:`.held.held`), or None."""
    items = interpreted(steps, None)
    if items is None:
        return None
    nowhere = (np.zeros(0), np.zeros((0, 0)), np.zeros((0, 0)), np.zeros((0, 0, 0)),
               np.zeros((0, 0, 0)), np.zeros((0, 0, 0)))       # no accumulation
    return held(items + (nowhere,))


class HorizonConstraints:
    """The constraints of ``problem``'s stages, evaluated by :meth:`evaluate`.

    ``stages``: [(model, start, stop, data)] of the stages with constraints, running
    phases then the terminal knot; ``data.constraints`` holds their residual data;
    ``sources[id(constraint data)]``: (r (K, n), Rx (K, n, ndx), Ru (K, n, nu), rows
    (nr,)) where :meth:`evaluate` leaves that constraint's values: r[:, rows].
    """

    def __init__(self, problem):
        self.problem = problem
        stages = [(model, start, stop, data) for model, start, stop, data in problem.phases]
        stages.append((problem.terminal_model, problem.N, problem.N + 1,
                       problem.terminal_data))
        self.stages = [s for s in stages if s[0].constraints]
        self.programs, self.windows, self.python = None, np.zeros((0, 2), dtype=np.int64), []
        # per constraint data (by id): (r, Rx, Ru, rows) where its values land
        self.sources = {}
        compiled = []
        for model, start, stop, data in self.stages:
            steps, sources, rest = _steps(model, data)
            python = {id(cd) for _, cd in rest}
            # one program per model the steps use (the interpreter takes one): the
            # terminal position and rotation of kinova "pose" (benchmarks/constrained.py)
            # on two loads of one robot went to Python, where each residual's
            # parallel_kernel ran its threaded copy for one knot (8-12 ms a call with two
            # Numba threads on the loaded machine, against ~10 us with one; cq30)
            for group, group_sources in _model_groups(steps, sources):
                program = _program(group)
                if program is not None and compiled and \
                        numba.typeof(program) != numba.typeof(compiled[0][0]):
                    program = None      # another model type: one typed List holds one type
                if program is None:
                    python.update(id(cd) for cd, _ in group_sources)
                else:
                    compiled.append((program, start, stop))
                    self.sources.update((id(cd), source) for cd, source in group_sources)
            # in the stage's order (a stage whose steps all stay in Python: all of its
            # constraints, as before)
            rest = [(c, cd) for c, cd in zip(model.constraints, data.constraints)
                    if id(cd) in python]
            if rest:
                self.python.append((model, start, stop, data,
                                    self._python_items(rest, model.terminal)))
        if compiled:
            self.programs = typed_list([program for program, _, _ in compiled])
            self.windows = np.array([(a, b) for _, a, b in compiled], dtype=np.int64)

    def _python_items(self, pairs, terminal):
        """A stage's (constraint, data) ``pairs`` evaluated from Python: the groups of two
        or more linear force residuals of equal ``group_key()`` (one group object each,
        its rows the members' sources) and the other pairs."""
        items, groups = [], {}
        for c, cd in pairs:
            key = getattr(c.residual, "group_key", None)
            key = None if key is None or terminal else key()
            if key is None:
                items.append((c, cd))
            else:
                groups.setdefault(key, []).append((c, cd))
        for members in groups.values():
            if len(members) == 1:
                items.extend(members)
                continue
            K, _, ndx = members[0][1].Rx.shape
            group = members[0][0].residual.group([c.residual for c, _ in members], K, ndx,
                                                 members[0][1].Ru.shape[2])
            items.append(group)
            for m, (_, cd) in enumerate(members):
                self.sources[id(cd)] = (group.r, group.Rx, group.Ru, group.rows(m))
        for item in items:
            if isinstance(item, tuple):
                cd = item[1]
                self.sources[id(cd)] = (cd.r, cd.Rx, cd.Ru,
                                        np.arange(cd.r.shape[1], dtype=np.int64))
        return items

    def evaluate(self, xs, us, mode):
        """The constraint residuals at (xs (N+1, nx), us (N, nu)), C-contiguous, with
        their Jacobians when ``mode`` is :data:`.fused.DIFF` (see the module docstring)."""
        if self.programs is not None:
            _evaluate(xs, us, self.programs, self.windows, mode)
        if self.python:
            # on one Numba thread, as the problem's own calc and calc_diff: a stage's
            # per-term kernels are too small for the thread pool's start (cq30)
            with _numba_threads(1):
                self._evaluate_python(xs, us, mode == DIFF)

    def _evaluate_python(self, xs, us, with_derivatives):
        problem = self.problem
        for model, start, stop, data, items in self.python:
            controls = None if model.terminal else problem._controls(us, model, start, stop)
            knots = xs[start:stop]
            for item in items:     # as model.calc_constraints(..., refresh=False)
                if isinstance(item, tuple):
                    item[0].calc(item[1], data.kinematics, knots, controls, with_derivatives)
                else:
                    item.evaluate(data.kinematics, knots, controls, with_derivatives)
