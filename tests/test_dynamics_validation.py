"""Bad input gets a clear Python exception at the API border, never a crash.

Every public dynamics function is called with one argument spoiled at a time
(wrong shape, NaN/inf, complex/string/object dtype, unnormalized quaternion
or (cos, sin) pair, a stack whose size differs from q's, bad external forces,
data of another model): it raises ValueError whose message names the
argument.  Unknown frame or joint names raise KeyError, out-of-range ids and
unknown reference frames ValueError.  Models: solo12 (free-flyer root:
quaternion in q) and a random tree (spherical, planar and unbounded revolute
joints).
"""
import re

import numpy as np
import pytest

import geppetto.dynamics as gd

MODELS = ("solo12", "random_tree")


def _frame(m):
    return m.nframes - 1


# name -> (f(model, data, x) with x a dict of arguments, {key of x: name of
# the argument in the function's signature})
CALLS = {
    "rnea": (lambda m, d, x: gd.rnea(m, d, x["q"], x["v"], x["a"]),
             {"q": "q", "v": "v", "a": "a"}),
    "rnea_f_ext": (lambda m, d, x: gd.rnea(m, d, x["q"], x["v"], x["a"], x["f_ext"]),
                   {"q": "q", "v": "v", "a": "a", "f_ext": "f_ext"}),
    "nonlinear_effects": (lambda m, d, x: gd.nonlinear_effects(m, d, x["q"], x["v"]),
                          {"q": "q", "v": "v"}),
    "generalized_gravity": (lambda m, d, x: gd.generalized_gravity(m, d, x["q"]), {"q": "q"}),
    "crba": (lambda m, d, x: gd.crba(m, d, x["q"]), {"q": "q"}),
    "aba": (lambda m, d, x: gd.aba(m, d, x["q"], x["v"], x["tau"]),
            {"q": "q", "v": "v", "tau": "tau"}),
    "aba_f_ext": (lambda m, d, x: gd.aba(m, d, x["q"], x["v"], x["tau"], x["f_ext"]),
                  {"q": "q", "v": "v", "tau": "tau", "f_ext": "f_ext"}),
    "compute_minverse": (lambda m, d, x: gd.compute_minverse(m, d, x["q"]), {"q": "q"}),
    "forward_kinematics": (lambda m, d, x: gd.forward_kinematics(m, d, x["q"], x["v"], x["a"]),
                           {"q": "q", "v": "v", "a": "a"}),
    "frame_placement": (lambda m, d, x: gd.frame_placement(m, d, _frame(m), q=x["q"]),
                        {"q": "q"}),
    "frame_jacobian": (lambda m, d, x: gd.frame_jacobian(m, d, x["q"], _frame(m), gd.WORLD),
                       {"q": "q"}),
    "joint_jacobian": (lambda m, d, x: gd.joint_jacobian(m, d, x["q"], m.njoints - 1),
                       {"q": "q"}),
    "compute_joint_jacobians": (lambda m, d, x: gd.compute_joint_jacobians(m, d, x["q"]),
                                {"q": "q"}),
    "center_of_mass": (lambda m, d, x: gd.center_of_mass(m, d, x["q"]), {"q": "q"}),
    "jacobian_center_of_mass": (lambda m, d, x: gd.jacobian_center_of_mass(m, d, x["q"]),
                                {"q": "q"}),
    "kinetic_energy": (lambda m, d, x: gd.kinetic_energy(m, d, x["q"], x["v"]),
                       {"q": "q", "v": "v"}),
    "potential_energy": (lambda m, d, x: gd.potential_energy(m, d, x["q"]), {"q": "q"}),
    "integrate": (lambda m, d, x: gd.integrate(m, x["q"], x["v"]), {"q": "q", "v": "v"}),
    "difference": (lambda m, d, x: gd.difference(m, x["q"], x["q1"]), {"q": "q0", "q1": "q1"}),
    "interpolate": (lambda m, d, x: gd.interpolate(m, x["q"], x["q1"], x["u"]),
                    {"q": "q0", "q1": "q1", "u": "u"}),
}
USES_DATA = [name for name in CALLS if name not in ("integrate", "difference", "interpolate")]
CONFIGURATIONS = ("q", "q1")


def _names(argument):
    """A regex matching the argument's name as a word of the message."""
    return rf"(?<![\w]){re.escape(argument)}(?![\w])"


@pytest.fixture(scope="module", params=MODELS)
def case(request, load_case):
    return load_case(request.param)


def _arguments(case, K=None):
    """Valid arguments: one state (K None) or a stack of K."""
    s = case.states(1 if K is None else K, seed=9)
    pick = (lambda x: x[0]) if K is None else (lambda x: x)
    return {"q": pick(s.q), "q1": pick(s.q1), "v": pick(s.v), "a": pick(s.a),
            "tau": pick(s.tau), "f_ext": pick(s.f_ext), "u": pick(s.u)}


def _bad_vectors(x):
    """(label, spoiled copy) of a valid vector x (n,) for any argument."""
    n = x.shape[0]
    nan, inf = x.copy(), x.copy()
    nan[n // 2] = np.nan
    inf[-1] = -np.inf
    return [
        ("too long", np.append(x, 0.0)),
        ("too short", x[:-1]),
        ("3-d", np.broadcast_to(x, (2, 3, n)).copy()),
        ("column", x.reshape(n, 1)),
        ("scalar", np.float64(1.0)),
        ("empty", np.zeros(0)),
        ("NaN", nan),
        ("inf", inf),
        ("complex", x.astype(complex)),
        ("string", np.array(["1.0"] * n)),
        ("object", [None] * n),
        ("ragged", [list(x), [1.0]]),
    ]


def _unit_blocks(m):
    """(start, length) of the quaternions and (cos, sin) pairs of q."""
    offsets = {gd.FREE_FLYER: (3, 4), gd.SPHERICAL: (0, 4), gd.REVOLUTE_UNBOUNDED: (0, 2),
               gd.PLANAR: (2, 2)}
    return [(m.idx_qs[i] + offsets[int(t)][0], offsets[int(t)][1])
            for i, t in enumerate(m.joint_types) if i > 0 and int(t) in offsets]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_bad_arguments_raise_value_error(case, name):
    m, d = case.model, case.data()
    call, signature = CALLS[name]
    x = _arguments(case)
    call(m, d, x)  # valid as given
    for key, argument in signature.items():
        if key in ("f_ext", "u"):
            continue  # tested below
        for label, bad in _bad_vectors(x[key]):
            with pytest.raises(ValueError, match=_names(argument)):
                call(m, d, dict(x, **{key: bad}))
                pytest.fail(f"{name}: {argument} {label} accepted")


@pytest.mark.parametrize("name", sorted(n for n in CALLS if "q" in CALLS[n][1]))
def test_unnormalized_configuration_raises(case, name):
    m, d = case.model, case.data()
    call, signature = CALLS[name]
    x = _arguments(case)
    blocks = _unit_blocks(m)
    assert blocks
    for key in CONFIGURATIONS:
        if key not in signature:
            continue
        for start, length in blocks:
            for factor in (1.01, 0.0):
                bad = x[key].copy()
                bad[start:start + length] *= factor
                with pytest.raises(ValueError, match=_names(signature[key])):
                    call(m, d, dict(x, **{key: bad}))
                    pytest.fail(f"{name}: {signature[key]} with a unit block x {factor}")
        # a stack with one bad configuration among good ones
        stack = np.repeat(x[key][None], 3, axis=0)
        start, length = blocks[-1]
        stack[1, start:start + length] *= 1.01
        with pytest.raises(ValueError, match=_names(signature[key])):
            call(m, d, dict(_arguments(case, 3), **{key: stack}))


@pytest.mark.parametrize("name", sorted(n for n in CALLS if len(CALLS[n][1]) > 1))
def test_batch_size_mismatch_raises(case, name):
    """Every stacked argument must have q's K; a stack with a single q is refused."""
    m, d = case.model, case.data()
    call, signature = CALLS[name]
    three, two, one = _arguments(case, 3), _arguments(case, 2), _arguments(case)
    call(m, d, three)
    first = next(iter(signature))
    for key, argument in list(signature.items())[1:]:
        with pytest.raises(ValueError, match=_names(argument)):
            call(m, d, dict(three, **{key: two[key]}))
        with pytest.raises(ValueError, match=_names(argument)):
            call(m, d, dict(one, **{key: two[key]}))
    assert first == "q"


def _bad_forces(f):
    """label -> a spoiled copy of valid external forces f (njoints, 6)."""
    nan = f.copy()
    nan[1, 2] = np.nan
    return {
        "one joint short": f[:-1],
        "five components": f[:, :5],
        "flat": f.reshape(-1),
        "transposed": f.T,
        "stack of 2 for one state": np.stack([f, f]),
        "NaN": nan,
        "inf": np.where(np.arange(6) == 0, np.inf, f),
        "complex": f.astype(complex),
        "string": np.full(f.shape, "0"),
        "ragged list": [list(row) for row in f[:-1]] + [[0.0] * 5],
        "list of strings": [["0"] * 6 for _ in f],
    }


BAD_FORCES = tuple(_bad_forces(np.zeros((3, 6))))


@pytest.mark.parametrize("label", BAD_FORCES)
@pytest.mark.parametrize("name", ["rnea_f_ext", "aba_f_ext"])
def test_bad_external_forces(case, name, label):
    m, d = case.model, case.data()
    call = CALLS[name][0]
    x = _arguments(case)
    with pytest.raises(ValueError, match=_names("f_ext")):
        call(m, d, dict(x, f_ext=_bad_forces(x["f_ext"])[label]))
        pytest.fail(f"{name}: f_ext {label} accepted")


@pytest.mark.parametrize("name", ["rnea_f_ext", "aba_f_ext"])
def test_external_forces_of_a_stack(case, name):
    m, d = case.model, case.data()
    call = CALLS[name][0]
    three = _arguments(case, 3)
    f = three["f_ext"][0]
    with pytest.raises(ValueError, match=_names("f_ext")):
        call(m, d, dict(three, f_ext=np.stack([f, f])))
    # accepted forms: (njoints, 6) for every state, a list of njoints 6-vectors
    call(m, d, dict(three, f_ext=f))
    call(m, d, dict(_arguments(case), f_ext=[list(row) for row in f]))


BAD_U = {"NaN": np.array([0.1, np.nan, 0.2]), "inf": np.inf, "too long": np.full(4, 0.5),
         "too short": np.full(2, 0.5), "3-d": np.full((3, 1, 2), 0.5),
         "complex": np.full(3, 0.5 + 0.5j), "string": "half", "object": [None] * 3}


@pytest.mark.parametrize("label", BAD_U)
def test_bad_interpolation_parameter(case, label):
    m = case.model
    x = _arguments(case, 3)
    with pytest.raises(ValueError, match=_names("u")):
        gd.interpolate(m, x["q"], x["q1"], BAD_U[label])
        pytest.fail(f"u {label} accepted")


@pytest.mark.parametrize("name", USES_DATA)
def test_data_of_another_model_raises(case, load_case, name):
    other = load_case("ur5" if case.name != "ur5" else "panda")
    call = CALLS[name][0]
    with pytest.raises(ValueError, match=_names("data")):
        call(case.model, other.data(), _arguments(case))


def test_unknown_frames_and_joints(case):
    m, d = case.model, case.data()
    q = _arguments(case)["q"]
    gd.forward_kinematics(m, d, q)
    with pytest.raises(KeyError, match="no_such_frame"):
        m.frame_id("no_such_frame")
    with pytest.raises(KeyError, match="no_such_frame"):
        gd.frame_placement(m, d, "no_such_frame")
    with pytest.raises(KeyError, match="no_such_frame"):
        gd.frame_jacobian(m, d, q, "no_such_frame")
    with pytest.raises(KeyError, match="no_such_joint"):
        gd.joint_jacobian(m, d, q, "no_such_joint")
    for frame in (-1, m.nframes, 10 ** 9, -10 ** 9):
        with pytest.raises(ValueError, match="frame"):
            gd.frame_placement(m, d, frame)
        with pytest.raises(ValueError, match="frame"):
            gd.frame_placement(m, d, frame, q=q)
        with pytest.raises(ValueError, match="frame"):
            gd.frame_jacobian(m, d, q, frame)
    for joint in (-1, m.njoints, 10 ** 9):
        with pytest.raises(ValueError, match="joint"):
            gd.joint_jacobian(m, d, q, joint)
    # valid ids at both ends, and numpy integers, are accepted
    for frame in (0, m.nframes - 1, np.int64(m.nframes - 1)):
        gd.frame_placement(m, d, frame)
        gd.frame_jacobian(m, d, q, frame)
    gd.joint_jacobian(m, d, q, np.int32(m.njoints - 1))


def test_unknown_reference_frame(case):
    m, d = case.model, case.data()
    q = _arguments(case)["q"]
    for reference in ("LOCALE", "world_aligned", 3, -1, None, 1.5):
        with pytest.raises(ValueError, match="reference"):
            gd.frame_jacobian(m, d, q, _frame(m), reference)
        with pytest.raises(ValueError, match="reference"):
            gd.joint_jacobian(m, d, q, 1, reference)
    for reference in ("LOCAL", "world", "Local_World_Aligned"):
        gd.frame_jacobian(m, d, q, _frame(m), reference)


def test_accepted_array_likes(case, assert_close):
    """Lists, integer and float32 arrays are read as float64 numbers."""
    m, d = case.model, case.data()
    x = _arguments(case)
    expected = gd.rnea(m, d, x["q"], x["v"], x["a"])
    assert_close(gd.rnea(m, d, list(x["q"]), list(x["v"]), tuple(x["a"])), expected, 0.0,
                 "lists")
    assert_close(gd.rnea(m, d, x["q"], np.zeros(m.nv, dtype=np.int32),
                         np.zeros(m.nv, dtype=np.int64)),
                 gd.generalized_gravity(m, d, x["q"]), 0.0, "integer v, a")
    q32 = x["q"].astype(np.float32)
    assert_close(gd.crba(m, d, q32), gd.crba(m, d, q32.astype(np.float64)), 0.0, "float32 q")
    strided = np.repeat(x["q"][None], 4, axis=0)[::2]
    assert_close(gd.crba(m, d, strided), gd.crba(m, d, np.ascontiguousarray(strided)), 0.0,
                 "non-contiguous stack")
    fortran = np.asfortranarray(np.repeat(x["q"][None], 3, axis=0))
    assert_close(gd.crba(m, d, fortran), gd.crba(m, d, np.ascontiguousarray(fortran)), 0.0,
                 "Fortran-ordered stack")


def test_arrays_in_kernel_form_take_the_same_path_to_the_same_values(case, assert_close):
    """One state as C-contiguous writable float64 arrays (taken as they are, checked by
    one compiled call) and the same state as read-only, strided or list arguments
    (converted and checked one by one) give the same values, bit for bit; the inputs
    are left as they were, and a spoiled value in kernel form is still refused."""
    m = case.model
    x = _arguments(case)
    q, v, tau = (np.ascontiguousarray(x[k], dtype=np.float64) for k in ("q", "v", "tau"))
    kept = [y.copy() for y in (q, v, tau)]
    frozen = q.copy()
    frozen.setflags(write=False)
    strided = np.repeat(v[:, None], 2, axis=1)[:, 0]
    for label, function in (("rnea", lambda d, q_, v_: gd.rnea(m, d, q_, v_, tau)),
                            ("aba", lambda d, q_, v_: gd.aba(m, d, q_, v_, tau)),
                            ("crba", lambda d, q_, v_: gd.crba(m, d, q_)),
                            ("compute_minverse", lambda d, q_, v_: gd.compute_minverse(m, d, q_)),
                            ("forward_kinematics",
                             lambda d, q_, v_: gd.forward_kinematics(m, d, q_, v_)[1])):
        given = function(case.data(), q, v)
        for other_q, other_v in ((frozen, strided), (list(q), list(v))):
            assert_close(function(case.data(), other_q, other_v), given, 0.0, label)
    for before, after in zip(kept, (q, v, tau)):
        assert np.array_equal(before, after)
    bad = q.copy()
    bad[-1] = np.nan
    with pytest.raises(ValueError, match=_names("q")):
        gd.aba(m, case.data(), bad, v, tau)
    bad_v = v.copy()
    bad_v[0] = np.inf
    with pytest.raises(ValueError, match=_names("v")):
        gd.rnea(m, case.data(), q, bad_v, tau)


def test_a_refused_call_leaves_data_usable(case, assert_close):
    m, d = case.model, case.data()
    x = _arguments(case, 3)
    expected = gd.aba(m, case.data(), x["q"], x["v"], x["tau"])
    with pytest.raises(ValueError):
        gd.aba(m, d, x["q"], x["v"][:2], x["tau"])
    with pytest.raises(ValueError):
        gd.aba(m, d, np.repeat(x["q"], 4, axis=0), x["v"], x["tau"])
    assert_close(gd.aba(m, d, x["q"], x["v"], x["tau"]), expected, 0.0, "after refusals")


# --- Data and constraints belong to one model; readers need computed data -----

def test_readers_refuse_data_of_another_model(case, load_case):
    """The readers that take no q (frame placements, kinematics-derivative getters)
    check the data's model as the algorithms do: no silent read of another
    robot's arrays, no write past them."""
    m = case.model
    other = load_case("ur5" if case.name != "ur5" else "panda")
    foreign = other.data()
    gd.forward_kinematics(other.model, foreign, _arguments(other)["q"])
    s = other.states(1, seed=3)
    gd.compute_forward_kinematics_derivatives(other.model, foreign, s.q[0], s.v[0], s.a[0])
    readers = {
        "update_frame_placements": lambda: gd.update_frame_placements(m, foreign),
        "frame_placement": lambda: gd.frame_placement(m, foreign, 0),
        "joint_velocity_derivatives": lambda: gd.joint_velocity_derivatives(m, foreign, 1),
        "frame_acceleration_derivatives":
            lambda: gd.frame_acceleration_derivatives(m, foreign, 0),
    }
    for label, call in readers.items():
        with pytest.raises(ValueError, match=_names("data")):
            call()
            pytest.fail(f"{label} read data of {other.name}")
    q = _arguments(case)["q"]
    contacts = gd.ConstraintSet(m, [gd.contact_3d(m, _frame(m))])
    for not_data in (None, np.zeros(3), "data", m, contacts):
        with pytest.raises(ValueError, match=_names("data")):
            gd.frame_placement(m, not_data, 0)
        with pytest.raises(ValueError, match=_names("data")):
            gd.rnea(m, not_data, q, np.zeros(m.nv), np.zeros(m.nv))


def test_data_of_the_same_robot_loaded_twice_is_accepted(case, assert_close):
    """The check compares the kinematic structure, not the object: a copy of the
    model (other gravity) shares its data."""
    m = case.model
    twin = m.with_changes(gravity=np.array([0.0, 0.0, -1.0]))
    d = case.data()
    q = _arguments(case)["q"]
    assert_close(gd.crba(twin, d, q), gd.crba(m, case.data(), q), 0.0, "twin's data")


def test_a_copy_with_other_gravity_computes_with_its_own_arrays(case, assert_close):
    """A model's compiled entry points and its ModelRef are kept on the model and
    follow its arrays: a copy made after a call (``with_changes`` copies what the
    model keeps) computes with its own gravity.  At rest, tau = g(q) is linear in
    gravity: half the gravity gives half the torques."""
    m = case.model
    q = np.ascontiguousarray(_arguments(case)["q"])
    zero = np.zeros(m.nv)
    tau = gd.rnea(m, case.data(), q, zero, zero)
    twin = m.with_changes(gravity=0.5 * m.gravity)
    assert_close(gd.rnea(twin, case.data(), q, zero, zero), 0.5 * tau, 1e-12, "twin's rnea")
    assert_close(gd.rnea(m, case.data(), q, zero, zero), tau, 0.0, "the model's rnea again")


def test_readers_need_computed_data(case):
    m = case.model
    for call in (lambda d: gd.frame_placement(m, d, 0),
                 lambda d: gd.update_frame_placements(m, d)):
        with pytest.raises(RuntimeError, match="forward_kinematics"):
            call(case.data())
    with pytest.raises(RuntimeError, match="compute_forward_kinematics_derivatives"):
        gd.frame_velocity_derivatives(m, case.data(), 0)
    d = case.data()
    x = _arguments(case, 2)
    gd.rnea(m, d, x["q"], x["v"], x["a"])          # any algorithm that takes q computes oMi
    R, p = gd.frame_placement(m, d, _frame(m))
    assert R.shape == (2, 3, 3) and p.shape == (2, 3)
    np.testing.assert_allclose(np.einsum("kji,kjl->kil", R, R), np.tile(np.eye(3), (2, 1, 1)),
                               atol=1e-12)


def test_constraints_of_another_model_are_refused(case, load_case):
    m, d = case.model, case.data()
    other = load_case("ur5" if case.name != "ur5" else "panda")
    foreign = gd.contact_3d(other.model, other.model.nframes - 1)
    s = case.states(1, seed=4)
    with pytest.raises(ValueError, match="constraint"):
        gd.constraint_dynamics(m, d, s.q[0], s.v[0], s.tau[0], [foreign])
    with pytest.raises(ValueError, match="constraints"):
        gd.constraint_dynamics(m, d, s.q[0], s.v[0], s.tau[0],
                               gd.ConstraintSet(other.model, [foreign]))
    with pytest.raises(ValueError, match="constraint"):
        gd.ConstraintSet(m, [foreign])
    for not_constraints in (5, d, None, [m]):
        with pytest.raises(ValueError, match="RigidConstraint"):
            gd.constraint_dynamics(m, d, s.q[0], s.v[0], s.tau[0], not_constraints)


@pytest.mark.parametrize("bad", [1.5, np.float64(2.0), None, np.nan, True, "", [1], 1 + 0j])
def test_frame_and_joint_ids_must_be_integers(case, bad):
    m, d = case.model, case.data()
    q = _arguments(case)["q"]
    gd.forward_kinematics(m, d, q)
    error = KeyError if bad == "" else ValueError
    with pytest.raises(error, match="frame"):
        gd.frame_placement(m, d, bad)
    with pytest.raises(error, match="frame"):
        gd.frame_jacobian(m, d, q, bad)
    with pytest.raises(error, match="joint"):
        gd.joint_jacobian(m, d, q, bad)
    with pytest.raises(error, match="frame"):
        gd.contact_3d(m, bad)


def test_the_fast_path_checks_data_and_grows_it(case, assert_close):
    """Arguments in kernel form take the fast path (one compiled check), which still
    refuses a Data of another structure or an object that is no Data, naming ``data``,
    and grows a Data of one state for a stack; forward_kinematics with v and a checks
    all three in that one call and names the spoiled one."""
    m = case.model
    x = _arguments(case, 4)
    q, v, tau = (np.ascontiguousarray(x[k]) for k in ("q", "v", "tau"))
    with pytest.raises(ValueError, match=_names("data")):
        gd.rnea(m, object(), q[0], v[0], tau[0])
    small = case.data()
    assert small.batch_size == 1
    stacked = gd.aba(m, small, q, v, tau)
    assert small.batch_size >= 4
    for k in range(4):
        assert_close(stacked[k], gd.aba(m, case.data(), q[k], v[k], tau[k]), 0.0, "aba")
    bad = tau[0].copy()
    bad[-1] = np.nan
    with pytest.raises(ValueError, match=_names("a")):
        gd.forward_kinematics(m, case.data(), q[0], v[0], bad)
    placements = gd.forward_kinematics(m, case.data(), q[0], v[0], tau[0])
    assert_close(placements[1], gd.forward_kinematics(m, case.data(), list(q[0]))[1], 0.0, "op")


def test_one_state_in_one_compiled_call_equals_the_stack_path(case):
    """One state as float64 vectors goes through one compiled call (dynamics/one_state.py:
    the checks, the kernel by its address, the Data's arrays as one DataRef); the same
    state as a stack of one takes the full path.  Results and the Data arrays the
    function fills are the same bits, for a fresh Data, one grown for a stack and
    resized back to one state (its arrays made anew twice), a deep copy and a
    pickled copy of the Data and of the model (whose arrays stay read-only, so they
    run the kernels compiled for the model)."""
    import copy
    import pickle

    m = case.model
    x = _arguments(case, 3)
    frame = _frame(m)
    # name -> (f(model, data, q, v, tau), the Data arrays it fills)
    functions = {
        "rnea": (lambda m_, d, q, v, tau: gd.rnea(m_, d, q, v, tau), ("tau", "f", "a_gf")),
        "aba": (lambda m_, d, q, v, tau: gd.aba(m_, d, q, v, tau), ("ddq", "pA", "Dinv")),
        "crba": (lambda m_, d, q, v, tau: gd.crba(m_, d, q), ("M", "oR", "op")),
        "compute_minverse": (lambda m_, d, q, v, tau: gd.compute_minverse(m_, d, q),
                             ("Minv", "U")),
        "rnea_derivatives": (lambda m_, d, q, v, tau: gd.rnea_derivatives(m_, d, q, v, tau),
                             ("dtau_dq", "oYcrb", "a")),
        "aba_derivatives": (lambda m_, d, q, v, tau: gd.aba_derivatives(m_, d, q, v, tau),
                            ("ddq_dq", "Minv", "tau")),
        "forward_kinematics": (lambda m_, d, q, v, tau: gd.forward_kinematics(m_, d, q, v, tau),
                               ("liR", "v", "a")),
        "frame_jacobian": (lambda m_, d, q, v, tau: gd.frame_jacobian(
            m_, d, q, frame, gd.LOCAL_WORLD_ALIGNED), ("J", "oRf", "opf")),
        "center_of_mass": (lambda m_, d, q, v, tau: gd.center_of_mass(m_, d, q),
                           ("com", "mass")),
        "jacobian_center_of_mass": (lambda m_, d, q, v, tau: gd.jacobian_center_of_mass(
            m_, d, q), ("Jcom", "com")),
    }
    # the copies keep the model's arrays read-only, so the kernels compiled for the
    # model serve them (Numba types a writable array apart: every kernel compiled again)
    for label, copied in (("deep copy", copy.deepcopy(m)),
                          ("pickled", pickle.loads(pickle.dumps(m))),
                          ("with_changes", m.with_changes(gravity=[0.0, 0.0, -1.0]))):
        frozen = [a for a in (*copied.arrays, copied.lower_position_limit, copied.effort_limit)
                  if isinstance(a, np.ndarray)]
        assert not any(a.flags.writeable for a in frozen), label
    one = (x["q"][0], x["v"][0], x["tau"][0])
    stack = tuple(y[:1] for y in (x["q"], x["v"], x["tau"]))
    grown = case.data()
    gd.aba(m, grown, x["q"][0], x["v"][0], x["tau"][0])  # a DataRef of the first arrays
    gd.aba(m, grown, x["q"], x["v"], x["tau"])
    grown.resize(1)  # back to one state: arrays made anew again
    for name, (function, fields) in functions.items():
        full = case.data()
        expected = function(m, full, *stack)
        expected = tuple(e[0] for e in expected) if isinstance(expected, tuple) else (expected[0],)
        fresh = case.data()
        function(m, fresh, *one)  # makes the Data's DataRef before the copies
        assert fresh.__dict__["_one_state"].entries, name  # the one-call path was taken
        for label, model, data in (("fresh", m, fresh), ("grown", m, grown),
                                   ("deep copy", copy.deepcopy(m), copy.deepcopy(fresh)),
                                   ("pickled", pickle.loads(pickle.dumps(m)),
                                    pickle.loads(pickle.dumps(fresh)))):
            out = function(model, data, *one)
            out = out if isinstance(out, tuple) else (out,)
            for got, want in zip(out, expected):
                assert np.array_equal(got, want), (name, label)
            for field in fields:
                assert np.array_equal(getattr(data, field)[0], getattr(full, field)[0]), \
                    (name, label, field)
    expected = gd.integrate(m, x["q"][:1], x["v"][:1])[0]
    for model in (m, pickle.loads(pickle.dumps(m))):
        assert np.array_equal(gd.integrate(model, x["q"][0], x["v"][0]), expected)
    assert m.__dict__["_one_state"].entries  # integrate's one-call path was taken


def test_a_one_state_kernel_of_other_types_raises(case):
    """The one-call path calls its kernel by (address, key) (dynamics/native.py:
    call_checked): rnea's trampoline given aba's kernel, compiled for other argument
    types, raises TypeError naming the types instead of running it on misread
    arguments; with its own kernel back, the same values as before."""
    from geppetto.dynamics.one_state import _aba_one, _rnea_one

    m = case.model
    x = _arguments(case)
    q, v, tau = x["q"], x["v"], x["tau"]
    data = case.data()
    expected = gd.rnea(m, data, q, v, tau).copy()
    gd.aba(m, data, q, v, tau)
    entries = data.__dict__["_one_state"].entries
    own, (_, *other) = entries[_rnea_one], entries[_aba_one]
    entries[_rnea_one] = (own[0], *other)
    with pytest.raises(TypeError, match="compiled for other argument types than this call "
                                        r"passes, Tuple\(numba\.ModelRefType"):
        gd.rnea(m, data, q, v, tau)
    entries[_rnea_one] = own
    assert np.array_equal(gd.rnea(m, data, q, v, tau), expected)


class _CountingKernel:
    """A dispatcher's two attributes that ``_compiled_entry`` reads: ``overloads`` (types
    -> an object with ``entry_point``) and ``typeof_pyval``, which counts its calls."""

    def __init__(self, overloads):
        import numba
        self.typed = 0
        self._typeof = numba.typeof
        self.overloads = {types: type("Overload", (), {"entry_point": entry})()
                          for types, entry in overloads.items()}

    def typeof_pyval(self, value):
        self.typed += 1
        return self._typeof(value)


def test_compiled_entry_is_typed_once_per_argument_types():
    """The entry point of arguments of the types already seen is found by their type
    fingerprint, without typing them again (a solver's per-solve lookup of 25 arguments
    cost ~160 us); other types are typed and get their own entry."""
    import numba
    from geppetto.dynamics.validation import _compiled_entry
    one, other = object(), object()
    float64, float32 = np.zeros((3, 2)), np.zeros((3, 2), dtype=np.float32)
    counting = _CountingKernel({(numba.typeof(float64), numba.typeof(1.0)): one,
                                (numba.typeof(float32), numba.typeof(1.0)): other})
    assert _compiled_entry(counting, (float64, 1.0)) is one
    assert counting.typed == 2
    assert _compiled_entry(counting, (np.ones((5, 7)), 2.5)) is one   # same types
    assert counting.typed == 2
    assert _compiled_entry(counting, (float32, 1.0)) is other
    assert counting.typed == 4
    # a real kernel: the remembered entry point computes what the dispatcher does
    from geppetto.dynamics.validation import _rows_are_finite
    x = np.ones((4, 3))
    assert _rows_are_finite(x, 4)
    entry = _compiled_entry(_rows_are_finite, (x, 4))
    assert entry is _compiled_entry(_rows_are_finite, (np.ones((2, 2)), 1))
    x[2, 1] = np.nan
    assert entry(x, 2) and not entry(x, 3)


def test_big_endian_inputs_give_the_native_results():
    """Numba's type fingerprint does not encode byte order: the one-state fast paths keyed
    by it read a big-endian (">f8") q, v, tau as native bytes (rnea 1e-60 instead of 9.1,
    rev34).  Such arrays take the checking path, which converts them."""
    from geppetto.robots import double_pendulum
    model = double_pendulum()
    q, v, tau = np.array([0.3, -0.2]), np.array([0.1, 0.4]), np.array([0.5, -0.1])
    swapped = [a.astype(">f8") for a in (q, v, tau)]
    for function in (gd.rnea, gd.aba):
        expected = function(model, model.create_data(), q, v, tau)
        np.testing.assert_array_equal(function(model, model.create_data(), *swapped), expected)
    np.testing.assert_array_equal(gd.crba(model, model.create_data(), swapped[0]),
                                  gd.crba(model, model.create_data(), q))
    np.testing.assert_array_equal(gd.integrate(model, swapped[0], swapped[1]),
                                  gd.integrate(model, q, v))
