"""geppetto: trajectory optimization for robots on analytical derivatives of
rigid-body dynamics.

>>> import geppetto as gp
>>> robot = gp.robots.load("ur5")
>>> model = robot.model; data = model.create_data()
"""
from . import dynamics
from . import robots
from . import ocp
from . import solvers

__version__ = "0.1.0"
__all__ = ["dynamics", "robots", "ocp", "solvers", "__version__"]
