"""config.json (a loop hook): the config a workdir last ran with."""

import json

from apertus_jax.records.config_record import newest_config


def test_newest_config_is_the_one_of_the_latest_resume(tmp_path):
    assert newest_config(str(tmp_path)) is None
    for name, steps in (("config.json", 4), ("config.step4.json", 8), ("config.step12.json", 16)):
        (tmp_path / name).write_text(json.dumps({"train": {"steps": steps}}))
        assert newest_config(str(tmp_path)) == {"train": {"steps": steps}}  # step12 after step4
