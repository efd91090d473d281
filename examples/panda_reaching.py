"""Panda reaching with FDDP: the hand goes to a point in one second.

The problem of ``python -m geppetto`` (the main job) and of DESIGN.md's
Crocoddyl anchor: a frame-translation cost on ``panda_hand`` with state and
control regularization, symplectic Euler ("euler", Crocoddyl's
IntegratedActionModelEuler), dt = 10 ms, 100 knots, solved by
FDDP (Mastalli et al., "Crocoddyl", ICRA 2020) from a quasi-static initial
guess, every knot's dynamics derivatives from the analytical ABA derivatives
(Carpentier & Mansard, RSS 2018).

    python -m geppetto.examples.panda_reaching [--out DIR] [--live] [--reduced]
"""

from geppetto.examples import _common, reaching

TARGET = (0.5, 0.3, 0.4)


def main(reduced=False, out="geppetto-examples/panda_reaching", live=False):
    return reaching.solve("panda", "panda_hand", TARGET, reduced, out, live,
                          path_png="hand_path.png", camera_position=(1.2, 1.0, 0.8))


if __name__ == "__main__":
    _common.run(main, "panda_reaching", __doc__)
