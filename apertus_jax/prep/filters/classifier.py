"""Document classifier: embed documents -> 2-layer MLP head trained in JAX (optax) -> score.

Apertus 3.1.3 (toxicity: multilingual embedding + 2-layer MLP, best validation checkpoint) and Boldt's tier
classifiers (annotator scores distilled into a head on embeddings) share this component. Heads are trained
from labeled JSONL, one object per line `{"text": str, "label": number}`: labels in {0, 1} train a binary
head (sigmoid cross-entropy; score = probability of label 1), any other numbers a regression head (squared
error; score = predicted label, e.g. an annotator's 0-5 educational score).

Saved heads are a safetensors file of float32 arrays with the embedder config and objective in its
metadata (no pickle).
"""

import dataclasses
import json
import os
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from apertus_jax import files
from apertus_jax.prep.filters.embedders import HashedCharNgramEmbedder, embedder_from_config

OBJECTIVES = ("binary", "regression")


@dataclasses.dataclass(frozen=True)
class HeadConfig:
    """Training settings of the MLP head (hidden units, AdamW, epochs; best epoch on a validation split)."""

    hidden: int = 64
    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    epochs: int = 10
    batch_size: int = 128
    validation_fraction: float = 0.1
    seed: int = 0


def load_labeled_jsonl(path: str) -> tuple[list[str], np.ndarray]:
    """Texts and float64 labels `[N]` from a labeled JSONL file.

    Raises:
      FileNotFoundError: no such file.
      ValueError: a line that is not JSON or lacks a string `text` and a numeric `label`, or no examples.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f'labeled JSONL {path!r} not found; one {{"text", "label"}} object per line')
    texts, labels = [], []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{line_no}: not JSON ({error.msg})") from None
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("text"), str)
                or isinstance(row.get("label"), bool)
                or not isinstance(row.get("label"), (int, float))
            ):
                raise ValueError(f'{path}:{line_no}: expected {{"text": str, "label": number}}')
            texts.append(row["text"])
            labels.append(float(row["label"]))
    if not texts:
        raise ValueError(f"{path}: no labeled examples")
    return texts, np.asarray(labels)


def init_head(rng: np.random.Generator, dim: int, hidden: int) -> dict[str, np.ndarray]:
    """MLP parameters: w1 [D, H], b1 [H], w2 [H], b2 [] (float32, Lecun-normal weights, zero biases)."""
    return {
        "w1": (rng.standard_normal((dim, hidden)) / np.sqrt(dim)).astype(np.float32),
        "b1": np.zeros((hidden,), np.float32),
        "w2": (rng.standard_normal((hidden,)) / np.sqrt(hidden)).astype(np.float32),
        "b2": np.zeros((), np.float32),
    }


def head_outputs(params: dict, x_NxD: jax.Array) -> jax.Array:
    """Raw head outputs [N] (logits for binary heads, predicted labels for regression heads)."""
    hidden_NxH = jax.nn.gelu(x_NxD @ params["w1"] + params["b1"])
    return hidden_NxH @ params["w2"] + params["b2"]


def _loss(params: dict, x_NxD: jax.Array, y_N: jax.Array, objective: str) -> jax.Array:
    out_N = head_outputs(params, x_NxD)
    if objective == "binary":
        return optax.sigmoid_binary_cross_entropy(out_N, y_N).mean()
    return jnp.mean((out_N - y_N) ** 2)


def train_head(
    features: np.ndarray, labels: np.ndarray, objective: str, config: HeadConfig = HeadConfig()
) -> dict:
    """Trains the MLP head on float32 features [N, D] and labels [N]; returns numpy params of the best epoch.

    A `validation_fraction` of the examples (a seeded permutation) is held out; the parameters with the
    lowest validation loss over `epochs` are returned (Apertus: best validation checkpoint).
    Raises:
      ValueError: unknown objective, mismatched shapes, or fewer than 2 training examples.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r} unknown; use one of {OBJECTIVES}")
    if features.ndim != 2 or len(features) != len(labels):
        raise ValueError(f"features {features.shape} and labels {labels.shape} do not match")
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(labels))
    n_val = int(round(config.validation_fraction * len(labels)))
    val, train = order[:n_val], order[n_val:]
    if len(train) < 2:
        raise ValueError(f"need at least 2 training examples, got {len(train)}")
    x, y = np.asarray(features, np.float32), np.asarray(labels, np.float32)
    tx = optax.adamw(config.learning_rate, weight_decay=config.weight_decay)
    params = init_head(rng, features.shape[1], config.hidden)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, xb, yb):
        loss, grads = jax.value_and_grad(_loss)(params, xb, yb, objective)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    val_loss = jax.jit(_loss, static_argnums=3)
    batch_size = min(config.batch_size, len(train))  # whole batches only: one compiled shape
    best, best_loss = params, np.inf
    for _ in range(config.epochs):
        shuffled = rng.permutation(train)
        for start in range(0, len(shuffled) - batch_size + 1, batch_size):
            batch = shuffled[start : start + batch_size]
            params, opt_state, _ = step(params, opt_state, x[batch], y[batch])
        loss = float(val_loss(params, x[val], y[val], objective)) if n_val else 0.0
        if loss < best_loss or not n_val:
            best, best_loss = params, loss
    return {k: np.asarray(v) for k, v in best.items()}


class Classifier:
    """An embedder plus a trained head: `score(texts) -> float64 [N]`.

    Build with `Classifier.train(texts, labels, ...)` or `Classifier.load(path)`; `save(path)` writes a
    safetensors file. The objective is inferred from the labels when not given ({0, 1} -> binary).
    """

    def __init__(self, embedder, params: dict, objective: str):
        self.embedder, self.objective = embedder, objective
        self.params = {k: jnp.asarray(v) for k, v in params.items()}
        self._outputs = jax.jit(head_outputs)

    @classmethod
    def train(
        cls,
        texts: Sequence[str],
        labels: np.ndarray,
        embedder=None,
        objective: str | None = None,
        config: HeadConfig = HeadConfig(),
    ) -> "Classifier":
        """Embeds `texts` and trains a head on float `labels` [N] (see `train_head`).

        Args:
          texts: documents.
          labels: one number per document; {0, 1} only -> "binary", otherwise "regression".
          embedder: default `HashedCharNgramEmbedder()`.
          objective: "binary" or "regression"; None infers it from the labels.
          config: head training settings.

        Raises:
          ValueError: as `train_head` (unknown objective, mismatched lengths, < 2 training examples).
        """
        embedder = embedder or HashedCharNgramEmbedder()
        labels = np.asarray(labels, np.float64)
        objective = objective or ("binary" if set(np.unique(labels)) <= {0.0, 1.0} else "regression")
        return cls(embedder, train_head(embedder(texts), labels, objective, config), objective)

    def score(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """float64 [N]: P(label = 1) for binary heads, the predicted label for regression heads."""
        scores = [
            self.score_features(self.embedder(texts[start : start + batch_size]))
            for start in range(0, len(texts), batch_size)
        ]
        return np.concatenate(scores) if scores else np.zeros((0,), np.float64)

    def score_features(self, features_NxD: np.ndarray) -> np.ndarray:
        """Scores [N] from precomputed `self.embedder` features [N, D] (heads sharing an embedder embed once)."""
        out = self._outputs(self.params, jnp.asarray(features_NxD))
        return np.asarray(jax.nn.sigmoid(out) if self.objective == "binary" else out, np.float64)

    def save(self, path: str) -> None:
        """Writes params and metadata as safetensors atomically (`apertus_jax.files.atomic_path`)."""
        meta = {"objective": self.objective, "embedder": json.dumps(self.embedder.config())}
        with files.atomic_path(path) as tmp:
            save_file({k: np.asarray(v, np.float32) for k, v in self.params.items()}, tmp, metadata=meta)

    @classmethod
    def load(cls, path: str, embedder=None) -> "Classifier":
        """Loads a head saved by `save`; pass `embedder` for heads trained on a user's CallableEmbedder.

        Raises:
          FileNotFoundError: no such file.
          ValueError: the file's embedder differs from `embedder` (see `embedder_from_config`).
        """
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"classifier head {path!r} not found; set the head's `labels` in the prep "
                "config (prepare_data trains missing heads) or use Classifier.train(...).save"
            )

        with safe_open(path, framework="numpy") as f:
            meta = f.metadata()
        embedder = embedder_from_config(json.loads(meta["embedder"]), embedder)
        return cls(embedder, load_file(path), meta["objective"])
