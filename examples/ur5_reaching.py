"""UR5 reaching with FDDP: the tool goes to a point in one second.

Demonstrates a whole optimal-control problem on a real arm: the URDF of
example-robot-data, forward dynamics whose derivatives come from the
analytical ABA derivatives (Carpentier & Mansard, RSS 2018, eq. 24) for
all knots in one kernel, and FDDP (Mastalli et al., "Crocoddyl", ICRA 2020)
from a quasi-static initial guess; Crocoddyl's arm-reaching setting.

    python -m geppetto.examples.ur5_reaching [--out DIR] [--live] [--reduced]
"""

from geppetto.examples import _common, reaching

TARGET = (0.4, 0.2, 0.4)


def main(reduced=False, out="geppetto-examples/ur5_reaching", live=False):
    return reaching.solve("ur5", "tool0", TARGET, reduced, out, live, path_png="tool_path.png",
                          camera_position=(1.2, 1.2, 0.8))


if __name__ == "__main__":
    _common.run(main, "ur5_reaching", __doc__)
