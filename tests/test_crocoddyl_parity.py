"""Crocoddyl 3.2 as an oracle: the same problem built in both gives the same costs,
derivatives and solver iterates.

Fourteen problems (:data:`PROBLEMS`, built from plain data by
``tests/crocoddyl_problems.py`` on both sides): two arms reaching a placement (SE3) with
a frame-velocity cost, a quadruped trot with touchdown impulses, a biped on 6D contacts,
box-limited torques from an infeasible (quasi-static) guess, RK4, another quadruped
(hyq) walking one foot at a time, a small arm under RK2 with frame translation and
rotation costs and a quadratic barrier on its state, an arm following a twist (frame
velocity, weighted control regularization), a free-flyer in free fall, quadrupeds on 3D
point contacts (three feet; four under control bounds), bolt on its two point feet and
talos on one sole. Compared, at seeded random points: the cost (per knot and in total)
and every ``calc_diff`` output (Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, the terminal Lx, Lxx) to
1e-10 of max(1, the largest entry); then each problem's solvers (FDDP, DDP, BoxFDDP)
from the same guess (x0 repeated with quasi-static controls; talos from a guess with
gaps at every knot): iterations within +-1 and the final cost to 1e-8 relative, and the
reported cost is the cost of the final iterate.

Crocoddyl runs in its own pinned environment
(:mod:`geppetto.benchmarks.crocoddyl_env`), once for the whole module (one
subprocess; with pytest-xdist its answer is shared by the workers of the run
through a file).  Without that environment the module is skipped, saying why
(make it with ``python -m geppetto.benchmarks.crocoddyl_env``); with
``GEPPETTO_REQUIRE_CROCODDYL=1`` (what ``.ci/run`` sets) the tier makes it if
missing and fails when it cannot.

:data:`EXPECTED_FAILURES` lists the comparisons that fail in this branch,
each with the reason (strict xfail: when the fix lands they XPASS and fail,
and the entry is deleted).
"""
import fcntl
import json
import os

import numpy as np
import pytest

import crocoddyl_problems as cp
import geppetto as gp

REQUIRE_VARIABLE = "GEPPETTO_REQUIRE_CROCODDYL"
TOLERANCE = 1e-10          # costs (relative), derivatives (to max(1, largest entry))
COST_TOLERANCE = 1e-8      # final cost of a solve, relative
ITERATION_TOLERANCE = 1    # iterations, ours - Crocoddyl's
SEEDS = (0, 1)             # random points per problem
OUTPUTS = ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu", "terminal_Lx", "terminal_Lxx")

# name -> (task, the solvers run on it, the seed of an infeasible guess or None for
# x0 repeated with quasi-static controls)
PROBLEMS = {
    "ur5_se3": (lambda: cp.arm_task("ur5_se3", "ur5", "tool0", (0.4, 0.2, 0.4), torque_limit=1.5),
                ("FDDP", "DDP", "BoxFDDP"), None),
    "panda_se3": (lambda: cp.arm_task("panda_se3", "panda", "panda_hand", (0.4, 0.2, 0.5)),
                  ("FDDP", "DDP"), None),
    "solo12_trot": (cp.trot_task, ("FDDP",), None),
    "talos_6d": (cp.talos_task, ("FDDP",), 7),
    "panda_box": (lambda: cp.arm_task("panda_box", "panda", "panda_hand", (0.4, 0.2, 0.5),
                                      torque_limit=0.6), ("BoxFDDP",), None),
    "ur5_rk4": (lambda: cp.arm_task("ur5_rk4", "ur5", "tool0", (0.4, 0.2, 0.4),
                                    integrator="rk4"), ("FDDP",), None),
    "hyq_walk": (lambda: cp.walk_task("hyq", step_knots=6, support_knots=2, dt=0.02),
                 ("FDDP",), None),
    # frame translation and rotation costs, a quadratic barrier on the state, RK2
    "ur3_rk2_barrier": (lambda: cp.reach_task("ur3_rk2_barrier", "ur3", "tool0",
                                              (0.3, 0.25, 0.25), knots=10, dt=0.03,
                                              integrator="rk2", keep_orientation=True,
                                              position_band=0.3), ("FDDP",), None),
    # a LOCAL frame velocity towards a non-zero twist, a terminal frame rotation, the
    # controls regularized by a weighted quadratic; continuous joints (nq != nv)
    "kinova_velocity": (lambda: cp.velocity_task(
        "kinova_velocity", "kinova", "j2s6s200_end_effector", (0.1, 0.0, 0.05, 0.0, 0.0, 0.3),
        knots=5, dt=0.05), ("FDDP",), None),
    # a floating base without contacts (free fall, the base unactuated)
    "solo12_free_fall": (lambda: cp.floating_task("solo12_free_fall", "solo12", "base_link",
                                                  knots=10), ("FDDP",), None),
    # 3D point contacts on three feet, the fourth raised, the centre of mass moved
    "anymal_three_feet": (lambda: cp.stance_task("anymal_three_feet", "anymal", lifted=3,
                                                 knots=8), ("FDDP",), None),
    # 3D point contacts on four feet under control bounds (some at a bound at the optimum)
    "a1_box_stance": (lambda: cp.stance_task("a1_box_stance", "a1", knots=8,
                                             torque_limit=1.05), ("BoxFDDP",), None),
    # one 6D contact, the other sole raised (frame placement), the centre of mass over the
    # support
    "talos_one_foot": (lambda: cp.one_foot_task("talos_one_foot", knots=8), ("FDDP",), None),
    # a biped on its two 3D point feet
    "bolt_two_feet": (lambda: cp.stance_task("bolt_two_feet", "bolt", knots=10,
                                             com_shift=(0.0, 0.02, -0.02)), ("FDDP",), None),
}

# (problem, comparison) -> why it is expected to fail (a strict xfail: the day it
# passes, the entry must go).  A comparison is "cost", "nu", an output of OUTPUTS, a
# solver name (iterations and the optimum) or "<solver>_reported_cost".  Empty: every
# comparison holds.
EXPECTED_FAILURES = {}


def _mark(problem, comparison):
    reason = EXPECTED_FAILURES.get((problem, comparison))
    # raises: only a failed comparison is expected (not an error, nor a missing oracle)
    return [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason \
        else []


def _params(pairs):
    return [pytest.param(p, c, id=f"{p}-{c}", marks=_mark(p, c)) for p, c in pairs]


# -- the shared run ----------------------------------------------------------
class Parity:
    """Our problems, points and guesses, and Crocoddyl's answer on them."""

    def __init__(self):
        self.tasks = {name: dict(make(), solvers=list(solvers))
                      for name, (make, solvers, _) in PROBLEMS.items()}
        self.problems = {name: cp.build(task) for name, task in self.tasks.items()}
        self.points = {name: [cp.random_point(problem, seed) for seed in SEEDS]
                       for name, problem in self.problems.items()}
        self.guesses = {name: cp.initial_guess(problem, PROBLEMS[name][2])
                        for name, problem in self.problems.items()}
        self._solutions = {}
        self.crocoddyl = self.versions = None

    def payload_points(self):
        return {name: [(xs, cp.crocoddyl_controls(self.problems[name], us))
                       for xs, us in points] for name, points in self.points.items()}

    def payload_guesses(self):
        return {name: (xs, cp.crocoddyl_controls(self.problems[name], us))
                for name, (xs, us) in self.guesses.items()}

    def solution(self, name, solver):
        if (name, solver) not in self._solutions:
            problem = self.problems[name]
            xs, us = self.guesses[name]
            feasible = solver == "DDP"   # as Crocoddyl's side: DDP from the rollout of us
            if feasible:
                xs = problem.rollout(us)
            self._solutions[name, solver] = getattr(gp.solvers, solver)(
                problem, th_stop=cp.TH_STOP).solve(xs.copy(), us.copy(), max_iter=cp.MAX_ITER,
                                                   is_feasible=feasible)
        return self._solutions[name, solver]


def _run_crocoddyl(parity, shared_folder=None):
    """Crocoddyl's answer, computed once per test run: with pytest-xdist the
    first worker writes it to a file in ``shared_folder`` (the run's temporary
    folder, common to its workers, which pytest removes in time) that the
    others read."""
    def run():
        return cp.crocoddyl_side(list(parity.tasks.values()), parity.payload_points(),
                                 parity.payload_guesses())

    if shared_folder is None:
        return run()
    path = os.path.join(shared_folder, "crocoddyl-parity.json")
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            with open(path) as stored:
                content = json.load(stored)
            return content["result"], content["reason"]
        result, reason = run()
        with open(path, "w") as out:
            json.dump(dict(result=result, reason=reason), out)
        return result, reason


def _prepare(make_environment, shared_folder=None):
    """(Parity with Crocoddyl's answer, None) or (None, why there is none).
    ``make_environment``: make Crocoddyl's environment if it is missing (else
    only look for it)."""
    from geppetto.benchmarks import crocoddyl_env
    info, reason = crocoddyl_env.ensure() if make_environment else crocoddyl_env.ready()
    if info is None:
        return None, reason
    parity = Parity()
    result, reason = _run_crocoddyl(parity, shared_folder)
    if result is None:
        return None, reason
    parity.crocoddyl, parity.versions = result["tasks"], result["versions"]
    return parity, None


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    """Crocoddyl's answer on every problem, or a skip saying why there is none
    (a failure when GEPPETTO_REQUIRE_CROCODDYL=1: then the environment is also
    made here if it is missing; otherwise it is only looked for)."""
    required = os.environ.get(REQUIRE_VARIABLE) == "1"
    shared = (str(tmp_path_factory.getbasetemp().parent)
              if os.environ.get("PYTEST_XDIST_WORKER") else None)
    parity, reason = _prepare(required, shared)
    if parity is None:
        if required:
            pytest.fail(f"{REQUIRE_VARIABLE}=1 and Crocoddyl's answer is missing: {reason}",
                        pytrace=False)
        pytest.skip(f"Crocoddyl parity tier: {reason}")
    return parity


def _relative(ours, theirs):
    """max |ours - theirs| / max(1, max |theirs|)."""
    ours, theirs = np.asarray(ours, float), np.asarray(theirs, float)
    assert ours.shape == theirs.shape, f"ours {ours.shape}, Crocoddyl's {theirs.shape}"
    if ours.size == 0:
        return 0.0
    return float(np.max(np.abs(ours - theirs)) / max(1.0, float(np.max(np.abs(theirs)))))


def _output(problem, point, output):
    """(ours, Crocoddyl's) values of one calc_diff output after ``problem.calc_diff``
    at ``point``: the control blocks at the knots that have controls in Crocoddyl."""
    N = problem.N
    if output.startswith("terminal_"):
        return getattr(problem, output[len("terminal_"):])[N], point[output]
    if output in ("Fx", "Lx", "Lxx"):
        return getattr(problem, output)[:N], point[output]
    impulses = set(cp.impulse_knots(problem))
    with_controls = [k for k in range(N) if k not in impulses]
    return getattr(problem, output)[with_controls], [point[output][k] for k in with_controls]


# -- costs and derivatives -----------------------------------------------------
@pytest.mark.parametrize("name, comparison", _params((p, "cost") for p in PROBLEMS))
def test_cost(parity, name, comparison):
    """The cost of every knot and the total at each random point and at the guess."""
    problem, theirs = parity.problems[name], parity.crocoddyl[name]
    for (xs, us), point in zip(parity.points[name], theirs["points"]):
        total = problem.calc(xs, us)
        per_knot = _relative(problem.costs[:problem.N], point["costs"])
        assert per_knot <= TOLERANCE, f"running costs differ by {per_knot:.1e} (of max(1, largest))"
        assert total == pytest.approx(point["cost"], rel=TOLERANCE, abs=0.0)
    guess = problem.calc(*parity.guesses[name])
    assert guess == pytest.approx(theirs["guess_cost"], rel=TOLERANCE, abs=0.0)


@pytest.mark.parametrize("name, comparison", _params((p, "nu") for p in PROBLEMS))
def test_controls_per_knot(parity, name, comparison):
    """Each running knot has Crocoddyl's number of controls (0 at an impact)."""
    ours = [model.nu for model in parity.problems[name].running_models]
    assert ours == parity.crocoddyl[name]["nu"]


@pytest.mark.parametrize("name, comparison",
                         _params((p, output) for p in PROBLEMS for output in OUTPUTS))
def test_calc_diff(parity, name, comparison):
    """One calc_diff output at each random point (control blocks at the knots
    that have controls in Crocoddyl)."""
    problem = parity.problems[name]
    for (xs, us), point in zip(parity.points[name], parity.crocoddyl[name]["points"]):
        problem.calc_diff(xs, us)
        ours, theirs = _output(problem, point, comparison)
        difference = _relative(ours, theirs)
        assert difference <= TOLERANCE, (
            f"{comparison} differs by {difference:.1e} (max |diff| / max(1, max |entry|))")


# -- solvers -------------------------------------------------------------------
SOLVES = [(p, s) for p, (_, solvers, _) in PROBLEMS.items() for s in solvers]


@pytest.mark.parametrize("name, comparison", _params(SOLVES))
def test_solver(parity, name, comparison):
    """Same number of iterations (+-1) and the same optimum: the cost of our final
    iterate equals Crocoddyl's final cost (1e-8 relative)."""
    ours = parity.solution(name, comparison)
    theirs = parity.crocoddyl[name]["solvers"][comparison]
    cost = parity.problems[name].calc(ours.xs, ours.us)
    relative = abs(cost - theirs["cost"]) / abs(theirs["cost"])
    assert abs(ours.iterations - theirs["iterations"]) <= ITERATION_TOLERANCE and \
        relative <= COST_TOLERANCE, (
            f"ours: {ours.iterations} iterations, cost {cost:.12g} ({ours.status}); "
            f"Crocoddyl: {theirs['iterations']} iterations, cost {theirs['cost']:.12g}; "
            f"relative cost difference {relative:.1e}")


@pytest.mark.parametrize("name, comparison",
                         _params((p, "FDDP_2_threads") for p in ("solo12_trot", "talos_6d")))
def test_two_threads(parity, name, comparison):
    """On two threads (calc_diff in one parallel region of two chunks, the backward pass
    started on the last chunk's knots while the first is evaluated) the solve is the
    one-thread solve: the same iterations, the cost of every iterate to 1e-10, the
    solution and the gains to the bit, with calc_diff started during the line search
    where the problem's rule says so (FDDP.speculative "auto": while most first trials
    are taken).  The
    phases cut at the chunks' parts (the trot's swing phases too, whose references are
    given per knot) read the whole phase's store of the trial's contact solves."""
    one = parity.solution(name, "FDDP")
    problem = parity.problems[name]
    xs, us = parity.guesses[name]
    problem.nthreads = 2
    problem.speculations[:] = 0, 0
    try:
        two = gp.solvers.FDDP(problem, th_stop=cp.TH_STOP).solve(xs.copy(), us.copy(),
                                                                 max_iter=cp.MAX_ITER)
    finally:
        problem.nthreads = 1
    assert problem._programs[2] is not None      # each chunk one compiled call
    # calc_diff started during line searches' first trials while most were taken and
    # the worker has its core (on a loaded machine none:
    # tests/test_parallel_speculation.py speculates at every line search)
    started, taken = problem.speculations
    assert taken <= started < two.iterations
    assert two.iterations == one.iterations
    np.testing.assert_allclose(two.history["cost"], one.history["cost"], rtol=1e-10, atol=0)
    for array in ("xs", "us", "K", "k"):    # the same kernel calls in the same order
        np.testing.assert_array_equal(getattr(two, array), getattr(one, array), err_msg=array)
    wholes = {id(data): (start, stop, data) for _, start, stop, data in problem.phases}
    parts = [(model, start, stop, data) for phases, _ in problem.parallel_plan(2)
             for model, start, stop, data in phases if id(data) not in wholes]
    assert parts
    if name == "solo12_trot":
        assert any(c.residual.has_knot_references() for model, *_ in parts for c in model.costs)
    for _, start, stop, data in parts:
        whole = next(d for a, b, d in wholes.values() if a <= start and stop <= b)
        store = whole.kinematics.contact.solved
        assert store[0].shape[0] == 0 or np.shares_memory(data.kinematics.contact.solved[0],
                                                          store[0])


@pytest.mark.parametrize("name, comparison",
                         _params((p, f"{s}_reported_cost") for p, s in SOLVES))
def test_reported_cost(parity, name, comparison):
    """The cost the solver reports is the cost of its final iterate, as Crocoddyl's
    ``solver.cost`` is (1e-12 relative)."""
    ours = parity.solution(name, comparison[:-len("_reported_cost")])
    cost = parity.problems[name].calc(ours.xs, ours.us)
    assert ours.cost == pytest.approx(cost, rel=1e-12, abs=0.0)


def main():
    """Print the tier's figures: per problem the largest cost and calc_diff
    differences, per solve the iterations and final costs, ours and Crocoddyl's.

        PYTHONPATH=<folder above geppetto> python tests/test_crocoddyl_parity.py
    """
    import time
    started = time.perf_counter()
    parity, reason = _prepare(True)
    if parity is None:
        raise SystemExit(f"Crocoddyl: skipped ({reason})")
    print(f"Crocoddyl {parity.versions['crocoddyl']}, Pinocchio "
          f"{parity.versions['pinocchio']} (its environment)")
    print(f"{'problem':12} {'cost':>8} {'worst calc_diff output':>24}")
    for name, problem in parity.problems.items():
        costs, outputs = [], {}
        for (xs, us), point in zip(parity.points[name], parity.crocoddyl[name]["points"]):
            costs.append(abs(problem.calc(xs, us) - point["cost"]) / abs(point["cost"]))
            problem.calc_diff(xs, us)
            for output in OUTPUTS:
                difference = _relative(*_output(problem, point, output))
                outputs[output] = max(outputs.get(output, 0.0), difference)
        worst = max(outputs, key=outputs.get)
        print(f"{name:12} {max(costs):8.1e} {outputs[worst]:16.1e} ({worst})")
    print(f"\n{'problem':12} {'solver':8} {'iterations':>10} {'final cost (ours)':>18} "
          f"{'Crocoddyl':>18} {'relative':>9} {'reported':>9}")
    for name, solver in SOLVES:
        ours = parity.solution(name, solver)
        theirs = parity.crocoddyl[name]["solvers"][solver]
        cost = parity.problems[name].calc(ours.xs, ours.us)
        print(f"{name:12} {solver:8} {ours.iterations:>4} / {theirs['iterations']:<3} "
              f"{cost:18.12g} {theirs['cost']:18.12g} "
              f"{abs(cost - theirs['cost']) / abs(theirs['cost']):9.1e} "
              f"{abs(ours.cost - theirs['cost']) / abs(theirs['cost']):9.1e}")
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
