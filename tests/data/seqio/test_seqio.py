"""seqio interop on real text (`seqio_vocabulary`, `seqio_import`, `seqio_export`): seqio Tasks as pipeline
components, our mixtures exported as seqio Tasks.

Runs only where the optional extra "seqio" is installed (`.ci/seqio` makes that environment); it skips
cleanly elsewhere.
"""

import functools

import numpy as np
import pytest

seqio = pytest.importorskip("seqio")
tf = pytest.importorskip("tensorflow")

from apertus_jax.data import mixture  # noqa: E402
from apertus_jax.data.config import parse_pipeline  # noqa: E402
from apertus_jax.data.demo_corpus import load_demo_documents, load_german_prose  # noqa: E402
from apertus_jax.data.pipeline import TrainIterator  # noqa: E402
from apertus_jax.data.seqio import export_tasks as seqio_export  # noqa: E402
from apertus_jax.data.seqio import import_tasks as seqio_import  # noqa: E402
from apertus_jax.data.seqio import vocabulary as seqio_vocabulary  # noqa: E402

UDHR_HELDOUT = {"kind": "demo", "split": "heldout", "sources": ["udhr"]}


def _udhr_heldout_count() -> int:
    """Held-out UDHR translations of the demo split (21 since the split is keyed on normalized text)."""
    return len(load_demo_documents("heldout", sources=["udhr"]))


def register_function_task(name, examples, output_features, preprocessors=(), split="validation"):
    """A seqio Task over fixed examples (dicts of equal keys); replaces an earlier one of that name."""
    columns = {key: [example[key] for example in examples] for key in examples[0]}

    def dataset_fn(split, shuffle_files):
        del split, shuffle_files
        return tf.data.Dataset.from_tensor_slices(
            {
                k: tf.ragged.constant(v).to_tensor() if isinstance(v[0], list) else v
                for k, v in columns.items()
            }
        )

    seqio.TaskRegistry.remove(name)
    return seqio.TaskRegistry.add(
        name,
        source=seqio.FunctionDataSource(dataset_fn, splits=[split]),
        output_features=output_features,
        preprocessors=list(preprocessors),
    )


def seqio_spec(task, feature, split="validation", **extra):
    config = parse_pipeline(
        {"components": {"c": {"kind": "seqio", "task": task, "split": split, "feature": feature, **extra}}}
    )
    return config.components["c"]


def first_batches(data_config, tokenizer, count=5):
    pipeline = TrainIterator(
        parse_pipeline(data_config),
        tokenizer,
        seq_len=256,
        batch_size=4,
        process_index=0,
        process_count=1,
        seed=3,
    )
    return [next(pipeline) for _ in range(count)]


def assert_same_batches(left, right):
    assert len(left) == len(right)
    for a, b in zip(left, right):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.fixture(scope="module")
def udhr_texts():
    return [document["text"] for document in load_demo_documents("heldout", ["udhr"])]


@pytest.fixture(scope="module")
def udhr_task(tekken, udhr_texts):
    """A seqio Task over real UDHR text: `text` (raw) and `targets` tokenized by seqio with our vocabulary."""
    vocabulary = seqio_vocabulary.TokenizerVocabulary(tekken)
    preprocessors = [
        functools.partial(seqio.preprocessors.rekey, key_map={"targets": "text", "text": "text"}),
        seqio.preprocessors.tokenize,
        seqio.preprocessors.append_eos,
    ]
    register_function_task(
        "test_udhr_text",
        [{"text": t} for t in udhr_texts],
        {"targets": seqio.Feature(vocabulary, add_eos=True)},
        preprocessors,
    )
    return "test_udhr_text"


def test_vocabulary_is_our_tokenizer(tekken):
    vocabulary = seqio_vocabulary.TokenizerVocabulary(tekken)
    assert (vocabulary.vocab_size, vocabulary.bos_id, vocabulary.eos_id, vocabulary.pad_id) == (
        131072,
        1,
        2,
        3,
    )
    texts = [d["text"] for d in load_german_prose()[:3]]
    for text in texts:
        ids = tekken.encode(text)
        assert list(vocabulary.encode(text)) == ids
        assert vocabulary.encode_tf(tf.constant(text)).numpy().tolist() == ids
        assert vocabulary.decode(ids + [tekken.eod_id] + ids) == tekken.decode(ids)  # stops after EoD
    rows = [tekken.encode(t)[:20] for t in texts]
    decoded = vocabulary.decode_tf(tf.constant(rows, tf.int32)).numpy()
    assert [d.decode() for d in decoded] == [tekken.decode(r) for r in rows]
    assert vocabulary == seqio_vocabulary.TokenizerVocabulary(tekken)
    assert vocabulary != seqio.PassThroughVocabulary(tekken.vocab_size, eos_id=2)


@pytest.mark.parametrize("feature", ["text", "targets"])
def test_seqio_task_documents_are_our_tokenization(tekken, udhr_task, udhr_texts, feature):
    """Raw text is tokenized by our tokenizer; seqio-tokenized ids of our vocabulary get BoD and keep EoD."""
    component = seqio_import.load_component("c", seqio_spec(udhr_task, feature), tekken)
    assert len(component.documents) == len(udhr_texts) == _udhr_heldout_count()
    for document, text in zip(component.documents, udhr_texts):
        np.testing.assert_array_equal(document, tekken.encode_document(text))
    assert component.mean_tokens == pytest.approx(
        np.mean([len(tekken.encode_document(t)) for t in udhr_texts])
    )


def test_pipeline_over_a_seqio_task_equals_the_same_documents_read_directly(tekken, udhr_task):
    via_seqio = {
        "components": {"c": {"kind": "seqio", "task": udhr_task, "split": "validation", "feature": "text"}}
    }
    direct = {"components": {"c": UDHR_HELDOUT}}
    assert_same_batches(first_batches(via_seqio, tekken), first_batches(direct, tekken))


def test_bad_seqio_sources_are_rejected(tekken, udhr_task):
    with pytest.raises(ValueError, match="No Task or Mixture found with name 'no_such_task'"):
        seqio_import.load_component("c", seqio_spec("no_such_task", "text"), tekken)
    with pytest.raises(ValueError, match="has no split 'train'"):
        seqio_import.load_component("c", seqio_spec(udhr_task, "text", split="train"), tekken)
    with pytest.raises(ValueError, match="has no feature 'inputs'"):
        seqio_import.load_component("c", seqio_spec(udhr_task, "inputs"), tekken)
    with pytest.raises(ValueError, match="task must name"):
        parse_pipeline({"components": {"c": {"kind": "seqio"}}})

    foreign = seqio.PassThroughVocabulary(tekken.vocab_size, eos_id=tekken.eod_id)
    register_function_task(
        "test_foreign_ids", [{"targets": [1, 500, 2]}], {"targets": seqio.Feature(foreign, add_eos=False)}
    )
    with pytest.raises(ValueError, match="holds ids of .* not of tokenizer 'tekken'"):
        seqio_import.load_component("c", seqio_spec("test_foreign_ids", "targets"), tekken)

    ours = seqio_vocabulary.TokenizerVocabulary(tekken)
    register_function_task(
        "test_large_ids",
        [{"targets": [1, 500, 2]}, {"targets": [1, 131072, 2]}],
        {"targets": seqio.Feature(ours, add_eos=False)},
    )
    with pytest.raises(ValueError, match=r"example 1 .* token id 131072 outside \[0, 131072\)"):
        seqio_import.load_component("c", seqio_spec("test_large_ids", "targets"), tekken)


def test_exported_mixture_has_our_token_shares_and_round_trips(tekken):
    data_config = {
        "components": {
            "udhr": {**UDHR_HELDOUT, "weight": 0.7},
            "prose": {
                "kind": "demo",
                "split": "heldout",
                "sources": ["german_prose"],
                "weight": 0.3,
                "take": 40,
            },
        }
    }
    names = seqio_export.register_seqio_tasks(parse_pipeline(data_config), tekken, prefix="roundtrip_")
    assert names == {
        "tasks": {"udhr": "roundtrip_udhr", "prose": "roundtrip_prose"},
        "mixtures": {"stage1": "roundtrip_stage1_mixture"},
    }

    # Our documents, computed here from the corpus (prose: the pipeline's fixed `take` subset).
    config = parse_pipeline(data_config)
    expected = {}
    for name, spec in config.components.items():
        component = spec.load(name, tekken)
        indices = mixture.host_documents(component, spec, split_seed=0, process_index=0, process_count=1)
        expected[name] = [component.documents[i] for i in indices]
    assert [len(expected["udhr"]), len(expected["prose"])] == [_udhr_heldout_count(), 40]
    texts = [d["text"] for d in load_demo_documents("heldout", ["udhr"])]
    np.testing.assert_array_equal(expected["udhr"][5], tekken.encode_document(texts[5]))

    # Mixture rates are document proportions (weight / mean tokens of the whole component, as the
    # pipeline's mix) whose token shares are our weights.
    prose_texts = [d["text"] for d in load_demo_documents("heldout", ["german_prose"])]
    mean_tokens = {
        name: np.mean([len(tekken.encode_document(t)) for t in corpus])
        for name, corpus in (("udhr", texts), ("prose", prose_texts))
    }
    seqio_mixture = seqio.get_mixture_or_task(names["mixtures"]["stage1"])
    rates = {task.name: seqio_mixture.get_rate(task) for task in seqio_mixture.tasks}
    assert rates == pytest.approx(
        {"roundtrip_udhr": 0.7 / mean_tokens["udhr"], "roundtrip_prose": 0.3 / mean_tokens["prose"]}
    )
    token_mass = np.array(
        [rates["roundtrip_udhr"] * mean_tokens["udhr"], rates["roundtrip_prose"] * mean_tokens["prose"]]
    )
    np.testing.assert_allclose(token_mass / token_mass.sum(), [0.7, 0.3])

    # Each Task yields exactly our documents (EoD appended by seqio) and their text.
    for name, task_name in names["tasks"].items():
        task = seqio.get_mixture_or_task(task_name)
        examples = list(
            task.get_dataset(sequence_length=None, split="heldout", shuffle=False).as_numpy_iterator()
        )
        assert len(examples) == len(expected[name])
        for example, document in zip(examples, expected[name]):
            np.testing.assert_array_equal(example["targets"], document)
            assert example["targets_pretokenized"].decode() == tekken.decode(document.tolist())

    # Read back as pipeline components: the same documents, and the same batches as the original mixture.
    round_trip = {
        "components": {
            "udhr": {"kind": "seqio", "task": "roundtrip_udhr", "split": "heldout", "weight": 0.7},
            "prose": {"kind": "seqio", "task": "roundtrip_prose", "split": "heldout", "weight": 0.3},
        }
    }
    for name, spec in parse_pipeline(round_trip).components.items():
        documents = seqio_import.load_component(name, spec, tekken).documents
        assert len(documents) == len(expected[name])
        for got, want in zip(documents, expected[name]):
            np.testing.assert_array_equal(got, want)
    assert_same_batches(first_batches(round_trip, tekken), first_batches(data_config, tekken))

    # The whole Mixture as one component: its Tasks' documents in turn.
    whole = seqio_import.load_component(
        "all", seqio_spec(names["mixtures"]["stage1"], "targets", split="heldout"), tekken
    )
    by_task = {"roundtrip_udhr": expected["udhr"], "roundtrip_prose": expected["prose"]}
    concatenated = [d for task in seqio_mixture.tasks for d in by_task[task.name]]
    assert len(whole.documents) == len(concatenated) == _udhr_heldout_count() + 40
    for got, want in zip(whole.documents, concatenated):
        np.testing.assert_array_equal(got, want)
