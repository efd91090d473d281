"""The benchmark problems are the same in every process: their construction does not
depend on the interpreter's string hash seed (PYTHONHASHSEED), which orders sets of
strings.  The order of a stage's costs is the order of their sums, so a set-ordered
cost list gives the solves different last bits from one process to the next."""
import ast
import os
import subprocess
import sys

import geppetto

# the frames of each running stage's FrameTranslationResidual costs, in cost order
TROT_STEP_FRAMES = (
    "import geppetto as gp; from geppetto.benchmarks import constrained as C; "
    "p = C.untuned4('trot'); "
    "print([[c.residual.frame for c in m.costs "
    "if isinstance(c.residual, gp.ocp.FrameTranslationResidual)] for m in p.running_models])")


def _frames_under_hash_seed(seed):
    root = os.path.dirname(os.path.dirname(geppetto.__file__))
    environment = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    finished = subprocess.run([sys.executable, "-c", TROT_STEP_FRAMES], env=environment,
                              capture_output=True, text=True, timeout=300, check=True)
    return ast.literal_eval(finished.stdout)


def test_a1_trot_swing_costs_in_the_feet_order_under_any_hash_seed():
    """untuned4("trot")'s swing knots carry the step costs of the two swing feet in
    A1_FEET's order (FR_foot, then RL_foot) whatever the hash seed: with the set
    difference of before, seeds 0 and 4 gave the two orders (and CSQP's xs, us two sha1
    values, by seed and not by what ran before in the process)."""
    from geppetto.benchmarks import constrained as C
    model = geppetto.robots.load("a1").model
    swing = [model.frame_id(f) for f in C.A1_FEET if f not in ("FL_foot", "RR_foot")]
    knots, stance, steps = 20, 4, 10                # untuned4's default: 20 knots
    expected = [[]] * stance + [swing] * steps + [[]] * (knots + 1 - stance - steps)
    for seed in (0, 4):
        assert _frames_under_hash_seed(seed) == expected, seed
