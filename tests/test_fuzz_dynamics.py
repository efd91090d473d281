"""Property tests at the API border of every public dynamics function.

Each example calls one function with its arguments valid except, half of the
time, one of them spoiled: wrong shape or dimension, NaN, inf, complex,
string or object dtype, a ragged list, a stack whose size differs from q's,
an unnormalized quaternion or (cos, sin) pair, data of another model or no
data, constraints of another model, a frame or joint id that is out of
range, fractional, None, NaN or an unknown name.  The outcome must be:

- all arguments valid: a finite result (and no exception);
- one argument spoiled: ValueError (KeyError for an unknown name) whose
  message names that argument (never an IndexError, TypeError or
  AttributeError from inside, never an accepted call).

Models: solo12 (free-flyer: a quaternion in q; four point contacts) and a
random tree with spherical, planar and unbounded revolute joints; foreign
data and constraints come from ur5.  Seeded (``derandomize``), bounded
example counts, ``deadline=None``: the module runs in well under a minute
once the kernels are compiled.
"""
import functools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import geppetto as gp
import geppetto.dynamics as gd

FUZZ = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Case:
    """A model, its constraints, and seeded valid arguments."""

    def __init__(self, name, model):
        self.name, self.model = name, model
        feet = [f.name for f in model.frames if f.name.endswith("_FOOT")]
        self.frame = max(range(model.nframes), key=lambda f: self._supporting_dofs(f))
        self.constraints = gd.ConstraintSet(
            model, [gd.contact_3d(model, f) for f in feet] if feet else
            [gd.contact_3d(model, self.frame, gd.LOCAL_WORLD_ALIGNED)])
        rng = np.random.default_rng(7)
        nv, nj, nc = model.nv, model.njoints, self.constraints.size
        self.valid = {"q": gd.random_configuration(model, rng),
                      "q1": gd.random_configuration(model, rng),
                      "v": rng.standard_normal(nv), "a": rng.standard_normal(nv),
                      "tau": rng.standard_normal(nv), "f_ext": rng.standard_normal((nj, 6)),
                      "lam": rng.standard_normal(nc), "u": np.float64(0.3)}
        self.unit_blocks = gd.validation.unit_blocks(model)

    def _supporting_dofs(self, frame):
        """Degrees of freedom between the world and ``frame`` (a contact there is
        regular when they are at least 3)."""
        joint, count = self.model.frames[frame].joint, 0
        while joint > 0:
            count += int(self.model.nvs[joint])
            joint = int(self.model.parents[joint])
        return count


@functools.lru_cache(maxsize=None)
def cases():
    return {"solo12": Case("solo12", gp.robots.load("solo12").model),
            "random_tree": Case("random_tree", gp.robots.random_tree(12, seed=3))}


@functools.lru_cache(maxsize=None)
def foreign():
    """ur5's model, a data that holds its placements and kinematics derivatives,
    and a contact of ur5."""
    model = gp.robots.load("ur5").model
    data = model.create_data()
    q, v = gd.neutral(model), np.ones(model.nv)
    gd.compute_forward_kinematics_derivatives(model, data, q, v, v)
    return model, data, gd.contact_3d(model, model.nframes - 1)


def _prepare_kinematics(m, d, x):
    gd.forward_kinematics(m, d, x["q"])


def _prepare_derivatives(m, d, x):
    gd.compute_forward_kinematics_derivatives(m, d, x["q"], x["v"], x["a"])


# name -> (call(m, d, x, frame, cs), arguments of x it reads, takes a frame/joint
# ("frame", "joint" or None), uses data, uses constraints, valid call to run first)
F = {
    "rnea": (lambda m, d, x, f, c: gd.rnea(m, d, x["q"], x["v"], x["a"], x["f_ext"]),
             ("q", "v", "a", "f_ext")),
    "nonlinear_effects": (lambda m, d, x, f, c: gd.nonlinear_effects(m, d, x["q"], x["v"]),
                          ("q", "v")),
    "generalized_gravity": (lambda m, d, x, f, c: gd.generalized_gravity(m, d, x["q"]), ("q",)),
    "crba": (lambda m, d, x, f, c: gd.crba(m, d, x["q"]), ("q",)),
    "aba": (lambda m, d, x, f, c: gd.aba(m, d, x["q"], x["v"], x["tau"], x["f_ext"]),
            ("q", "v", "tau", "f_ext")),
    "compute_minverse": (lambda m, d, x, f, c: gd.compute_minverse(m, d, x["q"]), ("q",)),
    "rnea_derivatives": (lambda m, d, x, f, c: gd.rnea_derivatives(m, d, x["q"], x["v"],
                                                                   x["a"], x["f_ext"]),
                         ("q", "v", "a", "f_ext")),
    "aba_derivatives": (lambda m, d, x, f, c: gd.aba_derivatives(m, d, x["q"], x["v"],
                                                                 x["tau"], x["f_ext"]),
                        ("q", "v", "tau", "f_ext")),
    "aba_derivative_f_ext": (lambda m, d, x, f, c: gd.aba_derivative_f_ext(m, d, x["q"]),
                             ("q",)),
    "forward_kinematics": (lambda m, d, x, f, c: gd.forward_kinematics(m, d, x["q"], x["v"],
                                                                       x["a"]),
                           ("q", "v", "a")),
    "update_frame_placements": (lambda m, d, x, f, c: gd.update_frame_placements(m, d), (),
                                None, True, False, _prepare_kinematics),
    "frame_placement": (lambda m, d, x, f, c: gd.frame_placement(m, d, f), (), "frame", True,
                        False, _prepare_kinematics),
    "frame_placement_q": (lambda m, d, x, f, c: gd.frame_placement(m, d, f, q=x["q"]),
                          ("q",), "frame"),
    "compute_joint_jacobians": (lambda m, d, x, f, c: gd.compute_joint_jacobians(m, d, x["q"]),
                                ("q",)),
    "frame_jacobian": (lambda m, d, x, f, c: gd.frame_jacobian(m, d, x["q"], f, gd.WORLD),
                       ("q",), "frame"),
    "joint_jacobian": (lambda m, d, x, f, c: gd.joint_jacobian(m, d, x["q"], f), ("q",),
                       "joint"),
    "center_of_mass": (lambda m, d, x, f, c: gd.center_of_mass(m, d, x["q"]), ("q",)),
    "jacobian_center_of_mass": (lambda m, d, x, f, c: gd.jacobian_center_of_mass(m, d, x["q"]),
                                ("q",)),
    "kinetic_energy": (lambda m, d, x, f, c: gd.kinetic_energy(m, d, x["q"], x["v"]),
                       ("q", "v")),
    "potential_energy": (lambda m, d, x, f, c: gd.potential_energy(m, d, x["q"]), ("q",)),
    "compute_forward_kinematics_derivatives": (
        lambda m, d, x, f, c: gd.compute_forward_kinematics_derivatives(m, d, x["q"], x["v"],
                                                                        x["a"]),
        ("q", "v", "a")),
    "joint_velocity_derivatives": (
        lambda m, d, x, f, c: gd.joint_velocity_derivatives(m, d, f, gd.LOCAL), (), "joint",
        True, False, _prepare_derivatives),
    "frame_acceleration_derivatives": (
        lambda m, d, x, f, c: gd.frame_acceleration_derivatives(m, d, f, gd.WORLD), (),
        "frame", True, False, _prepare_derivatives),
    "compute_joint_jacobians_time_variation": (
        lambda m, d, x, f, c: gd.compute_joint_jacobians_time_variation(m, d, x["q"], x["v"]),
        ("q", "v")),
    "frame_jacobian_time_variation": (
        lambda m, d, x, f, c: gd.frame_jacobian_time_variation(m, d, x["q"], x["v"], f),
        ("q", "v"), "frame"),
    "center_of_mass_derivatives": (
        lambda m, d, x, f, c: gd.center_of_mass_derivatives(m, d, x["q"]), ("q",)),
    "center_of_mass_velocity_derivatives": (
        lambda m, d, x, f, c: gd.center_of_mass_velocity_derivatives(m, d, x["q"], x["v"]),
        ("q", "v")),
    "integrate": (lambda m, d, x, f, c: gd.integrate(m, x["q"], x["v"]), ("q", "v"), None,
                  False),
    "difference": (lambda m, d, x, f, c: gd.difference(m, x["q"], x["q1"]), ("q", "q1"), None,
                   False),
    "interpolate": (lambda m, d, x, f, c: gd.interpolate(m, x["q"], x["q1"], x["u"]),
                    ("q", "q1", "u"), None, False),
    "d_integrate": (lambda m, d, x, f, c: gd.d_integrate(m, x["q"], x["v"], "v"), ("q", "v"),
                    None, False),
    "d_difference": (lambda m, d, x, f, c: gd.d_difference(m, x["q"], x["q1"], "q1"),
                     ("q", "q1"), None, False),
    "normalize": (lambda m, d, x, f, c: gd.normalize(m, x["q"]), ("q",), None, False),
    "constraint_jacobian": (lambda m, d, x, f, c: gd.constraint_jacobian(m, d, x["q"], c),
                            ("q",), None, True, True),
    "constraint_drift": (lambda m, d, x, f, c: gd.constraint_drift(m, d, x["q"], x["v"], c),
                         ("q", "v"), None, True, True),
    "constraint_acceleration": (
        lambda m, d, x, f, c: gd.constraint_acceleration(m, d, x["q"], x["v"], x["a"], c),
        ("q", "v", "a"), None, True, True),
    "constraint_forces": (lambda m, d, x, f, c: gd.constraint_forces(m, d, x["q"], x["lam"], c),
                          ("q", "lam"), None, True, True),
    "constraint_acceleration_derivatives": (
        lambda m, d, x, f, c: gd.constraint_acceleration_derivatives(m, d, x["q"], x["v"],
                                                                     x["a"], c),
        ("q", "v", "a"), None, True, True),
    "constraint_dynamics": (
        lambda m, d, x, f, c: gd.constraint_dynamics(m, d, x["q"], x["v"], x["tau"], c),
        ("q", "v", "tau"), None, True, True),
    "constraint_dynamics_derivatives": (
        lambda m, d, x, f, c: gd.constraint_dynamics_derivatives(m, d, x["q"], x["v"],
                                                                 x["tau"], c),
        ("q", "v", "tau"), None, True, True),
    "impulse_dynamics": (lambda m, d, x, f, c: gd.impulse_dynamics(m, d, x["q"], x["v"], c),
                         ("q", "v"), None, True, True),
    "impulse_dynamics_derivatives": (
        lambda m, d, x, f, c: gd.impulse_dynamics_derivatives(m, d, x["q"], x["v"], c),
        ("q", "v"), None, True, True),
}
DEFAULTS = (None, True, False, None)        # frame kind, uses data, uses constraints, prepare
# the name each argument has in the messages (difference & co. call q "q0")
MESSAGE_NAMES = {"q": ("q", "q0", "x"), "q1": ("q1",), "v": ("v",), "a": ("a",),
                 "tau": ("tau",), "f_ext": ("f_ext",), "lam": ("lam",), "u": ("u",)}

SPOILS = ("too long", "too short", "3-d", "NaN", "inf", "complex", "string", "object",
          "ragged", "stack of 2", "unnormalized")
KEEPS = ("array", "list", "float32", "integer zeros")
BAD_IDS = (-1, "n", 1.5, None, np.nan, True, "no_such_frame")


def spec(name):
    entry = F[name]
    return entry[0], entry[1], *(entry[2:] + DEFAULTS[len(entry) - 2:])


def keep(value, how):
    """A valid argument in another accepted form."""
    if value.ndim == 0:
        return float(value)
    if how == "list":
        return value.tolist()
    if how == "float32":
        return value.astype(np.float32).astype(np.float64)  # exact in float64 again
    return value


def spoil(case, key, value, how):
    """``value`` spoiled as ``how``, or None when that spoil does not apply to it."""
    if value.ndim == 0:         # the interpolation parameter
        return {"NaN": np.nan, "inf": np.inf, "complex": 0.3 + 1j, "string": "0.3",
                "object": None, "too long": np.full(3, 0.3), "3-d": np.full((2, 1, 2), 0.3)
                }.get(how)
    n = value.shape[-1]
    flat = value.reshape(-1).copy()
    if how == "too long":
        return np.append(value, np.zeros((1,) + value.shape[1:]), axis=0)
    if how == "too short":
        return value[:-1]
    if how == "3-d":
        return np.broadcast_to(value, (2, 3) + value.shape).copy()
    if how in ("NaN", "inf"):
        flat[len(flat) // 2] = np.nan if how == "NaN" else -np.inf
        return flat.reshape(value.shape)
    if how == "complex":
        return value.astype(complex)
    if how == "string":
        return np.full(value.shape, "0.5")
    if how == "object":
        return [None] * len(value)
    if how == "ragged":
        return [list(np.atleast_1d(value[0])), [1.0] * (n + 1)]
    if how == "stack of 2":
        return np.stack([value, value]) if key != "q" else None
    if how == "unnormalized":
        if key not in ("q", "q1") or not case.unit_blocks:
            return None
        start, length, _ = case.unit_blocks[len(case.unit_blocks) // 2]
        bad = value.copy()
        bad[start:start + length] *= 1.05
        return bad
    raise AssertionError(how)


def _names(argument):
    return rf"(?<![\w]){re.escape(argument)}(?![\w])"


def _finite(out):
    if isinstance(out, tuple):
        return all(_finite(o) for o in out)
    return out is None or bool(np.all(np.isfinite(np.asarray(out, dtype=float))))


def run_example(case_name, name, target, how, bad_id, data_kind):
    """One call; returns (outcome, detail): outcome "finite result", "clean error",
    "accepted bad input", "unclear error" or "non-finite result"."""
    case = cases()[case_name]
    m = case.model
    call, keys, frame_kind, uses_data, uses_constraints, prepare = spec(name)
    x = {k: keep(v, how if target is None else "array") for k, v in case.valid.items()}
    frame = m.njoints - 1 if frame_kind == "joint" else case.frame
    cs = case.constraints
    data = m.create_data()
    expect = None                      # (exception types, names that the message may use)
    if target in keys:
        x[target] = spoil(case, target, case.valid[target], how)
        expect = ((ValueError,), MESSAGE_NAMES[target])
    elif target == "id" and frame_kind is not None:
        frame = bad_id if bad_id != "n" else (m.njoints if frame_kind == "joint" else m.nframes)
        expect = ((KeyError,) if isinstance(frame, str) else (ValueError,), (frame_kind,))
    elif target == "data" and uses_data:
        other, other_data, _ = foreign()
        data = other_data if data_kind == "foreign" else None
        expect = ((ValueError,), ("data",))
    elif target == "fresh data" and prepare is not None:
        prepare = None
        expect = ((RuntimeError,), ("forward_kinematics", "compute_forward_kinematics_derivatives"))
    elif target == "constraints" and uses_constraints:
        cs = [foreign()[2]]
        expect = ((ValueError,), ("constraint",))
    if prepare is not None and isinstance(data, gd.Data) and data.model_name == m.name:
        prepare(m, data, case.valid)
    try:
        out = call(m, data, x, frame, cs)
    except Exception as error:                                        # noqa: BLE001
        if expect is not None and isinstance(error, expect[0]) and any(
                re.search(_names(n), str(error)) for n in expect[1]):
            return "clean error", ""
        return "unclear error", f"{type(error).__name__}: {error}"
    if expect is not None:
        return "accepted bad input", f"{target} {how} {bad_id} {data_kind}"
    return ("finite result", "") if _finite(out) else ("non-finite result", "")


EXAMPLE = st.fixed_dictionaries({
    "case_name": st.sampled_from(["solo12", "random_tree"]),
    "name": st.sampled_from(sorted(F)),
    "target": st.sampled_from([None, None, "q", "q1", "v", "a", "tau", "f_ext", "lam", "u",
                               "id", "data", "fresh data", "constraints"]),
    "how": st.sampled_from(SPOILS + KEEPS),
    "bad_id": st.sampled_from(BAD_IDS),
    "data_kind": st.sampled_from(["foreign", "none"]),
})


def _applies(example):
    """False for examples whose spoil does not apply (then hypothesis draws another)."""
    case = cases()[example["case_name"]]
    call, keys, frame_kind, uses_data, uses_constraints, prepare = spec(example["name"])
    target, how = example["target"], example["how"]
    if target is None:
        return how in KEEPS
    if target in case.valid:
        if example["name"] == "normalize" and how == "unnormalized":
            return False                # what normalize is for
        return (target in keys and how in SPOILS
                and spoil(case, target, case.valid[target], how) is not None)
    return {"id": frame_kind is not None, "data": uses_data, "fresh data": prepare is not None,
            "constraints": uses_constraints}[target]


@FUZZ
@given(example=EXAMPLE.filter(_applies))
def test_fuzz_dynamics_border(example):
    outcome, detail = run_example(**example)
    assert outcome in ("finite result", "clean error"), (outcome, detail, example)


@pytest.mark.parametrize("name", sorted(F))
def test_every_function_accepts_its_valid_arguments(name):
    """The baseline of the property test: each function, all arguments valid, on
    both models, gives a finite result."""
    for case_name in cases():
        assert run_example(case_name, name, None, "array", 0, "none") == ("finite result", "")
