"""Time to build a model, against the number of links: built-in chain and URDF.

    python -m geppetto.benchmarks.model_build [--sizes 500 1000 5000] [--out DIR]

For each size n: ``robots.chain(n)`` (a serial chain built in code) and
``robots.build_model_from_urdf_string`` on a generated n-link serial chain
URDF (revolute joints, one ``<inertial>`` per link), best of three, in CPU
seconds of this process and wall seconds; then one ``rnea``, ``aba`` and
``crba`` on the n-link model (after a first call that compiles).  Beside it,
``pinocchio.buildModelFromXML`` on the same URDF, in a subprocess because it
crashes (SIGSEGV, recursion in its parser) on long chains: its exit status is
recorded.  Model building was cubic in n before 2026-11-26 (500 links 8.4 s,
1000 links 77 s); it is linear now.  Writes ``results/model_build.json``.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

from geppetto import dynamics, robots
from geppetto.benchmarks import _common

_PIN_WORKER = r'''
import sys, time
sys.path.insert(0, {folder!r})
from geppetto.benchmarks.model_build import chain_urdf
import pinocchio as pin
xml = chain_urdf({n})
c = time.process_time()
pin.buildModelFromXML(xml)
print(time.process_time() - c)
'''


def chain_urdf(n):
    """A serial chain of n revolute joints as a URDF document."""
    inertial = ('<inertial><origin xyz="0 0 0.1"/><mass value="1"/><inertia ixx="0.01" '
                'ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.001"/></inertial>')
    links = [f'<link name="l{k}">{inertial}</link>' for k in range(n + 1)]
    joints = [f'<joint name="j{k}" type="revolute"><parent link="l{k - 1}"/>'
              f'<child link="l{k}"/><origin xyz="0 0 0.2"/><axis xyz="0 1 0"/>'
              '<limit lower="-3" upper="3" effort="10" velocity="5"/></joint>'
              for k in range(1, n + 1)]
    return "\n".join(['<robot name="chain">'] + links + joints + ["</robot>"])


def _best_of(build, repeats=3):
    """(best CPU seconds, best wall seconds, the last result) of ``build()``."""
    cpu, wall = [], []
    for _ in range(repeats):
        c, t = time.process_time(), time.perf_counter()
        out = build()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
    return min(cpu), min(wall), out


def _pinocchio(n):
    """CPU seconds of pin.buildModelFromXML, or the exit status if it failed."""
    folder = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, "-c", _PIN_WORKER.format(folder=folder, n=n)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return {"failed": True, "returncode": run.returncode}
    return {"failed": False, "cpu_s": float(run.stdout.split()[-1])}


def _dynamics_seconds(model):
    data, rng = model.create_data(), np.random.default_rng(0)
    q = dynamics.random_configuration(model, rng)
    v = rng.standard_normal(model.nv)
    calls = {"rnea": lambda: dynamics.rnea(model, data, q, v, v),
             "aba": lambda: dynamics.aba(model, data, q, v, v),
             "crba": lambda: dynamics.crba(model, data, q)}
    out = {}
    for name, call in calls.items():
        call()
        c = time.process_time()
        finite = bool(np.all(np.isfinite(call())))
        out[name] = {"cpu_s": time.process_time() - c, "finite": finite}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    rows, results = [], []
    for n in args.sizes:
        xml = chain_urdf(n)
        chain_cpu, chain_wall, _ = _best_of(lambda: robots.chain(n))
        urdf_cpu, urdf_wall, model = _best_of(lambda: robots.build_model_from_urdf_string(xml))
        pin_result = _pinocchio(n)
        timings = _dynamics_seconds(model)
        results.append(dict(n=n, chain_cpu_s=chain_cpu, chain_wall_s=chain_wall,
                            urdf_cpu_s=urdf_cpu, urdf_wall_s=urdf_wall, pinocchio=pin_result,
                            dynamics=timings))
        pin_text = (f"crashed (exit {pin_result['returncode']})" if pin_result["failed"]
                    else f"{pin_result['cpu_s']:.2f}")
        rows.append([n, f"{chain_cpu:.2f}", f"{chain_wall:.2f}", f"{urdf_cpu:.2f}",
                     f"{urdf_wall:.2f}", pin_text,
                     " ".join(f"{k} {t['cpu_s'] * 1e3:.1f}" for k, t in timings.items())])
    info = _common.machine()
    print(_common.describe_machine(info))
    print(_common.format_table(["links", "chain cpu s", "chain wall s", "URDF cpu s",
                                "URDF wall s", "pin URDF cpu s", "dynamics cpu ms"], rows))
    _common.write_json(os.path.join(args.out, "results", "model_build.json"),
                       {"machine": info, "results": results})


if __name__ == "__main__":
    main()
