"""Shared fixtures: a small real-text input set (every 30th demo document plus a code document) and heads."""

import os

import numpy as np
import pytest

from apertus_jax.prep.demo import inputs as demo
from apertus_jax.prep.executors import resolve_work_dir
from apertus_jax.prep.filters.classifier import Classifier, HeadConfig
from configs.prep import demo as demo_config

CODE_DOC = {
    "id": "code/0",
    "lang": "de",
    "source": "code",
    "url": "https://code-0.example/repo/settings.py",
    "text": "# Kontakt: admin@example.com\nALLOWED_HOSTS = ['10.0.0.1', '2001:db8::1']\n"
    "IBAN = 'DE89370400440532013000'\n",
}


@pytest.fixture(scope="session")
def small_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("prep_inputs")
    docs = demo.demo_documents()[::30] + [CODE_DOC]
    for i in range(4):
        demo.write_jsonl(docs[i::4], str(root / "input" / f"part-{i:05d}.jsonl"))
    demo.write_jsonl(
        [{"domain": h, "robots_txt": t} for h, t in sorted(demo.DEMO_ROBOTS.items())],
        str(root / "robots.jsonl"),
    )
    heads = {}
    rng = np.random.default_rng(0)
    for name, rows in demo.demo_labels().items():
        pick = rng.permutation(len(rows))[:600]
        head = Classifier.train(
            [rows[i]["text"] for i in pick],
            np.array([rows[i]["label"] for i in pick]),
            config=HeadConfig(epochs=3),
        )
        heads[name] = str(root / "heads" / f"{name}.safetensors")
        os.makedirs(os.path.dirname(heads[name]), exist_ok=True)
        head.save(heads[name])
    return {
        "root": root,
        "docs": docs,
        "heads": heads,
        "input_dir": str(root / "input"),
        "robots": str(root / "robots.jsonl"),
        "code_doc": CODE_DOC,
    }


@pytest.fixture(scope="session")
def small_config():
    """`make(inputs, work_dir, workers=1, tasks=2)`: the demo config pointed at the small inputs and heads."""
    return _small_config


def _small_config(inputs, work_dir, workers=1, tasks=2):
    config = demo_config.get_config()
    config.demo = False
    config.work_dir = str(work_dir)
    config.input_dir = inputs["input_dir"]
    config.robots.snapshot = inputs["robots"]
    for name, path in inputs["heads"].items():
        config.heads[name].path = path
    config.executor.tasks, config.executor.workers = tasks, workers
    return resolve_work_dir(config)
