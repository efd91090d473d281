"""The CasADi twin of the constrained and impulse dynamics (dynamics/symbolic_constrained.py)
and the derivative harness on them (issue 8).

- values: (ddq, lambda) and (v_after, impulse) of the twin equal the Numba
  kernels to 1e-10 (scaled by the size of the result) on solo12 (four point
  feet, LOCAL and LOCAL_WORLD_ALIGNED, Baumgarte gains, random targets), talos
  (two soles, 6D), the built-in four-bar linkage (3D and 6D loop closures:
  both redundant for a planar linkage, so solved by the proximal variant), a
  6D loop closure of a random tree, a foot listed twice (proximal), and
  impulses with restitution 0 and 0.5;
- derivatives: CasADi AD (through ``integrate`` for q) equals the analytical
  derivatives to 1e-8.  Talos's AD graph builds in about 2 s CPU (600k
  instructions), so talos is tested in full.  On the four-bar's 6D closure
  the redundant rows keep lambda moving along the iterations, and the Numba
  derivatives (Pinocchio's scheme: the final lambda in every iteration) are
  not those of the function computed; there the twin is judged by central
  differences;
- the harness (check_derivatives, geppetto check-derivatives) on the
  four-bar and on solo12's feet, and the arguments it refuses.

SX graphs are built once per constraint set for the session.
"""
import functools

import numpy as np
import pytest

ca = pytest.importorskip("casadi")

import geppetto as gp                                   # noqa: E402
from conftest import _assert_close as assert_close      # noqa: E402
from geppetto.dynamics import (LOCAL, LOCAL_WORLD_ALIGNED, derivative_check,  # noqa: E402
                               finite_differences, symbolic, symbolic_constrained)
from geppetto.dynamics.constrained_dynamics import (  # noqa: E402
    constraint_dynamics, constraint_dynamics_derivatives, impulse_dynamics,
    impulse_dynamics_derivatives)
from geppetto.dynamics.constraints import (ConstraintSet, RigidConstraint,  # noqa: E402
                                           contact_3d, loop_closure)

VALUE_TOLERANCE = 1e-10
DERIVATIVE_TOLERANCE = 1e-8
REFERENCES = {"LOCAL": LOCAL, "LOCAL_WORLD_ALIGNED": LOCAL_WORLD_ALIGNED}
PROXIMAL = dict(mu=1e-3, max_iterations=4, accuracy=0.0)


@functools.lru_cache(maxsize=None)
def load_robot(name):
    return gp.robots.load(name)


@functools.lru_cache(maxsize=None)
def four_bar():
    return gp.robots.four_bar()


def _rotation(rng):
    Q, R = np.linalg.qr(rng.standard_normal((3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q * np.linalg.det(Q)


def feet(robot, reference, Kp=3.0, Kd=2.0, seed=0):
    """The robot's contact_frames in contact, targets at random placements."""
    rng = np.random.default_rng(seed)
    m = robot.model
    return ConstraintSet(m, [
        RigidConstraint(m, size, frame, reference=reference, Kp=Kp, Kd=Kd,
                        target=(_rotation(rng), rng.uniform(-0.5, 0.5, 3)))
        for frame, size in robot.contact_frames])


def rotation_about(axis, angle):
    """Rodrigues' formula."""
    x, y, z = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * K @ K


def random_states(model, n, seed):
    rng = np.random.default_rng(seed)
    q = gp.dynamics.random_configuration(model, rng, size=n)
    return q, rng.standard_normal((n, model.nv)), rng.standard_normal((n, model.nv))


def compare_constraint_dynamics(model, cs, q, v, tau, settings, derivatives=True):
    """Twin = Numba: values, and AD = analytical derivatives."""
    data = model.create_data()
    twin = symbolic.symbolic_functions(model)
    ours = symbolic.evaluate(twin.constraint_dynamics(cs, **settings), q, v, tau)
    theirs = constraint_dynamics(model, data, q, v, tau, cs, **settings)
    for label, x, y in zip(("ddq", "lambda"), ours, theirs):
        assert_close(x, y, VALUE_TOLERANCE, f"{model.name} {label}")
    if derivatives:
        ours = symbolic.evaluate(twin.constraint_dynamics_derivatives(cs, **settings), q, v, tau)
        theirs = constraint_dynamics_derivatives(model, data, q, v, tau, cs, **settings)
        for label, x, y in zip(derivative_check.PARTIALS["constraint_dynamics"], ours, theirs):
            assert_close(x, y, DERIVATIVE_TOLERANCE, f"{model.name} {label}")


def compare_impulse_dynamics(model, cs, q, v, restitution, settings=None):
    settings = settings or {}
    data = model.create_data()
    twin = symbolic.symbolic_functions(model)
    ours = symbolic.evaluate(twin.impulse_dynamics(cs, restitution, **settings), q, v)
    theirs = impulse_dynamics(model, data, q, v, cs, restitution, **settings)
    for label, x, y in zip(("v_after", "impulse"), ours, theirs):
        assert_close(x, y, VALUE_TOLERANCE, f"{model.name} {label} e = {restitution}")
    ours = symbolic.evaluate(twin.impulse_dynamics_derivatives(cs, restitution, **settings), q,
                             v)
    theirs = impulse_dynamics_derivatives(model, data, q, v, cs, restitution, **settings)
    for label, x, y in zip(derivative_check.PARTIALS["impulse_dynamics"], ours, theirs):
        assert_close(x, y, DERIVATIVE_TOLERANCE, f"{model.name} {label} e = {restitution}")


# --- Contacts -------------------------------------------------------------------

@pytest.mark.parametrize("name", ("solo12", "talos"))
@pytest.mark.parametrize("reference, restitution", (("LOCAL", 0.0),
                                                    ("LOCAL_WORLD_ALIGNED", 0.5)))
def test_feet_equal_numba(name, reference, restitution):
    robot = load_robot(name)
    cs = feet(robot, REFERENCES[reference])
    q, v, tau = random_states(robot.model, 2, seed=1)
    compare_constraint_dynamics(robot.model, cs, q, v, tau, {})
    compare_impulse_dynamics(robot.model, cs, q, v, restitution)


def test_log6_on_every_branch():
    """log6 of the twin (Shepperd's four branches for the quaternion of R) equals the
    NumPy se3_difference, and its Jacobian stays finite on every branch."""
    R, p = ca.SX.sym("R", 3, 3), ca.SX.sym("p", 3)
    xi = symbolic_constrained._log6(R, p)
    log6 = ca.Function("log6", [R, p], [xi, ca.jacobian(xi, ca.vertcat(ca.vec(R), p))])
    p0 = np.array([0.1, -0.2, 0.3])
    for axis, angle in (((1, 0, 0), 3.0), ((0, 1, 0), 3.0), ((0, 0, 1), 3.0),
                        ((1, 2, 3), 0.7), ((1, 0, 0), 0.0), ((0.3, -1, 0.2), 3.1)):
        Rn = rotation_about(axis, angle)
        value, jacobian = (np.asarray(x) for x in log6(Rn, p0))
        expected = finite_differences.se3_difference(np.eye(4),
                                                     finite_differences.homogeneous(Rn, p0))
        assert_close(value.ravel(), expected, 1e-14, f"log6 about {axis} by {angle}")
        assert np.all(np.isfinite(jacobian)), f"log6 Jacobian about {axis} by {angle}"


def test_functions_are_kept_per_constraint_set_and_settings():
    robot = load_robot("solo12")
    twin = symbolic.symbolic_functions(robot.model)
    cs = feet(robot, LOCAL)
    same = feet(robot, LOCAL)                    # equal content, another object
    f = twin.constraint_dynamics(cs)
    assert twin.constraint_dynamics(same) is f
    assert twin.constraint_dynamics(list(same)) is f
    assert twin.constraint_dynamics(cs, mu=1e-3) is not f
    assert twin.constraint_dynamics(feet(robot, LOCAL, Kp=1.0)) is not f
    assert twin.impulse_dynamics(cs, 0.5) is not twin.impulse_dynamics(cs, 0.0)
    assert f.name() != twin.constraint_dynamics(cs, mu=1e-3).name()
    assert f.name_out() == ["ddq", "lambda"]
    assert f.size_out(1) == (cs.size, 1)


# --- Loop closures and the proximal variant -----------------------------------------

@pytest.mark.parametrize("reference", REFERENCES)
def test_four_bar_3d_closure_equals_numba(reference):
    """The planar linkage's 3D closure has a zero row (along the joint axes): redundant,
    solved by a few proximal iterations; the zero row leaves lambda's other rows
    converged, and the Numba derivatives are exact."""
    model = four_bar()
    cs = ConstraintSet(model, [loop_closure(model, "coupler_tip", "rocker_tip", size=3,
                                            reference=REFERENCES[reference], Kp=3.0, Kd=2.0)])
    q, v, tau = random_states(model, 3, seed=2)
    compare_constraint_dynamics(model, cs, q, v, tau, PROXIMAL)
    for restitution in (0.0, 0.5):
        compare_impulse_dynamics(model, cs, q, v, restitution, PROXIMAL)
    # the finite-difference twin takes one state as well as a stack
    data = model.create_data()
    stacked = finite_differences.impulse_dynamics_derivatives_fd(model, data, q, v, cs, 0.5,
                                                                 **PROXIMAL)
    single = finite_differences.impulse_dynamics_derivatives_fd(model, data, q[1], v[1], cs,
                                                                0.5, **PROXIMAL)
    for label, x, y in zip(derivative_check.PARTIALS["impulse_dynamics"], single, stacked):
        assert_close(x, y[1], 0.0, f"finite differences of one state: {label}")


def test_four_bar_6d_closure():
    """Values equal Numba's; AD equals central differences of the twin's own function
    (1e-6: about eps^(2/3) times the conditioning of G + mu I)."""
    model = four_bar()
    cs = ConstraintSet(model, [loop_closure(model, "coupler_tip", "rocker_tip", size=6,
                                            Kp=3.0, Kd=2.0)])
    q, v, tau = random_states(model, 3, seed=3)
    compare_constraint_dynamics(model, cs, q, v, tau, PROXIMAL, derivatives=False)
    twin = symbolic.symbolic_functions(model)
    ad = symbolic.evaluate(twin.constraint_dynamics_derivatives(cs, **PROXIMAL), q, v, tau)
    fd = finite_differences.constraint_dynamics_derivatives_fd(
        model, model.create_data(), q, v, tau, cs, **PROXIMAL)
    for label, x, y in zip(derivative_check.PARTIALS["constraint_dynamics"], ad, fd):
        assert_close(x, y, 1e-6, f"four_bar 6D {label} vs central differences")


@pytest.mark.parametrize("reference", REFERENCES)
def test_6d_loop_closure_of_a_tree_equals_numba(reference):
    """frame8 and frame3 of random_tree(12, seed=3) lie on one chain with six dofs
    between them: a regular 6D closure (every joint type on the way)."""
    model = gp.robots.random_tree(12, seed=3)
    cs = ConstraintSet(model, [loop_closure(model, "frame8", "frame3", size=6,
                                            reference=REFERENCES[reference], Kp=3.0, Kd=2.0)])
    q, v, tau = random_states(model, 2, seed=4)
    compare_constraint_dynamics(model, cs, q, v, tau, {})
    compare_impulse_dynamics(model, cs, q, v, 0.5)


def test_proximal_variant_on_a_foot_listed_twice():
    robot = load_robot("solo12")
    m = robot.model
    frames = [frame for frame, _ in robot.contact_frames]
    twice = ConstraintSet(m, [contact_3d(m, frame, Kd=2.0) for frame in frames + frames[:1]])
    q, v, tau = random_states(m, 2, seed=5)
    with pytest.raises(ValueError, match="redundant"):
        constraint_dynamics(m, m.create_data(), q, v, tau, twice)
    settings = dict(mu=1e-3, max_iterations=6, accuracy=0.0)
    compare_constraint_dynamics(m, twice, q, v, tau, settings)
    compare_impulse_dynamics(m, twice, q, v, 0.0, settings)


def test_proximal_iterations_stop_as_numba_does():
    """With accuracy > 0 Numba stops once lambda moves less than it; the twin freezes
    lambda there, so values and derivatives follow the same number of iterations."""
    robot = load_robot("solo12")
    m = robot.model
    cs = feet(robot, LOCAL)
    q, v, tau = random_states(m, 2, seed=6)
    settings = dict(mu=1e-2, max_iterations=20, accuracy=1e-9)
    data = m.create_data()
    constraint_dynamics(m, data, q, v, tau, cs, **settings)
    assert 2 < data.constraint_iterations.max() < 20
    compare_constraint_dynamics(m, cs, q, v, tau, settings)


# --- Code generation and arguments ---------------------------------------------------

def test_codegen_equals_virtual_machine():
    if symbolic.find_compiler() is None:
        pytest.skip("no C compiler: CasADi code generation is not available")
    model = four_bar()
    cs = ConstraintSet(model, [loop_closure(model, "coupler_tip", "rocker_tip", size=3)])
    twin = symbolic.symbolic_functions(model)
    function = twin.constraint_dynamics(cs, **PROXIMAL)
    compiled = twin.compiled(function)
    assert compiled.name() == function.name() and twin.compiled(function) is compiled
    q, v, tau = random_states(model, 3, seed=7)
    for c, vm in zip(symbolic.evaluate(compiled, q, v, tau),
                     symbolic.evaluate(function, q, v, tau)):
        assert_close(c, vm, 1e-14, "codegen constraint_dynamics")


def test_twin_rejects_bad_arguments():
    model = four_bar()
    twin = symbolic.symbolic_functions(model)
    cs = ConstraintSet(model, [loop_closure(model, "coupler_tip", "rocker_tip", size=3)])
    with pytest.raises(ValueError, match="mu"):
        twin.constraint_dynamics(cs, mu=-1.0)
    with pytest.raises(ValueError, match="max_iterations"):
        twin.constraint_dynamics_derivatives(cs, max_iterations=0)
    with pytest.raises(ValueError, match="restitution"):
        twin.impulse_dynamics(cs, restitution=1.5)
    with pytest.raises(ValueError, match="no constraints"):
        twin.constraint_dynamics([])
    with pytest.raises(ValueError, match="does not belong to model"):
        twin.constraint_dynamics(feet(load_robot("solo12"), LOCAL))
    with pytest.raises(ValueError, match="casadi.Function"):
        twin.compiled("constraint_dynamics")


# --- Contact frames of the robots ----------------------------------------------------

def test_contact_frames_of_the_robots():
    assert load_robot("solo12").contact_frames == tuple(
        (frame, 3) for frame in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"))
    assert load_robot("talos").contact_frames == (("left_sole_link", 6),
                                                  ("right_sole_link", 6))
    hyq = gp.robots.load("hyq")
    assert [frame for frame, _ in hyq.contact_frames] == ["lf_foot", "rf_foot", "lh_foot",
                                                          "rh_foot"]
    assert gp.robots.load("ur5").contact_frames == ()
    robot = gp.robots.Robot(four_bar(), contact_frames={"coupler_tip": 3})
    assert robot.contact_frames == (("coupler_tip", 3),)
    with pytest.raises(ValueError, match="no frame 'nowhere'"):
        robot.contact_frames = [("nowhere", 3)]
    with pytest.raises(ValueError, match="3 .point contact. or 6"):
        robot.contact_frames = [("coupler_tip", 4)]


# --- The harness ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def four_bar_checks():
    """Both constrained functions on the four-bar's 3D closure, every method."""
    model = four_bar()
    cs = [loop_closure(model, "coupler_tip", "rocker_tip", size=3, Kp=3.0, Kd=2.0)]
    return {function: derivative_check.check_derivatives(
                model, function, samples=10, seed=0, progress=False, constraints=cs,
                mu=PROXIMAL["mu"], max_iterations=PROXIMAL["max_iterations"],
                **({"restitution": 0.5} if function == "impulse_dynamics" else {}))
            for function in derivative_check.CONSTRAINED}


@pytest.mark.parametrize("function", derivative_check.CONSTRAINED)
def test_harness_on_the_four_bar(four_bar_checks, function):
    result = four_bar_checks[function]
    partials = derivative_check.PARTIALS[function]
    assert result.partials == partials and result.nv == 3 and result.nc == 3
    assert list(result.methods) == list(derivative_check.METHODS)
    exact = ["analytical", "casadi_ad"] + (
        [] if result.methods["casadi_codegen"].skipped else ["casadi_codegen"])
    for method in exact:
        r = result.methods[method]
        assert r.abs_error.shape == (10, len(partials))
        assert r.max_rel < DERIVATIVE_TOLERANCE, f"{method}: {r.max_rel:.1e}"
    assert result.methods["analytical"].reference == "casadi_ad"
    for method, low, high in (("central", 1e-12, 1e-6), ("forward", 1e-9, 1e-4)):
        r = result.methods[method]
        assert r.reference == "analytical"
        assert low <= r.max_rel <= high, f"{method}: max rel error {r.max_rel:.1e}"
    assert result.methods["central"].median_rel < result.methods["forward"].median_rel
    table = result.table()
    assert "constraints (nc = 3): coupler_tip 3D LOCAL Kp 3 Kd 2" in table
    assert "mu 0.001, 4 iterations" in table


def test_harness_on_the_default_feet():
    """solo12's contact_frames, LOCAL_WORLD_ALIGNED with a damping gain."""
    result = derivative_check.check_derivatives(
        load_robot("solo12"), "constraint_dynamics", samples=3, progress=False,
        methods=("analytical", "central", "casadi_ad"), reference="LOCAL_WORLD_ALIGNED",
        Kd=2.0)
    assert result.nc == 12
    assert result.methods["analytical"].max_rel < DERIVATIVE_TOLERANCE
    assert result.methods["central"].max_rel < 1e-5
    assert "FL_FOOT 3D LOCAL_WORLD_ALIGNED Kp 0 Kd 2" in result.table()


def test_harness_rejects_bad_constraint_arguments():
    model = four_bar()
    closure = [loop_closure(model, "coupler_tip", "rocker_tip", size=3)]
    with pytest.raises(ValueError, match="no default contacts"):
        derivative_check.check_derivatives(model, "constraint_dynamics", samples=1)
    with pytest.raises(ValueError, match="no default contacts"):
        derivative_check.check_derivatives(load_robot("ur5"), "impulse_dynamics", samples=1)
    with pytest.raises(ValueError, match="carry their own"):
        derivative_check.check_derivatives(model, "constraint_dynamics", constraints=closure,
                                           Kp=1.0)
    with pytest.raises(ValueError, match="reference must be one of"):
        derivative_check.check_derivatives(load_robot("solo12"), "constraint_dynamics",
                                           reference="WORLD")
    with pytest.raises(ValueError, match="restitution applies"):
        derivative_check.check_derivatives(model, "constraint_dynamics", constraints=closure,
                                           restitution=0.5)
    with pytest.raises(ValueError, match="apply to"):
        derivative_check.check_derivatives(model, "aba", constraints=closure)


def test_command_line(capsys):
    from geppetto.__main__ import main
    assert main(["check-derivatives", "--robot", "solo12", "--function", "impulse_dynamics",
                 "--samples", "2", "--methods", "analytical", "casadi_ad",
                 "--restitution", "0.5", "--reference", "LOCAL_WORLD_ALIGNED"]) == 0
    out = capsys.readouterr().out
    assert "solo12 (nv = 18): impulse_dynamics derivatives (dv_after_dq" in out
    assert "constraints (nc = 12): FL_FOOT 3D LOCAL_WORLD_ALIGNED" in out
    assert "restitution 0.5" in out
    assert main(["check-derivatives", "--robot", "ur5", "--function", "constraint_dynamics",
                 "--samples", "1"]) == 2
    assert "ur5 has no default contacts" in capsys.readouterr().err
