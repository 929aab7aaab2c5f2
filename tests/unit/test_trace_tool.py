"""tools/trace_command.py, which measures the path of one command (its
docstring's example): it runs the command and counts the calls into the
project's code and the files it enters."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_trace_tool_counts_the_path_of_a_group_read():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "trace_command.py"), "--files", "--",
                        "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    m = re.match(r"XREADGROUP GROUP g c STREAMS s >: (\d+) calls into project code, (\d+) functions, (\d+) files\n",
                 p.stdout)
    assert m, p.stdout
    calls, funcs, files = map(int, m.groups())
    assert calls >= funcs > 0 and files > 5
    listed = p.stdout.splitlines()[1:]
    assert len(listed) == files and "  storage/verbs/delivery.py" in listed and "  xstream_cli/runner.py" in listed
