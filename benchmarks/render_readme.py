"""The README's speed tables, rendered from the benchmarks' JSON.

    python -m geppetto.benchmarks.render_readme [--results DIR] [--readme PATH]
                                                [--tables NAME ...] [--write | --check]

Every table has a name (``TABLES``) and reads one JSON file that a benchmark
wrote into ``benchmarks/results/``.  In README.md a table sits between two
marker comments::

    <!-- table:dynamics -->
    ...
    <!-- /table:dynamics -->

The rendered text is a stamp line (the JSON file, the commit, the machine, the
date and the load average the benchmark recorded) and a Markdown table.  With
no option the tables are printed; ``--write`` replaces the text between each
pair of markers found in the README (tables without markers, or without their
JSON, are left as they are and listed); ``--check`` changes nothing and exits
with status 1 when a marked table differs from its rendering (a JSON file that
is missing is reported, not counted as a difference).

Tables and their JSON (the benchmark that writes it):

====================  ===================  =====================================
name                  JSON                 benchmark
====================  ===================  =====================================
dynamics              dynamics.json        benchmarks/dynamics.py
dynamics_compile      dynamics.json        (its first-call latencies)
derivatives           derivatives.json     benchmarks/derivatives.py (Table I)
derivatives_cpp       derivatives.json     (ours beside Pinocchio's C++)
lanes                 lanes.json           benchmarks/lanes.py
lanes_asm             lanes.json           (packed / scalar instruction counts)
ocp                   ocp.json             benchmarks/ocp.py
solvers               solvers.json         benchmarks/solvers.py
solvers_untuned       solvers_untuned.json (its ``--problems untuned --name solvers_untuned``)
solvers_untuned2      solvers_untuned2.json (its ``--problems untuned2 --name solvers_untuned2``)
solvers_untuned3      solvers_untuned3.json (its ``--problems untuned3 --name solvers_untuned3``)
mpc                   mpc.json             benchmarks/mpc.py
constrained           constrained.json     benchmarks/constrained.py
constrained_csqp      constrained.json     (ALDDP beside mim_solvers' CSQP)
====================  ===================  =====================================

The stamp names the commit that ``_common.machine`` recorded (``commit``, with
``+dirty`` when the working tree had changes); JSON written before it recorded
one says "commit not recorded".
"""
import argparse
import json
import math
import os
import re
import sys

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


# --- formatting ------------------------------------------------------------------------

def number(value, digits=2):
    """``value`` with ``digits`` decimals; "-" for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def ratio(numerator, denominator, digits=2):
    if numerator is None or denominator is None or denominator == 0:
        return "-"
    return number(numerator / denominator, digits)


def exponent(value):
    """A difference or violation as 1e-12; "-" for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.0e}"


def markdown(headers, rows):
    """A Markdown table: the first column left-aligned, the others right-aligned."""
    lines = ["| " + " | ".join(str(h) for h in headers) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def stamp(file_name, payload):
    """The line above a table: where its figures come from."""
    info = payload.get("machine") or {}
    commit = info.get("commit")
    load = info.get("load_average_1min")
    parts = [f"`benchmarks/results/{file_name}`",
             f"commit {commit}" if commit else "commit not recorded"]
    if info.get("cpu"):
        cores = info.get("usable_cores")
        parts.append(f"{info['cpu']}" + (f", {cores} cores" if cores else ""))
    versions = [f"{name} {info[name]}" for name in ("python", "numpy", "numba", "pinocchio")
                if info.get(name)]
    if versions:
        parts.append(", ".join(versions))
    if info.get("numba_threads") is not None:
        parts.append(f"NUMBA_NUM_THREADS={info['numba_threads']}")
    if info.get("date"):
        parts.append(info["date"])
    if load is not None:
        parts.append(f"load average {load:.1f} at the start")
    return "Rendered from " + "; ".join(parts) + "."


# --- one function per table: payload -> (headers, rows) ------------------------------

SHORT = {"rnea": "rnea", "aba": "aba", "crba": "crba", "compute_minverse": "minv"}


def _best(entry, statistic="best"):
    return None if entry is None else entry[statistic]


def dynamics(payload):
    headers = ["robot", "nv", "function", "batch us", "pin Python us", "batch / pin",
               "C++ us", "batch / C++", "max abs diff"]
    rows = []
    for row in payload["timings"]:
        batch, pin, cpp = _best(row["batch_us"]), _best(row["pin_python_us"]), _best(row["cpp_us"])
        rows.append([row["robot"], row["nv"], SHORT.get(row["function"], row["function"]),
                     number(batch), number(pin), ratio(batch, pin), number(cpp),
                     _batch_over_cpp(row, batch, cpp), exponent(row["max_abs_diff_vs_pin"])])
    return headers, rows


def _batch_over_cpp(row, batch, cpp):
    """The median over interleaved rounds of each round's ratio, with its range, where the
    benchmark measured rounds (a machine's load moves both sides within a round); the
    ratio of the two bests otherwise (older JSON)."""
    rounds = row.get("batch_over_cpp")
    return _spread(rounds) if rounds else ratio(batch, cpp)


def dynamics_compile(payload):
    latencies = payload.get("first_call") or {}
    headers = ["function", "compile: wall s", "CPU s", "from the cache: wall s", "CPU s"]
    rows = [[name, number(t["compile_s"], 1), number(t["compile_cpu_s"], 1),
             number(t["load_s"]), number(t["load_cpu_s"])] for name, t in latencies.items()]
    return headers, rows


DERIVATIVE_LABELS = ("ID", "dID", "FD", "dFD", "Minv")


def derivatives(payload):
    headers = ["robot", "nv", "ID", "dID", "dID fd", "FD", "dFD", "dFD fd", "M^-1",
               "dID / ID", "dFD / FD", "fd / dID", "fd / dFD"]
    rows = []
    for row in payload["rows"]:
        t = {label: _best(row["ours_in_jit_us"].get(label))
             for label in ("ID", "dID", "dID_fd", "FD", "dFD", "dFD_fd", "Minv")}
        rows.append([row["robot"], row["nv"], *(number(t[k]) for k in t),
                     ratio(t["dID"], t["ID"]), ratio(t["dFD"], t["FD"]),
                     ratio(t["dID_fd"], t["dID"], 1), ratio(t["dFD_fd"], t["dFD"], 1)])
    return headers, rows


def derivatives_cpp(payload):
    headers = ["robot", "function", "ours in-jit us", "pin Python us", "ours / pin",
               "C++ us", "ours / C++", "max rel diff"]
    rows = []
    for row in payload["rows"]:
        for label in DERIVATIVE_LABELS:
            ours = _best(row["ours_in_jit_us"].get(label))
            pin = _best((row.get("pin_python_us") or {}).get(label))
            cpp = _best((row.get("cpp_us") or {}).get(label))
            rows.append([row["robot"], label, number(ours), number(pin), ratio(ours, pin),
                         number(cpp), ratio(ours, cpp),
                         exponent((row.get("max_rel_diff_vs_pin") or {}).get(label))])
    return headers, rows


def _spread(entry):
    if not entry:
        return "-"
    return f"{entry['median']:.2f} ({entry['min']:.2f}-{entry['max']:.2f})"


def lanes(payload):
    headers = ["robot", "nv", "function", "stack us", "batch us", "lanes us", "C++ us",
               "stack / C++", "batch / C++", "lanes / C++", "max rel diff"]
    rows = [[r["robot"], r["nv"], r["function"], number(r["stack_us"]), number(r["batch_us"]),
             number(r["lanes_us"]), number(r["cpp_us"]), _spread(r.get("stack_over_cpp")),
             _spread(r.get("batch_over_cpp")), _spread(r.get("lanes_over_cpp")),
             exponent(r["max_rel_diff_vs_pin"])] for r in payload["rows"]]
    return headers, rows


def lanes_asm(payload):
    headers = ["kernel", "packed zmm", "packed ymm", "packed xmm", "scalar sd"]
    rows = [[f"`{kernel}`", c["zmm"], c["ymm"], c["xmm"], c["scalar_sd"]]
            for kernel, c in (payload.get("asm") or {}).items()]
    return headers, rows


def ocp(payload):
    threads = [str(t) for t in payload.get("threads", [1])]
    headers = (["robot", "function"] + [f"ours {t} thr ms" for t in threads]
               + ["Crocoddyl ms"] + [f"{t} thr / Croc" for t in threads]
               + ["ours CPU ms", "Croc CPU ms", "CPU ratio"])
    rows = []
    for row in payload["timings"]:
        ours = [row["ours"][t]["best"] for t in threads]
        croc = row.get("crocoddyl")
        theirs = croc["best"] if croc else None
        cpu, croc_cpu = row["ours"]["1"]["cpu_best"], croc["cpu_best"] if croc else None
        rows.append([row["robot"], row["function"]] + [number(v, 3) for v in ours]
                    + [number(theirs, 3)] + [ratio(v, theirs) for v in ours]
                    + [number(cpu, 3), number(croc_cpu, 3), ratio(cpu, croc_cpu)])
    return headers, rows


def solvers(payload):
    """ms per iteration (wall clock, best solve) and its split; Crocoddyl's split is its
    per-call time times its calls per solve, over its iterations; the last column is
    ours / Crocoddyl in CPU time of the calling thread."""
    threads = [str(t) for t in payload.get("threads", [1])]
    headers = ["problem", "solver", "iterations", "final cost", "ms / iteration", "calc_diff",
               "backward", "forward", "/ Crocoddyl", "CPU / Crocoddyl CPU"]
    rows = []
    for row in payload["results"]:
        name = row.get("solver", "FDDP")
        croc = row.get("crocoddyl")
        croc_iter = croc_cpu = None
        if croc:
            croc_iter = croc["total_s"]["best"] / croc["iterations"] * 1e3
            cpu_best = croc["total_s"].get("cpu_best")
            croc_cpu = None if cpu_best is None else cpu_best / croc["iterations"] * 1e3
        for t in threads:
            ours = row["ours"][t]
            per_iteration = ours["total_s"] * 1e3 / ours["iterations"]
            cpu = ours.get("cpu_s")
            cpu_iteration = None if cpu is None else cpu * 1e3 / ours["iterations"]
            rows.append([row["robot"], f"geppetto {name}, {t} thr", ours["iterations"],
                         f"{ours['cost']:.10f}", number(per_iteration)]
                        + [number(ours["split_s"][k] * 1e3 / ours["iterations"])
                           for k in ("calc_diff", "backward", "forward")]
                        + [ratio(per_iteration, croc_iter),
                           ratio(cpu_iteration, croc_cpu) if t == "1" else "-"])
        if croc:
            split = croc.get("split") or {}
            calls, per_call = split.get("calls_per_solve", {}), split.get("per_call_s", {})
            parts = [number(per_call[k] * calls[k] * 1e3 / croc["iterations"])
                     if k in calls and k in per_call else "-"
                     for k in ("calc_diff", "backward", "forward")]
            rows.append([row["robot"], f"Crocoddyl {name}", croc["iterations"],
                         f"{croc['cost']:.10f}", number(croc_iter)] + parts + ["1.00", "1.00"])
    return headers, rows


def mpc(payload):
    headers = ["", "p50 ms", "p95 ms", "p99 ms", "mean ms", "max ms", "rate at p50 Hz"]
    rows = [[name, number(s["p50"], 3), number(s["p95"], 3), number(s["p99"], 3),
             number(s["mean"], 3), number(s["max"]), number(1e3 / s["p50"], 0)]
            for name, s in payload["summary"].items()]
    return headers, rows


def call_overhead(payload):
    """One state from Python: the kernel alone, the public call, their difference (us)."""
    headers = ["robot", "function", "kernel us", "Python call us", "overhead us"]
    rows = [[r["robot"], r["function"], number(r["kernel_us"]), number(r["python_us"]),
             number(r["overhead_us"])] for r in payload["rows"]]
    return headers, rows


def contacts(payload):
    """Constrained dynamics per state (us): ours batched (the stack kernel), across SIMD lanes
    (``constraint_dynamics_batch``, where it exists) and per Python call, Pinocchio's Python
    and C++ (the C++ timed right after ours on the same states, in every round); the ratios
    to the C++ as the median (range) of the rounds' ratios where the JSON has them."""
    headers = ["robot", "function", "ours batched us", "ours lanes us", "ours Python us",
               "pin Python us", "C++ us", "batched / C++", "lanes / C++", "max abs diff"]
    rows = [[f"{t['robot']} ({t['nc']} constraint rows)", t["function"], number(t["batch_us"]),
             number(t.get("lanes_us")), number(t["python_us"]), number(t["pin_us"]),
             number(t["cpp_us"]),
             _spread(t["batch_over_cpp"]) if t.get("batch_over_cpp")
             else ratio(t["batch_us"], t["cpp_us"]),
             _spread(t.get("lanes_over_cpp")), exponent(t["max_abs_diff_vs_pin"])]
            for t in payload["timings"]]
    return headers, rows


def contacts_trot(payload):
    """Crocoddyl's trot solved by both FDDPs: process CPU time, best of the solves."""
    headers = ["solver", "knots", "cost at guess", "final cost", "iterations", "converged",
               "stop", "total s", "ms / iteration"]
    rows = [[r["solver"], r["knots"], f"{r['guess_cost']:.10g}", f"{r['cost']:.8g}",
             r["iterations"], "yes" if r["converged"] else "no", exponent(r["stop"]),
             number(r["seconds"]), number(r["ms_per_iteration"], 1)]
            for r in payload.get("trot") or []]
    return headers, rows


def constrained(payload):
    headers = ["robot", "task", "start", "solver", "iterations", "cost", "violation", "gaps",
               "status", "CPU ms", "CPU ms / iteration"]
    rows = [[r["robot"], r["task"], r["start"], r["solver"], r["iterations"],
             f"{r['cost']:.9g}", exponent(r["violation"]), exponent(r["gaps"]), r["status"],
             number(1e3 * r["cpu"], 1), number(1e3 * r["per_iteration"])]
            for r in payload["rows"]]
    return headers, rows


def constrained_csqp(payload):
    headers = ["robot", "task", "start", "ALDDP CPU / CSQP CPU"]
    rows = [[c["robot"], c["task"], c["start"], number(c["ratio"])]
            for c in payload.get("alddp_vs_csqp") or []]
    return headers, rows


# name -> (JSON file, renderer)
TABLES = {
    "dynamics": ("dynamics.json", dynamics),
    "dynamics_compile": ("dynamics.json", dynamics_compile),
    "derivatives": ("derivatives.json", derivatives),
    "derivatives_cpp": ("derivatives.json", derivatives_cpp),
    "lanes": ("lanes.json", lanes),
    "lanes_asm": ("lanes.json", lanes_asm),
    "ocp": ("ocp.json", ocp),
    "solvers": ("solvers.json", solvers),
    "solvers_untuned": ("solvers_untuned.json", solvers),
    "solvers_untuned2": ("solvers_untuned2.json", solvers),
    "solvers_untuned3": ("solvers_untuned3.json", solvers),
    "mpc": ("mpc.json", mpc),
    "call_overhead": ("call_overhead.json", call_overhead),
    "contacts": ("contacts.json", contacts),
    "contacts_trot": ("contacts.json", contacts_trot),
    "constrained": ("constrained.json", constrained),
    "constrained_csqp": ("constrained.json", constrained_csqp),
}


# --- rendering and the README ------------------------------------------------------------

def render(name, results_dir=RESULTS_DIR):
    """The text of table ``name`` (stamp line, blank line, Markdown table), or None
    when its JSON file is not in ``results_dir``."""
    file_name, renderer = TABLES[name]
    path = os.path.join(results_dir, file_name)
    if not os.path.isfile(path):
        return None
    with open(path) as handle:
        payload = json.load(handle)
    headers, rows = renderer(payload)
    return f"{stamp(file_name, payload)}\n\n{markdown(headers, rows)}"


def marker_pattern(name):
    """The README text from ``<!-- table:name -->`` to ``<!-- /table:name -->``; group 2
    is what lies between."""
    return re.compile(rf"(<!-- table:{re.escape(name)} -->\n)(.*?)(<!-- /table:{re.escape(name)} -->)",
                      re.DOTALL)


def replace_tables(text, rendered):
    """``text`` with every marked table of ``rendered`` ({name: text}) replaced, and the
    names of those that were marked."""
    replaced = []
    for name, body in rendered.items():
        pattern = marker_pattern(name)
        if pattern.search(text):
            text = pattern.sub(lambda m, body=body: f"{m.group(1)}{body}\n{m.group(3)}", text)
            replaced.append(name)
    return text, replaced


def differences(text, rendered):
    """Names of the marked tables whose text differs from ``rendered``."""
    differing = []
    for name, body in rendered.items():
        match = marker_pattern(name).search(text)
        if match and match.group(2) != f"{body}\n":
            differing.append(name)
    return differing


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default=RESULTS_DIR)
    parser.add_argument("--readme", default=README)
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="replace the marked tables")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 when a marked table differs from its rendering")
    options = parser.parse_args(argv)
    rendered, missing = {}, []
    for name in options.tables:
        body = render(name, options.results)
        if body is None:
            missing.append(f"{name} ({TABLES[name][0]})")
        else:
            rendered[name] = body
    if missing:
        print("no JSON for: " + ", ".join(missing), file=sys.stderr)
    if not (options.write or options.check):
        for name, body in rendered.items():
            print(f"<!-- table:{name} -->\n{body}\n<!-- /table:{name} -->\n")
        return 0
    with open(options.readme) as handle:
        text = handle.read()
    unmarked = [name for name in rendered if not marker_pattern(name).search(text)]
    if unmarked:
        print("no markers in the README for: " + ", ".join(unmarked), file=sys.stderr)
    if options.check:
        differing = differences(text, rendered)
        for name in differing:
            print(f"table {name} differs from {TABLES[name][0]}")
        return 1 if differing else 0
    new_text, replaced = replace_tables(text, rendered)
    if new_text != text:
        with open(options.readme, "w") as handle:
            handle.write(new_text)
    print("replaced: " + (", ".join(replaced) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
