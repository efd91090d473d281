"""Build the Pinocchio twin of a geppetto Model, for tests that compare to pin.

>>> from pin_bridge import to_pin_model
>>> pin_model = to_pin_model(geppetto_model)
>>> pin_data = pin_model.createData()

The twin has the same joints (same order, names, parents, placements, q/v
layout), the same inertias (universe included), limits, armature, gravity,
frames (same order, names, types, parent joints and frames, placements) and
reference configurations.  Joint types map as:

    REVOLUTE            JointModelRX/RY/RZ if the axis is +x/+y/+z,
                        else JointModelRevoluteUnaligned(axis)
    REVOLUTE_UNBOUNDED  JointModelRUBX/RUBY/RUBZ, else
                        JointModelRevoluteUnboundedUnaligned(axis)
    PRISMATIC           JointModelPX/PY/PZ, else JointModelPrismaticUnaligned(axis)
    FREE_FLYER          JointModelFreeFlyer
    SPHERICAL           JointModelSpherical
    PLANAR              JointModelPlanar
    TRANSLATION         JointModelTranslation

``aligned=False`` always uses the unaligned joint models (same dynamics, other
code path in Pinocchio).
"""
import numpy as np
import pinocchio as pin

from geppetto.dynamics.model import (FREE_FLYER, PLANAR, PRISMATIC, REVOLUTE,
                                     REVOLUTE_UNBOUNDED, SPHERICAL, TRANSLATION,
                                     inertia_parameters)

_ALIGNED = {
    REVOLUTE: (pin.JointModelRX, pin.JointModelRY, pin.JointModelRZ),
    REVOLUTE_UNBOUNDED: (pin.JointModelRUBX, pin.JointModelRUBY, pin.JointModelRUBZ),
    PRISMATIC: (pin.JointModelPX, pin.JointModelPY, pin.JointModelPZ),
}


def _revolute_unbounded_unaligned(axis):
    """pin 4.1's Python JointModelRevoluteUnboundedUnaligned has no axis
    constructor: take the joint from a one-joint URDF (continuous joint)."""
    xyz = " ".join(repr(float(x)) for x in axis)
    xml = ('<robot name="axis"><link name="a"/><link name="b"/>'
           '<joint name="j" type="continuous"><parent link="a"/><child link="b"/>'
           f'<axis xyz="{xyz}"/></joint></robot>')
    return pin.buildModelFromXML(xml).joints[1]


_UNALIGNED = {
    REVOLUTE: pin.JointModelRevoluteUnaligned,
    REVOLUTE_UNBOUNDED: _revolute_unbounded_unaligned,
    PRISMATIC: pin.JointModelPrismaticUnaligned,
}
_NO_AXIS = {
    FREE_FLYER: pin.JointModelFreeFlyer,
    SPHERICAL: pin.JointModelSpherical,
    PLANAR: pin.JointModelPlanar,
    TRANSLATION: pin.JointModelTranslation,
}


def pin_joint_model(jtype, axis, aligned=True):
    """The Pinocchio joint model of a geppetto joint type code and unit axis."""
    jtype = int(jtype)
    if jtype in _NO_AXIS:
        return _NO_AXIS[jtype]()
    if jtype not in _UNALIGNED:
        raise ValueError(f"no Pinocchio joint model for joint type {jtype}")
    axis = np.asarray(axis, dtype=float)
    if aligned:
        for k in range(3):
            if np.allclose(axis, np.eye(3)[k], rtol=0.0, atol=1e-14):
                return _ALIGNED[jtype][k]()
    return _UNALIGNED[jtype](axis)


def pin_inertia(inertia6):
    """pin.Inertia of a 6x6 spatial inertia [linear; angular]."""
    mass, com, inertia_at_com = inertia_parameters(np.asarray(inertia6))
    return pin.Inertia(mass, com, inertia_at_com)


def _copy_limits(model, pin_model):
    pin_model.lowerPositionLimit = np.array(model.lower_position_limit)
    pin_model.upperPositionLimit = np.array(model.upper_position_limit)
    pin_model.velocityLimit = np.array(model.velocity_limit)
    pin_model.effortLimit = np.array(model.effort_limit)
    pin_model.lowerEffortLimit = -np.array(model.effort_limit)
    pin_model.armature = np.array(model.armature)


def _copy_frames(model, pin_model):
    for index, frame in enumerate(model.frames[1:], start=1):
        pin_frame = pin.Frame(frame.name, frame.joint, frame.parent_frame,
                              pin.SE3(frame.R, frame.p), pin.FrameType.values[frame.type])
        frame_id = pin_model.addFrame(pin_frame, False)
        if frame_id != index:
            raise ValueError(f"frame {frame.name!r}: Pinocchio gave it id {frame_id}, "
                             f"not {index} (duplicate name and type?)")


def to_pin_model(model, aligned=True):
    """The ``pin.Model`` equal to the geppetto ``model`` (see module docstring)."""
    arrays = model.arrays
    pin_model = pin.Model()
    pin_model.name = model.name
    for i in range(1, arrays.njoints):
        joint_model = pin_joint_model(arrays.jtype[i], arrays.axis[i], aligned)
        placement = pin.SE3(np.array(arrays.jR[i]), np.array(arrays.jp[i]))
        jid = pin_model.addJoint(int(arrays.parents[i]), joint_model, placement,
                                 model.names[i])
        if jid != i:
            raise ValueError(f"joint {model.names[i]!r}: Pinocchio gave it id {jid}")
    for i in range(arrays.njoints):
        pin_model.inertias[i] = pin_inertia(arrays.inertia[i])
    _copy_limits(model, pin_model)
    pin_model.gravity = pin.Motion(np.array(arrays.gravity))
    _copy_frames(model, pin_model)
    for name, q in model.reference_configurations.items():
        pin_model.referenceConfigurations[name] = np.array(q)
    return pin_model


# Pinocchio joint model short names -> geppetto joint type codes.
PIN_JOINT_TYPES = {
    "JointModelRX": REVOLUTE, "JointModelRY": REVOLUTE, "JointModelRZ": REVOLUTE,
    "JointModelRevoluteUnaligned": REVOLUTE,
    "JointModelRUBX": REVOLUTE_UNBOUNDED, "JointModelRUBY": REVOLUTE_UNBOUNDED,
    "JointModelRUBZ": REVOLUTE_UNBOUNDED,
    "JointModelRevoluteUnboundedUnaligned": REVOLUTE_UNBOUNDED,
    "JointModelPX": PRISMATIC, "JointModelPY": PRISMATIC, "JointModelPZ": PRISMATIC,
    "JointModelPrismaticUnaligned": PRISMATIC,
    "JointModelFreeFlyer": FREE_FLYER, "JointModelSpherical": SPHERICAL,
    "JointModelPlanar": PLANAR, "JointModelTranslation": TRANSLATION,
}


def reference_configurations(pin_model):
    """``pin_model.referenceConfigurations`` as a dict name -> q."""
    return {entry.key(): np.array(entry.data()) for entry in pin_model.referenceConfigurations}


def _assert_same_joints(model, pin_model, atol):
    arrays = model.arrays
    assert (model.nq, model.nv, model.njoints) == (pin_model.nq, pin_model.nv,
                                                   pin_model.njoints)
    assert model.names == list(pin_model.names)
    np.testing.assert_array_equal(model.parents, list(pin_model.parents))
    np.testing.assert_array_equal(model.idx_qs, list(pin_model.idx_qs))
    np.testing.assert_array_equal(model.idx_vs, list(pin_model.idx_vs))
    np.testing.assert_array_equal(model.nqs, list(pin_model.nqs))
    np.testing.assert_array_equal(model.nvs, list(pin_model.nvs))
    pin_data = pin_model.createData()
    pin.forwardKinematics(pin_model, pin_data, pin.neutral(pin_model))
    for i in range(1, model.njoints):
        name = model.names[i]
        assert PIN_JOINT_TYPES[pin_model.joints[i].shortname()] == arrays.jtype[i], name
        S = arrays.S[:, arrays.idx_v[i]:arrays.idx_v[i] + arrays.nvs[i]]
        pin_S = np.array(pin_data.joints[i].S).reshape(6, -1)
        np.testing.assert_allclose(S, pin_S, rtol=0, atol=atol, err_msg=name)
    for i in range(model.njoints):
        placement = pin_model.jointPlacements[i]
        np.testing.assert_allclose(arrays.jR[i], placement.rotation, rtol=0, atol=atol)
        np.testing.assert_allclose(arrays.jp[i], placement.translation, rtol=0, atol=atol)
        np.testing.assert_allclose(arrays.inertia[i], pin_model.inertias[i].matrix(),
                                   rtol=0, atol=atol, err_msg=model.names[i])


def _assert_same_frames(model, pin_model, atol):
    assert model.nframes == len(pin_model.frames)
    names = [frame.name for frame in model.frames]
    for frame, pin_frame in zip(model.frames, pin_model.frames):
        assert frame.name == pin_frame.name
        assert (frame.type, frame.joint, frame.parent_frame) == (
            int(pin_frame.type), pin_frame.parentJoint, pin_frame.parentFrame), frame.name
        np.testing.assert_allclose(frame.R, pin_frame.placement.rotation, rtol=0, atol=atol)
        np.testing.assert_allclose(frame.p, pin_frame.placement.translation, rtol=0,
                                   atol=atol)
        if names.count(frame.name) == 1:  # pin 4 refuses ambiguous names
            assert model.frame_id(frame.name) == pin_model.getFrameId(frame.name)


def assert_same_model(model, pin_model, atol=1e-12):
    """Assert that a geppetto Model and a pin.Model describe the same system:
    joints (names, order, parents, types, motion subspaces, q/v layout),
    placements, inertias, limits, armature, gravity, frames and reference
    configurations."""
    _assert_same_joints(model, pin_model, atol)
    for ours, theirs in ((model.lower_position_limit, pin_model.lowerPositionLimit),
                         (model.upper_position_limit, pin_model.upperPositionLimit),
                         (model.velocity_limit, pin_model.velocityLimit),
                         (model.effort_limit, pin_model.effortLimit),
                         (model.armature, pin_model.armature)):
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(model.arrays.gravity, pin_model.gravity.vector)
    _assert_same_frames(model, pin_model, atol)
    theirs = reference_configurations(pin_model)
    assert set(model.reference_configurations) == set(theirs)
    for name, q in model.reference_configurations.items():
        np.testing.assert_allclose(q, theirs[name], rtol=0, atol=atol, err_msg=name)
