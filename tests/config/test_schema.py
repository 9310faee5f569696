"""The run schema and its parse: every numeric field is range-checked before anything is built or written;
the typed Config round-trips through its dict."""

import math
import sys

import ml_collections
import pytest

from apertus_jax.config.schema import (
    Config,
    base_config,
    closest_keys,
    key_paths,
    parse,
    parse_recorded,
    set_on_command_line,
)
from apertus_jax.train.config import check_layout
from configs.runs import tiny_demo

# Numeric fields inside data.pipeline (its own typed specs, apertus_jax.data.config), checked the same way.
PIPELINE_FIELDS = [
    ("data", "pipeline", "goldfish", "k"),
    ("data", "pipeline", "goldfish", "h"),
    ("data", "pipeline", "split_seed"),
    ("data", "pipeline", "components", "prose", "weight"),
]


def numeric_fields(tree: dict, prefix=()) -> list[tuple[str, ...]]:
    """Paths of every int/float leaf of the schema (bools excluded; data.pipeline has its own list)."""
    paths = []
    for key, value in tree.items():
        path = prefix + (key,)
        if path == ("data", "pipeline"):
            continue
        if isinstance(value, dict):
            paths += numeric_fields(value, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            paths.append(path)
    return paths


def _with(path: tuple[str, ...], value) -> ml_collections.ConfigDict:
    tree = tiny_demo.get_config().to_dict()
    node = tree
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return ml_collections.ConfigDict(tree)  # a fresh ConfigDict: types follow the new values


def validate(config, devices: int, processes: int = 1):
    """The checks of a run start: the parse, then the layout rules."""
    return check_layout(parse(config), devices, processes)


def test_the_walk_covers_every_section_of_a_valid_config():
    validate(_with(("seed",), 0), 1)  # the rebuilt ConfigDict itself is valid
    sections = {path[0] for path in numeric_fields(tiny_demo.get_config().to_dict())}
    assert sections == {
        "seed",
        "model",
        "data",
        "train",
        "optim",
        "mesh",
        "checkpoint",
        "faults",
        "posttrain",
        "profile",
        "eval",
    }


@pytest.mark.parametrize(
    "path", numeric_fields(tiny_demo.get_config().to_dict()) + PIPELINE_FIELDS, ids=".".join
)
@pytest.mark.parametrize("bad", [-2, math.nan, math.inf], ids=["negative", "nan", "inf"])
def test_every_numeric_field_rejects_a_bad_value_in_one_line(path, bad):
    with pytest.raises(ValueError) as error:
        validate(_with(path, bad), 1)
    message = str(error.value)
    assert "\n" not in message and path[-1] in message, message


@pytest.mark.parametrize(
    "path, bad",
    [
        (("optim", "b1"), 1.0),
        (("optim", "b3"), 1.5),
        (("optim", "init_fraction"), 1.5),
        (("optim", "final_fraction"), 2.0),
        (("optim", "peak_lr"), 0.0),
        (("optim", "eps"), 0.0),
        (("train", "steps"), 0),
        (("train", "batch_plan"), ((0, 0),)),
        (("train", "batch_plan"), ((5, 2048),)),
        (("data", "seq_len"), 1),
        (("checkpoint", "keep"), 0),
        (("mesh", "fsdp"), 0),
        (("model", "rope_factor"), 0.5),
    ],
    ids=lambda v: ".".join(v) if isinstance(v, tuple) and isinstance(v[0], str) else str(v),
)
def test_upper_bounds_and_zero(path, bad):
    with pytest.raises(ValueError) as error:
        validate(_with(path, bad), 1)
    assert "\n" not in str(error.value)


def test_cli_bad_microbatch_is_one_line_exit_2_and_writes_nothing(tmp_path, run_job):
    workdir = tmp_path / "w"
    result = run_job(
        "experiments.pretrain",
        "--config=configs/runs/tiny_demo.py",
        f"--workdir={workdir}",
        "--config.train.microbatch_size=-1",
    )
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: --config.train.microbatch_size must be an integer >= 0, got -1"], result.stderr[
        -2000:
    ]
    assert not workdir.exists()


def test_parse_round_trips_through_the_dict_and_fills_the_pipeline():
    config = parse(tiny_demo.get_config())
    assert isinstance(config, Config) and config.model_preset == "tiny"
    assert config.data.pipeline.components["prose"].sources == ("german_prose",)
    assert parse(config.to_dict()) == config
    assert set(config.to_dict()) == set(base_config())


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c.train.unlock().__setitem__("colour", 1), "unknown \\['train.colour'\\]"),
        (
            lambda c: c.train.unlock().__setitem__("lr", 1e-3),
            "unknown \\['train.lr'\\], missing \\[\\]; train.lr: did you mean optim.peak_lr\\?$",
        ),
        (
            lambda c: c.data.pipeline.components.prose.__setitem__("colour", 1),
            "prose: unknown keys \\['colour'\\]",
        ),
        (
            lambda c: c.data.pipeline.components.prose.__setitem__("kind", "csv"),
            "kind='csv' is not a component kind",
        ),
    ],
)
def test_unknown_keys_are_refused_anywhere_in_the_schema(change, message):
    config = tiny_demo.get_config()
    config.unlock()
    change(config)
    with pytest.raises(ValueError, match=message):
        parse(config)


@pytest.mark.parametrize(
    "key, expected",
    [
        ("train.lr", ["optim.peak_lr"]),  # a word of another section's key
        ("train.step", ["train.steps", "profile.start_step"]),  # a typo ranks above a shared word
        ("data.seqlen", ["data.seq_len", "model.max_seq_len"]),
        ("train.colour", []),  # nothing close: no guess
    ],
)
def test_closest_keys_search_every_section(key, expected):
    assert closest_keys(key, key_paths(base_config())) == expected


def test_a_record_without_keys_added_later_parses_with_their_defaults():
    """A config.json written before an option existed (here posttrain.qrpo_variant and eval.batch_rows) stays
    readable; its pipeline is not merged with the default one; an unknown key is still refused."""
    recorded = parse(tiny_demo.get_config()).to_dict()
    del recorded["posttrain"]["qrpo_variant"], recorded["eval"]["batch_rows"]
    config = parse_recorded(recorded)
    assert config == parse(tiny_demo.get_config())
    assert list(config.data.pipeline.components) == ["prose", "udhr"]
    recorded["train"]["colour"] = 1
    with pytest.raises(ValueError, match="unknown \\['train.colour'\\]"):
        parse_recorded(recorded)


def test_a_component_kind_whose_extra_is_missing_is_refused_at_parse(tmp_path, monkeypatch):
    """A Parquet component without pyarrow (simulated: a None entry in sys.modules): one line naming the
    component, the extra and the install command, before anything is built."""
    (tmp_path / "a.parquet").write_bytes(b"")
    config = tiny_demo.get_config()
    config.data.pipeline.components = {"web": {"kind": "parquet", "paths": [str(tmp_path / "a.parquet")]}}
    assert parse(config).data.pipeline.components["web"].kind == "parquet"
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ValueError) as error:
        parse(config)
    assert str(error.value) == (
        "data.pipeline.components.web (kind 'parquet') needs the 'prep' extra (pyarrow is not installed); "
        'install it with: pip install -e ".[prep]"'
    )


def test_an_overridden_step_count_alone_takes_the_schedule_with_it():
    """tiny_demo (300 steps of 2,048 tokens, warmup 20 steps, cooldown 60, AdEMAMix warmups 100 updates) run
    for 20 steps: the schedule ends with step 20 and keeps its shares; any schedule override turns this off."""
    from apertus_jax.config.schema import fit_schedule_to_steps

    config = tiny_demo.get_config()
    config.train.steps = 20
    message = fit_schedule_to_steps(config, ["train.steps"])
    optim = parse(config).optim
    assert (optim.total_tokens, optim.warmup_tokens, optim.decay_tokens) == (
        20 * 2048,
        20 * 2048 // 15,
        4 * 2048,
    )
    assert (optim.alpha_warmup_steps, optim.b3_warmup_steps) == (100 * 20 // 300, 100 * 20 // 300)
    assert message.startswith("train.steps=20 overridden without the schedule: the schedule follows it")
    assert "optim.total_tokens=40,960, warmup_tokens=2,730, decay_tokens=8,192" in message

    assert message.endswith("; set --config.optim.total_tokens etc. to choose it")

    for overridden in (["train.steps", "optim.total_tokens"], ["seed"]):
        config = tiny_demo.get_config()
        config.train.steps = 20
        assert fit_schedule_to_steps(config, overridden) is None
        assert parse(config).optim.total_tokens == 300 * 2048


def test_a_key_is_set_on_the_command_line_by_itself_a_key_within_it_or_its_section():
    argv = [
        "pretrain",
        "--config=configs/runs/tiny_demo.py",
        "--config.data.pipeline.components.udhr.weight=0.3",
    ]
    assert set_on_command_line("data.pipeline.components.udhr", argv)
    assert set_on_command_line("data.pipeline.components.udhr.weight", argv)
    assert not set_on_command_line("data.pipeline.components.prose", argv)
    assert not set_on_command_line("data.pipeline.components.udh", argv)  # a prefix of a name is no section
    assert set_on_command_line("model.n_layers", ["pretrain", "--config.model=..."])
