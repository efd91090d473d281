"""Mimic joints (``mimic=True``) against Pinocchio 4's ``buildModelFromUrdf(path, mimic=True)``.

Every URDF of example-robot-data with a ``<mimic>`` tag: Pinocchio refuses it
exactly when we do; where both load it, the reduced layout (names, idx_q,
idx_v, nq, nv, limits, mimicking and mimicked joints, neutral), the frames
and the body inertias are the same,
and at a seeded random state RNEA and CRBA equal Pinocchio's mimic model to
1e-12 relative.  Pinocchio 4.1 has no ABA, M^-1 or derivatives for mimic
models ("This algorithm does not support Joint Mimic type"), so those are
compared with what Pinocchio's own results imply: ABA with
solve(M_pin, tau - b_pin), M^-1 with inv(M_pin), the derivatives with
Pinocchio's derivatives of the full (independent-joint) model mapped by the
chain rule, and once with central differences of Pinocchio's mimic RNEA.
"""
import glob
import os
import warnings

import numpy as np
import pinocchio as pin
import pytest

from geppetto import dynamics
from geppetto.dynamics import MimicModel
from geppetto.robots import (URDFError, URDFWarning, build_model_from_urdf_string,
                             load_urdf, model_dir)
from pin_bridge import _assert_same_frames


def _files_with_mimic_tags():
    root = model_dir()
    paths = glob.glob(os.path.join(root, "**", "*.urdf"), recursive=True)
    return sorted(os.path.relpath(p, root) for p in paths
                  if b"<mimic" in open(p, "rb").read())


MIMIC_FILES = _files_with_mimic_tags()


def _relative_error(ours, theirs):
    return np.abs(ours - theirs).max() / max(1.0, np.abs(theirs).max())


def _symmetric(M):
    return np.triu(M) + np.triu(M, 1).T


def _load_quietly(path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", URDFWarning)
        return load_urdf(path, **options).model


def _state(model, seed):
    rng = np.random.default_rng(seed)
    q = dynamics.random_configuration(model, rng)
    return (q,) + tuple(rng.standard_normal(model.nv) for _ in range(3))


def test_every_file_with_mimic_tags_is_covered():
    names = {os.path.basename(p) for p in MIMIC_FILES}
    assert {"baxter.urdf", "pr2.urdf", "tiago_pro.urdf", "romeo.urdf"} <= names


@pytest.mark.parametrize("relative_path", MIMIC_FILES)
def test_mimic_true_equals_pinocchio(relative_path):
    path = os.path.join(model_dir(), relative_path)
    try:
        pin_model = pin.buildModelFromUrdf(path, mimic=True)
    except (RuntimeError, ValueError) as error:
        # Pinocchio refuses it (romeo, the talos grippers, alex's hands): so do we, saying why
        assert "mimic joint is not in the kinematic tree" in str(error)
        with pytest.raises(URDFError, match="mimic joint is not in the kinematic tree"):
            _load_quietly(path, mimic=True)
        return
    model = _load_quietly(path, mimic=True)
    assert (model.nq, model.nv, list(model.names)) == (pin_model.nq, pin_model.nv,
                                                       list(pin_model.names))
    for ours, theirs in ((model.idx_qs, pin_model.idx_qs), (model.idx_vs, pin_model.idx_vs),
                         (model.nqs, pin_model.nqs), (model.nvs, pin_model.nvs),
                         (model.lower_position_limit, pin_model.lowerPositionLimit),
                         (model.upper_position_limit, pin_model.upperPositionLimit),
                         (model.velocity_limit, pin_model.velocityLimit),
                         (model.effort_limit, pin_model.effortLimit),
                         (dynamics.neutral(model), pin.neutral(pin_model))):
        np.testing.assert_array_equal(ours, theirs)
    _assert_same_frames(model, pin_model, atol=1e-12)
    for i in range(1, model.njoints):
        np.testing.assert_allclose(model.inertias[i], pin_model.inertias[i].matrix(),
                                   rtol=0, atol=1e-12)
    if not isinstance(model, MimicModel):      # <mimic> on fixed joints only
        assert len(pin_model.mimicking_joints) == 0
        return
    assert model.mimicking_joints == list(pin_model.mimicking_joints)
    assert model.mimicked_joints == list(pin_model.mimicked_joints)
    q, v, a, tau = _state(model, seed=len(relative_path))
    data, pin_data = model.create_data(), pin_model.createData()
    assert _relative_error(dynamics.rnea(model, data, q, v, a),
                           pin.rnea(pin_model, pin_data, q, v, a)) <= 1e-12
    M = _symmetric(pin.crba(pin_model, pin_data, q))
    assert _relative_error(dynamics.crba(model, data, q), M) <= 1e-12
    bias = pin.rnea(pin_model, pin_data, q, v, np.zeros(model.nv))
    tolerance = max(1e-12, 1e-15 * np.linalg.cond(M))
    ddq = np.linalg.solve(M, tau - bias)
    assert _relative_error(dynamics.aba(model, data, q, v, tau), ddq) <= tolerance
    Minv = np.linalg.inv(M)
    assert _relative_error(dynamics.compute_minverse(model, data, q), Minv) <= tolerance
    full = pin.buildModelFromUrdf(path)
    _assert_derivatives_follow_from_pinocchio(full, model, q, v, a, tau, ddq, Minv, tolerance)


def _assert_derivatives_follow_from_pinocchio(full, model, q, v, a, tau, ddq, Minv, tolerance):
    """Our reduced derivatives = G^T (Pinocchio's derivatives of ``full``, the
    independent-joint model) G."""
    full_data, G = full.createData(), model.G
    q_full = model.expand_configuration(q)

    def pin_reduced(acceleration):
        partials = pin.computeRNEADerivatives(full, full_data, q_full, G @ v, G @ acceleration)
        return [G.T @ _symmetric(P) @ G if k == 2 else G.T @ P @ G
                for k, P in enumerate(partials)]

    data = model.create_data()
    for ours, theirs in zip(dynamics.rnea_derivatives(model, data, q, v, a), pin_reduced(a)):
        assert _relative_error(ours, theirs) <= 1e-12
    dtau_dq, dtau_dv, _ = pin_reduced(ddq)
    expected = (-Minv @ dtau_dq, -Minv @ dtau_dv, Minv)
    for ours, theirs in zip(dynamics.aba_derivatives(model, data, q, v, tau), expected):
        assert _relative_error(ours, theirs) <= tolerance


def test_rnea_derivatives_equal_central_differences_of_pinocchio_mimic_rnea():
    path = os.path.join(model_dir(), "baxter_description", "urdf", "baxter.urdf")
    model, pin_model = _load_quietly(path, mimic=True), pin.buildModelFromUrdf(path, mimic=True)
    pin_data = pin_model.createData()
    q, v, a, _ = _state(model, seed=7)
    h, n = 1e-6, model.nv
    dtau_dq = np.zeros((n, n))
    for i in range(n):
        step = np.zeros(n)
        step[i] = h
        dtau_dq[:, i] = (pin.rnea(pin_model, pin_data, pin.integrate(pin_model, q, step), v, a)
                         - pin.rnea(pin_model, pin_data, pin.integrate(pin_model, q, -step),
                                    v, a)) / (2 * h)
    ours = dynamics.rnea_derivatives(model, model.create_data(), q, v, a)[0]
    assert _relative_error(ours, dtau_dq) <= 1e-7


def test_batched_states_equal_single_states():
    path = os.path.join(model_dir(), "pr2_description", "urdf", "pr2.urdf")
    model = _load_quietly(path, mimic=True)
    data = model.create_data()
    rng = np.random.default_rng(3)
    qs = dynamics.random_configuration(model, rng, size=4)
    vs, taus = rng.standard_normal((2, 4, model.nv))
    batched = dynamics.aba(model, data, qs, vs, taus)
    for k in range(4):
        np.testing.assert_allclose(batched[k], dynamics.aba(model, data, qs[k], vs[k], taus[k]),
                                   rtol=1e-12, atol=1e-12)
    assert dynamics.crba(model, data, qs).shape == (4, model.nv, model.nv)


MIMIC_PAIR = """<robot name="pair">
  <link name="a"/>
  <link name="b"><inertial><mass value="1"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="c"><inertial><origin xyz="0 0 0.2"/><mass value="1"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="j2" type="revolute"><parent link="b"/><child link="c"/><axis xyz="0 1 0"/>
    <origin xyz="0 0 0.3"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
    <mimic joint="j1" multiplier="-2" offset="0.25"/></joint>
</robot>"""


def test_default_loads_mimic_joints_as_independent_with_a_warning():
    with pytest.warns(URDFWarning, match=r"joints 'j2' mimic other joints .* mimic=True"):
        model = build_model_from_urdf_string(MIMIC_PAIR)
    assert (model.nq, model.nv) == (2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build_model_from_urdf_string(MIMIC_PAIR, mimic=False).nv == 2
    mimic = build_model_from_urdf_string(MIMIC_PAIR, mimic=True)
    assert (mimic.nq, mimic.nv) == (1, 1)
    np.testing.assert_allclose(mimic.expand_configuration([0.5]), [0.5, -2 * 0.5 + 0.25])
    np.testing.assert_allclose(mimic.G, [[1.0], [-2.0]])


def test_mimic_model_refuses_functions_that_do_not_take_it():
    model = build_model_from_urdf_string(MIMIC_PAIR, mimic=True)
    with pytest.raises(TypeError, match="does not take a model with mimic joints"):
        dynamics.forward_kinematics(model, model.create_data(), np.zeros(1))
    with pytest.raises(ValueError, match=r"q: expected shape \(1,\)"):
        dynamics.rnea(model, model.create_data(), np.zeros(2), np.zeros(1), np.zeros(1))


def test_visual_placements_of_a_mimic_model_follow_the_mimicked_joint():
    from geppetto.robots.visualize import visual_placements
    path = os.path.join(model_dir(), "panda_description", "urdf", "panda.urdf")
    robot_mimic, robot_full = load_urdf(path, mimic=True), load_urdf(path, mimic=False)
    mimic, full = robot_mimic.model, robot_full.model
    q = dynamics.random_configuration(mimic, 5)
    ours = visual_placements(robot_mimic, mimic.create_data(), q[None])
    theirs = visual_placements(robot_full, full.create_data(),
                               mimic.expand_configuration(q)[None])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-14)
    fingers = mimic.expand_configuration(q)[-2:]
    np.testing.assert_allclose(fingers[1], fingers[0])       # multiplier 1, offset 0
