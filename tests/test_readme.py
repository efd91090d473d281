"""The README runs as written: every ```python block of README.md, top to bottom.

The blocks run in one namespace, in the order of the page, in an empty
working folder (the files they write land there): a block may use what a
block above it defined, as a reader who pastes them in order would.  A block
not meant to run here (one that needs a cluster, or runs for minutes) says
so on its first line, visibly::

    # not run by tests/test_readme.py: <why>

and is left out; those stay few (:data:`MAX_NOT_RUN`).
"""
import os
import re

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
NOT_RUN = "# not run by tests/test_readme.py:"
MAX_NOT_RUN = 2
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def python_blocks(text):
    """[(line number of the block's first code line, code)] of the ```python blocks."""
    return [(text.count("\n", 0, match.start(1)) + 1, match.group(1))
            for match in BLOCK.finditer(text)]


def test_the_extraction_finds_blocks_and_their_lines():
    text = "intro\n```python\nx = 1\n```\ntext\n```bash\nls\n```\n```python\ny = x\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (10, "y = x\n")]


def test_blocks_not_run_are_few_and_say_why():
    with open(README) as f:
        blocks = python_blocks(f.read())
    assert len(blocks) >= 3
    skipped = [code for _, code in blocks if code.startswith(NOT_RUN)]
    assert len(skipped) <= MAX_NOT_RUN
    for code in skipped:
        assert len(code.splitlines()[0]) > len(NOT_RUN) + 5, code.splitlines()[0]


def test_every_python_block_runs(tmp_path, monkeypatch):
    with open(README) as f:
        blocks = python_blocks(f.read())
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__readme__"}
    for line, code in blocks:
        if code.startswith(NOT_RUN):
            continue
        try:
            exec(compile(code, f"README.md, block at line {line}", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"README.md, the python block at line {line} fails: "
                                 f"{type(error).__name__}: {error}") from error
