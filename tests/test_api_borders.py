"""Bad input at the public borders the dynamics fuzz tests do not reach: the MPC
plant and loop, the model builder, the OCP constructors.  Each case was found by a
subprocess fuzz pass (round 35) with an outcome other than a ValueError naming the
argument: a segfault or abort (a 2-D or integer state into the compiled plant), a
read past the end of an array (a short state, a frame on a joint that does not
exist, a (2,) gravity), a silently accepted wrong value (NaN damping, a non-rotation
placement), or an AttributeError/TypeError/IndexError from inside.  Cheap: ur5 and
two-joint models, no solve longer than a few FDDP iterations."""
import numpy as np
import pytest

import geppetto as gp
import geppetto.dynamics as gd
import geppetto.ocp as go
from geppetto.solvers import FDDP, MPC, Push, Simulator, run_mpc


@pytest.fixture(scope="module")
def ur5():
    robot = gp.robots.load("ur5")
    return robot.model, np.concatenate([robot.q0, np.zeros(robot.model.nv)])


def _problem(model, x0, knots=3):
    dynamics = go.FreeDynamics(model)
    costs = [go.Cost(go.StateResidual(dynamics.state, x0), weight=1e-2),
             go.Cost(go.ControlResidual(dynamics.nu), weight=1e-4)]
    terminal = go.TerminalModel(dynamics.state, [go.Cost(go.StateResidual(dynamics.state, x0))])
    return go.ShootingProblem(x0, [go.StageModel(dynamics, costs)] * knots, terminal)


# ------------------------------------------------------------------ the MPC plant
@pytest.mark.parametrize("label, x, match", [
    ("one row of a stack (aborted)", lambda x0: x0[None, :], r"x: expected shape \(12,\)"),
    ("too short (read past its end)", lambda x0: x0[:5], r"x: expected shape \(12,\)"),
    ("NaN (NaN out)", lambda x0: np.full(12, np.nan), "x: contains NaN"),
    ("complex (Numba typing error)", lambda x0: x0 + 0j, "x: expected real numbers"),
    ("None (Numba typing error)", lambda x0: None, "x: expected real numbers"),
])
def test_simulator_step_refuses_a_bad_state(ur5, label, x, match):
    model, x0 = ur5
    with pytest.raises(ValueError, match=match):
        Simulator(model).step(x(x0), np.zeros(model.nv), 0.01)


def test_simulator_step_takes_an_integer_state_as_floats(ur5):
    """An int64 state segfaulted the plant; it is now read as float64."""
    model, _ = ur5
    plant = Simulator(model)
    x_int = np.zeros(model.nq + model.nv, dtype=np.int64)
    np.testing.assert_array_equal(plant.step(x_int, np.zeros(model.nv), 0.01),
                                  plant.step(x_int.astype(float), np.zeros(model.nv), 0.01))


@pytest.mark.parametrize("label, kwargs, match", [
    ("dt 0 (ZeroDivisionError)", {"dt": 0.0}, "dt: expected a finite number > 0"),
    ("dt NaN", {"dt": np.nan}, "dt: expected a finite number > 0"),
    ("dt None (TypeError)", {"dt": None}, "dt: expected a real number"),
    ("damping (1, nv) (Numba typing error)", {"damping": np.zeros((1, 6))},
     r"damping: expected shape \(6,\)"),
    ("damping NaN (NaN out)", {"damping": np.full(6, np.nan)}, "damping: contains NaN"),
    ("actuation of 3 rows (read past B's end)",
     {"actuation": go.Actuation(np.ones((3, 6)))}, "actuation: expected an Actuation of 6"),
    ("push on joint 99 (IndexError)", {"pushes": [Push(99, (1.0, 0.0, 0.0), 0.0, 1.0)]},
     r"pushes\[0\].joint: joint id 99 out of range"),
    ("push of a 2-vector", {"pushes": [Push(3, (1.0, 0.0), 0.0, 1.0)]},
     r"pushes\[0\].force: expected shape \(3,\)"),
    ("push not a Push (AttributeError)", {"pushes": ["push"]}, r"pushes\[0\]: expected a Push"),
])
def test_simulator_refuses_bad_settings(ur5, label, kwargs, match):
    model, _ = ur5
    with pytest.raises(ValueError, match=match):
        Simulator(model, **kwargs)


@pytest.mark.parametrize("duration, match", [
    (-0.01, "duration: expected a finite number >= 0"),    # was integrated backwards
    (np.inf, "duration: expected a finite number"),        # OverflowError
    (None, "duration: expected a real number"),            # TypeError
])
def test_simulator_step_refuses_a_bad_duration(ur5, duration, match):
    model, x0 = ur5
    with pytest.raises(ValueError, match=match):
        Simulator(model).step(x0, np.zeros(model.nv), duration)


def test_simulator_results_on_valid_input_are_unchanged_by_the_checks(ur5):
    """A push given by joint name is the push on that joint's id."""
    model, x0 = ur5
    u = np.linspace(-1.0, 1.0, model.nv)
    by_id = Simulator(model, pushes=[Push(3, (1.0, 0.0, 0.0), 0.0, 1.0)])
    by_name = Simulator(model, pushes=[Push(model.names[3], [1, 0, 0], 0, 1)])
    np.testing.assert_array_equal(by_id.step(x0, u, 0.01), by_name.step(list(x0), list(u), 0.01))


def test_mpc_refuses_what_is_not_its_problem(ur5):
    model, x0 = ur5
    with pytest.raises(ValueError, match="problem: expected a ShootingProblem"):
        MPC(None)                                              # AttributeError deep in DDP
    with pytest.raises(ValueError, match="solver: expected a solver class or a solver built"):
        MPC(_problem(model, x0), solver=FDDP(_problem(model, x0, knots=5)))   # broadcast error
    with pytest.raises(ValueError, match="update_references: expected a callable"):
        MPC(_problem(model, x0), update_references=3)          # TypeError at the first step


@pytest.mark.parametrize("dt_control, match", [(0.0, "dt_control: expected a finite number > 0"),
                                              (np.nan, "dt_control: expected a finite number")])
def test_run_mpc_refuses_a_bad_control_period(ur5, dt_control, match):
    model, x0 = ur5
    with pytest.raises(ValueError, match=match):
        run_mpc(MPC(_problem(model, x0)), Simulator(model), x0, 0.05, dt_control, progress=False)


# ------------------------------------------------------------------ the model builder
def _builder_with_joint():
    builder = gd.ModelBuilder()
    joint = builder.add_joint(0, "revolute", "j", axis=(0, 0, 1))
    return builder, joint


@pytest.mark.parametrize("label, call, match", [
    ("frame on a missing joint (read past the joints)",
     lambda b, j: b.add_frame("f", 7), "joint: index 7 out of range"),
    ("frame on joint -1", lambda b, j: b.add_frame("f", -1), "joint: index -1 out of range"),
    ("frame of a missing parent frame", lambda b, j: b.add_frame("f", j, parent_frame=9),
     "parent_frame: index 9 out of range"),
    ("frame of an unknown type", lambda b, j: b.add_frame("f", j, frame_type=77),
     "frame_type: unknown frame type 77"),
    ("inertia on a missing joint (IndexError)", lambda b, j: b.append_body_inertia(7, 1.0),
     "joint: index 7 out of range"),
    ("negative mass", lambda b, j: b.append_body_inertia(j, -1.0), "mass: expected a value >= 0"),
    ("NaN mass", lambda b, j: b.append_body_inertia(j, np.nan), "mass: contains NaN"),
    ("com of 2 (IndexError)", lambda b, j: b.append_body_inertia(j, 1.0, com=(0, 0)),
     r"com: expected shape \(3,\)"),
    ("NaN inertia", lambda b, j: b.append_body_inertia(j, 1.0, inertia_at_com=np.full((3, 3), np.nan)),
     "inertia_at_com: contains NaN"),
    ("joint placement not a rotation",
     lambda b, j: b.add_joint(j, "revolute", "k", R=np.ones((3, 3)), axis=(0, 0, 1)),
     "R: not a rotation matrix"),
    ("joint placement of NaN",
     lambda b, j: b.add_joint(j, "revolute", "k", p=(np.nan, 0, 0), axis=(0, 0, 1)),
     "p: contains NaN"),
    ("parent None (TypeError)", lambda b, j: b.add_joint(None, "revolute", "k", axis=(0, 0, 1)),
     "parent joint None does not exist"),
    ("joint name None", lambda b, j: b.add_joint(j, "revolute", None, axis=(0, 0, 1)),
     "name: expected a str"),
    ("unknown type name (KeyError)", lambda b, j: b.add_joint(j, "screw", "k", axis=(0, 0, 1)),
     "unknown joint type 'screw'"),
])
def test_model_builder_refuses_bad_arguments(label, call, match):
    builder, joint = _builder_with_joint()
    with pytest.raises(ValueError, match=match):
        call(builder, joint)


@pytest.mark.parametrize("gravity, match", [((0.0, 0.0), r"gravity: expected shape \(3,\)"),
                                            ((0.0, 0.0, np.nan), "gravity: contains NaN")])
def test_model_builder_refuses_a_bad_gravity(gravity, match):
    with pytest.raises(ValueError, match=match):
        gd.ModelBuilder(gravity=gravity)


def test_urdf_of_no_text_is_a_urdf_error():
    with pytest.raises(gp.robots.URDFError, match="expected the XML text"):
        gp.robots.build_model_from_urdf_string(None)            # TypeError in ElementTree


# ------------------------------------------------------------------ OCP constructors
@pytest.mark.parametrize("label, build, match", [
    ("damping NaN (NaN dynamics)", lambda m: go.FreeDynamics(m, damping=np.full(6, np.nan)),
     "damping: contains NaN"),
    ("damping (1, nv)", lambda m: go.FreeDynamics(m, damping=np.zeros((1, 6))),
     r"damping: expected shape \(6,\)"),
    ("armature complex", lambda m: go.FreeDynamics(m, armature=np.ones(6) + 1j),
     "armature: expected real numbers"),
    ("actuation NaN", lambda m: go.FreeDynamics(m, go.Actuation(np.full((6, 6), np.nan))),
     "actuation matrix B: contains NaN"),
    ("model None (AttributeError)", lambda m: go.FreeDynamics(None),
     "model: expected a dynamics Model"),
    ("terminal model of None (AttributeError)", lambda m: go.TerminalModel(None),
     "model: expected a dynamics Model"),
    ("stage of a model, not dynamics", lambda m: go.StageModel(m),
     "dynamics: expected FreeDynamics"),
    ("costs None (TypeError)", lambda m: go.StageModel(go.FreeDynamics(m), None),
     "costs: expected a list of terms"),
    ("one Cost for the list", lambda m: go.StageModel(go.FreeDynamics(m), go.Cost(go.ControlResidual(6))),
     "costs: expected a list of terms"),
    ("a residual for a cost (AttributeError)",
     lambda m: go.StageModel(go.FreeDynamics(m), [go.ControlResidual(6)]),
     r"costs\[0\]: expected a Cost"),
    ("None among the constraints", lambda m: go.StageModel(go.FreeDynamics(m), constraints=[None]),
     r"constraints\[0\]: expected a Constraint"),
    ("dt None (TypeError)", lambda m: go.StageModel(go.FreeDynamics(m), dt=None),
     "dt must be a positive number, got None"),
    ("weight None (TypeError)", lambda m: go.Cost(go.ControlResidual(6), weight=None),
     "weight: expected a real number"),
    ("weight a vector (TypeError)", lambda m: go.Cost(go.ControlResidual(6), weight=np.ones(3)),
     "weight: expected a real number"),
    ("eps NaN (accepted)", lambda m: go.Smooth1Norm(np.nan), "eps: expected a finite number > 0"),
    ("control size 2.5 (truncated)", lambda m: go.ControlResidual(2.5), "nu: expected an integer"),
    ("control size None (TypeError)", lambda m: go.ControlResidual(None), "nu: expected an integer"),
    ("state of size 0", lambda m: go.StateVector(0), "nx: expected an integer >= 1"),
    ("more positions than coordinates", lambda m: go.StateVector(4, 6),
     "nq: expected at most nx = 4"),
])
def test_ocp_constructors_refuse_bad_arguments(ur5, label, build, match):
    model, _ = ur5
    with pytest.raises(ValueError, match=match):
        build(model)


def test_nthreads_and_the_solvers_problem_are_checked(ur5):
    """nthreads 2.5 was truncated to 2 and "2" parsed; FDDP(None) or FDDP(stage) raised
    an AttributeError from inside (fz35's findings, mended by the lead)."""
    problem = _problem(*ur5)
    for value in (2.5, "2", None, 0, True):
        with pytest.raises(ValueError, match="nthreads"):
            problem.nthreads = value
    problem.nthreads = 2
    assert problem.nthreads == 2
    problem.nthreads = 1
    for value in (None, "problem", problem.running_models[0]):
        with pytest.raises(ValueError, match="problem"):
            FDDP(value)
