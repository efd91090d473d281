"""The `geppetto` command: every subcommand has --help, the demo (the README's
main job) solves Panda reaching and writes its files, bench runs a benchmark."""
import contextlib
import io
import os
import subprocess
import sys

import numba
import pytest

import geppetto

from geppetto.__main__ import (HELPER_STAGES, MAIN_JOB_STAGES, available_benchmarks,
                               compile_main_job, main)
from geppetto.examples._common import CompileProgress


@pytest.mark.parametrize("command", ["demo", "dynamics", "check-derivatives", "bench"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: geppetto {command}" in capsys.readouterr().out


def test_top_level_help_lists_the_commands_and_the_demo_options(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("demo", "dynamics", "check-derivatives", "bench"):
        assert command in out
    assert "--out DIR" in out and "--live" in out      # the default command's options


def test_compile_progress_speaks_only_when_numba_compiles():
    stream = io.StringIO()
    progress = CompileProgress(["a new kernel", "the same kernel again"], stream=stream)
    increment = numba.njit(lambda x: x + 1)            # not compiled yet, not cached
    with progress.stage(0):
        assert increment(1) == 2
    with progress.stage(1):
        assert increment(2) == 3                        # compiled: nothing to say
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("compiling the kernels (first run only")
    assert lines[1] == "  [1/2] a new kernel: compiling ..."
    assert lines[2].startswith("  [1/2] a new kernel: 1 kernels compiled in ")
    assert len(lines) == 3 and progress.compiled == [1, 0]


def test_a_warm_cache_prints_no_compile_progress():
    """Once the main job's kernels are in Numba's cache, a fresh interpreter loads
    them (no numba:compile event) and the progress display stays silent."""
    compile_main_job(CompileProgress(MAIN_JOB_STAGES, stream=io.StringIO()))   # fills the cache
    root = os.path.dirname(os.path.dirname(geppetto.__file__))
    script = ("import sys; from geppetto.__main__ import MAIN_JOB_STAGES, compile_main_job; "
              "from geppetto.examples._common import CompileProgress; "
              "p = CompileProgress(MAIN_JOB_STAGES); compile_main_job(p); "
              "print('compiled', p.compiled)")
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    finished = subprocess.run([sys.executable, "-c", script], env=environment,
                              capture_output=True, text=True, timeout=600, check=True)
    assert finished.stdout == f"compiled {[0] * len(MAIN_JOB_STAGES)}\n"


class ColdStart(CompileProgress):
    """Reports stage 0 as compiled, as on a cold cache, so that compile_main_job
    starts its second process."""

    @contextlib.contextmanager
    def stage(self, index):
        with super().stage(index):
            yield self
        self.compiled[0] = max(self.compiled[0], 1)


def test_a_cold_start_compiles_the_derivatives_in_a_second_process():
    stream = io.StringIO()
    compile_main_job(ColdStart(MAIN_JOB_STAGES, stream=stream))
    lines = stream.getvalue().splitlines()
    assert not any("failed" in line for line in lines), lines
    for n in HELPER_STAGES:
        prefix = f"  [{n + 1}/{len(MAIN_JOB_STAGES)}] {MAIN_JOB_STAGES[n]}: "
        assert prefix + "compiling in a second process" in lines
        assert any(line.startswith(prefix + "compiled by the second process (waited ")
                   for line in lines)


def test_demo_solves_and_writes_its_files(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["--out", str(out)]) == 0                # demo is the default command
    printed = capsys.readouterr().out
    assert "iter" in printed and "converged" in printed  # the iteration table
    files = set(os.listdir(out))
    assert {"panda_reaching.html", "joints.png", "hand_path.png", "convergence.png"} <= files
    for name in files:                                   # and lists every file it wrote
        assert str(out / name) in printed


def test_bench_runs_the_mpc_benchmark(tmp_path, capfd):
    assert "mpc" in available_benchmarks()
    assert main(["bench", "--only", "mpc", "--", "--duration", "0.1", "--no-crocoddyl",
                 "--out", str(tmp_path)]) == 0
    out = capfd.readouterr().out
    assert "geppetto FDDP iteration (cpu)" in out and "Crocoddyl: skipped" in out
    assert {"mpc.json", "mpc.png"} <= set(os.listdir(tmp_path))
