"""The typed pipeline: defaults, clear errors, the Apertus five-stage schedule as a config, the round trip."""

import ml_collections
import pytest

from apertus_jax.data import kinds
from apertus_jax.data.components import ArrayRecordSpec, DemoSpec
from apertus_jax.data.config import parse_pipeline
from apertus_jax.data.goldfish.drop_masks import GoldfishSpec

T = 10**12


def apertus_70b_stages():
    """docs/recipe.md 6: five stages by token boundaries, each with its own seed (weights illustrative)."""
    names = [
        "fineweb_edu_2",
        "fineweb_edu_3",
        "fineweb2_hq33",
        "fineweb2_hq10",
        "starcoder",
        "finemath",
        "megamath_web",
        "dclm_edu",
        "stack_edu",
        "wikipedia",
        "instructions",
    ]
    components = {n: {"kind": "arrayrecord", "paths": [f"/data/{n}"]} for n in names}
    stages = [
        {
            "name": "stage1",
            "until_tokens": 5 * T,
            "seed": 1,
            "weights": {"fineweb_edu_2": 0.6, "fineweb2_hq33": 0.3, "starcoder": 0.05, "finemath": 0.05},
        },
        {
            "name": "stage2",
            "until_tokens": 9 * T,
            "seed": 2,
            "weights": {"fineweb_edu_3": 0.6, "fineweb2_hq33": 0.3, "starcoder": 0.05, "finemath": 0.05},
        },
        {
            "name": "stage3",
            "until_tokens": 12 * T,
            "seed": 3,
            "weights": {"fineweb_edu_3": 0.55, "fineweb2_hq33": 0.3, "starcoder": 0.05, "megamath_web": 0.1},
        },
        {
            "name": "stage4",
            "until_tokens": 13.5 * T,
            "seed": 4,
            "weights": {"dclm_edu": 0.6, "fineweb2_hq10": 0.25, "starcoder": 0.15},
        },
        {
            "name": "cooldown",
            "until_tokens": 15 * T,
            "seed": 5,
            "weights": {
                "dclm_edu": 0.4,
                "fineweb2_hq10": 0.2,
                "stack_edu": 0.1,
                "starcoder": 0.1,
                "wikipedia": 0.1,
                "instructions": 0.1,
            },
        },
    ]
    return {"components": components, "stages": stages, "goldfish": {"k": 50, "h": 50}}


def test_apertus_stages_validate_with_defaults():
    config = parse_pipeline(ml_collections.ConfigDict(apertus_70b_stages()))
    assert [s.until_tokens for s in config.stages] == [5 * T, 9 * T, 12 * T, 13_500_000_000_000, 15 * T]
    assert config.goldfish == GoldfishSpec(k=50, h=50, hash="apertus")
    starcoder = config.components["starcoder"]
    assert isinstance(starcoder, ArrayRecordSpec) and starcoder.paths == ("/data/starcoder",)
    assert starcoder.order == "shuffle" and starcoder.epochs is None


def test_default_single_stage_uses_component_weights():
    config = parse_pipeline({"components": {"a": {"kind": "demo", "weight": 2}, "b": {"kind": "demo"}}})
    assert [stage.to_dict() for stage in config.stages] == [
        {"name": "stage1", "until_tokens": None, "weights": {"a": 2.0, "b": 1.0}, "seed": None}
    ]


def test_to_dict_round_trips_and_fills_every_default():
    config = parse_pipeline(apertus_70b_stages())
    normalized = config.to_dict()
    assert parse_pipeline(normalized) == config
    assert normalized["components"]["wikipedia"] == {
        "kind": "arrayrecord",
        "paths": ["/data/wikipedia"],
        "weight": 1.0,
        "epochs": None,
        "order": "shuffle",
        "take": None,
    }


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda c: c["components"]["starcoder"].update(kind="csv"),
            "starcoder: kind='csv' is not a component kind",
        ),
        (lambda c: c["components"]["starcoder"].update(colour="red"), r"unknown keys \['colour'\]"),
        (
            lambda c: c["components"]["starcoder"].update(split="train"),
            r"unknown keys \['split'\] for kind 'arrayrecord'",
        ),
        (lambda c: c["components"]["starcoder"].update(paths=[]), "starcoder: paths is empty"),
        (
            lambda c: c["components"]["starcoder"].update(epochs=0),
            "starcoder: epochs=0 must be a positive integer",
        ),
        (
            lambda c: c["stages"][1].update(until_tokens=4 * T),
            r"stages\[1\].until_tokens=4000000000000 must exceed",
        ),
        (lambda c: c["stages"][0].update(until_tokens=None), "only the last stage"),
        (lambda c: c["stages"][2]["weights"].update(nope=1.0), "unknown components"),
        (lambda c: c["goldfish"].update(hash="md5"), "goldfish.hash must be one of"),
        (lambda c: c.update(shuffle=True), "unknown keys"),
    ],
)
def test_invalid_configs_name_the_key(change, message):
    config = apertus_70b_stages()
    change(config)
    with pytest.raises(ValueError, match=message):
        parse_pipeline(config)


@pytest.mark.parametrize(
    ("buckets", "message"),
    [
        ({"edges": [10, 5], "token_shares": [1, 1, 1]}, "strictly increasing"),
        ({"edges": [10], "token_shares": [1, 1, 1]}, "needs 2 shares"),
        ({"edges": [10], "token_shares": [0, 0]}, "at least one share > 0"),
        ({"edges": [10], "token_shares": [-1, 2]}, "token_shares"),
        ({"edges": [10]}, "must be"),
    ],
)
def test_length_buckets_are_validated(buckets, message):
    config = {"components": {"c": {"kind": "demo", "length_buckets": buckets}}}
    with pytest.raises(ValueError, match=message):
        parse_pipeline(config)


def test_length_buckets_are_normalized_and_absent_when_unset():
    config = {"components": {"c": {"kind": "demo", "length_buckets": {"edges": [8], "token_shares": [1, 3]}}}}
    spec = parse_pipeline(config).components["c"]
    assert spec.length_buckets == kinds.LengthBuckets((8,), (0.25, 0.75))
    assert spec.to_dict()["length_buckets"] == {"edges": [8], "token_shares": [0.25, 0.75]}
    assert (
        "length_buckets"
        not in parse_pipeline({"components": {"c": {"kind": "demo"}}}).to_dict()["components"]["c"]
    )


def test_typed_specs_are_accepted_as_they_are():
    spec = DemoSpec(sources=("german_prose",), weight=3)
    config = parse_pipeline({"components": {"prose": spec}})
    assert config.components["prose"] is spec and config.stages[0].weights == {"prose": 3.0}


def test_a_new_kind_registers_once():
    with pytest.raises(ValueError, match="already registered"):

        @kinds.register_kind
        class Again(DemoSpec):  # noqa: F811 - another class under the same kind name
            pass
