"""Property test of the URDF loader on mutated real URDFs (hypothesis).

Real files of example-robot-data are mutated one to three times: an element
deleted or duplicated, one number of an attribute set to NaN, inf, a huge
or negative number, garbage or nothing, a link reference broken or pointed back up the
tree (a kinematic loop).  Every mutated document must end in either

- a clean ``URDFError`` (a ValueError) whose message stays short, or
- a model whose RNEA, CRBA and ABA at a random state are finite, unless the
  load warned (URDFWarning: an inconsistent inertia or a singular M), so
  that nothing non-finite comes out silently.

The examples are derandomized (the same ones on every run) and bounded, so
the test takes a few seconds.
"""
import copy
import os
import warnings
from xml.etree import ElementTree

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geppetto import dynamics
from geppetto.robots import URDFError, URDFWarning, build_model_from_urdf_string, model_dir
from geppetto.robots.urdf_checks import MESSAGE_LIMIT

BASE_FILES = ("ur_description/urdf/ur5_robot.urdf",
              "double_pendulum_description/urdf/double_pendulum_continuous.urdf",
              "solo_description/robots/solo12.urdf",
              "panda_description/urdf/panda.urdf")
BAD_NUMBERS = ("nan", "inf", "-inf", "garbage", "", "1 2", "0x10", "1e400")
ODD_NUMBERS = ("1e30", "-1e30", "-1", "0", "1e-300", "-0.5", "1e6")
REFERENCE_ATTRIBUTES = {"parent": "link", "child": "link", "mimic": "joint"}


def _documents():
    out = {}
    for relative in BASE_FILES:
        path = os.path.join(model_dir(), relative)
        if os.path.isfile(path):
            out[relative] = ElementTree.parse(path).getroot()   # trusted local files
    return out


DOCUMENTS = _documents()


def _elements(robot):
    """(parent, child) pairs of every element below the root."""
    return [(parent, child) for parent in robot.iter() for child in parent]


def _mutate(robot, draw):
    """Apply one mutation drawn by ``draw`` (hypothesis's ``data.draw``)."""
    pairs = _elements(robot)
    kind = draw(st.sampled_from(["delete", "duplicate", "number", "number", "number",
                                 "reference", "loop"]))
    parent, element = pairs[draw(st.integers(0, len(pairs) - 1))]
    if kind == "delete":
        parent.remove(element)
    elif kind == "duplicate":
        parent.append(copy.deepcopy(element))
    elif kind == "number":
        numeric = [(e, a) for _, e in pairs for a in e.attrib if a not in ("name", "link",
                                                                            "joint", "type")]
        target, attribute = numeric[draw(st.integers(0, len(numeric) - 1))]
        tokens = target.get(attribute).split() or [""]
        tokens[draw(st.integers(0, len(tokens) - 1))] = draw(st.sampled_from(
            draw(st.sampled_from([BAD_NUMBERS, ODD_NUMBERS]))))
        target.set(attribute, " ".join(tokens))
    elif kind == "reference":
        references = [e for _, e in pairs if e.tag in REFERENCE_ATTRIBUTES]
        if references:
            target = references[draw(st.integers(0, len(references) - 1))]
            names = [e.get("name") for e in robot if e.get("name")] + ["ghost", ""]
            target.set(REFERENCE_ATTRIBUTES[target.tag], draw(st.sampled_from(names)))
    else:   # point a joint's child at the root link, or its parent at its own child
        joints = robot.findall("joint")
        joint = joints[draw(st.integers(0, len(joints) - 1))]
        links = [e.get("name") for e in robot.findall("link")]
        child, parent_link = joint.find("child"), joint.find("parent")
        if child is not None and parent_link is not None:
            if draw(st.booleans()):
                child.set("link", links[0])
            else:
                parent_link.set("link", child.get("link"))


def _finite_dynamics(model):
    if model.nv == 0:
        return True
    rng = np.random.default_rng(0)
    q = dynamics.random_configuration(model, rng)
    v, tau = rng.standard_normal((2, model.nv))
    data = model.create_data()
    outputs = (dynamics.rnea(model, data, q, v, tau), dynamics.crba(model, data, q),
               dynamics.aba(model, data, q, v, tau))
    return all(np.all(np.isfinite(out)) for out in outputs)


@pytest.mark.skipif(not DOCUMENTS, reason="example-robot-data is not installed")
@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_urdfs_load_cleanly_or_raise_urdf_error(data):
    name = data.draw(st.sampled_from(sorted(DOCUMENTS)))
    robot = copy.deepcopy(DOCUMENTS[name])
    for _ in range(data.draw(st.sampled_from([1, 1, 1, 2, 3]))):
        _mutate(robot, data.draw)
    xml = ElementTree.tostring(robot)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", URDFWarning)
        try:
            model = build_model_from_urdf_string(xml, mimic=False)
        except URDFError as error:
            assert len(str(error)) <= MESSAGE_LIMIT + 100
            return
        except ValueError as error:      # a random_configuration-level or builder check
            assert len(str(error)) <= MESSAGE_LIMIT + 100
            return
        try:
            finite = _finite_dynamics(model)
        except ValueError as error:      # crossed limits, or M singular: the load warned
            assert ("lower_position_limit" in str(error) or "is singular" in str(error)) \
                and caught
            return
    assert finite or any(issubclass(w.category, URDFWarning) for w in caught), name


def test_error_messages_quote_at_most_a_short_excerpt():
    huge = "1" * 5_000_000 + "x"
    xml = (f'<robot name="r"><link name="a"><inertial><mass value="{huge}"/>'
           '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>'
           '</robot>')
    with pytest.raises(URDFError) as error:
        build_model_from_urdf_string(xml)
    assert "is not a list of numbers" in str(error.value) and len(str(error.value)) < 300
    links = "".join(f'<link name="{"n" * 1000}{k}"/>' for k in range(2000))
    with pytest.raises(URDFError, match="several root links: .* and 1990 more") as error:
        build_model_from_urdf_string(f'<robot name="r">{links}</robot>')
    assert len(str(error.value)) <= MESSAGE_LIMIT
