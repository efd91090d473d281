"""URDF/SRDF parsing and example-robot-data loaders, checked against Pinocchio.

Every model must equal ``pin.buildModelFromUrdf`` on the same file with the
same root joint: joint order, q/v layout, placements, inertias, frames,
limits and reference configurations, to 1e-12.
"""
import os

import numpy as np
import pinocchio as pin
import pytest

from geppetto.dynamics.model import (FREE_FLYER, PLANAR, PRISMATIC, REVOLUTE,
                                     REVOLUTE_UNBOUNDED)
from geppetto.dynamics import random_configuration
from geppetto.robots import (Robot, URDFError, URDFWarning, available_robots,
                             build_model_from_urdf_string, default_configuration, load,
                             load_reference_configurations, load_urdf, model_dir)
from geppetto.robots.loaders import ENVIRONMENT_VARIABLE, ROBOTS
from pin_bridge import assert_same_model, reference_configurations, to_pin_model

REQUIRED = ["ur5", "panda", "solo12", "hyq", "anymal", "talos"]


def pin_model_of(name):
    """What Pinocchio builds from the files :func:`load` uses for ``name``."""
    entry, folder = ROBOTS[name], os.path.join(model_dir(), ROBOTS[name].folder)
    path = os.path.join(folder, entry.urdf)
    if entry.free_flyer:
        pin_model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    else:
        pin_model = pin.buildModelFromUrdf(path)
    if entry.srdf is not None:
        pin.loadReferenceConfigurations(pin_model, os.path.join(folder, entry.srdf))
    return pin_model


# ---------------------------------------------------------------- example-robot-data
@pytest.mark.parametrize("name", available_robots())
def test_loaded_robot_equals_pinocchio(name):
    robot = load(name)
    assert isinstance(robot, Robot) and robot.name == name
    assert_same_model(robot.model, pin_model_of(name), atol=1e-12)


@pytest.mark.parametrize("name", REQUIRED)
def test_required_robots_are_available(name):
    assert name in available_robots()


def test_known_sizes_and_root_joints():
    sizes = {name: (load(name).model.nq, load(name).model.nv) for name in REQUIRED}
    assert sizes == {"ur5": (6, 6), "panda": (9, 9), "solo12": (19, 18),
                     "hyq": (19, 18), "anymal": (19, 18), "talos": (39, 38)}
    for name in ["solo12", "hyq", "anymal", "talos"]:
        model = load(name).model
        assert model.names[1] == "root_joint" and model.joint_types[1] == FREE_FLYER
    for name in ["ur5", "panda"]:
        assert FREE_FLYER not in load(name).model.joint_types


@pytest.mark.parametrize("name, posture", [("panda", "default"), ("solo12", "standing"),
                                           ("hyq", "standing"), ("anymal", "standing"),
                                           ("talos", "half_sitting")])
def test_q0_is_the_upstream_reference_posture(name, posture):
    robot, pin_model = load(name), pin_model_of(name)
    expected = pin.normalize(pin_model, reference_configurations(pin_model)[posture])
    np.testing.assert_allclose(robot.q0, expected, rtol=0, atol=1e-12)


def test_ur5_q0_is_neutral():
    np.testing.assert_array_equal(load("ur5").q0, np.zeros(6))


def test_continuous_joints_match_pinocchio_conventions():
    model = load("double_pendulum_continuous").model
    assert list(model.joint_types[1:]) == [REVOLUTE_UNBOUNDED] * 2
    assert (model.nq, model.nv) == (4, 2)
    np.testing.assert_array_equal(model.lower_position_limit, [-1.01] * 4)
    np.testing.assert_array_equal(model.upper_position_limit, [1.01] * 4)
    np.testing.assert_array_equal(load("double_pendulum_continuous").q0, [1, 0, 1, 0])


def test_free_flyer_root_limits_are_pinocchio_defaults():
    model = load("solo12").model
    huge = np.finfo(float).max
    np.testing.assert_array_equal(model.upper_position_limit[:7], [huge] * 7)
    np.testing.assert_array_equal(model.lower_position_limit[:7], [-huge] * 7)
    np.testing.assert_array_equal(model.velocity_limit[:6], [huge] * 6)


def test_unknown_robot_lists_available_names():
    with pytest.raises(ValueError, match="available robots:.*talos.*ur5"):
        load("r2d2")


def test_model_dir_honours_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(tmp_path))
    assert model_dir() == str(tmp_path)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(tmp_path / "missing"))
    assert os.path.isdir(os.path.join(model_dir(), "ur_description"))


def test_to_pin_model_reproduces_pinocchio_ur5():
    model, pin_model = load("ur5").model, pin_model_of("ur5")
    bridged = to_pin_model(model)
    for i in range(pin_model.njoints):
        np.testing.assert_allclose(bridged.inertias[i].matrix(),
                                   pin_model.inertias[i].matrix(), rtol=0, atol=1e-12)
        assert bridged.jointPlacements[i].isApprox(pin_model.jointPlacements[i], 1e-12)
        assert bridged.joints[i].shortname() == pin_model.joints[i].shortname()
    assert_same_model(model, bridged)
    q = pin.randomConfiguration(pin_model)
    v, a = np.random.default_rng(0).normal(size=(2, 6))
    np.testing.assert_allclose(pin.rnea(bridged, bridged.createData(), q, v, a),
                               pin.rnea(pin_model, pin_model.createData(), q, v, a),
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["ur5", "solo12", "panda"])
def test_visuals_match_pinocchio_geometry_model(name):
    robot = load(name)
    pin_model = pin_model_of(name)
    geometry = pin.buildGeomFromUrdf(pin_model, robot.urdf_path, pin.GeometryType.VISUAL,
                                     package_dirs=robot.package_dirs)
    expected = {g.name: g for g in geometry.geometryObjects}
    assert sorted(expected) == sorted(v.name for v in robot.visuals)
    for visual in robot.visuals:
        g = expected[visual.name]
        assert (visual.joint, visual.frame_id) == (g.parentJoint, g.parentFrame)
        assert visual.kind == "mesh" and os.path.isfile(visual.mesh_path)
        assert os.path.samefile(visual.mesh_path, g.meshPath)
        np.testing.assert_allclose(visual.R, g.placement.rotation, rtol=0, atol=1e-12)
        np.testing.assert_allclose(visual.p, g.placement.translation, rtol=0, atol=1e-12)
        np.testing.assert_allclose(visual.scale, g.meshScale)


# ---------------------------------------------------------------- URDF features
def link(name, mass=1.0, xyz="0.1 -0.2 0.3", rpy="0.3 -0.2 0.1",
         inertia=(0.3, 0.01, -0.02, 0.4, 0.03, 0.5), visual=""):
    ixx, ixy, ixz, iyy, iyz, izz = inertia
    return (f'<link name="{name}"><inertial><origin xyz="{xyz}" rpy="{rpy}"/>'
            f'<mass value="{mass}"/><inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" '
            f'iyy="{iyy}" iyz="{iyz}" izz="{izz}"/></inertial>{visual}</link>')


def joint(name, kind, parent, child, xyz="0.1 0.2 0.3", rpy="0.4 0.5 -0.6", extra=None):
    if extra is None:
        extra = ('<axis xyz="0 0 1"/><limit lower="-1" upper="2" effort="3" velocity="4"/>'
                 if kind in ("revolute", "prismatic") else "")
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin xyz="{xyz}" rpy="{rpy}"/>{extra}</joint>')


def urdf(*elements, name="test_robot"):
    return f'<?xml version="1.0"?>\n<robot name="{name}">\n' + "\n".join(elements) + "\n</robot>"


UNALIGNED = '<axis xyz="0.3 -0.5 0.8"/><limit lower="-0.5" upper="1.5" effort="7" velocity="8"/>'

# Every joint type, unaligned axes, fixed joints in chains (with and without
# inertia, with children), a link without <inertial>, a continuous joint with
# and without <limit>, children declared out of alphabetical order.
FEATURES = urdf(
    link("base"), link("a"), link("b"), link("c"), link("d"), link("e"),
    '<link name="no_inertia"/>', link("f"), link("g"), link("h"), link("i"), link("k"),
    joint("z_rev", "revolute", "base", "a", extra=UNALIGNED),
    joint("fix1", "fixed", "a", "b"),
    joint("fix2", "fixed", "b", "c", xyz="0 0 0.5", rpy="1 0 0"),
    joint("m_prism", "prismatic", "c", "d", extra=UNALIGNED),
    joint("b_cont", "continuous", "base", "e", extra='<axis xyz="0 1 0"/>'),
    joint("c_cont", "continuous", "e", "no_inertia",
          extra='<axis xyz="1 1 0"/><limit effort="5" velocity="6"/>'),
    joint("a_float", "floating", "base", "f"),
    joint("a_planar", "planar", "f", "g"),
    joint("Z_upper", "revolute", "base", "h"),
    joint("fix3", "fixed", "h", "i"),
    joint("y_rev", "revolute", "i", "k"))


@pytest.mark.parametrize("root_joint", [None, "free-flyer"])
def test_urdf_features_equal_pinocchio(root_joint):
    model = build_model_from_urdf_string(FEATURES, root_joint=root_joint)
    if root_joint is None:
        pin_model = pin.buildModelFromXML(FEATURES)
    else:
        pin_model = pin.buildModelFromXML(FEATURES, pin.JointModelFreeFlyer())
    assert_same_model(model, pin_model, atol=1e-12)
    assert model.name == "test_robot"
    types = dict(zip(model.names, model.joint_types))
    assert (types["z_rev"], types["m_prism"], types["b_cont"], types["a_float"],
            types["a_planar"]) == (REVOLUTE, PRISMATIC, REVOLUTE_UNBOUNDED, FREE_FLYER, PLANAR)
    assert "fix1" not in model.names and model.has_frame("fix1") and model.has_frame("c")


def test_child_joints_are_visited_in_alphabetical_order():
    # File order c, a, b; b has a child "0_b_child": depth first, alphabetical.
    xml = urdf(link("root"), link("l1"), link("l2"), link("l3"), link("l4"),
               joint("c_joint", "revolute", "root", "l1"),
               joint("a_joint", "revolute", "root", "l2"),
               joint("b_joint", "revolute", "root", "l3"),
               joint("0_b_child", "revolute", "l3", "l4"))
    model = build_model_from_urdf_string(xml)
    assert model.names == ["universe", "a_joint", "b_joint", "0_b_child", "c_joint"]
    assert model.names == list(pin.buildModelFromXML(xml).names)
    np.testing.assert_array_equal(model.parents, [0, 0, 0, 2, 0])


def test_inertial_origin_rotates_inertia():
    xml = urdf(link("root"), link("body", mass=2.0, xyz="1 2 3", rpy="0 0 1.5707963267948966",
                                  inertia=(1, 0, 0, 2, 0, 3)),
               joint("j", "revolute", "root", "body", xyz="0 0 0", rpy="0 0 0"))
    Y = build_model_from_urdf_string(xml).inertias[1]
    expected = pin.Inertia(2.0, np.array([1.0, 2.0, 3.0]), np.diag([2.0, 1.0, 3.0]))
    np.testing.assert_allclose(Y, expected.matrix(), rtol=0, atol=1e-12)


def test_fixed_base_root_inertia_goes_to_universe():
    xml = urdf(link("root", mass=3.0), link("body"), joint("j", "revolute", "root", "body"))
    assert build_model_from_urdf_string(xml).inertias[0][0, 0] == 3.0
    assert build_model_from_urdf_string(xml, "free-flyer").inertias[1][0, 0] == 3.0


def test_load_urdf_from_file_with_primitive_visuals(tmp_path):
    box = ('<visual><origin xyz="0 0 0.1"/><geometry><box size="0.1 0.2 0.3"/></geometry>'
           '<material name="red"><color rgba="1 0 0 1"/></material></visual>'
           '<visual><geometry><cylinder radius="0.05" length="0.4"/></geometry>'
           '<material name="blue"/></visual>')
    ball = '<visual><geometry><sphere radius="0.2"/></geometry></visual>'
    xml = urdf('<material name="blue"><color rgba="0 0 1 1"/></material>',
               link("root", visual=box), link("arm"), link("hand", visual=ball),
               joint("j", "revolute", "root", "arm"),
               joint("wrist", "fixed", "arm", "hand", xyz="0 0 1", rpy="0 0 0"))
    path = tmp_path / "toy.urdf"
    path.write_text(xml)
    robot = load_urdf(path)
    assert robot.urdf_path == str(path) and robot.srdf_path is None
    kinds = [(v.name, v.kind, v.size, v.rgba) for v in robot.visuals]
    assert kinds == [("root_0", "box", (0.1, 0.2, 0.3), (1.0, 0.0, 0.0, 1.0)),
                     ("root_1", "cylinder", (0.05, 0.4), (0.0, 0.0, 1.0, 1.0)),
                     ("hand_0", "sphere", (0.2,), None)]
    hand = robot.visuals[2]
    assert hand.joint == 1 and robot.model.frames[hand.frame_id].name == "hand"
    np.testing.assert_allclose(hand.p, [0, 0, 1])
    np.testing.assert_allclose(robot.visuals[0].p, [0, 0, 0.1])


def test_package_uri_resolution(tmp_path):
    mesh = tmp_path / "share" / "my_pkg" / "meshes" / "part.stl"
    mesh.parent.mkdir(parents=True)
    mesh.write_text("solid")
    visual = ('<visual><geometry><mesh filename="package://my_pkg/meshes/part.stl"/>'
              '</geometry></visual>')
    path = tmp_path / "share" / "my_pkg" / "robot.urdf"
    path.write_text(urdf(link("root", visual=visual)))
    for package_dirs in (None, [tmp_path / "share"], [tmp_path / "share" / "my_pkg"]):
        robot = load_urdf(path, package_dirs=package_dirs)
        assert os.path.samefile(robot.visuals[0].mesh_path, mesh)
    assert load_urdf(path, package_dirs=[tmp_path / "nowhere"]).visuals[0].mesh_path is None


# ---------------------------------------------------------------- SRDF
SRDF_MODEL = urdf(link("base"), link("a"), link("b"), link("c"),
                  joint("rev", "revolute", "base", "a"),
                  joint("cont", "continuous", "a", "b", extra='<axis xyz="0 0 1"/>'),
                  joint("slide", "prismatic", "b", "c"))
SRDF = """<?xml version="1.0"?>
<robot name="test_robot">
  <group_state name="standing" group="all">
    <joint name="root_joint" value="0.1 0.2 0.3 0 0 0.6 0.8"/>
    <joint name="rev" value="0.5"/>
    <joint name="cont" value="1.2"/>
    <joint name="not_in_model" value="3"/>
  </group_state>
  <group_state name="half_sitting" group="all">
    <joint name="slide" value="-0.25"/>
  </group_state>
  <group_state name="standing" group="all">
    <joint name="rev" value="9"/>
  </group_state>
</robot>"""


@pytest.mark.parametrize("root_joint", [None, "free-flyer"])
def test_srdf_reference_configurations_equal_pinocchio(root_joint):
    model = build_model_from_urdf_string(SRDF_MODEL, root_joint, srdf=SRDF)
    if root_joint is None:
        pin_model = pin.buildModelFromXML(SRDF_MODEL)
    else:
        pin_model = pin.buildModelFromXML(SRDF_MODEL, pin.JointModelFreeFlyer())
    pin.loadReferenceConfigurationsFromXML(pin_model, SRDF, False)
    assert_same_model(model, pin_model)
    standing = model.reference_configurations["standing"]
    np.testing.assert_allclose(standing[-4:], [0.5, np.cos(1.2), np.sin(1.2), 0.0])


def test_load_reference_configurations_from_file(tmp_path):
    path = tmp_path / "robot.srdf"
    path.write_text(SRDF)
    model = build_model_from_urdf_string(SRDF_MODEL)
    configurations = load_reference_configurations(model, path)
    assert list(configurations) == ["standing", "half_sitting"]


def test_default_configuration_preference(tmp_path):
    model = build_model_from_urdf_string(SRDF_MODEL, srdf=SRDF)
    np.testing.assert_array_equal(default_configuration(model),
                                  model.reference_configurations["half_sitting"])
    # normalizing the (cos, sin) pair moves it by one ulp
    np.testing.assert_allclose(default_configuration(model, "standing"),
                               model.reference_configurations["standing"], rtol=0, atol=1e-15)
    with pytest.raises(KeyError, match="no reference configuration 'sitting'"):
        default_configuration(model, "sitting")
    other = SRDF.replace("half_sitting", "zzz").replace("standing", "yyy")
    model = build_model_from_urdf_string(SRDF_MODEL, srdf=other)
    np.testing.assert_allclose(default_configuration(model),
                               model.reference_configurations["yyy"], rtol=0, atol=1e-15)
    bare = build_model_from_urdf_string(SRDF_MODEL)
    np.testing.assert_array_equal(default_configuration(bare), [0, 1, 0, 0])


def test_srdf_with_wrong_number_of_values_is_rejected():
    bad = SRDF.replace('value="1.2"', 'value="1 2 3"')
    with pytest.raises(URDFError, match="joint 'cont': expected 2 values, got 3"):
        build_model_from_urdf_string(SRDF_MODEL, srdf=bad)


# ---------------------------------------------------------------- malformed input
MALFORMED = {
    "unknown joint type": (
        urdf(link("a"), link("b"), joint("j", "hinge", "a", "b")),
        r"joint 'j': unknown joint type 'hinge'"),
    "missing parent link": (
        urdf(link("b"), joint("j", "revolute", "ghost", "b")),
        r"joint 'j': parent link 'ghost' does not exist"),
    "missing child link": (
        urdf(link("a"), joint("j", "revolute", "a", "ghost")),
        r"joint 'j': child link 'ghost' does not exist"),
    "kinematic loop": (
        urdf(link("a"), link("b"), link("c"), joint("j1", "revolute", "a", "b"),
             joint("j2", "revolute", "a", "c"), joint("j3", "revolute", "c", "b")),
        r"kinematic loop: link 'b' is the child of joints 'j1' and 'j3'"),
    "detached cycle": (
        urdf(link("a"), link("b"), link("c"), joint("j1", "revolute", "b", "c"),
             joint("j2", "revolute", "c", "b")),
        r"kinematic loop"),
    "several root links": (
        urdf(link("a"), link("b"), link("c"), joint("j", "revolute", "a", "b")),
        r"several root links: 'a', 'c'"),
    "negative mass": (
        urdf(link("a"), link("b", mass=-1.0), joint("j", "revolute", "a", "b")),
        r"link 'b': negative mass -1.0"),
    "negative effort": (
        urdf(link("a"), link("b"), joint("j", "prismatic", "a", "b", extra=(
            '<limit lower="0" upper="1" effort="-1" velocity="1"/>'))),
        r"joint 'j': limit: effort=-1.0 is negative"),
    "negative velocity": (
        urdf(link("a"), link("b"), joint("j", "prismatic", "a", "b", extra=(
            '<limit lower="0" upper="1" effort="1" velocity="-2"/>'))),
        r"joint 'j': limit: velocity=-2.0 is negative"),
    "revolute without limit": (
        urdf(link("a"), link("b"), joint("j", "revolute", "a", "b", extra="")),
        r"joint 'j': a revolute joint needs <limit>"),
    "limit without effort": (
        urdf(link("a"), link("b"), joint("j", "prismatic", "a", "b",
                                         extra='<limit lower="0" upper="1" velocity="1"/>')),
        r"joint 'j': limit: missing attribute 'effort'"),
    "zero axis": (
        urdf(link("a"), link("b"), joint("j", "continuous", "a", "b",
                                         extra='<axis xyz="0 0 0"/>')),
        r"joint 'j': axis has zero length"),
    "planar normal not z": (
        urdf(link("a"), link("b"), joint("j", "planar", "a", "b",
                                         extra='<axis xyz="1 0 0"/>')),
        r"joint 'j': planar joints must have normal axis"),
    "bad number": (
        urdf(link("a"), link("b"), joint("j", "fixed", "a", "b", xyz="0 zero 0")),
        r"joint 'j': origin xyz: '0 zero 0' is not a list of numbers"),
    "duplicate link": (
        urdf(link("a"), link("a")), r"link 'a' is defined twice"),
    "missing mass": (
        urdf('<link name="a"><inertial><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" '
             'izz="1"/></inertial></link>'),
        r"link 'a': inertial: missing <mass>"),
    "not a robot": ("<model/>", r"root element is <model>, not <robot>"),
    "no link": (urdf(), r"the robot has no <link>"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_urdf_raises_urdf_error(case, tmp_path):
    xml, message = MALFORMED[case]
    path = tmp_path / "bad.urdf"
    path.write_text(xml)
    with pytest.raises(URDFError, match=message):
        load_urdf(path)
    with pytest.raises(ValueError, match=message):
        build_model_from_urdf_string(xml)


def test_xml_syntax_error_names_the_line():
    xml = urdf(link("a"), '<link name=b/>', link("c"))
    with pytest.raises(URDFError, match="XML syntax error at line 4"):
        build_model_from_urdf_string(xml)


def test_missing_files_raise_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.urdf"):
        load_urdf(tmp_path / "nothing.urdf")
    path = tmp_path / "ok.urdf"
    path.write_text(urdf(link("a")))
    with pytest.raises(FileNotFoundError, match="nothing.srdf"):
        load_urdf(path, srdf_path=tmp_path / "nothing.srdf")


# Files Pinocchio loads although they are not physically consistent: they load
# (equal to Pinocchio's model) with a URDFWarning naming the defect; strict=True
# raises URDFError with the same message.
INCONSISTENT = {
    "indefinite inertia": (
        urdf(link("a"), link("b", inertia=(1, 0, 0, 1, 0, -1)),
             joint("j", "revolute", "a", "b")),
        r"link 'b': rotational inertia is not positive semi-definite"),
    "slightly indefinite inertia": (
        urdf(link("a"), link("b", inertia=(6.1e-8, 0, 0, 3.5e-8, 4.5e-8, 2e-8)),
             joint("j", "revolute", "a", "b")),
        r"link 'b': rotational inertia is not positive semi-definite"),
    "triangle inequality": (
        urdf(link("a"), link("b", inertia=(1, 0, 0, 1, 0, 3)),
             joint("j", "revolute", "a", "b")),
        r"link 'b': principal moments .* triangle inequality"),
    "lower above upper": (
        urdf(link("a"), link("b"), joint("j", "prismatic", "a", "b", extra=(
            '<limit lower="1" upper="-1" effort="1" velocity="1"/>'))),
        r"joint 'j': limit: lower=1.0 is above upper=-1.0"),
    "massless moving link": (
        urdf(link("a"), '<link name="b"/>', joint("j", "revolute", "a", "b")),
        r"joints 'j' move links without mass or inertia .* M is singular"),
}


@pytest.mark.parametrize("case", sorted(INCONSISTENT))
def test_inconsistent_urdf_loads_with_a_warning_as_in_pinocchio(case):
    xml, message = INCONSISTENT[case]
    with pytest.warns(URDFWarning, match=message):
        model = build_model_from_urdf_string(xml)
    assert_same_model(model, pin.buildModelFromXML(xml))
    with pytest.raises(URDFError, match=message + ".*strict=True"):
        build_model_from_urdf_string(xml, strict=True)


def test_crossed_limits_are_named_by_random_configuration():
    xml, _ = INCONSISTENT["lower above upper"]
    with pytest.warns(URDFWarning):
        model = build_model_from_urdf_string(xml)
    with pytest.raises(ValueError, match=r"lower_position_limit\[0\] = 1.0 > upper"):
        random_configuration(model, 0)


def test_bad_arguments():
    xml = urdf(link("a"), link("b"), joint("root_joint", "revolute", "a", "b"))
    with pytest.raises(URDFError, match="already named 'root_joint'"):
        build_model_from_urdf_string(xml, root_joint="free-flyer")
    with pytest.raises(ValueError, match="root_joint must be None or 'free-flyer'"):
        build_model_from_urdf_string(xml, root_joint="planar")
    with pytest.raises(ValueError, match="mimic must be None, False or True"):
        build_model_from_urdf_string(xml, mimic="couple")
    assert issubclass(URDFError, ValueError)
