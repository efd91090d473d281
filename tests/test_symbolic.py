"""The CasADi twin (dynamics/symbolic.py) and the derivative harness (dynamics/derivative_check.py).

- values: CasADi's RNEA, ABA, CRBA, forward kinematics, frame placements,
  integrate and difference equal the Numba kernels to 1e-12 (scaled by the
  size of the result) on ur5, solo12, talos and random trees with every joint
  type, on a fixed and on a free-flyer root;
- derivatives: CasADi AD of RNEA and ABA (through ``integrate`` for q, so in
  the tangent space) equals the analytical derivatives to 1e-10;
- the harness on a 3-link chain: exact methods agree to 1e-10, finite
  differences land in the band 1e-9 .. 1e-5.

The SX graphs are built once per model for the session (symbolic_functions
caches them); talos's aba_derivatives graph takes a few seconds, so its
states are few.
"""
import functools
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("casadi")

import geppetto as gp                                   # noqa: E402
from conftest import _assert_close as assert_close      # noqa: E402
from geppetto.dynamics import derivative_check, symbolic  # noqa: E402

VALUE_TOLERANCE = 1e-12
DERIVATIVE_TOLERANCE = 1e-10
MODELS = ("ur5", "solo12", "talos", "random_tree", "random_tree_ff")
BUILTIN = {
    # every joint type but the free-flyer (revolute, unbounded revolute,
    # prismatic, spherical, planar, translation), unaligned axes
    "random_tree": lambda: gp.robots.random_tree(12, seed=3),
    "random_tree_ff": lambda: gp.robots.random_tree(9, seed=11, root_joint="free-flyer",
                                                    armature=True),
}


@functools.lru_cache(maxsize=None)
def load_model(name):
    return BUILTIN[name]() if name in BUILTIN else gp.robots.load(name).model


def random_states(model, n, seed):
    rng = np.random.default_rng(seed)
    q = gp.dynamics.random_configuration(model, rng, size=n)
    q1 = gp.dynamics.random_configuration(model, rng, size=n)
    v, a = rng.standard_normal((n, model.nv)), rng.standard_normal((n, model.nv))
    return q, q1, v, a


def test_every_joint_type_is_covered():
    types = {int(t) for name in BUILTIN for t in load_model(name).joint_types[1:]}
    assert types == set(gp.dynamics.model.JOINT_NQ)


@pytest.mark.parametrize("name", MODELS)
def test_values_equal_numba(name):
    model = load_model(name)
    data = model.create_data()
    twin = symbolic.symbolic_functions(model)
    q, q1, v, a = random_states(model, 4, seed=1)
    for function, args, numba in (
            ("rnea", (q, v, a), gp.dynamics.rnea(model, data, q, v, a)),
            ("aba", (q, v, a), gp.dynamics.aba(model, data, q, v, a)),
            ("crba", (q,), gp.dynamics.crba(model, data, q)),
            ("integrate", (q, v), gp.dynamics.integrate(model, q, v)),
            ("integrate", (q, 1e-7 * v), gp.dynamics.integrate(model, q, 1e-7 * v)),
            ("difference", (q, q1), gp.dynamics.difference(model, q, q1))):
        (ours,) = symbolic.evaluate(getattr(twin, function), *args)
        assert_close(ours, numba, VALUE_TOLERANCE, f"{name} {function}")
    gp.dynamics.forward_kinematics(model, data, q)
    oR, op = symbolic.evaluate(twin.forward_kinematics, q)
    assert_close(oR.reshape(4, model.njoints, 3, 3), data.oR[:4], VALUE_TOLERANCE, f"{name} oR")
    assert_close(op, data.op[:4], VALUE_TOLERANCE, f"{name} op")
    frame = model.nframes - 1
    R, p = symbolic.evaluate(twin.frame_placement(frame), q[:1])
    gp.dynamics.forward_kinematics(model, data, q[0])
    numba_R, numba_p = gp.dynamics.frame_placement(model, data, frame)
    assert_close(R[0], numba_R, VALUE_TOLERANCE, f"{name} frame R")
    assert_close(p[0], numba_p, VALUE_TOLERANCE, f"{name} frame p")


@pytest.mark.parametrize("name", ("random_tree", "random_tree_ff"))
def test_lie_group_identities_at_small_and_zero_steps(name):
    model = load_model(name)
    twin = symbolic.symbolic_functions(model)
    q, _, v, _ = random_states(model, 3, seed=2)
    (same,) = symbolic.evaluate(twin.difference, q, q)
    assert np.all(np.isfinite(same)) and np.max(np.abs(same)) < 1e-14
    for scale in (1e-9, 1e-3, 0.5):
        (q_next,) = symbolic.evaluate(twin.integrate, q, scale * v)
        (back,) = symbolic.evaluate(twin.difference, q, q_next)
        # 1 - cos(th) of planar and free-flyer steps costs digits at small angles
        assert_close(back, scale * v, 1e-10, f"{name} difference(q, integrate(q, {scale} v))")


@pytest.mark.parametrize("name", ("ur5", "solo12", "talos", "random_tree_ff", "random_tree"))
def test_ad_jacobians_equal_analytical(name):
    model = load_model(name)
    data = model.create_data()
    twin = symbolic.symbolic_functions(model)
    q, _, v, a = random_states(model, 2, seed=3)
    for function, analytical in (("rnea", gp.dynamics.rnea_derivatives),
                                 ("aba", gp.dynamics.aba_derivatives)):
        ours = symbolic.evaluate(getattr(twin, f"{function}_derivatives"), q, v, a)
        for label, x, y in zip(derivative_check.PARTIALS[function], ours,
                               analytical(model, data, q, v, a)):
            assert_close(x, y, DERIVATIVE_TOLERANCE, f"{name} {label}")


def test_codegen_equals_virtual_machine():
    if symbolic.find_compiler() is None:
        pytest.skip("no C compiler: CasADi code generation is not available")
    model = load_model("random_tree_ff")
    twin = symbolic.symbolic_functions(model)
    q, _, v, a = random_states(model, 3, seed=4)
    compiled = twin.compiled("rnea")
    assert compiled.name() == "rnea" and compiled is twin.compiled("rnea")
    (vm,) = symbolic.evaluate(twin.rnea, q, v, a)
    (c,) = symbolic.evaluate(compiled, q, v, a)
    assert_close(c, vm, 1e-14, "codegen rnea")


@pytest.fixture(scope="module")
def chain_checks():
    model = gp.robots.chain(3)
    return {function: derivative_check.check_derivatives(model, function, samples=20, seed=0,
                                                         progress=False)
            for function in ("rnea", "aba")}


@pytest.mark.parametrize("function", ("rnea", "aba"))
def test_harness_on_a_chain(chain_checks, function):
    result = chain_checks[function]
    assert result.nv == 3 and result.samples == 20
    assert result.partials == derivative_check.PARTIALS[function]
    assert list(result.methods) == list(derivative_check.METHODS)
    exact = ["analytical", "casadi_ad"] + (
        [] if result.methods["casadi_codegen"].skipped else ["casadi_codegen"])
    for method in exact:
        r = result.methods[method]
        assert r.abs_error.shape == (20, 3)
        assert r.max_rel < DERIVATIVE_TOLERANCE, f"{method}: {r.max_rel:.1e}"
    assert result.methods["analytical"].reference == "casadi_ad"
    # finite differences reach about two thirds (central) or half (forward) of the
    # digits; the largest entrywise relative error of 20 states sits on small entries
    # (forward on aba: 6e-6 and 1.4e-5 with two round-off-equivalent ABA kernels)
    for method, largest in (("central", 1e-6), ("forward", 1e-4)):
        r = result.methods[method]
        assert r.reference == "analytical"
        assert 1e-10 <= r.max_rel <= largest, f"{method}: max rel error {r.max_rel:.1e}"
    assert result.methods["central"].median_rel < result.methods["forward"].median_rel
    for r in result.methods.values():
        assert r.skipped or (r.seconds_per_evaluation > 0 and np.isfinite(r.setup_seconds))
    table = result.table()
    for method in derivative_check.METHODS:
        assert method in table
    assert result.fastest()[0] in derivative_check.METHODS


def test_harness_skips_codegen_without_a_compiler(monkeypatch):
    monkeypatch.setattr(symbolic, "find_compiler", lambda: None)
    result = derivative_check.check_derivatives(
        gp.robots.chain(2), "rnea", samples=2,
        methods=("analytical", "casadi_codegen"), progress=False)
    skipped = result.methods["casadi_codegen"].skipped
    assert skipped and "no C compiler" in skipped
    assert "skipped: no C compiler" in result.table()
    assert result.methods["analytical"].reference == "analytical"


def test_harness_rejects_bad_arguments():
    model = gp.robots.chain(2)
    with pytest.raises(ValueError, match="function"):
        derivative_check.check_derivatives(model, "crba")
    with pytest.raises(ValueError, match="unknown methods"):
        derivative_check.check_derivatives(model, "rnea", methods=("autodiff",))
    with pytest.raises(ValueError, match="samples"):
        derivative_check.check_derivatives(model, "rnea", samples=0)


def test_command_line(capsys):
    from geppetto.__main__ import main
    assert main(["check-derivatives", "--robot", "ur5", "--function", "aba", "--samples", "2",
                 "--methods", "analytical", "central", "casadi_ad"]) == 0
    out = capsys.readouterr().out
    assert "ur5 (nv = 6): aba derivatives" in out
    for method in ("analytical", "central", "casadi_ad"):
        assert method in out


def test_import_geppetto_does_not_import_casadi():
    code = "import sys, geppetto; assert 'casadi' not in sys.modules, 'casadi imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
