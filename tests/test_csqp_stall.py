"""CSQP's restoration after a certified-infeasible QP ends on a stall of its
infeasibility (rs35, issue 19: an infeasible problem ends "infeasible" in bounded time).

ur5 "unreachable" (:func:`geppetto.benchmarks.constrained.untuned4`: the tool at z >= 1.5 m
at the last knot, above its reach): the SQP's first two QPs are certified infeasible and
ProxDDP's restoration took the other 498 of 500 iterations ("infeasible" only at
max_iter), its violation 0.98 after 50 and 0.977 from 100 on: its own BCL test never
fires, its inner solves crawl at steps of 1/32 and never converge.  Now it stops once its
least infeasibility has not fallen 1 % in RESTORE_STALL (50) iterations: 95 / 65
iterations in all from the guess / FDDP's optimum.  The swing-up from rest, the one
converged run of benchmarks/constrained.py whose restoration follows a certificate (231
iterations), fell at least 27 % in every 50 of them."""
import numpy as np
import pytest

import geppetto as gp
from geppetto.benchmarks.constrained import untuned4
from geppetto.solvers import csqp


@pytest.fixture(scope="module")
def unreachable():
    return untuned4("unreachable")


def test_an_unreachable_target_ends_infeasible_on_the_restorations_stall(unreachable):
    solver = gp.solvers.CSQP(unreachable)
    result = solver.solve(max_iter=500)
    assert result.status == "infeasible" and not result.converged
    restored = solver.restored
    assert restored is not None and restored.status == "stalled", restored.status
    # stopped after RESTORE_STALL iterations without 1 % progress, far before max_iter
    # (it ran 498 before)
    assert csqp.RESTORE_STALL < result.restoration_iterations < 150
    assert result.iterations == result.restoration_iterations + 2
    least = np.minimum.accumulate(np.maximum(restored.history["gaps"],
                                             restored.history["violation"]))
    assert least[-1] > csqp.RESTORE_STALL_RATIO * least[-1 - csqp.RESTORE_STALL]
    assert result.violation > 0.9       # the tool 0.9 m short of 1.5 m or more


def test_the_stall_test_is_an_option_of_the_al_solvers(unreachable):
    """ProxDDP on its own: max_iter after 500 iterations at violation 0.977 (its inner
    solves crawl); with ``stall_window`` it ends "stalled"."""
    solver = gp.solvers.ProxDDP(unreachable)
    result = solver.solve(max_iter=300, stall_window=50)
    assert result.status == "stalled" and result.iterations < 150, result.status
    assert result.violation > 0.9
    for name, bad in (("stall_window", dict(stall_window=0)),
                      ("stall_window", dict(stall_window=2.5)),
                      ("stall_window", dict(stall_window=True)),
                      ("stall_ratio", dict(stall_window=10, stall_ratio=1.5)),
                      ("stall_ratio", dict(stall_window=10, stall_ratio=np.nan)),
                      ("stall_above", dict(stall_window=10, stall_above=-1.0))):
        with pytest.raises(ValueError, match=name):
            solver.solve(max_iter=5, **bad)
