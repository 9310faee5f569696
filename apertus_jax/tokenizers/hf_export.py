"""A `Tokenizer` as a HuggingFace `tokenizer.json`: the `tokenizers` library's serialization, for HF exports.

`hf_tokenizer(tokenizer, names)` builds a `tokenizers.Tokenizer` that encodes a text to the ids of
`tokenizer.encode` (with `add_special_tokens=False`; with it, the BoD id comes first, as the run frames a
document) and decodes ids to the text of `tokenizer.decode` (with `skip_special_tokens=True`). Per kind:

- SentencePiece BPE (the demo tokenizer, `tokenizers.train`; identity normalization): SentencePiece's own
  normalization as a normalizer (a "▁" before the text, every space to "▁"). Added tokens are split off
  first, so every segment between two of them gets its own "▁", as the chat format encodes each message
  (`posttrain.chat`). The model is a BPE over all pieces with byte fallback; its merges are every split of a
  normal piece into two normal pieces, ranked by the merged piece's score, because SentencePiece's BPE merges
  the adjacent pair whose merged piece scores highest. The decoder undoes "▁", the byte pieces and the
  leading "▁".
- tekken: tiktoken's pre-tokenization regex as a `Split`, then a byte-level BPE over the 130,072 ranks
  shifted by 1,000, merges ranked by the merged token's rank (tiktoken merges the pair of lowest rank) and
  `ignore_merges` (tiktoken takes a pre-token that is itself a token whole). Ids 0..999 are special tokens:
  `<unk>`, `<s>`, `</s>`, `<pad>` (the Apertus layout, docs/recipe.md section 2), then `<SPECIAL_i>`.
- an HF `tokenizer.json`: the file itself.

In all three the post-processor puts the BoD token before a text. `names` renames control ids: the chat role
tokens of a post-trained run (`posttrain.chat.role_token_ids`). In SentencePiece models those are the byte
pieces `<0xF8>`..`<0xFF>`: bytes that never occur in UTF-8, so byte fallback never needs their names.

As with any HF tokenizer, a text that spells a special token (e.g. "</s>") is encoded as that token, where
`tokenizer.encode` encodes its characters.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping

import tokenizers
from sentencepiece import sentencepiece_model_pb2
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.tokenizers.hf import HFTokenizer
from apertus_jax.tokenizers.sentencepiece_model import SentencePieceTokenizer
from apertus_jax.tokenizers.tekken import NUM_SPECIAL, TekkenTokenizer

SPM_SPACE = "▁"
# SentencePiece piece types (sentencepiece_model.proto); merges form NORMAL pieces only, never UNUSED (5) ones.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _BYTE = 1, 2, 3, 4, 6
TEKKEN_NAMES = ("<unk>", "<s>", "</s>", "<pad>")


def hf_tokenizer(tokenizer: Tokenizer, names: Mapping[int, str] | None = None) -> tokenizers.Tokenizer:
    """The `tokenizers.Tokenizer` equivalent of `tokenizer` (module docstring); `.to_str()` is tokenizer.json.

    Args:
      tokenizer: a `SentencePieceTokenizer` (BPE, identity normalization), `TekkenTokenizer` or `HFTokenizer`.
      names: {id: token string} for control ids to name as special tokens (SentencePiece: control or
        byte pieces; tekken: ids 0..999); not for an HF tokenizer.json, whose names are its own.

    Raises:
      ValueError: a SentencePiece model of another type or normalization, a name for an id that cannot take
        one, a name already in the vocabulary, or names for an HF tokenizer.json.
    """
    names = dict(names or {})
    if isinstance(tokenizer, SentencePieceTokenizer):
        hf = _from_sentencepiece(tokenizer, names)
    elif isinstance(tokenizer, TekkenTokenizer):
        hf = _from_tekken(tokenizer, names)
    elif isinstance(tokenizer, HFTokenizer):
        if names:
            raise ValueError(
                f"tokenizer {tokenizer.name}: an HF tokenizer.json keeps its own token names; "
                f"cannot rename ids {sorted(names)}"
            )
        hf = tokenizers.Tokenizer.from_file(tokenizer.path)
    else:
        raise ValueError(
            f"tokenizer {tokenizer.name}: no tokenizer.json conversion for {type(tokenizer).__name__}"
        )
    bod = hf.id_to_token(tokenizer.bod_id)
    hf.post_processor = processors.TemplateProcessing(
        single=f"{bod} $A", pair=f"{bod} $A {bod}:1 $B:1", special_tokens=[(bod, tokenizer.bod_id)]
    )
    return hf


def special_token_names(tokenizer: Tokenizer, hf: tokenizers.Tokenizer) -> dict[str, str]:
    """`bos_token`, `eos_token`, `pad_token` of `hf` as `tokenizer` uses them (its BoD, EoD and pad ids), and
    `unk_token` where the model has one, for `tokenizer_config.json`."""
    out = {
        "bos_token": hf.id_to_token(tokenizer.bod_id),
        "eos_token": hf.id_to_token(tokenizer.eod_id),
        "pad_token": hf.id_to_token(tokenizer.pad_id),
    }
    unk = getattr(hf.model, "unk_token", None)
    if unk:
        out["unk_token"] = unk
    return out


def _named_specials(hf: tokenizers.Tokenizer, specials: dict[int, str]) -> None:
    """Adds `specials` ({id: token already in the model's vocabulary}) as special added tokens."""
    hf.add_special_tokens(
        [
            tokenizers.AddedToken(token, special=True, normalized=False)
            for _, token in sorted(specials.items())
        ]
    )


def _check_names(kind: str, names: dict[int, str], allowed: set[int], vocab: dict[str, int]) -> None:
    bad = sorted(set(names) - allowed)
    if bad:
        raise ValueError(f"{kind}: ids {bad} are not control ids and cannot be renamed")
    taken = sorted(name for i, name in names.items() if vocab.get(name, i) != i)
    if taken:
        raise ValueError(f"{kind}: names {taken} are already tokens of the vocabulary")


def _from_sentencepiece(tokenizer: SentencePieceTokenizer, names: dict[int, str]) -> tokenizers.Tokenizer:
    proto = sentencepiece_model_pb2.ModelProto()
    with open(tokenizer.path, "rb") as f:
        proto.ParseFromString(f.read())
    spec, normalizer = proto.trainer_spec, proto.normalizer_spec
    kind = f"SentencePiece model {tokenizer.path}"
    if spec.model_type != sentencepiece_model_pb2.TrainerSpec.BPE or spec.treat_whitespace_as_suffix:
        raise ValueError(f"{kind}: only BPE models with the whitespace as prefix are converted")
    if (
        normalizer.name != "identity"
        or normalizer.remove_extra_whitespaces
        or not normalizer.escape_whitespaces
    ):
        raise ValueError(
            f"{kind}: only identity normalization without whitespace removal is converted "
            f"(this one: {normalizer.name!r}, remove_extra_whitespaces={normalizer.remove_extra_whitespaces}); "
            "train it with `python -m experiments.train_tokenizer`"
        )
    pieces = [(p.piece, p.score, p.type) for p in proto.pieces]
    if any(type_ == _USER_DEFINED for _, _, type_ in pieces):
        raise ValueError(f"{kind}: user-defined pieces are not converted")
    vocab = {piece: i for i, (piece, _, _) in enumerate(pieces)}
    renamable = {i for i, (_, _, t) in enumerate(pieces) if t in (_CONTROL, _BYTE, _UNKNOWN)}
    _check_names(kind, names, renamable, vocab)
    for i, name in names.items():
        del vocab[pieces[i][0]]
        vocab[name] = i
    normal = {piece: (score, i) for i, (piece, score, t) in enumerate(pieces) if t == _NORMAL}
    merges = []
    for piece, (score, i) in normal.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                merges.append(((-score, i, normal[left][1], normal[right][1]), (left, right)))
    merges = [pair for _, pair in sorted(merges)]
    unk = pieces[spec.unk_id][0] if spec.unk_id >= 0 else None
    hf = tokenizers.Tokenizer(models.BPE(vocab, merges, unk_token=unk, byte_fallback=spec.byte_fallback))
    steps = [normalizers.Replace(" ", SPM_SPACE)]
    decode = [decoders.Replace(SPM_SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if normalizer.add_dummy_prefix:
        # Prepend skips an empty text, as SentencePiece encodes "" to no ids.
        steps.insert(0, normalizers.Prepend(SPM_SPACE))
        decode.append(decoders.Strip(" ", 1, 0))
    hf.normalizer = normalizers.Sequence(steps)
    hf.decoder = decoders.Sequence(decode)
    specials = {i: piece for i, (piece, _, t) in enumerate(pieces) if t in (_CONTROL, _UNKNOWN)}
    _named_specials(hf, {**specials, **names})
    return hf


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: printable Latin-1 bytes map to themselves, the others to 256 + n."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _from_tekken(tokenizer: TekkenTokenizer, names: dict[int, str]) -> tokenizers.Tokenizer:
    with open(tokenizer.path, encoding="utf-8") as f:
        config = json.load(f)
    alphabet = _bytes_to_unicode()
    ranks = config["vocab"][: tokenizer.vocab_size - NUM_SPECIAL]
    vocab = {
        "".join(alphabet[b] for b in base64.b64decode(entry["token_bytes"])): entry["rank"] + NUM_SPECIAL
        for entry in ranks
    }
    _check_names("tekken", names, set(range(NUM_SPECIAL)), vocab)
    specials = {i: TEKKEN_NAMES[i] if i < len(TEKKEN_NAMES) else f"<SPECIAL_{i}>" for i in range(NUM_SPECIAL)}
    specials.update(names)
    clashes = sorted(set(specials.values()) & set(vocab))
    if clashes:
        raise ValueError(f"tekken: special token names {clashes} are also byte-level tokens")
    merges = []
    for token, token_id in vocab.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in vocab and right in vocab:
                merges.append(((token_id, vocab[left], vocab[right]), (left, right)))
    merges = [pair for _, pair in sorted(merges)]
    vocab.update({token: i for i, token in specials.items()})
    hf = tokenizers.Tokenizer(models.BPE(vocab, merges, ignore_merges=True))
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(tokenizers.Regex(config["config"]["pattern"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    _named_specials(hf, specials)
    return hf
