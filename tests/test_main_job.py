"""The `geppetto` command: every subcommand has --help, the demo (the README's
main job) solves Panda reaching and writes its files, bench runs a benchmark."""
import os

import pytest

from geppetto.__main__ import available_benchmarks, main


@pytest.mark.parametrize("command", ["demo", "dynamics", "check-derivatives", "bench"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: geppetto {command}" in capsys.readouterr().out


def test_top_level_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("demo", "dynamics", "check-derivatives", "bench"):
        assert command in out


def test_demo_solves_and_writes_its_files(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["--out", str(out)]) == 0                # demo is the default command
    printed = capsys.readouterr().out
    assert "iter" in printed and "converged" in printed  # the iteration table
    files = set(os.listdir(out))
    assert {"panda_reaching.html", "joints.png", "hand_path.png", "convergence.png"} <= files
    assert str(out) in printed                           # it says where they are


def test_bench_runs_the_mpc_benchmark(tmp_path, capfd):
    assert "mpc" in available_benchmarks()
    assert main(["bench", "--only", "mpc", "--", "--duration", "0.1", "--no-crocoddyl",
                 "--out", str(tmp_path)]) == 0
    out = capfd.readouterr().out
    assert "geppetto FDDP iteration (cpu)" in out and "Crocoddyl: skipped" in out
    assert {"mpc.json", "mpc.png"} <= set(os.listdir(tmp_path))
