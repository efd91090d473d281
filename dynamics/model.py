"""Model (immutable arrays describing a kinematic tree) and Data (workspace).

Notation, kept across ``dynamics/`` (Pinocchio's, in snake case):

- joints are numbered ``0 .. njoints-1``; joint 0 is the universe; every
  joint ``i > 0`` has ``parents[i] < i`` and the joints are stored in
  depth-first order, so the subtree of ``i`` is ``i .. subtree_end[i]-1``;
- ``jR[i], jp[i]``: the constant placement of joint ``i`` in its parent's
  frame (Pinocchio's ``jointPlacements``); ``liR, lip``: ``liMi``, the same
  times the joint transform ``XJ(q)``; ``oR, op``: ``oMi``, joint ``i`` in the
  world;
- spatial vectors are ``[linear; angular]``; ``S[:, idx_v[i]:idx_v[i]+nvs[i]]``
  is the motion subspace of joint ``i`` in its own frame (constant for every
  joint type here, so the bias ``cJ`` is zero);
- ``inertia[i]`` is the 6x6 spatial inertia of body ``i`` (with every body
  fixed to it merged in) in the frame of joint ``i``.
"""
import copy
import numbers
from collections import namedtuple

import numpy as np

# Joint type codes.  The kernels dispatch on these integers.
UNIVERSE = -1
REVOLUTE = 0             # about any unit axis, nq = nv = 1
REVOLUTE_UNBOUNDED = 1   # q = (cos, sin), nq = 2, nv = 1 (URDF "continuous")
PRISMATIC = 2            # along any unit axis, nq = nv = 1
FREE_FLYER = 3           # q = (x, y, z, qx, qy, qz, qw), v local, nv = 6
SPHERICAL = 4            # q = (qx, qy, qz, qw), v = local angular velocity
PLANAR = 5               # q = (x, y, cos, sin), v = (vx, vy, wz) local
TRANSLATION = 6          # q = (x, y, z), nv = 3

JOINT_NQ = {REVOLUTE: 1, REVOLUTE_UNBOUNDED: 2, PRISMATIC: 1, FREE_FLYER: 7,
            SPHERICAL: 4, PLANAR: 4, TRANSLATION: 3}
JOINT_NV = {REVOLUTE: 1, REVOLUTE_UNBOUNDED: 1, PRISMATIC: 1, FREE_FLYER: 6,
            SPHERICAL: 3, PLANAR: 3, TRANSLATION: 3}
JOINT_TYPE_NAMES = {
    "revolute": REVOLUTE, "revolute_unbounded": REVOLUTE_UNBOUNDED,
    "prismatic": PRISMATIC, "free_flyer": FREE_FLYER, "spherical": SPHERICAL,
    "planar": PLANAR, "translation": TRANSLATION}

# Frame types (Pinocchio's FrameType).
OP_FRAME, JOINT_FRAME, FIXED_JOINT_FRAME, BODY_FRAME, SENSOR_FRAME = 1, 2, 4, 8, 16

ModelArrays = namedtuple("ModelArrays", [
    "njoints", "nq", "nv", "parents", "jtype", "idx_q", "idx_v", "nqs", "nvs",
    "subtree_end", "axis", "jR", "jp", "inertia", "S", "gravity", "armature",
    "dof_parent", "dof_joint", "frame_joint", "frame_R", "frame_p"])


def skew(x):
    """3x3 matrix ``[x]_x`` with ``skew(x) @ y == cross(x, y)``."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def spatial_inertia(mass, com, inertia_at_com):
    """6x6 spatial inertia ``[linear; angular]`` of a rigid body.

    ``mass`` in kg, ``com`` (3,) the centre of mass and ``inertia_at_com``
    (3, 3) the rotational inertia about it, both in the frame of expression.
    """
    c = skew(np.asarray(com, dtype=float))
    out = np.zeros((6, 6))
    out[:3, :3] = mass * np.eye(3)
    out[:3, 3:] = -mass * c
    out[3:, :3] = mass * c
    out[3:, 3:] = np.asarray(inertia_at_com, dtype=float) - mass * c @ c
    return out


def inertia_parameters(inertia6):
    """Inverse of :func:`spatial_inertia`: ``(mass, com, inertia_at_com)``."""
    mass = inertia6[0, 0]
    if mass > 0.0:
        c = inertia6[3:, :3] / mass
        com = np.array([c[2, 1], c[0, 2], c[1, 0]])
    else:
        com = np.zeros(3)
    inertia_at_com = inertia6[3:, 3:] + mass * skew(com) @ skew(com)
    return mass, com, 0.5 * (inertia_at_com + inertia_at_com.T)


def transform_inertia(R, p, inertia6):
    """Spatial inertia given in frame B, expressed in frame A where aMb = (R, p)."""
    mass, com, inertia_at_com = inertia_parameters(inertia6)
    return spatial_inertia(mass, R @ com + p, R @ inertia_at_com @ R.T)


def freeze_arrays(values):
    """Make each NumPy array among ``values`` read-only."""
    for value in values:
        if isinstance(value, np.ndarray):
            value.setflags(write=False)


def _check_depth_first(parents, names):
    """Raise ValueError unless joints ``1 .. n-1`` are stored in depth-first
    (pre-)order: each joint's parent comes first and is on the path from the
    root to the joint stored just before it.

    One pass over a stack of the current root-to-joint path, so O(njoints):
    every joint is pushed and popped once.
    """
    path = [0]
    for i in range(1, len(parents)):
        if parents[i] >= i:
            raise ValueError(f"joint {names[i]!r}: parent must come first")
        while path and path[-1] != parents[i]:
            path.pop()
        if not path:
            raise ValueError(f"joints are not in depth-first order: joint {names[i]!r} "
                             f"comes after the subtree of its parent {names[parents[i]]!r} "
                             "was left")
        path.append(i)


class Frame:
    """A named frame attached to a joint: ``placement`` = (R, p) in the joint frame."""

    __slots__ = ("name", "joint", "R", "p", "type", "parent_frame")

    def __init__(self, name, joint, R, p, frame_type, parent_frame=0):
        self.name, self.joint, self.type = name, int(joint), int(frame_type)
        self.R = np.array(R, dtype=float).reshape(3, 3)
        self.p = np.array(p, dtype=float).reshape(3)
        self.parent_frame = int(parent_frame)

    def __repr__(self):
        return f"Frame({self.name!r}, joint={self.joint}, type={self.type})"


def _finite_array(value, shape, name):
    """``value`` as a float64 array of ``shape`` with finite entries; ValueError naming
    ``name`` otherwise (the builder's inputs end in compiled kernels that trust their
    shapes: a (2,) gravity or com would be read past its end)."""
    from .validation import as_float_array     # validation imports this module
    arr = as_float_array(value, name)
    if arr.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf")
    return arr.copy()


def _rotation(R, name):
    """``R`` as a (3, 3) rotation matrix (orthonormal, det +1 to 1e-6)."""
    R = _finite_array(R, (3, 3), name)
    if not (np.allclose(R @ R.T, np.eye(3), atol=1e-6) and np.linalg.det(R) > 0.0):
        raise ValueError(f"{name}: not a rotation matrix (R R^T != I or det R < 0)")
    return R


def _builder_index(value, size, name):
    """An int in [0, size) from a Python or NumPy integer (not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer index, got {value!r}")
    if not 0 <= value < size:
        raise ValueError(f"{name}: index {value} out of range [0, {size})")
    return int(value)


class ModelBuilder:
    """Assemble a :class:`Model` joint by joint, in depth-first order.

    >>> b = ModelBuilder("pendulum")
    >>> j = b.add_joint(0, "revolute", "joint1", axis=(0, 1, 0))
    >>> b.append_body_inertia(j, 1.0, com=(0, 0, -1), inertia_at_com=np.eye(3) * 1e-3)
    >>> model = b.build()
    """

    def __init__(self, name="model", gravity=(0.0, 0.0, -9.81)):
        self.name = name
        self.gravity = _finite_array(gravity, (3,), "gravity")
        self.joint_names = ["universe"]
        self._joint_name_set = {"universe"}
        self.parents = [0]
        self.jtypes = [UNIVERSE]
        self.axes = [np.zeros(3)]
        self.jR = [np.eye(3)]
        self.jp = [np.zeros(3)]
        self.inertias = [np.zeros((6, 6))]
        self.lower, self.upper, self.velocity_limit, self.effort_limit = [], [], [], []
        self.armature = []
        self.frames = [Frame("universe", 0, np.eye(3), np.zeros(3), FIXED_JOINT_FRAME, 0)]
        self.reference_configurations = {}

    def add_joint(self, parent, joint_type, name, R=None, p=None, axis=None,
                  lower=None, upper=None, velocity_limit=None, effort_limit=None,
                  armature=None):
        """Append a joint below ``parent``; returns its index.

        ``joint_type`` is a name of ``JOINT_TYPE_NAMES`` or a type code;
        (R, p) its placement in the parent joint frame; ``axis`` the unit axis
        of revolute and prismatic joints.  Limits are per configuration
        coordinate (nq) for ``lower``/``upper`` and per velocity coordinate
        (nv) for the others; missing limits are infinite.
        """
        if isinstance(joint_type, str):
            jtype = JOINT_TYPE_NAMES.get(joint_type)
        elif isinstance(joint_type, numbers.Integral) and not isinstance(joint_type, bool):
            jtype = int(joint_type)
        else:
            jtype = None
        if jtype not in JOINT_NQ:
            raise ValueError(f"joint {name!r}: unknown joint type {joint_type!r}")
        if not isinstance(name, str):
            raise ValueError(f"name: expected a str, got {name!r}")
        if (isinstance(parent, (bool, np.bool_)) or not isinstance(parent, numbers.Integral)
                or not 0 <= parent < len(self.parents)):
            raise ValueError(f"joint {name!r}: parent joint {parent!r} does not exist")
        if name in self._joint_name_set:
            raise ValueError(f"joint {name!r} defined twice")
        nq, nv = JOINT_NQ[jtype], JOINT_NV[jtype]
        a = np.zeros(3)
        if jtype in (REVOLUTE, REVOLUTE_UNBOUNDED, PRISMATIC):
            if axis is None:
                raise ValueError(f"joint {name!r}: a revolute or prismatic joint needs an axis")
            a = _finite_array(axis, (3,), f"joint {name!r}: axis")
            norm = np.linalg.norm(a)
            if not np.isfinite(norm) or norm < 1e-12:
                raise ValueError(f"joint {name!r}: axis {axis} is not a valid direction")
            a = a / norm
        self.joint_names.append(name)
        self._joint_name_set.add(name)
        self.parents.append(int(parent))
        self.jtypes.append(jtype)
        self.axes.append(a)
        self.jR.append(np.eye(3) if R is None else _rotation(R, f"joint {name!r}: R"))
        self.jp.append(np.zeros(3) if p is None else _finite_array(p, (3,), f"joint {name!r}: p"))
        self.inertias.append(np.zeros((6, 6)))

        def fill(values, size, default):
            if values is None:
                return [default] * size
            values = np.atleast_1d(np.asarray(values, dtype=float))
            if values.shape != (size,):
                raise ValueError(f"joint {name!r}: expected {size} limit values, got {values.shape}")
            return list(values)

        self.lower += fill(lower, nq, -np.inf)
        self.upper += fill(upper, nq, np.inf)
        self.velocity_limit += fill(velocity_limit, nv, np.inf)
        self.effort_limit += fill(effort_limit, nv, np.inf)
        self.armature += fill(armature, nv, 0.0)
        return len(self.parents) - 1

    def append_body_inertia(self, joint, mass, com=(0, 0, 0), inertia_at_com=None,
                            R=None, p=None):
        """Add a rigid body to ``joint``: mass, com and inertia about the com,
        given in a frame placed at (R, p) in the joint frame."""
        joint = _builder_index(joint, len(self.parents), "joint")
        mass = float(_finite_array(mass, (), "mass"))
        if mass < 0.0:
            raise ValueError(f"mass: expected a value >= 0, got {mass}")
        com = _finite_array(com, (3,), "com")
        inertia_at_com = np.zeros((3, 3)) if inertia_at_com is None else _finite_array(
            inertia_at_com, (3, 3), "inertia_at_com")
        Y = spatial_inertia(mass, com, inertia_at_com)
        if R is not None or p is not None:
            Y = transform_inertia(np.eye(3) if R is None else _rotation(R, "R"),
                                  np.zeros(3) if p is None else _finite_array(p, (3,), "p"), Y)
        self.inertias[joint] = self.inertias[joint] + Y

    def add_frame(self, name, joint, R=None, p=None, frame_type=OP_FRAME, parent_frame=0):
        """Attach a frame at (R, p) in the frame of ``joint``; returns its id."""
        joint = _builder_index(joint, len(self.parents), "joint")
        parent_frame = _builder_index(parent_frame, len(self.frames), "parent_frame")
        if frame_type not in (OP_FRAME, JOINT_FRAME, FIXED_JOINT_FRAME, BODY_FRAME,
                              SENSOR_FRAME):
            raise ValueError(f"frame_type: unknown frame type {frame_type!r}")
        if not isinstance(name, str):
            raise ValueError(f"name: expected a str, got {name!r}")
        self.frames.append(Frame(name, joint, np.eye(3) if R is None else _rotation(R, "R"),
                                 np.zeros(3) if p is None else _finite_array(p, (3,), "p"),
                                 frame_type, parent_frame))
        return len(self.frames) - 1

    def build(self):
        """Freeze into a :class:`Model` (checks the depth-first ordering)."""
        return Model(self)


class Model:
    """A kinematic tree with its inertias: immutable once built.

    Attributes ``nq``, ``nv``, ``njoints``, ``names`` (joint names),
    ``frames``, ``lower_position_limit``, ``upper_position_limit``,
    ``velocity_limit``, ``effort_limit``, ``reference_configurations`` (dict
    of name -> q) and ``arrays`` (the :data:`ModelArrays` the kernels read).
    """

    # what the one-state calls keep on the model in a process (compiled entry points,
    # the ModelRef, the fast path's gathered checks, the one-call path's entries): Numba
    # objects that cannot be pickled; a pickled or deep-copied model (sent to a Dask
    # worker) leaves them behind and makes them again at its first call
    _PROCESS_CACHES = ("_entry_points", "_model_ref", "_border", "_zero_forces", "_one_state",
                       "_crba_passes")

    # the read-only arrays: the kernels' ModelArrays (the model's own and the cached
    # gravity-free copy of constrained_dynamics) and the limits
    _FROZEN_ARRAYS = ("arrays", "_arrays_without_gravity")
    _FROZEN_LIMITS = ("lower_position_limit", "upper_position_limit", "velocity_limit",
                      "effort_limit")

    def __getstate__(self):
        return {name: value for name, value in self.__dict__.items()
                if name not in self._PROCESS_CACHES}

    def __setstate__(self, state):
        # NumPy unpickles (and deep-copies) a read-only array as a writable one, and
        # Numba types a writable array apart from a read-only one: a pickled model (sent
        # to a Dask worker) or a deep copy compiled every kernel it met a second time
        # (tests/test_dynamics_validation.py's one-state test on solo12, which calls ten
        # functions on a deep copy and a pickled copy: 156 CPU s before, 43 after).
        # Frozen again, the copy runs the kernels compiled (or cached) for the original.
        self.__dict__.update(state)
        self._freeze()

    def _freeze(self):
        """Make the model's arrays read-only (what the kernels were compiled for)."""
        for name in self._FROZEN_ARRAYS:
            freeze_arrays(self.__dict__.get(name, ()))
        freeze_arrays(getattr(self, name) for name in self._FROZEN_LIMITS)

    def __init__(self, builder):
        nj = len(builder.parents)
        parents = np.array(builder.parents, dtype=np.int64)
        jtype = np.array(builder.jtypes, dtype=np.int64)
        nqs = np.array([0] + [JOINT_NQ[t] for t in builder.jtypes[1:]], dtype=np.int64)
        nvs = np.array([0] + [JOINT_NV[t] for t in builder.jtypes[1:]], dtype=np.int64)
        idx_q = np.concatenate([[0], np.cumsum(nqs)[:-1]]).astype(np.int64)
        idx_v = np.concatenate([[0], np.cumsum(nvs)[:-1]]).astype(np.int64)
        nq, nv = int(nqs.sum()), int(nvs.sum())
        _check_depth_first(parents, builder.joint_names)
        subtree_end = np.arange(1, nj + 1, dtype=np.int64)
        for i in range(nj - 1, 0, -1):
            subtree_end[parents[i]] = max(subtree_end[parents[i]], subtree_end[i])
        S = np.zeros((6, nv))
        dof_parent = np.full(nv, -1, dtype=np.int64)
        dof_joint = np.zeros(nv, dtype=np.int64)
        last_dof = np.full(nj, -1, dtype=np.int64)
        for i in range(1, nj):
            t, a, iv = jtype[i], builder.axes[i], idx_v[i]
            cols = S[:, iv:iv + nvs[i]]
            if t in (REVOLUTE, REVOLUTE_UNBOUNDED):
                cols[3:, 0] = a
            elif t == PRISMATIC:
                cols[:3, 0] = a
            elif t == FREE_FLYER:
                cols[:, :] = np.eye(6)
            elif t == SPHERICAL:
                cols[3:, :] = np.eye(3)
            elif t == PLANAR:
                cols[0, 0] = cols[1, 1] = cols[5, 2] = 1.0
            elif t == TRANSLATION:
                cols[:3, :] = np.eye(3)
            previous = last_dof[parents[i]]
            for d in range(iv, iv + nvs[i]):
                dof_parent[d] = previous
                dof_joint[d] = i
                previous = d
            last_dof[i] = previous
        frames = list(builder.frames)
        self.arrays = ModelArrays(
            njoints=nj, nq=nq, nv=nv, parents=parents, jtype=jtype, idx_q=idx_q,
            idx_v=idx_v, nqs=nqs, nvs=nvs, subtree_end=subtree_end,
            axis=np.array(builder.axes), jR=np.array(builder.jR), jp=np.array(builder.jp),
            inertia=np.array(builder.inertias), S=S,
            gravity=np.concatenate([builder.gravity, np.zeros(3)]),
            armature=np.array(builder.armature, dtype=float).reshape(nv),
            dof_parent=dof_parent, dof_joint=dof_joint,
            frame_joint=np.array([f.joint for f in frames], dtype=np.int64),
            frame_R=np.array([f.R for f in frames]).reshape(len(frames), 3, 3),
            frame_p=np.array([f.p for f in frames]).reshape(len(frames), 3))
        self.name = builder.name
        self.names = list(builder.joint_names)
        self.frames = frames
        self.lower_position_limit = np.array(builder.lower, dtype=float).reshape(nq)
        self.upper_position_limit = np.array(builder.upper, dtype=float).reshape(nq)
        self.velocity_limit = np.array(builder.velocity_limit, dtype=float).reshape(nv)
        self.effort_limit = np.array(builder.effort_limit, dtype=float).reshape(nv)
        self._freeze()
        self.reference_configurations = dict(builder.reference_configurations)
        self._frame_ids = {}
        for index, frame in enumerate(frames):
            self._frame_ids.setdefault(frame.name, index)
        self._joint_ids = {n: i for i, n in enumerate(self.names)}

    nq = property(lambda self: self.arrays.nq)
    nv = property(lambda self: self.arrays.nv)
    njoints = property(lambda self: self.arrays.njoints)
    nframes = property(lambda self: len(self.frames))
    parents = property(lambda self: self.arrays.parents)
    gravity = property(lambda self: self.arrays.gravity[:3].copy())
    armature = property(lambda self: self.arrays.armature)
    inertias = property(lambda self: self.arrays.inertia)
    idx_qs = property(lambda self: self.arrays.idx_q)
    idx_vs = property(lambda self: self.arrays.idx_v)
    nqs = property(lambda self: self.arrays.nqs)
    nvs = property(lambda self: self.arrays.nvs)
    joint_types = property(lambda self: self.arrays.jtype)

    def frame_id(self, name):
        """Index of the first frame called ``name``; KeyError names the frame."""
        try:
            return self._frame_ids[name]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no frame named {name!r}") from None

    def joint_id(self, name):
        """Index of the joint called ``name``; KeyError names the joint."""
        try:
            return self._joint_ids[name]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no joint named {name!r}") from None

    def has_frame(self, name):
        return name in self._frame_ids

    def total_mass(self):
        return float(self.arrays.inertia[1:, 0, 0].sum())

    def with_changes(self, gravity=None, armature=None):
        """A copy of this model with another gravity (3-vector, world frame) and/or
        armature (nv,); everything else is shared.

        The new arrays are frozen like the model's own, so the kernels compiled
        for this model serve the copy too (Numba types a read-only array apart
        from a writable one: an unfrozen array would compile every kernel again).
        """
        out = copy.copy(self)
        changes = {}
        if gravity is not None:
            g = np.asarray(gravity, dtype=float)
            if g.shape != (3,) or not np.all(np.isfinite(g)):
                raise ValueError(f"gravity: expected a finite 3-vector, got {gravity!r}")
            changes["gravity"] = np.concatenate([g, np.zeros(3)])
        if armature is not None:
            a = np.asarray(armature, dtype=float)
            if a.shape != (self.nv,) or not np.all(np.isfinite(a)) or np.any(a < 0.0):
                raise ValueError(f"armature: expected ({self.nv},) finite values >= 0")
            changes["armature"] = a.copy()
        freeze_arrays(changes.values())
        out.arrays = self.arrays._replace(**changes)
        for cached in ("_arrays_without_gravity",):
            out.__dict__.pop(cached, None)
        return out

    def create_data(self):
        """A new :class:`Data` workspace for this model."""
        from .data import Data
        return Data(self)

    def __repr__(self):
        return (f"Model({self.name!r}, nq={self.nq}, nv={self.nv}, "
                f"njoints={self.njoints}, nframes={self.nframes})")
