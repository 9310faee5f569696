"""The test suite's own rule: a test starts a Python process only where the process is the point (signals and
kill -9, multi-host, a device count other than the suite's 8, fresh imports, the documented commands and the
docs' Python snippets run as a user runs them); a job's errors and results are checked in this process
(`run_job` in tests/conftest.py)."""

import pathlib
import re

import pytest

PROCESS_FILES_BOUND = 11
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


@pytest.fixture(scope="module")
def shared():
    """A module-scoped fixture: its users form one xdist group (tests/conftest.py)."""
    return __name__


def test_a_module_fixtures_users_run_as_one_group_on_one_worker(shared, request):
    """`--dist loadgroup` (pytest.ini) groups by the id suffix `@GROUP`, which xdist appends in the worker; a
    pytest that does not let it (9.2 with xdist 3.8) would silently build every module fixture once per test."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not an xdist worker of --dist loadgroup")
    assert request.node.nodeid.endswith(f"@{shared}")


# The session fixtures that train a run (tests/conftest.py): each worker builds them once, about 40 s on 2 cores.
TRAINING_FIXTURES = {"uninterrupted"}


def test_the_quick_loop_trains_nothing(request):
    """A test that needs a trained run is `slow` (pytest.ini): otherwise `-m "not slow"` trains it once per worker
    and the quick loop overruns its 3 minutes (as the module-scoped pipeline, export, dedup, checkpoint and QRPO
    fixtures did when quick tests used them)."""
    quick = [item for item in request.session.items if not item.get_closest_marker("slow")]
    assert any(item.nodeid == request.node.nodeid for item in quick)  # the rule sees the quick tests
    assert not [item.nodeid for item in quick if TRAINING_FIXTURES & set(item.fixturenames)]
