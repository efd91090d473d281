"""geppetto: trajectory optimization for robots on analytical derivatives of
rigid-body dynamics.

>>> import geppetto as gp
>>> robot = gp.robots.load("ur5")
>>> model = robot.model; data = model.create_data()
"""
__version__ = "0.1.0"
__all__ = ["dynamics", "robots", "ocp", "solvers", "__version__"]

# The repository root is this package, so pytest (which sets up the directory
# holding tests/ as a package node) may execute this file under the checkout's
# folder name ("main", "ci-check", ...): then it must neither fail nor import
# the library a second time under that name.
if __name__ == "geppetto":
    from . import dynamics
    from . import robots
    from . import ocp
    from . import solvers
