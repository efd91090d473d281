"""Every URDF that example-robot-data ships, loaded beside Pinocchio.

For each file and each root joint (None, free-flyer) that
``pin.buildModelFromUrdf`` accepts, ``load_urdf`` must build the same model
(joints, q/v layout, placements, inertias, frames, position/velocity/effort
limits, to 1e-12) with default options, and the same dynamics at a seeded
random state: RNEA and CRBA to 1e-12 relative, ABA to 1e-12 or, where M is
ill-conditioned (robot hands: cond(M) up to 1e18), 1e-15 cond(M).  Physically inconsistent
inertias load with a URDFWarning, as Pinocchio loads them.
Moving joints that carry no mass (romeo's fingers: M singular, both
libraries' ``aba`` return NaN) load with a warning that says so.
"""
import glob
import os
import warnings
import zlib

import numpy as np
import pinocchio as pin
import pytest

from geppetto import dynamics
from geppetto.robots import URDFError, URDFWarning, load_urdf, model_dir
from pin_bridge import assert_same_model

ROOT_JOINTS = (None, "free-flyer")


def _urdf_files():
    root = model_dir()
    return sorted(os.path.relpath(p, root) for p in glob.glob(
        os.path.join(root, "**", "*.urdf"), recursive=True))


def _pin_model(path, root_joint):
    if root_joint is None:
        return pin.buildModelFromUrdf(path)
    return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())


def _relative_error(ours, theirs):
    if np.size(theirs) == 0:       # nv = 0: a fixed-base file with fixed joints only
        assert np.size(ours) == 0
        return 0.0
    return np.abs(ours - theirs).max() / max(1.0, np.abs(theirs).max())


def compare_dynamics(model, pin_model, seed):
    """Relative differences of rnea, aba, crba at one seeded random state, and
    the condition number of M there (aba: None where Pinocchio's is not
    finite, M being singular)."""
    rng = np.random.default_rng(seed)
    q = dynamics.random_configuration(model, rng)
    v, a, tau = (rng.standard_normal(model.nv) for _ in range(3))
    data, pin_data = model.create_data(), pin_model.createData()
    pin_ddq = pin.aba(pin_model, pin_data, q, v, tau)
    M = dynamics.crba(model, data, q)
    return {
        "rnea": _relative_error(dynamics.rnea(model, data, q, v, a),
                                pin.rnea(pin_model, pin_data, q, v, a)),
        "aba": _relative_error(dynamics.aba(model, data, q, v, tau), pin_ddq)
        if np.all(np.isfinite(pin_ddq)) else None,
        "crba": _relative_error(M, _symmetric(pin.crba(pin_model, pin_data, q))),
        "cond": np.linalg.cond(M) if model.nv else 1.0}


def _symmetric(M):
    return np.triu(M) + np.triu(M, 1).T


@pytest.mark.parametrize("root_joint", ROOT_JOINTS, ids=["fixed", "free-flyer"])
@pytest.mark.parametrize("relative_path", _urdf_files())
def test_every_example_robot_data_urdf_loads_as_in_pinocchio(relative_path, root_joint):
    path = os.path.join(model_dir(), relative_path)
    try:
        pin_model = _pin_model(path, root_joint)
    except (RuntimeError, ValueError) as error:
        # Pinocchio refuses it (ur3.urdf: no <link>): so do we, with a URDFError
        assert str(error)
        with pytest.raises(URDFError):
            load_urdf(path, root_joint=root_joint, mimic=False)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", URDFWarning)
        model = load_urdf(path, root_joint=root_joint, mimic=False).model
    assert_same_model(model, pin_model, atol=1e-12)
    seed = zlib.crc32(f"{relative_path}{root_joint}".encode())
    errors = compare_dynamics(model, pin_model, seed)
    assert errors["rnea"] <= 1e-12 and errors["crba"] <= 1e-12, errors
    if errors["aba"] is None:
        # M is singular (romeo's massless fingers): the load said so, and our aba says
        # why where Pinocchio's returns NaN
        assert any("M is singular" in str(w.message) for w in caught)
        q = dynamics.random_configuration(model, np.random.default_rng(seed))
        with pytest.raises(ValueError, match="aba: the joint-space inertia matrix .* singular"):
            dynamics.aba(model, model.create_data(), q, np.zeros(model.nv), np.zeros(model.nv))
        return
    # ABA solves with M: two backward-stable solves differ by up to
    # eps * cond(M), and robots with gram-sized links (alex's and icub's hands,
    # tiago) reach cond(M) = 1e7 .. 1e18.
    assert errors["aba"] <= max(1e-12, 1e-15 * errors["cond"]), errors


def test_shipped_files_with_inconsistent_inertias_warn_and_strict_raises():
    path = os.path.join(model_dir(), "hyq_description", "robots", "hyq_no_sensors.urdf")
    with pytest.warns(URDFWarning, match=r"link 'lf_foot': principal moments .* triangle"):
        load_urdf(path, root_joint="free-flyer")
    with pytest.raises(URDFError, match=r"link '.*': .*strict=True"):
        load_urdf(path, root_joint="free-flyer", strict=True)
