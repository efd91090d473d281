"""benchmarks/render_readme.py on small synthetic JSON files: the tables' figures,
the stamp, and the README markers (--write replaces, --check compares)."""
import json

import pytest

from geppetto.benchmarks import render_readme

MACHINE = dict(cpu="AMD EPYC", usable_cores=2, python="3.11.7", numpy="2.4.6",
               numba="0.68.1", numba_threads=1, load_average_1min=1.25, commit="abc1234",
               date="2026-11-26T09:00:00")


def _timing(best):
    return dict(best=best, median=best * 1.1)


DYNAMICS = dict(machine=MACHINE, timings=[
    dict(robot="ur5", nv=6, function="rnea", batch_us=_timing(1.2), pin_python_us=_timing(2.4),
         cpp_us=_timing(0.8), max_abs_diff_vs_pin=2.1e-14),
    dict(robot="ur5", nv=6, function="compute_minverse", batch_us=_timing(3.0),
         pin_python_us=None, cpp_us=None, max_abs_diff_vs_pin=None)])

LANES = dict(machine=dict(MACHINE, commit=None), rows=[
    dict(robot="solo12", nv=18, function="aba", stack_us=5.0, batch_us=1.5, lanes_us=1.25,
         cpp_us=4.0, max_rel_diff_vs_pin=3e-15,
         stack_over_cpp=dict(median=1.25, min=1.2, max=1.3),
         batch_over_cpp=dict(median=0.375, min=0.36, max=0.4),
         lanes_over_cpp=dict(median=0.3125, min=0.3, max=0.33))],
    asm={"_aba_forward_pass_1_lanes": dict(zmm=120, ymm=0, xmm=3, scalar_sd=40)})


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "dynamics.json").write_text(json.dumps(DYNAMICS))
    (folder / "lanes.json").write_text(json.dumps(LANES))
    return folder


def _rows(text):
    """The table's body rows as lists of cells."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


def test_dynamics_table(results):
    text = render_readme.render("dynamics", str(results))
    assert text.startswith("Rendered from `benchmarks/results/dynamics.json`; commit abc1234; "
                           "AMD EPYC, 2 cores;")
    assert "NUMBA_NUM_THREADS=1" in text and "load average 1.2 at the start" in text
    assert _rows(text) == [
        ["ur5", "6", "rnea", "1.20", "2.40", "0.50", "0.80", "1.50", "2e-14"],
        ["ur5", "6", "minv", "3.00", "-", "-", "-", "-", "-"]]


def test_lanes_tables(results):
    text = render_readme.render("lanes", str(results))
    assert "commit not recorded" in text
    assert _rows(text) == [["solo12", "18", "aba", "5.00", "1.50", "1.25", "4.00",
                            "1.25 (1.20-1.30)", "0.38 (0.36-0.40)", "0.31 (0.30-0.33)",
                            "3e-15"]]
    assert _rows(render_readme.render("lanes_asm", str(results))) == [
        ["`_aba_forward_pass_1_lanes`", "120", "0", "3", "40"]]


def test_call_overhead_table(results):
    payload = dict(machine=MACHINE, rows=[dict(robot="ur5", function="rnea", kernel_us=1.25,
                                               python_us=4.5, overhead_us=3.25)])
    (results / "call_overhead.json").write_text(json.dumps(payload))
    assert _rows(render_readme.render("call_overhead", str(results))) == [
        ["ur5", "rnea", "1.25", "4.50", "3.25"]]


def test_contacts_tables(results):
    payload = dict(machine=MACHINE, timings=[
        dict(robot="solo12", nv=18, nc=12, function="dynamics", batch_us=8.0, python_us=12.0,
             pin_us=20.0, cpp_us=10.0, max_abs_diff_vs_pin=3e-10),
        dict(robot="talos", nv=38, nc=12, function="derivatives", batch_us=50.0,
             python_us=70.0, pin_us=99.0, cpp_us=80.0, lanes_us=40.0,
             batch_over_cpp=dict(median=0.625, min=0.6, max=0.65),
             lanes_over_cpp=dict(median=0.5, min=0.45, max=0.55), max_abs_diff_vs_pin=2e-10)],
        trot=[dict(solver="geppetto FDDP", knots=56, guess_cost=797147.5727, cost=1306.8581,
                   iterations=20, converged=True, stop=4.3e-10, seconds=0.41,
                   ms_per_iteration=20.5)])
    (results / "contacts.json").write_text(json.dumps(payload))
    assert _rows(render_readme.render("contacts", str(results))) == [
        ["solo12 (12 constraint rows)", "dynamics", "8.00", "-", "12.00", "20.00", "10.00",
         "0.80", "-", "3e-10"],
        ["talos (12 constraint rows)", "derivatives", "50.00", "40.00", "70.00", "99.00",
         "80.00", "0.62 (0.60-0.65)", "0.50 (0.45-0.55)", "2e-10"]]
    assert _rows(render_readme.render("contacts_trot", str(results))) == [
        ["geppetto FDDP", "56", "797147.5727", "1306.8581", "20", "yes", "4e-10", "0.41",
         "20.5"]]


def test_missing_json_renders_nothing(results):
    assert render_readme.render("mpc", str(results)) is None


README = """# geppetto

## Speed
<!-- table:dynamics -->
an old table
<!-- /table:dynamics -->

Prose that stays.
<!-- table:lanes -->
<!-- /table:lanes -->
"""


def test_write_then_check(results, tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    arguments = ["--results", str(results), "--readme", str(readme)]
    assert render_readme.main(arguments + ["--check"]) == 1
    assert "table dynamics differs" in capsys.readouterr().out
    assert render_readme.main(arguments + ["--write"]) == 0
    text = readme.read_text()
    assert "an old table" not in text and "Prose that stays." in text
    assert text.count("<!-- table:dynamics -->") == 1 and text.count("<!-- /table:lanes -->") == 1
    assert render_readme.render("dynamics", str(results)) + "\n<!-- /table:dynamics -->" in text
    assert render_readme.main(arguments + ["--check"]) == 0
    # a figure changes in the JSON: --check sees it, only in that table
    changed = dict(DYNAMICS, timings=[dict(DYNAMICS["timings"][0], batch_us=_timing(1.1))])
    (results / "dynamics.json").write_text(json.dumps(changed))
    capsys.readouterr()
    assert render_readme.main(arguments + ["--check"]) == 1
    assert capsys.readouterr().out.strip() == "table dynamics differs from dynamics.json"


def test_tables_without_markers_are_left_alone(results):
    rendered = {"dynamics": render_readme.render("dynamics", str(results))}
    text, replaced = render_readme.replace_tables("no markers here\n", rendered)
    assert text == "no markers here\n" and replaced == []
