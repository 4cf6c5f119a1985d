"""A SentencePiece model as a Hugging Face ``tokenizers`` tokenizer (``tokenizer.json``) that segments text
into the same piece ids.

The pipeline follows SentencePiece's own order (``normalizer_spec`` of the model proto): the precompiled
character map (NFKC, and case folding for ``nmt_nfkc_cf``), removal of leading, trailing and repeated spaces,
spaces escaped as U+2581, the dummy prefix U+2581, then the Viterbi segmentation of the unigram model with
the same piece scores (or BPE merges ranked by score). It is the construction of the ``SpmConverter`` in
Hugging Face transformers (``convert_slow_tokenizer.py``), written here without that dependency. Consecutive
unknown characters become one ``<unk>`` piece in both (SentencePiece merges runs of unknown pieces;
``tokenizers`` fuses them).
"""

from __future__ import annotations

from ..errors import MissingDependencyError, ModelFormatError
from .hf_tokenizer import tokenizers_module

SPACE = "\u2581"


def parse_proto(proto: bytes):
    """The SentencePiece ``ModelProto`` of serialized model bytes (needs protobuf: the ``interop`` extra)."""
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb
    except ImportError as e:  # the generated module imports google.protobuf, which sentencepiece does not require
        raise MissingDependencyError(f"reading a SentencePiece model's pieces needs protobuf ({e}): "
                                     "pip install 'bitextmine[interop]' (or pip install protobuf)") from None

    m = pb.ModelProto()
    try:
        m.ParseFromString(proto)
    except Exception as e:  # protobuf's DecodeError has no stable import path across versions
        raise ModelFormatError(f"not a SentencePiece model ({e})") from None
    return m


KEEP_CASE_AS = [chr(0x100000 + i) for i in range(256)]  # private use, plane 16: what a capital is kept as while
# lower-casing (a text holding one of these characters itself would read it as that capital: none is a piece)


def _lowercase_as(proto: bytes, charsmap: bytes, normalizers) -> list:
    """Normalizers that lower-case a text before the precompiled map ``charsmap`` of the case-folding model
    ``proto``, keeping aside each capital for which the map alone gives SentencePiece's normalisation more often
    than the map after lower-casing (tried alone, before U+0308 and U+0301, after a letter): the dotted "İ", which
    the bundled model keeps, and Cherokee capitals, whose lower case it folds back to the capital without the
    mark; [] when more than :data:`KEEP_CASE_AS` are."""
    import sys
    import unicodedata

    from ..tokenizer import Tokenizer

    processor = Tokenizer(proto).sp
    alone = normalizers.Precompiled(charsmap)
    lowered = normalizers.Sequence([normalizers.Lowercase(), alone])

    def right(norm, probes, want) -> int:
        return sum(norm.normalize_str(p) == w for p, w in zip(probes, want))

    keep = []
    for c in (chr(i) for i in range(sys.maxunicode + 1)):
        if 0xD800 <= ord(c) < 0xE000 or c.lower() == c:
            continue
        probes = (c, c + "\u0308", c + "\u0301", "a" + c)
        want = [processor.normalize(p).lstrip("\u2581") for p in probes]
        if right(alone, probes, want) > right(lowered, probes, want):
            keep.append(c)
    if len(keep) > len(KEEP_CASE_AS):
        return []
    pairs = list(zip(keep, KEEP_CASE_AS))
    aside = [normalizers.Replace(form, p) for c, p in pairs  # the capital, and decomposed ("I" + U+0307)
             for form in dict.fromkeys((unicodedata.normalize("NFD", c), c))]
    return aside + [normalizers.Lowercase()] + [normalizers.Replace(p, c) for c, p in pairs]


def _unmatchable(piece) -> str:
    """A piece's string in the tokenizer.json vocabulary: its own, but ``<unk>`` and control pieces behind a NUL,
    which no text bitextmine reads holds, so that a literal "<unk>" in a text is split as SentencePiece splits it
    rather than matched as the unknown token (the id, not the string, is what the model uses)."""
    return "\0" + piece.piece if piece.type in (piece.UNKNOWN, piece.CONTROL) else piece.piece


def tokenizer_from_sentencepiece(proto: bytes, *, unknown_as: "str | None" = None):
    """A ``tokenizers.Tokenizer`` that encodes (``add_special_tokens=False``) to the ids SentencePiece gives
    for the model ``proto`` (serialized ModelProto bytes). Unigram and BPE models; byte fallback is kept.

    ``unknown_as`` (a character no piece holds): every run of characters that no piece holds becomes that
    character, a token of its own with the next id (vocab_size), instead of SentencePiece's ``<unk>``. For
    model2vec, which drops its unknown token from every sentence: giving the new token the ``<unk>`` row keeps
    the vectors. Runs are what SentencePiece merges into one ``<unk>``, as long as every character of a piece
    is also a piece of its own (so a character is unknown only where no piece holds it; SentencePiece's
    trainers make models that way: :func:`characters_without_own_piece` checks a model)."""
    tk = tokenizers_module()
    from tokenizers import Regex, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE, Unigram

    m = parse_proto(proto)
    spec, trainer = m.normalizer_spec, m.trainer_spec
    kind = trainer.ModelType.Name(trainer.model_type)
    byte_fallback = bool(trainer.byte_fallback)
    user_defined = [p.piece for p in m.pieces if p.type == p.USER_DEFINED]
    if unknown_as is not None and kind != "UNIGRAM":
        raise ModelFormatError(f"a SentencePiece {kind.lower()} model; a model2vec export needs a unigram one "
                               "(--format sentence-transformers takes both)")
    if unknown_as is not None and unknown_as in piece_characters(m):
        raise ModelFormatError(f"a piece holds {unknown_as!r}, the character that stands for a run of unknown "
                               "characters in a model2vec export (--format sentence-transformers has none)")
    if kind == "UNIGRAM":
        vocab = [(_unmatchable(p), p.score) for p in m.pieces]
        if unknown_as is not None:
            vocab.append((unknown_as, min(p.score for p in m.pieces) - 10.0))  # SentencePiece's unknown penalty
        model = Unigram(vocab, unk_id=trainer.unk_id, byte_fallback=byte_fallback)
    elif kind == "BPE":
        model = BPE(vocab={p.piece: i for i, p in enumerate(m.pieces)}, merges=_bpe_merges(m),
                    unk_token=trainer.unk_piece, fuse_unk=True, byte_fallback=byte_fallback,
                    ignore_merges=bool(user_defined))
    else:
        raise ModelFormatError(f"a SentencePiece {kind.lower()} model; only unigram and bpe models convert")
    tok = tk.Tokenizer(model)
    steps = []
    if spec.precompiled_charsmap:
        if spec.name.endswith("_cf"):  # lower case first: Precompiled maps a capital and the marks after it ("U" +
            steps += _lowercase_as(proto, spec.precompiled_charsmap, normalizers)  # U+0308) by the capital alone
        steps.append(normalizers.Precompiled(spec.precompiled_charsmap))
    if spec.remove_extra_whitespaces:  # spaces only: SentencePiece leaves other whitespace alone
        steps += [normalizers.Replace(Regex(r"\A +| +\z"), ""), normalizers.Replace(Regex(" {2,}"), " ")]
    if spec.escape_whitespaces:
        steps.append(normalizers.Replace(" ", SPACE))
    if spec.add_dummy_prefix:
        # Metaspace adds no prefix to a text that already starts with U+2581; SentencePiece always adds one
        steps.append(normalizers.Replace(Regex(r"\A" + SPACE), SPACE + SPACE))
    if unknown_as is not None:
        steps.append(normalizers.Replace(Regex(f"[^{char_class(piece_characters(m))}]+"), unknown_as))
    tok.normalizer = normalizers.Sequence(steps)
    pre = []
    if spec.add_dummy_prefix:
        pre.append(pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=False))
    if user_defined:  # SentencePiece emits user-defined pieces whole
        import re

        pattern = "|".join(re.escape(p) for p in sorted(user_defined, key=len, reverse=True))
        pre.append(pre_tokenizers.Split(Regex(pattern), behavior="isolated"))
    if pre:
        tok.pre_tokenizer = pre_tokenizers.Sequence(pre)
    dec = [decoders.Replace(SPACE, " ")]
    if byte_fallback:
        dec.append(decoders.ByteFallback())
    if spec.add_dummy_prefix:
        dec += [decoders.Fuse(), decoders.Strip(content=" ", left=1)]
    elif byte_fallback:
        dec.append(decoders.Fuse())
    tok.decoder = decoders.Sequence(dec)
    return tok


def piece_characters(m) -> set[str]:
    """The characters of the normal and user-defined pieces of ModelProto ``m`` (U+2581 among them)."""
    return {c for p in m.pieces if p.type in (p.NORMAL, p.USER_DEFINED) for c in p.piece}


def characters_without_own_piece(proto: bytes) -> set[str]:
    """Characters that occur in a piece of ``proto`` but are no piece alone (empty for models made by
    SentencePiece's trainers; see :func:`tokenizer_from_sentencepiece`)."""
    m = parse_proto(proto)
    return piece_characters(m) - {p.piece for p in m.pieces if p.type in (p.NORMAL, p.USER_DEFINED)}


def char_class(chars: set[str]) -> str:
    """The inside of a regex character class (Oniguruma syntax) matching exactly ``chars``, as ranges."""
    codes, out, i = sorted(ord(c) for c in chars), [], 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        out.append(f"\\x{{{codes[i]:X}}}" + (f"-\\x{{{codes[j]:X}}}" if j > i else ""))
        i = j + 1
    return "".join(out)


def _bpe_merges(m) -> list[tuple[str, str]]:
    """BPE merges of a SentencePiece BPE model: every split of a normal piece into two normal pieces, the
    higher-scored (then lower id) result first."""
    normal = {p.piece: (p.score, i) for i, p in enumerate(m.pieces) if p.type == p.NORMAL}
    ranked = []
    for piece, (score, i) in normal.items():
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in normal and right in normal:
                ranked.append((-score, i, left, right))
    return [(a, b) for _, _, a, b in sorted(ranked)]


def tokenizer_json_from_sentencepiece(proto: bytes, *, unknown_as: "str | None" = None) -> str:
    """The ``tokenizer.json`` text of :func:`tokenizer_from_sentencepiece` (no padding, no truncation)."""
    return tokenizer_from_sentencepiece(proto, unknown_as=unknown_as).to_str()
