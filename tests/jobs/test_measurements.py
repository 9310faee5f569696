"""The measurement registry: names selected by --only, and documented commands that name what exists."""

import os
import shlex

import pytest

from apertus_jax.jobs.measurements import MEASUREMENTS, REPO, selected


def test_only_selects_in_registry_order_and_rejects_unknown_names():
    assert selected(None) == selected([]) == ["demo", "posttrain", "evaluation", "goldfish_study"]
    assert selected(["evaluation", "demo"]) == ["demo", "evaluation"]
    with pytest.raises(
        ValueError, match="no measurement nope; known: demo, posttrain, evaluation, goldfish_study"
    ):
        selected(["demo", "nope"])


@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_measured_commands_name_existing_modules_and_configs(name):
    measurement = MEASUREMENTS[name]
    assert set(measurement.deterministic) and len(set(measurement.deterministic)) == len(
        measurement.deterministic
    )
    for line in measurement.command.splitlines():
        argv = shlex.split(line.split("  #")[0])
        assert argv[0] == "python" and argv[1] in ("-m", "-c"), line
        if argv[1] == "-m":
            assert os.path.isfile(os.path.join(REPO, *argv[2].split(".")) + ".py"), line
        for arg in argv[3:]:
            if arg.startswith("--config="):
                assert os.path.isfile(os.path.join(REPO, arg.split("=", 1)[1])), line
