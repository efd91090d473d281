"""A robot: its dynamics :class:`~geppetto.dynamics.model.Model`, where it came
from, a default configuration ``q0`` and the visual geometries a viewer needs.
"""
from dataclasses import dataclass, field

import numpy as np

from ..dynamics.mimic import MimicModel
from ._configurations import neutral_configuration, normalize_configuration

# Reference configurations tried, in this order, for the default ``q0``.
PREFERRED_POSTURES = ("half_sitting", "standing", "straight_standing")


@dataclass(frozen=True)
class VisualGeometry:
    """One ``<visual>`` element of a URDF link.

    Attributes
    ----------
    name : str
        ``"<link>_<k>"`` for the k-th visual of the link, as Pinocchio names
        its geometry objects.
    link : str
        Name of the link it belongs to.
    frame_id : int
        Index in ``model.frames`` of the link's BODY frame.
    joint : int
        Index of the joint that carries the link (0: the universe).
    R, p : (3, 3) and (3,) arrays
        Placement of the geometry in the frame of ``joint``.
    kind : str
        ``"mesh"``, ``"box"``, ``"cylinder"`` or ``"sphere"``.
    size : tuple of float
        ``(x, y, z)`` for a box, ``(radius, length)`` for a cylinder,
        ``(radius,)`` for a sphere, ``()`` for a mesh.
    filename : str or None
        A mesh's file name as written in the URDF (``package://...``).
    mesh_path : str or None
        That file on this machine, or None if it could not be found.
    scale : (3,) array
        A mesh's scale (ones otherwise).
    rgba : tuple of 4 float, or None
        The material colour, if the URDF gives one.
    """

    name: str
    link: str
    frame_id: int
    joint: int
    R: np.ndarray
    p: np.ndarray
    kind: str
    size: tuple = ()
    filename: str = None
    mesh_path: str = None
    scale: np.ndarray = field(default_factory=lambda: np.ones(3))
    rgba: tuple = None


def default_configuration(model, posture=None):
    """The configuration a robot starts in, of shape (nq,).

    ``posture`` names one of ``model.reference_configurations``; without it,
    the first of "half_sitting", "standing", "straight_standing" that exists,
    else the first reference configuration, else the neutral configuration.
    Quaternions and (cos, sin) pairs are normalized, as example-robot-data's
    loaders do.
    """
    if isinstance(model, MimicModel):
        return model.reduce_configuration(default_configuration(model.full, posture))
    references = model.reference_configurations
    jtypes = list(model.joint_types)
    if posture is not None:
        if posture not in references:
            raise KeyError(f"model {model.name!r} has no reference configuration "
                           f"{posture!r}; it has {sorted(references)}")
        return normalize_configuration(jtypes, references[posture])
    for candidate in PREFERRED_POSTURES:
        if candidate in references:
            return normalize_configuration(jtypes, references[candidate])
    if references:
        return normalize_configuration(jtypes, next(iter(references.values())))
    return neutral_configuration(jtypes)


class Robot:
    """A dynamics model with its provenance and what a viewer needs.

    Parameters
    ----------
    model : geppetto.dynamics.Model
    name : str, optional
        Defaults to ``model.name``.
    urdf_path, srdf_path : str, optional
        The files the model was read from (None for built-in models).
    package_dirs : sequence of str, optional
        Folders used to resolve ``package://`` mesh URIs.
    visuals : sequence of VisualGeometry, optional
    q0 : (nq,) array or str, optional
        The default configuration, or the name of a reference configuration;
        see :func:`default_configuration` for the default.
    contact_frames : sequence of (frame name, size) pairs, or a dict, optional
        The frames the robot stands on: size 3 for a point foot (a 3D contact),
        6 for a sole (a 6D contact).  The default contacts of tools that need
        some (``geppetto check-derivatives --function constraint_dynamics``).

    Attributes
    ----------
    model, name, urdf_path, srdf_path, package_dirs, visuals, q0
    contact_frames : tuple of (str, int) pairs, () when none is described;
        setting it checks the frames and sizes.
    """

    def __init__(self, model, name=None, urdf_path=None, srdf_path=None,
                 package_dirs=(), visuals=(), q0=None, contact_frames=()):
        self.model = model
        self.name = model.name if name is None else name
        self.urdf_path = urdf_path
        self.srdf_path = srdf_path
        self.package_dirs = list(package_dirs)
        self.visuals = list(visuals)
        if q0 is None or isinstance(q0, str):
            q0 = default_configuration(model, q0)
        q0 = np.array(q0, dtype=float)
        if q0.shape != (model.nq,):
            raise ValueError(f"q0 must have shape ({model.nq},), got {q0.shape}")
        q0.setflags(write=False)
        self.q0 = q0
        self.contact_frames = contact_frames

    @property
    def contact_frames(self):
        return self._contact_frames

    @contact_frames.setter
    def contact_frames(self, value):
        pairs = tuple(value.items()) if isinstance(value, dict) else tuple(value)
        checked = []
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(f"contact_frames: expected (frame name, size) pairs, got "
                                 f"{pair!r}")
            frame, size = pair
            names = [f.name for f in self.model.frames]
            if frame not in names:
                raise ValueError(f"contact_frames: model {self.model.name!r} has no frame "
                                 f"{frame!r}")
            if size not in (3, 6):
                raise ValueError(f"contact_frames: the size of {frame!r} must be 3 (point "
                                 f"contact) or 6 (surface contact), got {size!r}")
            checked.append((str(frame), int(size)))
        self._contact_frames = tuple(checked)

    nq = property(lambda self: self.model.nq)
    nv = property(lambda self: self.model.nv)

    def __repr__(self):
        return f"Robot({self.name!r}, nq={self.model.nq}, nv={self.model.nv})"
