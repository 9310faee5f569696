"""The test suite's own rule: a test starts a Python process only where the process is the point (signals and
kill -9, multi-host, a device count other than the suite's 8, fresh imports, the documented commands); a job's
errors and results are checked in this process (`run_job` in tests/conftest.py)."""

import pathlib
import re

PROCESS_FILES_BOUND = 10
TESTS = pathlib.Path(__file__).parent
STARTS = re.compile(r"subprocess\.(run|Popen|check_output|check_call)\(")
PYTHON = re.compile(r'sys\.executable|"bash"')  # this interpreter, or a shell script that starts one


def test_at_most_ten_test_files_start_a_python_process():
    starting = sorted(
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*.py")
        if STARTS.search(text := path.read_text()) and PYTHON.search(text)
    )
    assert "test_layers.py" in starting  # the rule finds them (its fresh-process import count)
    assert len(starting) <= PROCESS_FILES_BOUND, starting
