"""Checks of the solvers' options, at ``__init__`` and at ``solve`` entry.

A bad option raises ``ValueError`` naming it before any iteration runs, so
that a solve always ends in bounded time: ``reg_factor <= 1`` would never
raise the regularization to ``reg_max`` (the backward pass would retry
forever), an empty ``alphas`` has no step to try, ``max_iter=None`` no count.
"""
import numbers

import numpy as np

from ..dynamics.validation import as_count


def _number(value, name, low=-np.inf, high=np.inf, low_open=False, allow_inf=False):
    """``value`` as a float in [low, high] (or (low, high] when ``low_open``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected a real number, got {value!r}")
    value = float(value)
    if np.isnan(value) or (np.isinf(value) and not allow_inf):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    if value < low or value > high or (low_open and value == low):
        left = "(" if low_open else "["
        right = "]" if np.isfinite(high) else ")"
        raise ValueError(f"{name} = {value!r}: expected a value in {left}{low}, {high}{right}")
    return value


def _integer(value, name, low=0):
    """``value`` as an int >= ``low``: an integral number (Python's or numpy's), not a
    bool, a float or a string (``int(2.5)`` would truncate silently, ``int(inf)`` raise
    an OverflowError that names nothing): the dynamics layer's
    :func:`~geppetto.dynamics.validation.as_count`, one check for the model builder's,
    the OCP constructors' and the solvers' counts."""
    return as_count(value, name, low)


def check_options(solver):
    """Validate the thresholds, the regularization schedule and the step lengths
    of a DDP-family solver in place (``alphas`` becomes a float array)."""
    for name in ("th_stop", "th_grad"):
        setattr(solver, name, _number(getattr(solver, name), name, 0.0))
    solver.th_acceptstep = _number(solver.th_acceptstep, "th_acceptstep", 0.0, 1.0)
    if hasattr(solver, "th_acceptnegstep"):          # FDDP's
        solver.th_acceptnegstep = _number(solver.th_acceptnegstep, "th_acceptnegstep", 0.0)
    solver.reg_min = _number(solver.reg_min, "reg_min", 0.0)
    solver.reg_max = _number(solver.reg_max, "reg_max", solver.reg_min)
    solver.reg_init = _number(solver.reg_init, "reg_init", 0.0, solver.reg_max)
    solver.reg_factor = _number(solver.reg_factor, "reg_factor", 1.0, low_open=True)
    solver.th_stepinc = _number(solver.th_stepinc, "th_stepinc", 0.0, 1.0)
    solver.th_stepdec = _number(solver.th_stepdec, "th_stepdec", 0.0, 1.0)
    solver.alphas = check_alphas(solver.alphas)


def check_alphas(alphas):
    """The line search's step lengths as a float array: non-empty, in (0, 1], in
    decreasing order (the searches try them in turn and read the last as the smallest
    step: BoxFDDP's, ALDDP's and ProxDDP's hopeless test, the crawl count, the skips)."""
    try:
        given = np.asarray(alphas)
        # booleans are not step lengths (np.asarray(True, float) is [1.0]: rs35)
        if given.dtype == np.bool_:
            raise TypeError
        steps = np.asarray(alphas, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"alphas: expected a sequence of step lengths, got {alphas!r}") \
            from None
    if steps.size == 0 or not np.all((steps > 0.0) & (steps <= 1.0)):
        raise ValueError(f"alphas: expected a non-empty sequence of step lengths in (0, 1], "
                         f"got {alphas!r}")
    if np.any(np.diff(steps) > 0.0):
        raise ValueError(f"alphas: expected step lengths in decreasing order, got {alphas!r}")
    return steps


def check_solve_arguments(max_iter, time_limit):
    """``max_iter`` an integer >= 0; ``time_limit`` None or seconds >= 0 (inf allowed;
    0 stops after the first iteration, whose line search then tries only alpha = 1)."""
    if isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, numbers.Integral) \
            or max_iter < 0:
        raise ValueError(f"max_iter: expected an integer >= 0, got {max_iter!r}")
    if time_limit is not None:
        time_limit = _number(time_limit, "time_limit", 0.0, allow_inf=True)
    return int(max_iter), time_limit
