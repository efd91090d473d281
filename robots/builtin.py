"""Models built in code, without files: closed-form test cases, scaling studies
and the seeded random trees the tests compare the kernels on.

Every function returns a :class:`~geppetto.dynamics.model.Model` (wrap it in
:class:`~geppetto.robots.robot.Robot` for a ``q0``).  Frames follow the URDF
convention of :mod:`geppetto.robots.urdf`: a BODY frame for the base on the
universe, then per joint a JOINT frame (named as the joint, its parent frame
being the parent body's BODY frame) and a BODY frame for the body it carries;
some models add OP frames (``"tip"``).  Gravity is (0, 0, -9.81).  Limits
are finite everywhere (see :func:`_finite_limits`) so that random
configurations can be drawn within them.

- :func:`pendulum`, :func:`double_pendulum`: point masses on revolute joints
  about y, hanging along -z at q = 0;
- :func:`cartpole`: a cart on a prismatic joint along x and a pole (point mass)
  on a revolute joint about y, upright at q = 0 (masses and length default to
  those of Crocoddyl's cartpole example);
- :func:`chain`: n bodies, serial or branched with a fixed branching factor;
- :func:`random_tree`: n bodies on a random tree with random joint types,
  placements, axes and physically consistent inertias, all from a seed.
"""
import numpy as np

from ..dynamics.model import (BODY_FRAME, FREE_FLYER, JOINT_FRAME, JOINT_NQ, JOINT_NV,
                              JOINT_TYPE_NAMES, ModelBuilder, OP_FRAME, PLANAR, PRISMATIC,
                              REVOLUTE, REVOLUTE_UNBOUNDED, SPHERICAL, TRANSLATION)

# Joint types random_tree draws from with joint_types="all" (a free-flyer
# only comes as the root joint, or when asked for by name).
RANDOM_JOINT_TYPES = ("revolute", "revolute_unbounded", "prismatic", "spherical",
                      "planar", "translation")
_AXES = ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0))
_ROOT_JOINTS = (None, "free-flyer", "free_flyer")


class _TreeBuilder:
    """A ModelBuilder that adds, with each joint, its JOINT and BODY frames."""

    def __init__(self, name):
        self.builder = ModelBuilder(name)
        self.body_frame = {0: self.builder.add_frame("base", 0, frame_type=BODY_FRAME)}

    def add(self, parent, jtype, name, link, R=None, p=None, axis=None, armature=None):
        """Joint ``name`` below joint ``parent`` carrying body ``link``, with
        :func:`_finite_limits`; returns its index."""
        b = self.builder
        jtype = JOINT_TYPE_NAMES[jtype] if isinstance(jtype, str) else int(jtype)
        jid = b.add_joint(parent, jtype, name, R, p, axis=axis, armature=armature,
                          **_finite_limits(jtype))
        fid = b.add_frame(name, jid, frame_type=JOINT_FRAME,
                          parent_frame=self.body_frame[parent])
        self.body_frame[jid] = b.add_frame(link, jid, frame_type=BODY_FRAME,
                                           parent_frame=fid)
        return jid

    def add_op_frame(self, name, joint, R=None, p=None):
        return self.builder.add_frame(name, joint, R, p, OP_FRAME,
                                      parent_frame=self.body_frame[joint])


def pendulum(length=1.0, mass=1.0):
    """Simple pendulum: a point mass ``mass`` at ``length`` below a revolute
    joint about y; q = 0 hangs down, and ``ddq = -g / length * sin(q)``.
    Frames: ``joint1``, ``link1``, ``tip`` (at the mass)."""
    tree = _TreeBuilder("pendulum")
    j = tree.add(0, REVOLUTE, "joint1", "link1", axis=(0, 1, 0))
    tree.builder.append_body_inertia(j, mass, com=(0, 0, -length))
    tree.add_op_frame("tip", j, p=(0, 0, -length))
    return tree.builder.build()


def double_pendulum(lengths=(1.0, 1.0), masses=(1.0, 1.0)):
    """Two point masses on revolute joints about y, hanging along -z at q = 0.
    Joint 2 sits at mass 1.  Frames: ``joint1``, ``link1``, ``joint2``,
    ``link2``, ``tip`` (at mass 2)."""
    tree = _TreeBuilder("double_pendulum")
    j1 = tree.add(0, REVOLUTE, "joint1", "link1", axis=(0, 1, 0))
    tree.builder.append_body_inertia(j1, masses[0], com=(0, 0, -lengths[0]))
    j2 = tree.add(j1, REVOLUTE, "joint2", "link2", p=(0, 0, -lengths[0]), axis=(0, 1, 0))
    tree.builder.append_body_inertia(j2, masses[1], com=(0, 0, -lengths[1]))
    tree.add_op_frame("tip", j2, p=(0, 0, -lengths[1]))
    return tree.builder.build()


def cartpole(cart_mass=1.0, pole_mass=0.1, pole_length=0.5):
    """Cart on a prismatic joint along x ("slider"), pole on a revolute joint
    about y ("hinge") with a point mass at ``pole_length``.

    q = (x, theta), theta = 0 upright, theta > 0 tilts the tip towards +x.
    With a force f on the cart, s = sin(theta), c = cos(theta), m1 the cart
    and m2 the pole mass, l the pole length::

        ddx = (f - m2 g s c + m2 l s dtheta^2) / (m1 + m2 s^2)
        ddtheta = (g s - c ddx) / l

    The cart is a 0.2 x 0.1 x 0.1 m box.  Frames: ``slider``, ``cart``,
    ``hinge``, ``pole``, ``tip``."""
    tree = _TreeBuilder("cartpole")
    slider = tree.add(0, PRISMATIC, "slider", "cart", axis=(1, 0, 0))
    tree.builder.append_body_inertia(slider, cart_mass,
                                     inertia_at_com=_box_inertia(cart_mass, (0.2, 0.1, 0.1)))
    hinge = tree.add(slider, REVOLUTE, "hinge", "pole", axis=(0, 1, 0))
    tree.builder.append_body_inertia(hinge, pole_mass, com=(0, 0, pole_length))
    tree.add_op_frame("tip", hinge, p=(0, 0, pole_length))
    return tree.builder.build()


def _box_inertia(mass, size):
    x, y, z = np.square(size)
    return mass / 12.0 * np.diag([y + z, x + z, x + y])


def _joint_type_codes(joint_types, default):
    """Joint type codes from a name, a code, or a sequence of them."""
    if joint_types == "all":
        joint_types = default
    if isinstance(joint_types, (str, int, np.integer)):
        joint_types = [joint_types]
    codes = []
    for jtype in joint_types:
        code = JOINT_TYPE_NAMES.get(jtype) if isinstance(jtype, str) else int(jtype)
        if code not in JOINT_NQ:
            raise ValueError(f"unknown joint type {jtype!r}; known: "
                             f"{', '.join(JOINT_TYPE_NAMES)}")
        codes.append(code)
    if not codes:
        raise ValueError("joint_types is empty")
    return codes


def _depth_first_order(parents):
    """Depth-first (pre-order) relabelling of a tree given by creation order.

    ``parents[k]`` (k >= 1) is the creation index of the parent of node k,
    node 0 being the universe.  Returns the nodes 1.. in model order.
    """
    children = [[] for _ in parents]
    for k in range(1, len(parents)):
        children[parents[k]].append(k)
    order, stack = [], list(reversed(children[0]))
    while stack:
        k = stack.pop()
        order.append(k)
        stack.extend(reversed(children[k]))
    return order


def _check_size(n, root_joint):
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if root_joint not in _ROOT_JOINTS:
        raise ValueError(f"root_joint must be None or 'free-flyer', got {root_joint!r}")


def _add_root(tree, root_joint, mass=1.0):
    """The optional free-flyer root joint; returns the joint the tree hangs from."""
    if root_joint is None:
        return 0
    root = tree.add(0, FREE_FLYER, "root_joint", "base_link")
    tree.builder.append_body_inertia(root, mass, inertia_at_com=_box_inertia(
        mass, (0.3, 0.2, 0.1)))
    return root


def chain(n, branching=1, joint_types="revolute", seed=0, link_length=0.2,
          root_joint=None):
    """A tree of ``n`` bodies, for scaling studies.

    Parameters
    ----------
    n : int
        Number of bodies (and joints, without the root joint).
    branching : int
        Children per body: 1 is a serial chain, 2 a binary tree, ...; bodies
        are created breadth first (body k >= 2 hangs from body
        ``(k - 2) // branching + 1``) and stored depth first.
    joint_types : str, int or sequence
        Joint type names (see ``JOINT_TYPE_NAMES``) or codes, used in turn.
    seed : int
        Seeds the body masses (uniform in [0.5, 1.5] kg).
    link_length : float
        Each body is a rod of this length along z (radius 0.02 m); a child's
        joint sits at its parent's end, siblings spread along x.
    root_joint : None or "free-flyer"
        Put the tree on a free-flyer ``root_joint`` carrying a 1 kg base.

    Returns
    -------
    Model
        Joints ``joint1..jointn`` and bodies ``link1..linkn`` in depth-first
        order, revolute and prismatic axes cycling through z, y, x, and an OP
        frame ``tip<k>`` at the end of every leaf body ``link<k>``.
    """
    _check_size(n, root_joint)
    if int(branching) != branching or branching < 1:
        raise ValueError(f"branching must be a positive integer, got {branching!r}")
    codes = _joint_type_codes(joint_types, ["revolute"])
    masses = np.random.default_rng(seed).uniform(0.5, 1.5, size=n + 1)
    parents = [0, 0] + [(k - 2) // branching + 1 for k in range(2, n + 1)]
    sibling = [0, 0] + [(k - 2) % branching for k in range(2, n + 1)]
    tree = _TreeBuilder(f"chain{n}")
    root = _add_root(tree, root_joint)
    joint_of = {0: root}
    radius, length = 0.02, float(link_length)
    has_children = set(parents[2:])
    for index, k in enumerate(_depth_first_order(parents), start=1):
        p = np.zeros(3)
        if k > 1:
            p = np.array([(sibling[k] - (branching - 1) / 2) * length / 2, 0.0, length])
        jid = tree.add(joint_of[parents[k]], codes[(k - 1) % len(codes)], f"joint{index}",
                       f"link{index}", p=p, axis=_AXES[(k - 1) % 3])
        joint_of[k] = jid
        rod = masses[k] / 12.0 * np.diag([3 * radius ** 2 + length ** 2] * 2
                                         + [6 * radius ** 2])
        tree.builder.append_body_inertia(jid, masses[k], com=(0, 0, length / 2),
                                         inertia_at_com=rod)
        if k not in has_children:
            tree.add_op_frame(f"tip{index}", jid, p=(0, 0, length))
    return tree.builder.build()


def _random_rotation(rng):
    """A rotation matrix drawn uniformly (from a random unit quaternion)."""
    quaternion = rng.normal(size=4)
    x, y, z, w = quaternion / np.linalg.norm(quaternion)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _random_inertia(rng):
    """(mass, com, inertia about the com) of a random solid ellipsoid:
    positive definite, principal moments satisfying the triangle inequality."""
    mass = rng.uniform(0.5, 2.0)
    a, b, c = rng.uniform(0.05, 0.5, size=3) ** 2
    R = _random_rotation(rng)
    inertia = R @ (mass / 5.0 * np.diag([b + c, a + c, a + b])) @ R.T
    return mass, rng.uniform(-0.2, 0.2, size=3), inertia


def _finite_limits(jtype):
    """Finite limits (so that random configurations can be drawn): angles in
    [-pi, pi], translations in [-1, 1], quaternion and (cos, sin) coordinates in
    [-1.01, 1.01] (Pinocchio's URDF bound); velocity 10, effort 100."""
    bounds = {REVOLUTE: [np.pi], PRISMATIC: [1.0], REVOLUTE_UNBOUNDED: [1.01] * 2,
              FREE_FLYER: [1.0] * 3 + [1.01] * 4, SPHERICAL: [1.01] * 4,
              PLANAR: [1.0, 1.0, 1.01, 1.01], TRANSLATION: [1.0] * 3}[jtype]
    nv = JOINT_NV[jtype]
    return dict(lower=-np.array(bounds), upper=np.array(bounds),
                velocity_limit=np.full(nv, 10.0), effort_limit=np.full(nv, 100.0))


def _random_types(rng, n, codes):
    """n joint type codes: every code once first (shuffled) when n allows it,
    then uniform draws."""
    first = [codes[i] for i in rng.permutation(len(codes))][:n]
    return first + [codes[i] for i in rng.integers(0, len(codes), size=n - len(first))]


def random_tree(n, seed, joint_types="all", root_joint=None, armature=False):
    """A random kinematic tree of ``n`` bodies, reproducible from ``seed``.

    Parameters
    ----------
    n : int
        Number of bodies (and joints, without the root joint).
    seed : int or numpy.random.Generator
    joint_types : "all", str, int or sequence
        Joint types drawn from ("all": every type but the free-flyer, see
        ``RANDOM_JOINT_TYPES``); each appears at least once when n allows it.
    root_joint : None or "free-flyer"
        Put the tree on a free-flyer ``root_joint``.
    armature : bool
        Give every degree of freedom a random armature in [0.01, 0.1].

    Returns
    -------
    Model
        Joint k hangs from a uniformly drawn earlier body (stored depth
        first); placements are random rotations and translations in
        [-0.5, 0.5]^3; revolute and prismatic axes are random unit vectors;
        bodies are random solid ellipsoids (mass in [0.5, 2] kg, com in
        [-0.2, 0.2]^3); limits are finite.  Frames: ``joint<k>``, ``link<k>``
        and an OP frame ``frame<k>`` at a random placement on every body.
    """
    _check_size(n, root_joint)
    rng = np.random.default_rng(seed)
    codes = _random_types(rng, n, _joint_type_codes(joint_types, RANDOM_JOINT_TYPES))
    parents = [0] + [int(rng.integers(0, k)) for k in range(1, n + 1)]
    tree = _TreeBuilder(f"random_tree{n}_seed{seed}")
    joint_of = {0: _add_root(tree, root_joint)}
    for index, k in enumerate(_depth_first_order(parents), start=1):
        jtype = codes[k - 1]
        axis = rng.normal(size=3) if jtype in (REVOLUTE, REVOLUTE_UNBOUNDED, PRISMATIC) else None
        nv = JOINT_NV[jtype]
        jid = tree.add(joint_of[parents[k]], jtype, f"joint{index}", f"link{index}",
                       R=_random_rotation(rng), p=rng.uniform(-0.5, 0.5, size=3), axis=axis,
                       armature=rng.uniform(0.01, 0.1, size=nv) if armature else None)
        joint_of[k] = jid
        mass, com, inertia = _random_inertia(rng)
        tree.builder.append_body_inertia(jid, mass, com, inertia)
        tree.add_op_frame(f"frame{index}", jid, _random_rotation(rng),
                          rng.uniform(-0.5, 0.5, size=3))
    return tree.builder.build()


def four_bar(ground=0.3, crank=0.1, coupler=0.35, rocker=0.3, masses=(0.2, 0.5, 0.4),
             crank_angle=np.pi / 3):
    """Planar four-bar linkage, a closed chain: the tree is cut at the pin C
    between the coupler and the rocker, and ``loop_closure(model,
    "coupler_tip", "rocker_tip", size=3)`` joins it again.

    Joints (revolute about y, links along their local x, in the x-z plane):
    ``crank`` at A = 0 on the ground, ``coupler`` at the crank's tip B,
    ``rocker`` at D = (ground, 0, 0) on the ground.  Links are uniform bars of
    ``masses`` (crank, coupler, rocker).  OP frames ``coupler_tip`` and
    ``rocker_tip`` are the two halves of the cut pin C.  The default lengths
    make a Grashof crank-rocker (the crank turns fully).
    ``reference_configurations["assembled"]`` is the closed configuration at
    ``crank_angle``, C above the ground line.
    """
    lengths = (crank, coupler, rocker)
    tree = _TreeBuilder("four_bar")
    j1 = tree.add(0, REVOLUTE, "crank", "crank_link", axis=(0, 1, 0))
    j2 = tree.add(j1, REVOLUTE, "coupler", "coupler_link", p=(crank, 0, 0), axis=(0, 1, 0))
    j3 = tree.add(0, REVOLUTE, "rocker", "rocker_link", p=(ground, 0, 0), axis=(0, 1, 0))
    for joint, length, mass in zip((j1, j2, j3), lengths, masses):
        tree.builder.append_body_inertia(joint, mass, com=(length / 2, 0, 0),
                                         inertia_at_com=_box_inertia(mass, (length, 0.02, 0.02)))
    tree.add_op_frame("coupler_tip", j2, p=(coupler, 0, 0))
    tree.add_op_frame("rocker_tip", j3, p=(rocker, 0, 0))
    # closure, in (x, z) coordinates: C at `coupler` from B and at `rocker`
    # from D; a rotation theta about y sends x to (cos theta, 0, -sin theta),
    # so the angle of a planar vector (x, z) is atan2(-z, x)
    B = crank * np.array([np.cos(crank_angle), -np.sin(crank_angle)])
    D = np.array([ground, 0.0])
    base = np.linalg.norm(D - B)
    along = (coupler ** 2 - rocker ** 2 + base ** 2) / (2 * base)
    height = np.sqrt(coupler ** 2 - along ** 2)
    u = (D - B) / base
    C = B + along * u + height * np.array([-u[1], u[0]])
    if C[1] < 0:
        C = B + along * u - height * np.array([-u[1], u[0]])
    coupler_angle = np.arctan2(-(C - B)[1], (C - B)[0]) - crank_angle
    rocker_angle = np.arctan2(-(C - D)[1], (C - D)[0])
    tree.builder.reference_configurations["assembled"] = np.array(
        [crank_angle, coupler_angle, rocker_angle])
    return tree.builder.build()
