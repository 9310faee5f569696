"""EleutherAI lm-evaluation-harness model `apertus_jax`: harness tasks on our JAX checkpoints (docs/lm_eval.md).

Importing this module registers `ApertusJaxLM` under the name `apertus_jax` in lm-eval's model registry.
lm-eval 0.4.13 resolves `--model NAME` only from that registry (it reads no plugin entry points for
models), so the command line goes through `python -m experiments.lm_eval`, which is lm-eval's own
CLI with this module imported first.

Request handling (the harness's `TemplateLM` contract, as its `--model hf` does it):
- tokens: `tok_encode` prepends the BoD token (`add_bos_token=True`, the default) as every training document
  starts with it (docs/recipe.md section 2); `_encode_pair` encodes context + continuation jointly and
  splits after the context's tokens, moving trailing context spaces into the continuation. An empty context
  is the BoD token alone.
- `loglikelihood`: requests are packed several to a row (`eval.scoring.pack_requests`: own segment, positions
  from 0) into fixed `[batch_size, max_length + 1]` batches, so one compilation serves a whole task; the
  sum of the continuation's log-probabilities and whether every continuation token is the argmax.
- `loglikelihood_rolling`: the harness's disjoint rolling windows of `max_length` predicted tokens, the first
  conditioned on the BoD token, scored as loglikelihood requests and summed.
- `generate_until`: our KV-cached `models.generate.generate` (greedy, or with `do_sample` sampling at
  `temperature` / `top_p`), cut at
  the first stop string of `until` (or the EoD token); decoding runs the full `max_gen_toks` and cuts after.
"""

from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import lm_eval.models  # noqa: F401  (lm-eval's own models: it fills an empty registry only)
import numpy as np
from flax import nnx
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window, simple_parse_args_string
from tqdm import tqdm

from apertus_jax.data.config import DataConfig
from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.eval.scoring import batched_token_logprobs, pack_requests
from apertus_jax.models.generate import generate
from apertus_jax.models.hf import load_hf
from apertus_jax.models.transformer import Apertus, model_from_params
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.load import load_tokenizer, spec_forms
from apertus_jax.trained.workdir import load_workdir

DEFAULT_BATCH_SIZE = 16
DEFAULT_MAX_GEN_TOKS = 256
REQUESTS_PER_PACK = 2048


def _truthy(value) -> bool:
    """A model_args value ("true", "False", "1", True, ...) as a bool."""
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes")


def load_model_and_tokenizer(
    workdir: str | None = None, pretrained: str | None = None, tokenizer: str | None = None, dtype: str = ""
) -> tuple[Apertus, Tokenizer]:
    """The model and tokenizer of a training workdir or of a HF checkpoint directory.

    Args:
      workdir: an `experiments.pretrain` workdir (newest checkpoint and the run's tokenizer).
      pretrained: a HF directory written by `models.hf.save_hf` (Apertus or Llama); its tokenizer is
        `tokenizer.json` in the same directory unless `tokenizer` is given.
      tokenizer: a tokenizer spec (`tokenizers.load.SPEC_FORMS`; "demo" is the demo BPE of
        `DataConfig.demo_tokenizer_vocab` ids) overriding the default one.
      dtype: compute dtype ("bfloat16", ...); empty keeps the checkpoint's.
    Raises:
      ValueError: neither or both of `workdir` and `pretrained`, or no tokenizer found.
      FileNotFoundError: as `trained.workdir.load_workdir` / `models.hf.load_hf`.
    """

    if (workdir is None) == (pretrained is None):
        raise ValueError(
            "apertus_jax: pass exactly one of model_args workdir=DIR (training workdir) or pretrained=DIR "
            "(HF checkpoint directory)"
        )
    if workdir is not None:
        trained = load_workdir(workdir, "evaluating")
        model, tok = trained.model, trained.tokenizer
        if dtype and dtype != model.config.dtype:
            params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
            model = model_from_params(model.config.replace(dtype=dtype), params)
    else:
        model = load_hf(pretrained, **({"dtype": dtype} if dtype else {}))
        tok = None
        if tokenizer is None:
            path = os.path.join(pretrained, "tokenizer.json")
            if not os.path.isfile(path):
                raise ValueError(
                    f"apertus_jax: {pretrained} has no tokenizer.json; pass model_args tokenizer=SPEC "
                    f"({spec_forms()})"
                )
            tok = load_tokenizer(f"hf:{path}")
    if tokenizer is not None:
        tok = run_tokenizer(tokenizer, DataConfig.demo_tokenizer_vocab)
    return model, tok


def _make_scores_fn(model: Apertus):
    """Jitted `(tokens, positions, segment_ids) [B, T] -> [B, T-1, 2]` float32: channel 0 the log-prob of
    the next token, channel 1 whether it is the argmax (1.0) or not (0.0)."""
    graphdef, state = nnx.split(model)

    @jax.jit
    def scores(state, tokens_BxT, positions_BxT, segment_ids_BxT):
        logits_BxTxV = nnx.merge(graphdef, state)(tokens_BxT, positions_BxT, segment_ids_BxT)
        logprobs_BxTxV = jax.nn.log_softmax(logits_BxTxV[:, :-1].astype(jnp.float32), axis=-1)
        targets_BxT = tokens_BxT[:, 1:]
        logprob_BxT = jnp.take_along_axis(logprobs_BxTxV, targets_BxT[..., None], axis=-1)[..., 0]
        greedy_BxT = (jnp.argmax(logprobs_BxTxV, axis=-1) == targets_BxT).astype(jnp.float32)
        return jnp.stack([logprob_BxT, greedy_BxT], axis=-1)

    return lambda tokens, positions, segment_ids: np.asarray(
        scores(state, jnp.asarray(tokens), jnp.asarray(positions), jnp.asarray(segment_ids))
    )


@register_model("apertus_jax")
class ApertusJaxLM(TemplateLM):
    """lm-eval model over our JAX `Apertus` (see the module docstring for the request handling).

    Args (lm-eval `--model_args key=value,...`; strings are converted):
      workdir / pretrained / tokenizer / dtype: what to load, see `load_model_and_tokenizer`.
      model, tokenizer_obj: an already built `Apertus` and `Tokenizer` (Python use; instead of the above).
      batch_size: rows per forward pass ("auto" = 16); each row packs several requests.
      max_length: tokens of context + continuation per request (default: the model's `max_seq_len`);
        longer contexts are cut on the left, as the harness's HF model does.
      add_bos_token: prepend the BoD token to every context (default true, as in training).
      max_gen_toks: generation length of `generate_until` requests that do not set their own (256).
      seed: PRNG seed of sampled generation (`do_sample`); batch k uses `seed + k * batch_size`.
      max_batch_size, device: accepted for CLI compatibility and ignored (JAX places arrays itself).
    """

    def __init__(
        self,
        workdir: str | None = None,
        pretrained: str | None = None,
        tokenizer: str | None = None,
        dtype: str = "",
        batch_size: int | str = DEFAULT_BATCH_SIZE,
        max_length: int | str | None = None,
        add_bos_token: bool | str = True,
        max_gen_toks: int | str = DEFAULT_MAX_GEN_TOKS,
        model: Apertus | None = None,
        tokenizer_obj: Tokenizer | None = None,
        max_batch_size=None,
        device=None,
        seed: int | str = 0,
    ):
        super().__init__()
        del max_batch_size, device
        if model is not None:
            if tokenizer_obj is None:
                raise ValueError("apertus_jax: pass tokenizer_obj together with model")
            self._model, self._tokenizer = model, tokenizer_obj
        else:
            self._model, self._tokenizer = load_model_and_tokenizer(workdir, pretrained, tokenizer, dtype)
        if self._tokenizer.vocab_size > self._model.config.vocab_size:
            raise ValueError(
                f"apertus_jax: tokenizer has {self._tokenizer.vocab_size} ids but the model only "
                f"{self._model.config.vocab_size}; pass the run's tokenizer"
            )
        self.batch_size = DEFAULT_BATCH_SIZE if str(batch_size).startswith("auto") else int(batch_size)
        self._max_length = int(max_length) if max_length else int(self._model.config.max_seq_len)
        self.add_bos_token = _truthy(add_bos_token)
        self.max_gen_toks = int(max_gen_toks)
        self.seed = int(seed)
        self._scores = _make_scores_fn(self._model)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None) -> ApertusJaxLM:
        """The model of `--model_args` as lm-eval's CLI parses them ({key: value}).

        Raises:
          ValueError: a key `__init__` does not take (a typo such as `workdr=`), naming the closest key; lm-eval
            would raise a TypeError about `__init__`'s keyword arguments.
        """
        known = [name for name in inspect.signature(cls.__init__).parameters if name != "self"]
        for key in arg_dict:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"did you mean {close[0]}=? " if close else ""
                raise ValueError(
                    f"apertus_jax: unknown --model_args key {key!r}; {hint}the keys: {', '.join(known)}"
                )
        return super().create_from_arg_obj(arg_dict, additional_config)

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> ApertusJaxLM:
        """The model of `--model_args key=value,...` given as one string (`create_from_arg_obj`'s check)."""
        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    # ------------------------------------------------------------ tokens

    @property
    def eot_token_id(self) -> int:
        return self._tokenizer.eod_id

    @property
    def prefix_token_id(self) -> int:
        return self._tokenizer.bod_id

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def tokenizer_name(self) -> str:
        return self._tokenizer.name

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        """Token ids of `string`, with the BoD token first when `add_special_tokens` (None: `add_bos_token`)."""
        add = self.add_bos_token if add_special_tokens is None else add_special_tokens
        ids = self._tokenizer.encode(string)
        return [self._tokenizer.bod_id, *ids] if add else ids

    def tok_decode(self, tokens: Sequence[int]) -> str:
        return self._tokenizer.decode(tokens)

    # ------------------------------------------------------------ scoring

    def _loglikelihood_tokens(
        self, requests, disable_tqdm: bool = False, **kwargs
    ) -> list[tuple[float, bool]]:
        """`(sum of continuation log-probs, every continuation token greedy)` per `(key, context_ids,
        continuation_ids)` request, in order; packed rows of `max_length + 1` tokens, `REQUESTS_PER_PACK`
        requests packed at a time (bounded packing cost and host memory; a progress bar with ETA).

        Raises:
          ValueError: an empty continuation, or one that leaves no context token within `max_length + 1`.
        """
        pad_id = self._tokenizer.pad_id
        results = []
        chunks = range(0, len(requests), REQUESTS_PER_PACK)
        for begin in tqdm(chunks, desc="apertus_jax loglikelihood", disable=disable_tqdm or len(chunks) < 2):
            chunk = requests[begin : begin + REQUESTS_PER_PACK]
            pairs = [(list(context), list(continuation)) for _, context, continuation in chunk]
            rows, spans = pack_requests(pairs, self._max_length + 1, pad_id)
            scores = batched_token_logprobs(self._scores, rows, batch_size=self.batch_size, pad_id=pad_id)
            for (key, _, _), (row, start, stop) in zip(chunk, spans):
                span = scores[row, start:stop]
                result = (float(np.sum(span[:, 0], dtype=np.float64)), bool(np.all(span[:, 1] == 1.0)))
                results.append(result)
                if key is not None:
                    self.cache_hook.add_partial("loglikelihood", key, result)
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Total log-likelihood (nats) of each whole string, in disjoint windows of `max_length` tokens."""
        windows, counts = [], []
        for (string,) in [req.args for req in requests]:
            ids = self.tok_encode(string, add_special_tokens=False)
            rolling = [
                make_disjoint_window(w)
                for w in get_rolling_token_windows(
                    token_list=ids,
                    prefix_token=self.prefix_token_id,
                    max_seq_len=self._max_length,
                    context_len=1,
                )
            ]
            windows.extend((None, context, continuation) for context, continuation in rolling)
            counts.append(len(rolling))
        scores = iter(self._loglikelihood_tokens(windows, disable_tqdm=disable_tqdm))
        results = []
        for req, count in zip(requests, counts):
            total = sum(next(scores)[0] for _ in range(count))
            results.append(total)
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, total)
        return results

    # ------------------------------------------------------------ generation

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy (or sampled, `do_sample`/`temperature`) continuations cut at the first stop string.

        Requests with equal generation settings run together in batches of `batch_size` prompts; prompts
        are cut on the left to leave `max_gen_toks` tokens of room within `max_length`.

        Raises:
          ValueError: `until` that is neither a string nor a list of strings, or `max_gen_toks` that leaves
            no room for a prompt.
        """
        results: list[str | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        settings = []
        for i, req in enumerate(requests):
            context, gen_kwargs = req.args
            until, max_gen_toks, temperature, top_p = self._generation_settings(dict(gen_kwargs))
            settings.append((context, until))
            groups.setdefault((max_gen_toks, temperature, top_p), []).append(i)
        for (max_gen_toks, temperature, top_p), indices in groups.items():
            room = self._max_length - max_gen_toks
            if room < 1:
                raise ValueError(
                    f"apertus_jax: max_gen_toks={max_gen_toks} leaves no prompt room within "
                    f"max_length={self._max_length}; raise max_length or lower max_gen_toks"
                )
            starts = range(0, len(indices), self.batch_size)
            for b in tqdm(starts, desc="apertus_jax generate_until", disable=disable_tqdm or len(starts) < 2):
                batch = indices[b : b + self.batch_size]
                prompts = [self.tok_encode(settings[i][0])[-room:] for i in batch]
                out = generate(
                    self._model,
                    prompts,
                    max_new_tokens=max_gen_toks,
                    temperature=temperature,
                    top_p=top_p,
                    eos_id=self._tokenizer.eod_id,
                    pad_id=self._tokenizer.pad_id,
                    seed=self.seed + b,
                )
                for i, tokens in zip(batch, out):
                    text = self.tok_decode(_until_eod(tokens, self._tokenizer.eod_id))
                    results[i] = cut_at_stop(text, settings[i][1])
                    self.cache_hook.add_partial("generate_until", requests[i].args, results[i])
        return results

    def _generation_settings(self, gen_kwargs: dict) -> tuple[list[str], int, float, float]:
        """`(until, max_gen_toks, temperature, top_p)` of one request's `gen_kwargs` (greedy unless
        `do_sample`)."""
        until = gen_kwargs.pop("until", None) or []
        if isinstance(until, str):
            until = [until]
        if not isinstance(until, list) or not all(isinstance(u, str) for u in until):
            raise ValueError(f"apertus_jax: gen_kwargs until={until!r} must be a string or a list of strings")
        max_gen_toks = int(gen_kwargs.pop("max_gen_toks", self.max_gen_toks))
        do_sample = _truthy(gen_kwargs.pop("do_sample", False))
        temperature = float(gen_kwargs.pop("temperature", 1.0)) if do_sample else 0.0
        top_p = float(gen_kwargs.pop("top_p", 1.0)) if do_sample else 1.0
        return until, max_gen_toks, temperature, top_p


def _until_eod(tokens: np.ndarray, eod_id: int) -> list[int]:
    """Generated ids up to (not including) the first EoD token."""
    tokens = [int(t) for t in tokens]
    return tokens[: tokens.index(eod_id)] if eod_id in tokens else tokens


def cut_at_stop(text: str, until: Sequence[str]) -> str:
    """`text` up to the earliest occurrence of any stop string in `until` (unchanged if none occurs)."""
    cut = min((i for i in (text.find(stop) for stop in until if stop) if i >= 0), default=len(text))
    return text[:cut]
