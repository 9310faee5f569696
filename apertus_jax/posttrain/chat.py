"""The chat template: dedicated start/end tokens per role, loss on assistant tokens only.

A conversation renders as

    <s> <|system_start|> ... <|system_end|> <|user_start|> ... <|user_end|>
        <|assistant_start|> ... <|assistant_end|> ... </s>

where each `...` is the message content encoded without special tokens. The trained tokens (targets of
the loss) are exactly the content tokens of assistant messages and their `<|assistant_end|>`: the model
learns to answer and to stop, never to write the user's turns. A generation prompt is the rendered
conversation so far followed by `<|assistant_start|>`; generation stops at `<|assistant_end|>`.
(Apertus post-training uses a chat format with dedicated role tokens, docs/recipe.md section 11 and
Apertus tech report section 4.)

Role token ids (never produced by `encode`, so user text cannot forge a role boundary):

- tekken: ids 61..68 of the 1,000 control ids (the Apertus pretraining layout uses only 0..3);
- SentencePiece models with byte fallback (the demo tokenizer and those of `apertus_jax.tokenizers.train`):
  the byte pieces `<0xF8>`..`<0xFF>`; bytes 0xF8..0xFF never occur in UTF-8, so `encode` never emits them
  (demo tokenizer: ids 252..259).

Their embeddings are untrained after pretraining; SFT learns them.
"""

from collections.abc import Sequence

import numpy as np

from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.sentencepiece_model import SentencePieceTokenizer
from apertus_jax.tokenizers.tekken import TekkenTokenizer

ROLES = ("system", "developer", "user", "assistant")
TEKKEN_FIRST_ROLE_ID = 61
FIRST_SPARE_UTF8_BYTE = 0xF8
# The names of the role tokens in a HF export (`role_token_names`, `CHAT_TEMPLATE`).
ROLE_TOKENS = {role: (f"<|{role}_start|>", f"<|{role}_end|>") for role in ROLES}

# `render_conversation` / `render_prompt` as the Jinja chat template of a HF export (transformers'
# `apply_chat_template` passes `messages`, `add_generation_prompt`, `bos_token`, `eos_token`). The text renders
# the role tokens by name; the tokenizer.json splits them off before it encodes each message content on its own.
CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] not in " + repr(list(ROLES)) + " -%}"
    "{{- raise_exception('unknown chat role ' + message['role'] + '; use one of "
    + ", ".join(ROLES)
    + "') -}}"
    "{%- endif -%}"
    "{{- '<|' + message['role'] + '_start|>' + message['content'] + '<|' + message['role'] + '_end|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '" + ROLE_TOKENS["assistant"][0] + "' -}}"
    "{%- else -%}{{- eos_token -}}{%- endif -%}"
)


def role_token_ids(tokenizer: Tokenizer) -> dict[str, tuple[int, int]]:
    """role -> (start id, end id) for the tokenizer (see the module docstring for the ids).

    Raises:
      ValueError: a tokenizer without spare ids (a SentencePiece model without byte fallback, an HF
        tokenizer.json).
    """
    if isinstance(tokenizer, TekkenTokenizer):
        ids = list(range(TEKKEN_FIRST_ROLE_ID, TEKKEN_FIRST_ROLE_ID + 2 * len(ROLES)))
    elif isinstance(tokenizer, SentencePieceTokenizer):
        ids = [tokenizer.byte_piece_id(b) for b in range(FIRST_SPARE_UTF8_BYTE, FIRST_SPARE_UTF8_BYTE + 8)]
        if None in ids:
            raise ValueError(
                f"tokenizer {tokenizer.name} has no byte-fallback pieces <0xF8>..<0xFF> for the chat role "
                "tokens; train it with `python -m experiments.train_tokenizer` (byte fallback on)"
            )
    else:
        raise ValueError(
            f"tokenizer {tokenizer.name}: chat role tokens are defined for tekken and SentencePiece "
            "byte-fallback models only; use data.tokenizer 'tekken', 'demo' or 'sentencepiece:PATH'"
        )
    return {role: (ids[2 * i], ids[2 * i + 1]) for i, role in enumerate(ROLES)}


def role_token_names(tokenizer: Tokenizer) -> dict[int, str]:
    """id -> name (`ROLE_TOKENS`, e.g. "<|user_start|>") of the tokenizer's role tokens, for a HF export.

    Raises:
      ValueError: as `role_token_ids`.
    """
    ids = role_token_ids(tokenizer)
    return {i: name for role in ROLES for i, name in zip(ids[role], ROLE_TOKENS[role])}


def render_conversation(messages: Sequence[dict], tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The ids of a whole conversation and which of them are trained.

    Args:
      messages: validated `{"role", "content"}` dicts (`inputs.parse_messages`).
      tokenizer: any tokenizer with role token ids (`role_token_ids`).

    Returns:
      `(ids, trained)`: int32 `[L]` ids `<s> ... </s>` and bool `[L]`, True exactly at the content tokens of
      assistant messages and their `<|assistant_end|>` (a trained token is a TARGET of the loss).
    """
    roles = role_token_ids(tokenizer)
    ids, trained = [tokenizer.bod_id], [False]
    for message, content_ids in zip(messages, tokenizer.encode_batch([m["content"] for m in messages])):
        start, end = roles[message["role"]]
        is_assistant = message["role"] == "assistant"
        ids += [start, *content_ids, end]
        trained += [False] + [is_assistant] * (len(content_ids) + 1)
    ids.append(tokenizer.eod_id)
    trained.append(False)
    return np.asarray(ids, np.int32), np.asarray(trained, bool)


def render_prompt(messages: Sequence[dict], tokenizer: Tokenizer) -> np.ndarray:
    """The generation prompt: `<s>`, the rendered messages, then `<|assistant_start|>` (int32 `[L]`)."""
    ids, _ = render_conversation(messages, tokenizer)
    return np.append(ids[:-1], role_token_ids(tokenizer)["assistant"][0]).astype(np.int32)


def render_completion(text: str, tokenizer: Tokenizer) -> np.ndarray:
    """The ids an assistant completion adds to a prompt: content, `<|assistant_end|>`, `</s>` (int32)."""
    end = role_token_ids(tokenizer)["assistant"][1]
    return np.asarray([*tokenizer.encode(text), end, tokenizer.eod_id], np.int32)


def decode_reply(ids: Sequence[int], tokenizer: Tokenizer) -> str:
    """The text of generated ids up to the first `<|assistant_end|>` (role tokens dropped)."""
    roles = role_token_ids(tokenizer)
    ids = [int(i) for i in ids]
    end = roles["assistant"][1]
    if end in ids:
        ids = ids[: ids.index(end)]
    role_ids = {i for pair in roles.values() for i in pair}
    return tokenizer.decode([i for i in ids if i not in role_ids])
