# The Python examples of README.md and docs/python.md run as written, and each
# print(...) whose line ends in "# TEXT" prints TEXT.
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", (ROOT / path).read_text(), re.S)


@pytest.mark.parametrize("path", ["README.md", "docs/python.md"])
def test_examples_print_what_their_comments_say(path):
    blocks = python_blocks(path)
    assert blocks, f"{path} has no Python example"
    for code in blocks:
        expected = [m.group(1).strip() for m in
                    re.finditer(r"^print\(.*\)\s+# (.*)$", code, re.M)]
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ), timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == expected
