"""URDF -> :class:`~geppetto.dynamics.model.Model`, as Pinocchio's parser builds it.

The model equals ``pinocchio.buildModelFromUrdf(path)`` (or
``buildModelFromUrdf(path, pin.JointModelFreeFlyer())`` with
``root_joint="free-flyer"``) joint by joint and frame by frame:

- the tree is visited depth first from the root link; the child joints of a
  link are visited in alphabetical (byte) order of joint name, which is the
  order urdfdom stores them in, whatever their order in the file;
- URDF ``revolute`` -> REVOLUTE (axis normalized), ``continuous`` ->
  REVOLUTE_UNBOUNDED (q = (cos, sin)), ``prismatic`` -> PRISMATIC,
  ``floating`` -> FREE_FLYER, ``planar`` -> PLANAR (normal z only, the only
  one Pinocchio has); a missing ``<axis>`` means (1, 0, 0);
- a ``fixed`` joint adds no joint: the child link's inertia is merged into the
  body of the closest moving joint above it, at the composed placement; the
  fixed joint and its child link stay as FIXED_JOINT and BODY frames, and the
  placements of the joints below compose through it;
- frames: ``universe``; the root link (BODY, on the universe, or on
  ``root_joint`` with a free-flyer root); then, per URDF joint in visit
  order, a JOINT (or FIXED_JOINT) frame named as the joint whose parent frame
  is the parent link's BODY frame, followed by the child link's BODY frame;
  placements are relative to the supporting joint;
- with a fixed base, the root link's inertia is added to the universe
  (``inertia[0]``), as Pinocchio does; with a free-flyer root, to
  ``root_joint``;
- inertias: ``<inertial>`` gives the mass, the com (origin xyz) and the
  rotational inertia about the com in the frame rotated by origin rpy, so it is
  ``R I R^T`` in the link frame;
- limits: ``lower``/``upper`` (0 when absent), ``velocity`` and ``effort``
  from ``<limit>`` (required for revolute and prismatic joints, optional for
  continuous ones: infinite without it); (cos, sin) and quaternion
  coordinates get [-1.01, 1.01], translations of floating and planar joints
  [-inf, inf]; the free-flyer root joint gets +-DBL_MAX everywhere, as
  Pinocchio's ``addJoint`` defaults;
- ``<dynamics>`` (damping, friction), ``<calibration>``,
  ``<safety_controller>``, transmissions and gazebo tags are ignored.

Mimic joints: ``mimic=False`` loads a joint with a ``<mimic>`` tag as an
independent joint, as ``pinocchio.buildModelFromUrdf`` does by default; the
default ``mimic=None`` does the same and warns (:class:`URDFWarning`);
``mimic=True`` gives a :class:`~geppetto.dynamics.mimic.MimicModel` where the
joint follows ``q = multiplier * q_mimicked + offset``, laid out as Pinocchio's
``buildModelFromUrdf(path, mimic=True)`` and refused where Pinocchio refuses
it (the mimicked joint is not a moving joint visited before the mimicking
one).  A ``<mimic>`` on a fixed joint is ignored.

Malformed input raises :class:`URDFError` (a ValueError) naming the element:
XML syntax (with its line), unknown joint type, missing parent or child link,
kinematic loops, several root links, a missing ``<limit>``, negative velocity
or effort limits, non-finite numbers, negative masses.  Physically
inconsistent inertias (rotational inertia not positive semi-definite or
breaking the triangle inequality), lower > upper limits and moving joints that carry no
mass or inertia (M singular) load with a :class:`URDFWarning` naming the link
or joint and the defect, as Pinocchio loads them; ``strict=True`` raises
instead (see :mod:`.urdf_checks`).

SRDF ``group_state`` entries become ``model.reference_configurations`` with
Pinocchio's ``loadReferenceConfigurations`` semantics: every group state starts
from the neutral configuration; a joint that is not in the model is skipped; a
continuous joint takes one angle; a free-flyer ``root_joint`` takes its 7
numbers; if a name appears twice the first one is kept.
"""
import math
import os
from dataclasses import dataclass, field
from xml.etree.ElementTree import ParseError

import numpy as np
from defusedxml import DefusedXmlException
from defusedxml import ElementTree

from ..dynamics.mimic import MimicModel
from ..dynamics.model import (BODY_FRAME, FIXED_JOINT_FRAME, FREE_FLYER, JOINT_FRAME,
                              JOINT_NQ, JOINT_NV, ModelBuilder, PLANAR, PRISMATIC,
                              REVOLUTE, REVOLUTE_UNBOUNDED)
from ._configurations import configuration_layout, neutral_configuration
from .robot import Robot, VisualGeometry
from .urdf_checks import (URDFError, URDFWarning, check_inertia, check_limit,
                          check_motion_has_inertia, quote, quote_list, warn)


ROOT_JOINT_NAME = "root_joint"
_ROOT_JOINTS = {None: None, "free-flyer": FREE_FLYER, "free_flyer": FREE_FLYER}
_MIMIC_MODES = (None, False, True)
_DBL_MAX = float(np.finfo(float).max)
_UNIT_COORDINATE_BOUND = 1.01
# URDF joint type -> joint type code (None: fixed, merged into its parent).
_URDF_JOINT_TYPES = {"revolute": REVOLUTE, "continuous": REVOLUTE_UNBOUNDED,
                     "prismatic": PRISMATIC, "floating": FREE_FLYER,
                     "planar": PLANAR, "fixed": None}


# ---------------------------------------------------------------- elements
@dataclass
class _Inertial:
    mass: float
    com: np.ndarray
    inertia: np.ndarray      # about the com, in the link frame (R I R^T)


@dataclass
class _Visual:
    name: str
    R: np.ndarray
    p: np.ndarray
    kind: str
    size: tuple
    filename: str
    scale: np.ndarray
    rgba: tuple


@dataclass
class _Link:
    name: str
    inertial: _Inertial = None
    visuals: list = field(default_factory=list)


@dataclass
class _Joint:
    name: str
    jtype: object            # a joint type code, or None for fixed
    parent: str
    child: str
    R: np.ndarray
    p: np.ndarray
    axis: np.ndarray
    limit: dict = None
    mimic: tuple = None      # (mimicked joint, multiplier, offset)


# ---------------------------------------------------------------- numbers
def rpy_matrix(rpy):
    """Rotation ``Rz(yaw) Ry(pitch) Rx(roll)`` of URDF's ``rpy`` attribute."""
    roll, pitch, yaw = rpy
    cr, sr, cp, sp = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch)
    cy, sy = np.cos(yaw), np.sin(yaw)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr]])


def _number_list(text, count, what):
    """``count`` whitespace-separated finite numbers (``count`` None: any), as floats."""
    try:
        values = [float(token) for token in str(text).split()]
    except ValueError:
        raise URDFError(f"{what}: {quote(text)} is not a list of numbers") from None
    if count is not None and len(values) != count:
        raise URDFError(f"{what}: expected {count} numbers, got {quote(text)}")
    if not all(map(math.isfinite, values)):
        raise URDFError(f"{what}: {quote(text)} has non-finite values")
    return values


def _floats(text, count, what):
    """:func:`_number_list` as an array."""
    return np.array(_number_list(text, count, what))


def _attribute(element, name, what, default=None):
    """A float attribute; ``default`` None means it is required."""
    text = element.get(name)
    if text is None:
        if default is None:
            raise URDFError(f"{what}: missing attribute {quote(name)}")
        return float(default)
    return _number_list(text, 1, f"{what}, attribute {quote(name)}")[0]


def _origin(parent, what):
    """(R, p) of the ``<origin>`` child of ``parent`` (identity if absent)."""
    element = parent.find("origin")
    if element is None:
        return np.eye(3), np.zeros(3)
    p = _floats(element.get("xyz", "0 0 0"), 3, f"{what}: origin xyz")
    rpy = _floats(element.get("rpy", "0 0 0"), 3, f"{what}: origin rpy")
    return rpy_matrix(rpy), p


def _compose(R1, p1, R2, p2):
    """Placement ``(R1, p1) * (R2, p2)``."""
    return R1 @ R2, R1 @ p2 + p1


# ---------------------------------------------------------------- links
def _parse_inertial(link_element, link, strict):
    """The link's :class:`_Inertial`, or None if it has no ``<inertial>``."""
    element = link_element.find("inertial")
    if element is None:
        return None
    what = f"link {quote(link)}: inertial"
    mass_element, inertia_element = element.find("mass"), element.find("inertia")
    if mass_element is None:
        raise URDFError(f"{what}: missing <mass>")
    if inertia_element is None:
        raise URDFError(f"{what}: missing <inertia>")
    mass = _attribute(mass_element, "value", f"{what} mass")
    i = {key: _attribute(inertia_element, key, f"{what} inertia")
         for key in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    inertia = np.array([[i["ixx"], i["ixy"], i["ixz"]],
                        [i["ixy"], i["iyy"], i["iyz"]],
                        [i["ixz"], i["iyz"], i["izz"]]])
    check_inertia(link, mass, inertia, strict)
    R, com = _origin(element, what)
    return _Inertial(mass, com, R @ inertia @ R.T)


def _parse_geometry(visual, what):
    """(kind, size, filename, scale) of a ``<visual>``'s ``<geometry>``."""
    geometry = visual.find("geometry")
    shape = None if geometry is None else next(iter(geometry), None)
    if shape is None:
        raise URDFError(f"{what}: missing <geometry>")
    if shape.tag == "mesh":
        filename = shape.get("filename")
        if not filename:
            raise URDFError(f"{what}: mesh without filename")
        scale = _floats(shape.get("scale", "1 1 1"), 3, f"{what}: mesh scale")
        return "mesh", (), filename, scale
    if shape.tag == "box":
        size = tuple(_floats(shape.get("size", ""), 3, f"{what}: box size").tolist())
    elif shape.tag == "cylinder":
        size = (_attribute(shape, "radius", f"{what}: cylinder"),
                _attribute(shape, "length", f"{what}: cylinder"))
    elif shape.tag == "sphere":
        size = (_attribute(shape, "radius", f"{what}: sphere"),)
    else:
        raise URDFError(f"{what}: unknown geometry <{shape.tag}>")
    return shape.tag, size, None, np.ones(3)


def _material_colors(robot):
    """Named colours of the robot-level ``<material>`` elements."""
    colors = {}
    for material in robot.findall("material"):
        color = material.find("color")
        if color is not None and material.get("name"):
            colors[material.get("name")] = tuple(_floats(
                color.get("rgba", ""), 4, f"material {quote(material.get('name'))}").tolist())
    return colors


def _parse_visual(visual, name, materials, what):
    R, p = _origin(visual, what)
    kind, size, filename, scale = _parse_geometry(visual, what)
    rgba, material = None, visual.find("material")
    if material is not None:
        color = material.find("color")
        if color is not None:
            rgba = tuple(_floats(color.get("rgba", ""), 4, f"{what}: material").tolist())
        else:
            rgba = materials.get(material.get("name"))
    return _Visual(name, R, p, kind, size, filename, scale, rgba)


def _parse_link(element, materials, strict):
    name = element.get("name")
    if not name:
        raise URDFError("a <link> has no name")
    link = _Link(name, _parse_inertial(element, name, strict))
    for k, visual in enumerate(element.findall("visual")):
        link.visuals.append(_parse_visual(visual, f"{name}_{k}", materials,
                                          f"link {quote(name)}: visual {k}"))
    return link


# ---------------------------------------------------------------- joints
def _parse_limit(element, joint, required, strict):
    """The ``<limit>`` of a joint as a dict, or None when absent and optional."""
    limit = element.find("limit")
    if limit is None:
        if required:
            raise URDFError(f"joint {quote(joint)}: a {element.get('type')} joint needs <limit>")
        return None
    what = f"joint {quote(joint)}: limit"
    values = {"lower": _attribute(limit, "lower", what, 0.0),
              "upper": _attribute(limit, "upper", what, 0.0),
              "effort": _attribute(limit, "effort", what),
              "velocity": _attribute(limit, "velocity", what)}
    check_limit(joint, values, strict)
    return values


def _link_name(element, tag, joint):
    child = element.find(tag)
    if child is None or not child.get("link"):
        raise URDFError(f"joint {quote(joint)}: missing <{tag} link=...>")
    return child.get("link")


def _parse_mimic(element, joint):
    """(mimicked joint, multiplier, offset) of a ``<mimic>`` element, or None."""
    mimic = element.find("mimic")
    if mimic is None:
        return None
    what = f"joint {quote(joint)}: mimic"
    if not mimic.get("joint"):
        raise URDFError(f"{what}: missing attribute 'joint'")
    return (mimic.get("joint"), _attribute(mimic, "multiplier", what, 1.0),
            _attribute(mimic, "offset", what, 0.0))


def _parse_joint(element, strict):
    name = element.get("name")
    if not name:
        raise URDFError("a <joint> has no name")
    kind = element.get("type")
    if kind not in _URDF_JOINT_TYPES:
        raise URDFError(f"joint {quote(name)}: unknown joint type {quote(kind)} "
                        f"(known: {', '.join(_URDF_JOINT_TYPES)})")
    jtype = _URDF_JOINT_TYPES[kind]
    R, p = _origin(element, f"joint {quote(name)}")
    axis_element = element.find("axis")
    axis = np.array([1.0, 0.0, 0.0])
    if axis_element is not None and jtype not in (None, FREE_FLYER):
        axis = _floats(axis_element.get("xyz", ""), 3, f"joint {quote(name)}: axis")
        if np.linalg.norm(axis) < 1e-12:
            raise URDFError(f"joint {quote(name)}: axis has zero length")
        if jtype == PLANAR and not np.allclose(axis / np.linalg.norm(axis), [0, 0, 1]):
            raise URDFError(f"joint {quote(name)}: planar joints must have normal axis "
                            "(0, 0, 1), the only one Pinocchio supports")
    limit = None
    if jtype in (REVOLUTE, PRISMATIC, REVOLUTE_UNBOUNDED):
        limit = _parse_limit(element, name, jtype != REVOLUTE_UNBOUNDED, strict)
    mimic = _parse_mimic(element, name)
    return _Joint(name, jtype, _link_name(element, "parent", name),
                  _link_name(element, "child", name), R, p, axis, limit, mimic)


# ---------------------------------------------------------------- document
def _read_xml(text, source):
    """Root element of an XML document; syntax errors name the line."""
    if not isinstance(text, (str, bytes)):
        raise URDFError(f"{source}: expected the XML text (a str or bytes), got "
                        f"{type(text).__name__}")
    try:
        return ElementTree.fromstring(text)
    except ParseError as error:
        line = error.position[0] if getattr(error, "position", None) else "?"
        raise URDFError(f"{source}: XML syntax error at line {line}: "
                        f"{quote(error, 200)}") from None
    except DefusedXmlException as error:
        raise URDFError(f"{source}: forbidden XML construct: {error}") from None


def _parse_robot(xml, source, strict):
    """(robot name, links by name, joints by name) of a URDF document."""
    robot = _read_xml(xml, source)
    if robot.tag != "robot":
        raise URDFError(f"{source}: the root element is <{robot.tag[:80]}>, not <robot>")
    materials = _material_colors(robot)
    links, joints = {}, {}
    for element in robot.findall("link"):
        link = _parse_link(element, materials, strict)
        if link.name in links:
            raise URDFError(f"link {quote(link.name)} is defined twice")
        links[link.name] = link
    for element in robot.findall("joint"):
        joint = _parse_joint(element, strict)
        if joint.name in joints:
            raise URDFError(f"joint {quote(joint.name)} is defined twice")
        joints[joint.name] = joint
    if not links:
        raise URDFError(f"{source}: the robot has no <link>")
    return robot.get("name") or "robot", links, joints


def _tree(links, joints):
    """Root link and, for every link, its child joints in alphabetical order."""
    parent_joint = {}
    children = {name: [] for name in links}
    for name in sorted(joints):
        joint = joints[name]
        for role, link in (("parent", joint.parent), ("child", joint.child)):
            if link not in links:
                raise URDFError(f"joint {quote(name)}: {role} link {quote(link)} does not exist")
        if joint.parent == joint.child:
            raise URDFError(f"joint {quote(name)}: link {quote(joint.child)} is its own parent")
        if joint.child in parent_joint:
            raise URDFError(f"kinematic loop: link {quote(joint.child)} is the child of "
                            f"joints {quote(parent_joint[joint.child])} and {quote(name)}")
        parent_joint[joint.child] = name
        children[joint.parent].append(joint)
    roots = [name for name in links if name not in parent_joint]
    if not roots:
        raise URDFError("no root link: the joints form a kinematic loop")
    if len(roots) > 1:
        raise URDFError(f"several root links: {quote_list(roots)}")
    return roots[0], children


def _depth_first(root, children, nlinks):
    """URDF joints in Pinocchio's visit order (pre-order, children sorted)."""
    order, stack = [], list(reversed(children[root]))
    while stack:
        joint = stack.pop()
        order.append(joint)
        stack.extend(reversed(children[joint.child]))
    if len(order) != nlinks - 1:
        reached = {root} | {joint.child for joint in order}
        raise URDFError("kinematic loop: links not connected to the root "
                        f"{quote_list(sorted(set(children) - reached))}")
    return order


# ---------------------------------------------------------------- assembly
def _joint_limits(joint):
    """Keyword arguments of ModelBuilder.add_joint for the limits of ``joint``."""
    jtype, limit, inf, unit = joint.jtype, joint.limit, np.inf, _UNIT_COORDINATE_BOUND
    nv = JOINT_NV[jtype]
    if jtype in (REVOLUTE, PRISMATIC):
        return dict(lower=[limit["lower"]], upper=[limit["upper"]],
                    velocity_limit=[limit["velocity"]], effort_limit=[limit["effort"]])
    if jtype == REVOLUTE_UNBOUNDED:
        lower, upper = [-unit, -unit], [unit, unit]
    elif jtype == FREE_FLYER:
        lower, upper = [-inf] * 3 + [-unit] * 4, [inf] * 3 + [unit] * 4
    else:  # PLANAR
        lower, upper = [-inf] * 2 + [-unit] * 2, [inf] * 2 + [unit] * 2
    velocity = [inf] * nv if limit is None else [limit["velocity"]] * nv
    effort = [inf] * nv if limit is None else [limit["effort"]] * nv
    return dict(lower=lower, upper=upper, velocity_limit=velocity, effort_limit=effort)


class _Assembler:
    """Adds parsed URDF links and joints to a ModelBuilder in Pinocchio's order.

    ``body_frame[link]`` is the id of the link's BODY frame, whose joint and
    placement every joint below the link is placed from.
    """

    def __init__(self, name, links):
        self.builder = ModelBuilder(name)
        self.links = links
        self.body_frame = {}
        self.mimics = []         # (mimicking joint, mimicked joint name, ratio, offset)

    def _append_inertia(self, joint, link, R, p):
        inertial = self.links[link].inertial
        if inertial is not None:
            self.builder.append_body_inertia(joint, inertial.mass, R @ inertial.com + p,
                                             R @ inertial.inertia @ R.T)

    def add_root(self, root, root_joint):
        """The root link: on the universe, or on a free-flyer ``root_joint``."""
        b, R, p = self.builder, np.eye(3), np.zeros(3)
        if root_joint is None:
            self._append_inertia(0, root, R, p)
            self.body_frame[root] = b.add_frame(root, 0, R, p, BODY_FRAME, 0)
            return
        huge = _DBL_MAX
        jid = b.add_joint(0, FREE_FLYER, ROOT_JOINT_NAME, lower=[-huge] * 7,
                          upper=[huge] * 7, velocity_limit=[huge] * 6,
                          effort_limit=[huge] * 6)
        fid = b.add_frame(ROOT_JOINT_NAME, jid, R, p, JOINT_FRAME, 0)
        self._append_inertia(jid, root, R, p)
        self.body_frame[root] = b.add_frame(root, jid, R, p, BODY_FRAME, fid)

    def add(self, joint):
        """One URDF joint and its child link."""
        b = self.builder
        parent_fid = self.body_frame[joint.parent]
        parent = b.frames[parent_fid]
        R, p = _compose(parent.R, parent.p, joint.R, joint.p)
        if joint.jtype is None:
            fid = b.add_frame(joint.name, parent.joint, R, p, FIXED_JOINT_FRAME, parent_fid)
            self._append_inertia(parent.joint, joint.child, R, p)
            self.body_frame[joint.child] = b.add_frame(joint.child, parent.joint, R, p,
                                                       BODY_FRAME, fid)
            return
        jid = b.add_joint(parent.joint, joint.jtype, joint.name, R, p,
                          axis=joint.axis, **_joint_limits(joint))
        if joint.mimic is not None:
            self.mimics.append((jid,) + joint.mimic)
        fid = b.add_frame(joint.name, jid, np.eye(3), np.zeros(3), JOINT_FRAME, parent_fid)
        self._append_inertia(jid, joint.child, np.eye(3), np.zeros(3))
        self.body_frame[joint.child] = b.add_frame(joint.child, jid, np.eye(3),
                                                   np.zeros(3), BODY_FRAME, fid)


def _assemble(xml, source, root_joint, name, mimic, strict):
    """Parse a URDF document into an :class:`_Assembler` (links, builder, frames)."""
    if root_joint not in _ROOT_JOINTS:
        raise ValueError(f"root_joint must be None or 'free-flyer', got {root_joint!r}")
    if not any(mimic is mode for mode in _MIMIC_MODES):
        raise ValueError(f"mimic must be None, False or True, got {mimic!r}")
    robot_name, links, joints = _parse_robot(xml, source, strict)
    root, children = _tree(links, joints)
    order = _depth_first(root, children, len(links))
    if root_joint is not None and ROOT_JOINT_NAME in joints:
        raise URDFError(f"{source}: a joint is already named {quote(ROOT_JOINT_NAME)}; "
                        "cannot add the free-flyer root joint")
    assembler = _Assembler(robot_name if name is None else name, links)
    assembler.add_root(root, _ROOT_JOINTS[root_joint])
    for joint in order:
        assembler.add(joint)
    return assembler


def _mimic_model(model, mimics):
    """A MimicModel of ``model``, as ``buildModelFromUrdf(mimic=True)``: the
    mimicked joint must be a moving joint visited before the mimicking one."""
    relations = []
    for jid, mimicked, ratio, offset in mimics:
        k = model.joint_id(mimicked) if mimicked in model.names else 0
        if not 0 < k < jid:
            raise URDFError(f"joint {quote(model.names[jid])} mimics {quote(mimicked)}, which "
                            "is not a moving joint visited before it: the parent joint of the "
                            "mimic joint is not in the kinematic tree (Pinocchio refuses it "
                            "too); load it with mimic=False")
        relations.append((jid, k, ratio, offset))
    try:
        return MimicModel(model, relations)
    except ValueError as error:
        raise URDFError(str(error)) from None


def _build(assembler, mimic, strict):
    """The Model (or MimicModel with ``mimic=True``) of an assembled URDF."""
    model = assembler.builder.build()
    check_motion_has_inertia(model, strict)
    if not assembler.mimics or mimic is False:
        return model
    if mimic:
        return _mimic_model(model, assembler.mimics)
    names = [model.names[jid] for jid, _, _, _ in assembler.mimics]
    warn(f"joints {quote_list(names)} mimic other joints and were loaded as independent "
         "joints, as pinocchio.buildModelFromUrdf does by default; pass mimic=True for a "
         "model where they follow the joints they mimic, or mimic=False to load them as "
         "independent joints without this warning")
    return model


# ---------------------------------------------------------------- SRDF
def _group_state_values(values, jtype, nq, what):
    """The q block of one joint from the numbers of an SRDF ``<joint value=...>``."""
    if jtype == REVOLUTE_UNBOUNDED and values.size == 1:
        return np.array([np.cos(values[0]), np.sin(values[0])])
    if values.size != nq:
        raise URDFError(f"{what}: expected {nq} values, got {values.size}")
    return values


def reference_configurations_from_srdf(xml, names, jtypes, source="SRDF"):
    """Reference configurations (``group_state``) of an SRDF document.

    Parameters
    ----------
    xml : str or bytes
        The SRDF document.
    names, jtypes : sequences
        Joint names and type codes of the model (universe first).
    source : str
        How to name the document in error messages.

    Returns
    -------
    dict of str -> (nq,) array, in the order of the document.
    """
    robot = _read_xml(xml, source)
    idx_q, _ = configuration_layout(jtypes)
    index = {name: i for i, name in enumerate(names) if i > 0}
    configurations = {}
    for state in robot.findall("group_state"):
        state_name = state.get("name")
        if not state_name:
            raise URDFError(f"{source}: a <group_state> has no name")
        q = neutral_configuration(jtypes)
        for element in state.findall("joint"):
            i = index.get(element.get("name"))
            if i is None:
                continue
            what = f"{source}: group_state {quote(state_name)}, joint {quote(names[i])}"
            nq = JOINT_NQ[jtypes[i]]
            values = _floats(element.get("value", ""), None, what)
            q[idx_q[i]:idx_q[i] + nq] = _group_state_values(values, jtypes[i], nq, what)
        configurations.setdefault(state_name, q)
    return configurations


def _read_file(path, kind):
    """Bytes of an XML file (the parser reads its encoding declaration)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{kind} file {quote(path)} does not exist")
    with open(path, "rb") as stream:
        return stream.read()


def load_reference_configurations(model, srdf_path):
    """Reference configurations of ``model`` in an SRDF file (dict name -> q).

    Pinocchio's ``loadReferenceConfigurations``, returning the dict instead of
    changing the (immutable) model.
    """
    return reference_configurations_from_srdf(
        _read_file(srdf_path, "SRDF"), model.names, list(model.joint_types), srdf_path)


# ---------------------------------------------------------------- meshes
def _mesh_candidates(filename, package_dirs, base_dir):
    """(candidate path, the folder it must stay in) pairs for a URDF mesh name.

    ``package://pkg/rest`` is looked up as ``d/pkg/rest`` (folder ``d/pkg``)
    for every ``d`` in ``package_dirs``, and as ``d/rest`` (folder ``d``) when
    ``d`` itself is named ``pkg``; ``file://`` and plain paths are taken
    relative to ``base_dir``, and must stay in it.
    """
    if filename.startswith("package://"):
        relative = filename[len("package://"):]
        package, _, rest = relative.partition("/")
        for directory in package_dirs:
            yield os.path.join(directory, relative), os.path.join(directory, package)
            if os.path.basename(os.path.normpath(directory)) == package:
                yield os.path.join(directory, rest), directory
        return
    path = filename[len("file://"):] if filename.startswith("file://") else filename
    if base_dir is not None:
        yield os.path.join(base_dir, path), base_dir
    elif os.path.isabs(path):
        yield path, None


def _inside(path, folder):
    folder = os.path.realpath(folder)
    return os.path.commonpath([os.path.realpath(path), folder]) == folder


def resolve_mesh_path(filename, package_dirs=(), base_dir=None, allowed_roots=()):
    """Path on this machine of a URDF mesh ``filename``, or None.

    ``package://pkg/rest`` is looked up as ``d/pkg/rest`` for every ``d`` in
    ``package_dirs``, and as ``d/rest`` when ``d`` itself is named ``pkg``;
    ``file://`` and relative paths are taken relative to ``base_dir`` (the
    URDF's folder).  A file is only read from inside the package it names, or
    from inside ``base_dir`` for ``file://`` and plain paths (symbolic links
    resolved), or from inside a folder of ``allowed_roots``: a mesh name such
    as ``file:///etc/passwd``, ``../../x`` or ``package://pkg/../../x`` that
    leads elsewhere gives None with a :class:`URDFWarning` naming it, so that
    an exported page never embeds a file the URDF's author chose.  None
    without a warning when no candidate file exists.
    """
    refused = None
    for candidate, folder in _mesh_candidates(filename, package_dirs, base_dir):
        if not os.path.isfile(candidate):
            continue
        roots = list(allowed_roots) + ([] if folder is None else [folder])
        if any(_inside(candidate, root) for root in roots):
            return os.path.realpath(candidate)
        refused = candidate
    if refused is not None:
        warn(f"mesh {quote(filename)} leads to {quote(os.path.realpath(refused))}, outside "
             "the URDF's folder and the package it names: not read (pass "
             "allowed_mesh_roots=[folder] to load_urdf to allow it)")
    return None


def _default_package_dirs(urdf_path):
    """ROS_PACKAGE_PATH entries, then every folder above the URDF file."""
    dirs = [d for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]
    folder = os.path.dirname(os.path.abspath(urdf_path))
    while True:
        dirs.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            return dirs
        folder = parent


def _visual_geometries(assembler, package_dirs, base_dir, allowed_roots):
    """VisualGeometry list, links in the order the model visits them."""
    visuals = []
    for link, fid in assembler.body_frame.items():
        frame = assembler.builder.frames[fid]
        for visual in assembler.links[link].visuals:
            R, p = _compose(frame.R, frame.p, visual.R, visual.p)
            mesh_path = None if visual.filename is None else resolve_mesh_path(
                visual.filename, package_dirs, base_dir, allowed_roots)
            visuals.append(VisualGeometry(
                visual.name, link, fid, frame.joint, R, p, visual.kind, visual.size,
                visual.filename, mesh_path, visual.scale, visual.rgba))
    return visuals


# ---------------------------------------------------------------- public
def build_model_from_urdf_string(xml, root_joint=None, name=None, *, srdf=None,
                                 mimic=None, strict=False):
    """A :class:`~geppetto.dynamics.model.Model` from a URDF document.

    Parameters
    ----------
    xml : str or bytes
        The URDF document.
    root_joint : None or "free-flyer"
        None: fixed base (the root link is welded to the universe);
        "free-flyer": a FREE_FLYER joint named "root_joint" carries it.
    name : str, optional
        Model name; defaults to the ``<robot name=...>`` attribute.
    srdf : str, optional
        An SRDF document whose ``group_state`` entries become
        ``model.reference_configurations``.
    mimic : None, False or True
        ``<mimic>`` joints: False loads them as independent joints (Pinocchio's
        default), None too but with a :class:`URDFWarning` that says so, True
        gives a :class:`~geppetto.dynamics.mimic.MimicModel` where they follow
        the joints they mimic (Pinocchio's ``mimic=True``).
    strict : bool
        Raise :class:`URDFError` instead of warning about physically
        inconsistent inertias and crossed position limits.

    Raises
    ------
    URDFError
        If the document is malformed (the message names the element).

    Warns
    -----
    URDFWarning
        As :func:`load_urdf`.
    """
    assembler = _assemble(xml, "URDF string", root_joint, name, mimic, strict)
    builder = assembler.builder
    if srdf is not None:
        builder.reference_configurations = reference_configurations_from_srdf(
            srdf, builder.joint_names, builder.jtypes, "SRDF string")
    return _build(assembler, mimic, strict)


def load_urdf(path, root_joint=None, package_dirs=None, *, srdf_path=None, q0=None,
              name=None, mimic=None, strict=False, allowed_mesh_roots=()):
    """A :class:`~geppetto.robots.robot.Robot` from a URDF file.

    Parameters
    ----------
    path : str or os.PathLike
        The URDF file.
    root_joint : None or "free-flyer"
        As in :func:`build_model_from_urdf_string`.
    package_dirs : sequence of str, optional
        Folders in which ``package://`` mesh URIs are looked up; by default
        ``ROS_PACKAGE_PATH`` and every folder above the URDF file.
    srdf_path : str, optional
        SRDF file with reference configurations (``group_state``).
    q0 : str or (nq,) array, optional
        Default configuration or the name of a reference configuration (see
        :func:`~geppetto.robots.robot.default_configuration`).
    name, mimic, strict
        As in :func:`build_model_from_urdf_string`.
    allowed_mesh_roots : sequence of str
        Folders meshes may also be read from.  By default a mesh is read only
        from inside the package its ``package://`` URI names, or for
        ``file://`` and relative names from inside the URDF's folder (see
        :func:`resolve_mesh_path`); others are left out with a URDFWarning.

    Raises
    ------
    FileNotFoundError
        If ``path`` or ``srdf_path`` does not exist.
    URDFError
        If a document is malformed.

    Warns
    -----
    URDFWarning
        For each physically inconsistent inertia or crossed limit (unless
        ``strict``), and for mimic joints loaded as independent (``mimic=None``).
    """
    path = os.path.abspath(os.fspath(path))
    assembler = _assemble(_read_file(path, "URDF"), path, root_joint, name, mimic, strict)
    builder = assembler.builder
    if srdf_path is not None:
        srdf_path = os.path.abspath(os.fspath(srdf_path))
        builder.reference_configurations = reference_configurations_from_srdf(
            _read_file(srdf_path, "SRDF"), builder.joint_names, builder.jtypes, srdf_path)
    model = _build(assembler, mimic, strict)
    if package_dirs is None:
        package_dirs = _default_package_dirs(path)
    package_dirs = [os.fspath(d) for d in package_dirs]
    allowed_mesh_roots = [os.fspath(d) for d in allowed_mesh_roots]
    visuals = _visual_geometries(assembler, package_dirs, os.path.dirname(path),
                                 allowed_mesh_roots)
    return Robot(model, urdf_path=path, srdf_path=srdf_path, package_dirs=package_dirs,
                 visuals=visuals, q0=q0)
