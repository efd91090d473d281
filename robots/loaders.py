"""Robots of example-robot-data by name: ``load("panda")``.

Each entry uses the URDF, SRDF, root joint and reference posture of the
matching loader of example-robot-data's Python package
(``example_robot_data/robots_loader.py``): free-flyer root for legged robots,
humanoids and flying bases, fixed base for arms.  The model equals
``pinocchio.buildModelFromUrdf`` on the same file with the same root joint.
Legged robots also get ``contact_frames``, their feet as (frame, size) pairs:
the point feet of the quadrupeds and of bolt (3D contacts), talos's soles (6D).
Two things the upstream loaders do are *not* done here, so that the model
stays equal to ``buildModelFromUrdf``: they overwrite the free-flyer position
limits with [-1, 1] (``addFreeFlyerJointLimits``), and talos loads rotor
inertias and gear ratios from the SRDF into ``model.armature``.  Mimic joints
(panda's and talos's grippers) are independent joints, as upstream
(``mimic=False``); files with physically inconsistent inertias (hyq, anymal,
go1) load with a :class:`~geppetto.robots.urdf_checks.URDFWarning` per defect.

The data folder (``.../share/example-robot-data/robots``) is found from, in
order: the ``EXAMPLE_ROBOT_DATA_MODEL_DIR`` environment variable, the
``cmeel.prefix`` folder of every site-packages (the pip wheel), the ``share``
folder of ``sys.prefix`` and of every ``sys.path`` entry's prefix, and
``/opt/openrobots/share``.
"""
import os
import site
import sys
from collections import namedtuple

from .urdf import load_urdf

ENVIRONMENT_VARIABLE = "EXAMPLE_ROBOT_DATA_MODEL_DIR"

_Entry = namedtuple("_Entry", ["folder", "urdf", "srdf", "free_flyer", "posture",
                               "contacts"])


def _entry(folder, urdf, srdf=None, free_flyer=False, posture=None, contacts=()):
    return _Entry(folder, urdf, srdf, free_flyer, posture, contacts)


def _feet(*frames, size=3):
    """Contact frames: ``frames`` with one contact size (3: point feet, 6: soles)."""
    return tuple((frame, size) for frame in frames)


_SOLO_FEET = _feet("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
_UNITREE_FEET = _feet("FL_foot", "FR_foot", "RL_foot", "RR_foot")
_TALOS_SOLES = _feet("left_sole_link", "right_sole_link", size=6)


# name -> where its files are (relative to the data folder) and how to load it.
# ``posture`` is the upstream ``ref_posture`` (None: the neutral configuration).
ROBOTS = {
    "ur3": _entry("ur_description", "urdf/ur3_robot.urdf"),
    "ur5": _entry("ur_description", "urdf/ur5_robot.urdf", "srdf/ur5.srdf"),
    "ur5_limited": _entry("ur_description", "urdf/ur5_joint_limited_robot.urdf",
                          "srdf/ur5.srdf"),
    "ur10": _entry("ur_description", "urdf/ur10_robot.urdf"),
    "panda": _entry("panda_description", "urdf/panda.urdf", "srdf/panda.srdf",
                    posture="default"),
    "kinova": _entry("kinova_description", "robots/kinova.urdf", "srdf/kinova.srdf",
                     posture="arm_up"),
    "z1": _entry("z1_description", "urdf/z1.urdf", "srdf/z1.srdf", posture="arm_up"),
    "solo8": _entry("solo_description", "robots/solo.urdf", "srdf/solo.srdf", True,
                    "standing", contacts=_SOLO_FEET),
    "solo12": _entry("solo_description", "robots/solo12.urdf", "srdf/solo.srdf", True,
                     "standing", contacts=_SOLO_FEET),
    "bolt": _entry("bolt_description", "robots/bolt.urdf", "srdf/bolt.srdf", True,
                   "standing", contacts=_feet("FL_FOOT", "FR_FOOT")),
    "hyq": _entry("hyq_description", "robots/hyq_no_sensors.urdf", "srdf/hyq.srdf", True,
                  "standing",
                  contacts=_feet("lf_foot", "rf_foot", "lh_foot", "rh_foot")),
    "anymal": _entry("anymal_b_simple_description", "robots/anymal.urdf",
                     "srdf/anymal.srdf", True, "standing",
                     contacts=_feet("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")),
    "go1": _entry("go1_description", "urdf/go1.urdf", "srdf/go1.srdf", True, "standing",
                  contacts=_UNITREE_FEET),
    "a1": _entry("a1_description", "urdf/a1.urdf", "srdf/a1.srdf", True, "standing",
                 contacts=_UNITREE_FEET),
    "talos": _entry("talos_data", "robots/talos_reduced.urdf", "srdf/talos.srdf", True,
                    "half_sitting", contacts=_TALOS_SOLES),
    "talos_full": _entry("talos_data", "robots/talos_full_v2.urdf", "srdf/talos.srdf",
                         True, "half_sitting", contacts=_TALOS_SOLES),
    "talos_arm": _entry("talos_data", "robots/talos_left_arm.urdf", "srdf/talos.srdf",
                        False, "half_sitting"),
    "double_pendulum": _entry("double_pendulum_description", "urdf/double_pendulum.urdf"),
    "double_pendulum_continuous": _entry("double_pendulum_description",
                                         "urdf/double_pendulum_continuous.urdf"),
    "double_pendulum_simple": _entry("double_pendulum_description",
                                     "urdf/double_pendulum_simple.urdf"),
}


def _candidate_folders():
    """Folders that may hold example-robot-data's ``robots`` folder, in order."""
    candidates = []
    if os.environ.get(ENVIRONMENT_VARIABLE):
        candidates.append(os.environ[ENVIRONMENT_VARIABLE])
    site_dirs = list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path
    for directory in site_dirs:
        if directory:
            candidates.append(os.path.join(directory, "cmeel.prefix", "share",
                                           "example-robot-data", "robots"))
    prefixes = [sys.prefix] + [os.path.join(d, "..", "..", "..") for d in sys.path if d]
    for prefix in prefixes + ["/opt/openrobots"]:
        candidates.append(os.path.join(prefix, "share", "example-robot-data", "robots"))
    return candidates


def model_dir():
    """example-robot-data's ``robots`` folder; FileNotFoundError lists where it looked."""
    candidates = _candidate_folders()
    for folder in candidates:
        if os.path.isdir(folder):
            return os.path.abspath(folder)
    raise FileNotFoundError(
        "example-robot-data not found (pip install example-robot-data, or set "
        f"{ENVIRONMENT_VARIABLE} to its share/example-robot-data/robots folder); "
        f"looked in: {', '.join(candidates)}")


def available_robots():
    """Names accepted by :func:`load`, sorted."""
    return sorted(ROBOTS)


def load(name):
    """Load a robot of example-robot-data by name.

    Parameters
    ----------
    name : str
        One of :func:`available_robots` (e.g. "ur5", "panda", "solo12", "hyq",
        "anymal", "talos").

    Returns
    -------
    Robot
        With ``q0`` the upstream loader's reference posture.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the available ones).
    FileNotFoundError
        If example-robot-data is not installed.
    """
    if name not in ROBOTS:
        raise ValueError(f"unknown robot {name!r}; available robots: "
                         f"{', '.join(available_robots())}")
    entry = ROBOTS[name]
    root = model_dir()
    folder = os.path.join(root, entry.folder)
    srdf_path = None if entry.srdf is None else os.path.join(folder, entry.srdf)
    robot = load_urdf(os.path.join(folder, entry.urdf),
                      root_joint="free-flyer" if entry.free_flyer else None,
                      package_dirs=[os.path.normpath(os.path.join(root, "..", ".."))],
                      srdf_path=srdf_path, q0=entry.posture, mimic=False)
    robot.name = name
    robot.contact_frames = entry.contacts
    return robot
