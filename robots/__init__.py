"""Robot descriptions -> dynamics Models.

>>> from geppetto import robots
>>> robot = robots.load("panda")                    # example-robot-data by name
>>> robot = robots.load_urdf(path, root_joint="free-flyer", srdf_path=srdf)
>>> model = robots.random_tree(12, seed=0)          # built-in, no files
>>> viz = robots.MeshcatVisualizer(robot)           # meshcat (see :mod:`.visualize`)

Joint order, q/v layout, frames, inertias and limits are those of
``pinocchio.buildModelFromUrdf`` on the same file (see :mod:`.urdf`): every
URDF it loads loads here, defects of the file (inconsistent inertias, crossed
limits, massless moving links) reported as :class:`URDFWarning`
(``strict=True``: :class:`URDFError`).

>>> robot = robots.load_urdf(path, mimic=True)      # mimic joints follow (pin's mimic=True)
>>> robot = robots.load_urdf(path, strict=True)     # refuse inconsistent files
"""
from .builtin import cartpole, chain, double_pendulum, four_bar, pendulum, random_tree
from .loaders import available_robots, load, model_dir
from .robot import Robot, VisualGeometry, default_configuration
from .urdf import (URDFError, URDFWarning, build_model_from_urdf_string,
                   load_reference_configurations, load_urdf, resolve_mesh_path)

__all__ = ["load", "load_urdf", "build_model_from_urdf_string", "Robot", "VisualGeometry",
           "URDFError", "URDFWarning", "available_robots", "model_dir", "default_configuration",
           "load_reference_configurations", "resolve_mesh_path", "pendulum",
           "double_pendulum", "cartpole", "chain", "random_tree", "four_bar",
           "MeshcatVisualizer"]


def __getattr__(name):
    # meshcat imports IPython (over a second): load the viewer on first use only.
    if name == "MeshcatVisualizer":
        from .visualize import MeshcatVisualizer
        return MeshcatVisualizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
