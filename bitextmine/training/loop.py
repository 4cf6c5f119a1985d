"""Training encoders on bitext (Wieting et al. 2019): negatives from a mega-batch, symmetric hinge loss.

The mega-batch holds k mini-batches; k starts at ``megabatch_start`` and grows by one every
``megabatch_every`` mini-batches up to ``megabatch_max``. For each mega-batch, the embeddings of all its
pairs are computed once without dropout and the negatives chosen (``negatives``: the hardest, found
with one matrix product by :func:`bitextmine.loss.hardest_negatives`; random; or a mix; with
``paraphrase``, from the pooled sentences of both sides); then each mini-batch takes one Adam step on
the hinge loss with piece dropout (averaging encoders) or word shuffling (the BiLSTM).

At the end, token frequencies over the training data and the SIF common component are stored in the
model (:mod:`bitextmine.sif`).

Checkpoints (``OUT/checkpoint/``: ``state.json``, ``tensors.safetensors``, ``tokenizer.bin``) hold the
weights, Adam's moments, the annealing step, the random generators, the epoch and position in the
epoch's permutation, and the best weights so far; they are written at mega-batch boundaries, and
``resume=True`` continues from one to the same final model as an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from .. import __version__
from ..config import AMP_MODES, NEGATIVES, TokenizerConfig, TrainConfig
from ..corpus import CorpusSpec, load_corpora, read_parallel
from ..errors import ConfigError, ModelFormatError
from ..evaluation.metrics import retrieval_accuracy, sts_pearson
from ..evaluation.readers import read_sts
from .negatives import hardest_negatives
from ..model import Model, make_encoder, piece_dropout, shuffle_words, tensors_from_module
from ..tokenizer import Tokenizer, ragged_gather, sample_sentences, train_sentencepiece

CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_VERSION = 2
TOKENIZER_CKPT = "tokenizer.bin"

Progress = Callable[[dict], None]


@dataclass
class Side:
    """One side of a tokenised corpus: flat ids int64 (total,), offsets int64 (n,), lengths int64 (n,),
    text ids int64 (n,) equal for equal strings."""

    ids: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    text_ids: np.ndarray

    @classmethod
    def build(cls, texts: Sequence[str], tok: Tokenizer, *, threads: int = 0, chunk: int = 200_000) -> "Side":
        id_parts, len_parts = [], []
        for a in range(0, len(texts), chunk):
            pieces = tok.encode_lists(texts[a : a + chunk], threads=threads)
            len_parts.append(np.fromiter((len(p) for p in pieces), np.int64, count=len(pieces)))
            id_parts.append(np.concatenate(pieces).astype(np.int32) if len(pieces) else np.zeros(0, np.int32))
        lengths = np.concatenate(len_parts) if len_parts else np.zeros(0, np.int64)
        ids = np.concatenate(id_parts).astype(np.int64) if id_parts else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths), np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        table: dict[str, int] = {}
        text_ids = np.fromiter((table.setdefault(t, len(table)) for t in texts), np.int64, count=len(texts))
        return cls(ids, offsets, lengths, text_ids)

    def gather(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flat (ids, offsets) of the sentences ``idx`` (int64 (m,)), without a Python loop."""
        lens = self.lengths[idx]
        off = np.zeros(len(idx), np.int64)
        np.cumsum(lens[:-1], out=off[1:])
        return ragged_gather(self.ids, self.offsets[idx], lens), off


@dataclass
class TrainResult:
    model_dir: str
    steps: int
    seconds: float
    pairs_per_second: float
    best_score: float
    history: list[dict] = field(default_factory=list)


def _data_fingerprint(src: Sequence[str], tgt: Sequence[str]) -> str:
    h = hashlib.sha256()
    for s, t in zip(src, tgt):
        h.update(s.encode())
        h.update(b"\t")
        h.update(t.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def split_dev(src: list[str], tgt: list[str], n_dev: int, seed: int):
    """Hold apart ``n_dev`` random pairs; also drop training pairs sharing a text with a dev pair.

    Returns (train_src, train_tgt, dev_src, dev_tgt, n_dropped_overlap).
    """
    n = len(src)
    n_dev = min(n_dev, n // 10)
    if n_dev < 2:
        return src, tgt, [], [], 0
    rng = np.random.default_rng([seed, 7])
    dev_idx = np.sort(rng.choice(n, n_dev, replace=False))
    is_dev = np.zeros(n, bool)
    is_dev[dev_idx] = True
    dev_src = [src[i] for i in dev_idx]
    dev_tgt = [tgt[i] for i in dev_idx]
    ds, dt = set(dev_src), set(dev_tgt)
    tr_s, tr_t, dropped = [], [], 0
    for i in range(n):
        if is_dev[i]:
            continue
        if src[i] in ds or tgt[i] in dt:
            dropped += 1
            continue
        tr_s.append(src[i])
        tr_t.append(tgt[i])
    return tr_s, tr_t, dev_src, dev_tgt, dropped


class _DevSet:
    """A tokenised dev benchmark evaluated with the current weights."""

    def __init__(self, name: str, kind: str, a: Side, b: Side, gold: np.ndarray | None = None):
        self.name, self.kind, self.a, self.b, self.gold = name, kind, a, b, gold

    def score(self, embed: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> float:
        """The benchmark's score with ``embed(ids, offsets)`` -> L2-normalised float32 (n, dim)."""
        xa = embed(self.a.ids, self.a.offsets)
        xb = embed(self.b.ids, self.b.offsets)
        if self.kind == "sts":
            return sts_pearson(xa, xb, self.gold)
        acc = retrieval_accuracy(xa, xb)
        return 100.0 * (acc[0] + acc[1]) / 2


def _embed_no_grad(enc, ids: np.ndarray, offsets: np.ndarray, *, normalize: bool = True, token_weights=None):
    """Sentence embeddings (torch float (n, dim) on the module's device) of flat (ids, offsets)."""
    import torch.nn.functional as F

    from ..model import embed_in_chunks

    return embed_in_chunks(enc, ids, offsets, token_weights=token_weights,
                           post=(lambda x: F.normalize(x, dim=1)) if normalize else None)


def _concat_sides(a: Side, b: Side, text_ids_a: np.ndarray, text_ids_b: np.ndarray) -> Side:
    """One Side holding a's sentences then b's (paraphrase pools)."""
    return Side(np.concatenate([a.ids, b.ids]), np.concatenate([a.offsets, b.offsets + len(a.ids)]),
                np.concatenate([a.lengths, b.lengths]), np.concatenate([text_ids_a, text_ids_b]))


def _shared_text_ids(src: Sequence[str], tgt: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Text ids over both sides together (equal strings on either side share an id)."""
    table: dict[str, int] = {}
    ts = np.fromiter((table.setdefault(t, len(table)) for t in src), np.int64, count=len(src))
    tt = np.fromiter((table.setdefault(t, len(table)) for t in tgt), np.int64, count=len(tgt))
    return ts, tt


def train(
    corpora: Sequence[CorpusSpec],
    out_dir: str,
    *,
    config: TrainConfig = TrainConfig(),
    tokenizer_config: TokenizerConfig = TokenizerConfig(),
    tokenizer_path: str | None = None,
    init_from: str | None = None,
    sts_pairs: Sequence[str] = (),
    dev_tatoeba: Sequence[tuple[str, str]] = (),
    dev_sts: Sequence[str] = (),
    languages: Sequence[str] = (),
    resume: bool = False,
    progress: Progress | None = None,
) -> TrainResult:
    """Train a model on ``corpora`` and write the best model (by dev score) to ``out_dir``.

    ``config.encoder`` picks the encoder (sp, word, trigram, blstm-sp); ``config.untrained`` saves the
    random initial model instead (still counting token frequencies and estimating the SIF component on
    the corpus). ``init_from`` (a model directory) starts from that model's tokenizer and weights (its
    encoder kind wins over ``config.encoder``), pulled toward them by ``config.reg_to_init``.
    ``sts_pairs`` (STS files in any format :func:`bitextmine.evaluation.read_sts` reads) add their pairs
    scored >= ``config.sts_min_score`` as positives.

    ``progress`` receives dict events: {"event": "log", "message"}, {"event": "start", "total_steps"},
    {"event": "step", "step", "loss", "megabatch", "pairs_per_second"}, {"event": "eval", "step", "scores", "score"}.
    Returns a TrainResult. Raises CorpusError, ConfigError, ModelFormatError.
    """
    import torch

    from ..device import resolve_device
    from ..model import ENCODERS, TOKENIZER_OF, load_model, module_from_model
    from ..tokenizer import VocabTokenizer, make_tokenizer

    emit = progress or (lambda e: None)
    log = lambda m: emit({"event": "log", "message": m})  # noqa: E731
    if config.batch_size < 1 or config.megabatch_start < 1 or config.megabatch_max < config.megabatch_start:
        raise ConfigError("batch size and mega-batch sizes must be >= 1, and megabatch_max >= megabatch_start")
    if config.megabatch_every < 1:
        raise ConfigError("megabatch_every must be >= 1")
    if not 0.0 <= config.dropout < 1.0:
        raise ConfigError(f"dropout {config.dropout}: expected a probability in [0, 1)")
    if config.negatives not in NEGATIVES:
        raise ConfigError(f"negatives {config.negatives!r}: expected one of {', '.join(NEGATIVES)}")
    init_model = load_model(init_from) if init_from else None
    encoder = init_model.encoder if init_model is not None else config.encoder
    if encoder not in ENCODERS:
        raise ConfigError(f"encoder {encoder!r}: expected one of {', '.join(ENCODERS)}")
    if init_model is not None and init_model.encoder != config.encoder:
        log(f"--init-from: continuing the model's own encoder, {encoder}")
        config = replace(config, encoder=encoder)
    if config.reg_to_init and init_model is None:
        raise ConfigError("--reg-to-init needs --init-from MODEL (the weights to stay close to)")
    if config.separate_vocab not in ("", "src", "tgt"):
        raise ConfigError(f"separate_vocab {config.separate_vocab!r}: expected src, tgt or empty")
    if init_model is not None and init_model.marked_offset and not config.separate_vocab:
        raise ConfigError("--init-from: that model has separate vocabularies; name the marked side with "
                          "--separate-vocab src|tgt")
    if init_model is not None and config.separate_vocab and not init_model.marked_offset:
        raise ConfigError("--separate-vocab: the --init-from model has one shared vocabulary")
    if tokenizer_path and TOKENIZER_OF[encoder] != "sentencepiece":
        raise ConfigError(f"--spm-model: the {encoder} encoder has its own vocabulary, not SentencePiece")
    device = resolve_device(config.device)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    ckpt_dir = os.path.join(out_dir, CHECKPOINT_DIR)
    if resume and not os.path.isfile(os.path.join(ckpt_dir, "state.json")):
        raise ConfigError(f"--resume: no checkpoint in {ckpt_dir}")

    t0 = time.time()
    extra = []
    for p in sts_pairs:
        d = read_sts(p)
        keep = np.flatnonzero(d.gold >= config.sts_min_score)
        extra.append((p, [d.s1[i] for i in keep], [d.s2[i] for i in keep]))
        log(f"{p}: {len(keep)} of {len(d.gold)} STS pairs scored >= {config.sts_min_score:g} used as positives")
    src, tgt, stats = load_corpora(corpora, extra=extra)
    log(f"corpora: {stats.summary()}")
    src, tgt, dev_src, dev_tgt, overlap = split_dev(src, tgt, config.dev_pairs, config.seed)
    log(f"held apart {len(dev_src)} dev pairs; dropped {overlap} training pairs sharing a text with them; "
        f"{len(src)} training pairs")
    data_fp = _data_fingerprint(src, tgt)

    tok_kind = TOKENIZER_OF[encoder]
    if resume:
        with open(os.path.join(ckpt_dir, "state.json")) as f:
            kind = json.load(f).get("tokenizer", "sentencepiece")
        with open(os.path.join(ckpt_dir, TOKENIZER_CKPT), "rb") as f:
            tok = make_tokenizer(kind, f.read(), os.path.join(ckpt_dir, TOKENIZER_CKPT))
    elif init_model is not None:
        tok = init_model.tokenizer
    elif tokenizer_path:
        tok = Tokenizer.load(tokenizer_path)
    elif tok_kind == "sentencepiece":
        sample = sample_sentences(src, tgt, size=tokenizer_config.sample_sentences, seed=tokenizer_config.seed)
        log(f"training SentencePiece ({tokenizer_config.model_type}, vocabulary {tokenizer_config.vocab_size}) "
            f"on {len(sample)} sentences")
        tok = Tokenizer(train_sentencepiece(sample, tokenizer_config))
        del sample
    else:
        log(f"counting {tok_kind} tokens for a vocabulary of {tokenizer_config.token_vocab_size}")
        tok = VocabTokenizer.build(tok_kind, (x for side in (src, tgt) for x in side), tokenizer_config.token_vocab_size)
    log(f"tokenising {2 * len(src)} training sentences (vocabulary {tok.vocab_size})")
    V = tok.vocab_size
    rows = 2 * V if config.separate_vocab else V  # separate vocabularies: the marked side's ids are offset by V

    def build(texts, name: str | None = None) -> Side:
        """Tokenise ``texts`` of training side ``name`` (None: the unmarked language)."""
        side = Side.build(texts, tok)
        if name and name == config.separate_vocab:
            side.ids += V
        return side

    S = build(src, "src")
    T = build(tgt, "tgt")
    P = None
    if config.paraphrase:  # one pool of both sides; equal strings share a text id across sides
        S.text_ids, T.text_ids = _shared_text_ids(src, tgt)
        P = _concat_sides(S, T, S.text_ids, T.text_ids)
    n_pairs = len(src)
    del src, tgt

    devsets: list[_DevSet] = []
    if dev_src:
        devsets.append(_DevSet("heldout", "retrieval", build(dev_src, "src"), build(dev_tgt, "tgt")))
    for a, b in dev_tatoeba:  # SRC TGT in the order of the training sides
        xa, xb = read_parallel(a, b)
        devsets.append(_DevSet(f"tatoeba:{os.path.basename(a)}", "retrieval", build(xa, "src"), build(xb, "tgt")))
    for p in dev_sts:
        d = read_sts(p)
        devsets.append(_DevSet(f"sts:{os.path.basename(p)}", "sts", build(d.s1), build(d.s2), d.gold))  # unmarked language

    gen = torch.Generator(device=device)
    gen.manual_seed(config.seed)
    shuffle_gen = torch.Generator().manual_seed(config.seed + 1)
    torch.manual_seed(config.seed)  # the LSTM's own initialisation
    if init_model is not None:
        enc = module_from_model(init_model, device)
    else:
        enc = make_encoder(encoder, rows, config.dim).to(device)
        with torch.no_grad():
            g = torch.Generator().manual_seed(config.seed)
            w = torch.empty(rows, config.dim)
            w.normal_(0.0, 1.0, generator=g) if config.untrained else w.uniform_(-config.init_scale, config.init_scale, generator=g)
            enc.weight.copy_(w)
    init_params = [p.detach().clone() for p in enc.parameters()] if config.reg_to_init else None
    word_start = torch.from_numpy(np.tile(tok.pieces_start_words(), rows // V)) if encoder == "blstm-sp" else None
    # fused Adam: one kernel over the whole embedding table (measured 6x faster per step on CPU)
    opt = torch.optim.Adam(enc.parameters(), lr=config.lr, fused=True)

    state: dict[str, Any] = {"epoch": 0, "pos": 0, "step": 0, "best_score": -np.inf, "history": [], "pairs_seen": 0}
    best = {k: v.detach().clone() for k, v in enc.state_dict().items()}
    if resume:
        state, best = _load_checkpoint(ckpt_dir, enc, opt, gen, shuffle_gen, data_fp, config, device)
        log(f"resumed from {ckpt_dir}: epoch {state['epoch'] + 1}, mini-batch {state['step']}")

    B = config.batch_size
    steps_per_epoch = -(-n_pairs // B)
    epochs = 0 if config.untrained else config.epochs
    total_steps = steps_per_epoch * epochs
    if config.max_steps:
        total_steps = min(total_steps, config.max_steps)
    emit({"event": "start", "total_steps": total_steps, "step": state["step"], "pairs": n_pairs})

    def embed_dev(ids, offsets):
        return _embed_no_grad(enc, ids, offsets).float().cpu().numpy()

    def evaluate() -> None:
        if not devsets:
            return
        scores = {d.name: round(d.score(embed_dev), 3) for d in devsets}
        score = float(np.mean(list(scores.values())))
        rec = {"epoch": state["epoch"] + 1, "step": state["step"], "scores": scores, "score": round(score, 3)}
        state["history"].append(rec)
        if score > state["best_score"]:
            state["best_score"] = score
            for k, v in enc.state_dict().items():
                best[k].copy_(v)
        emit({"event": "eval", **rec, "best": state["best_score"]})

    tS = time.time()
    pairs_run = 0
    stopped_early = False
    ctx = _StepContext(enc, opt, gen, shuffle_gen, S, T, P, config, device, word_start, init_params)

    def crossed(every: int, before: int) -> bool:
        # schedules are keyed to absolute step multiples, so a resumed run keeps the same schedule
        return every > 0 and state["step"] // every > before // every

    while state["epoch"] < epochs:
        perm = np.random.default_rng([config.seed, state["epoch"]]).permutation(n_pairs)
        while state["pos"] < n_pairs:
            k = min(config.megabatch_max, config.megabatch_start + state["step"] // config.megabatch_every)
            idx = perm[state["pos"] : state["pos"] + k * B]
            before = state["step"]
            loss_sum, n_mb = _train_megabatch(ctx, idx)
            state["step"] += n_mb
            state["pos"] += len(idx)
            state["pairs_seen"] += len(idx)
            pairs_run += len(idx)
            rate = pairs_run / max(1e-9, time.time() - tS)
            emit({"event": "step", "step": state["step"], "loss": loss_sum / n_mb, "megabatch": k,
                  "pairs_per_second": rate, "epoch": state["epoch"] + 1, "advance": n_mb})
            if crossed(config.eval_every, before) and state["pos"] < n_pairs:  # epoch ends evaluate anyway
                evaluate()
            if config.max_steps and state["step"] >= config.max_steps:
                stopped_early = True
                break
            if crossed(config.checkpoint_every, before):
                _save_checkpoint(ckpt_dir, enc, opt, gen, shuffle_gen, best, state, tok, data_fp, config)
        if stopped_early:
            break
        evaluate()
        state["epoch"] += 1
        state["pos"] = 0
        _save_checkpoint(ckpt_dir, enc, opt, gen, shuffle_gen, best, state, tok, data_fp, config)
    if config.untrained:
        evaluate()  # reported, not selected on: the random model is saved as it is

    seconds = time.time() - t0
    rate = pairs_run / max(1e-9, time.time() - tS)
    if stopped_early:
        _save_checkpoint(ckpt_dir, enc, opt, gen, shuffle_gen, best, state, tok, data_fp, config)
        log(f"stopped after {state['step']} mini-batches (max_steps); continue with --resume")
    if devsets and np.isfinite(state["best_score"]) and not config.untrained:
        enc.load_state_dict(best)
    counts = token_counts(S, T, rows)
    pc = _sif_component(enc, S, T, counts, config, device)
    log(f"SIF: token frequencies counted, common component estimated on {min(config.sif_sample, 2 * n_pairs)} sentences")
    emb, tensors = tensors_from_module(enc)
    tensors.update(piece_counts=counts, sif_pc=pc)
    model = Model(
        tokenizer=tok,
        embeddings=emb,
        tensors=tensors,
        config={
            "encoder": encoder,
            "languages": list(languages),
            "bitextmine_version": __version__,
            "sif_a": config.sif_a,
            "separate_vocab": bool(config.separate_vocab),
            "training": {
                **asdict(config),
                "tokenizer": (asdict(tokenizer_config) if not tokenizer_path else {"path": os.path.basename(tokenizer_path)}),
                "init_from": os.path.basename(os.path.normpath(init_from)) if init_from else None,
                "init_fingerprint": init_model.fingerprint if init_model is not None else None,
                "sts_pairs": [os.path.basename(p) for p in sts_pairs],
                "pairs": n_pairs,
                "corpora": [c.describe() for c in corpora],  # file names only: no local paths in a model
                "cleaning": asdict(stats),
                "steps": state["step"],
                "complete": not stopped_early,
                "dev_history": state["history"],
                "best_dev_score": state["best_score"] if np.isfinite(state["best_score"]) else None,
            },
        },
    )
    model.save(out_dir, dtype="float16" if config.fp16 else "float32")
    if not stopped_early and os.path.isdir(ckpt_dir):
        shutil.rmtree(ckpt_dir)
    return TrainResult(out_dir, state["step"], seconds, rate,
                       state["best_score"] if np.isfinite(state["best_score"]) else float("nan"), state["history"])


def token_counts(S: Side, T: Side, rows: int) -> np.ndarray:
    """int64 (rows,): how often each token id occurs on both sides (SIF's frequencies)."""
    return (np.bincount(S.ids, minlength=rows) + np.bincount(T.ids, minlength=rows)).astype(np.int64)


def _sif_component(enc, S: Side, T: Side, counts: np.ndarray, config: TrainConfig, device) -> np.ndarray:
    """The SIF common component (float32 (dim,)) of a seeded sample of training sentences, computed
    with the weights as they will be stored (rounded to float16 when the model is stored so)."""
    import torch

    from ..sif import first_component, sif_weights

    with torch.no_grad():
        saved = None
        if config.fp16:  # estimate on the weights the model file will hold
            saved = {k: v.clone() for k, v in enc.state_dict().items()}
            for p in enc.parameters():
                p.copy_(p.half().float())
        rng = np.random.default_rng([config.seed, 11])
        half = max(1, config.sif_sample // 2)
        w = torch.from_numpy(sif_weights(counts, config.sif_a)).to(device)
        xs = []
        for side in (S, T):
            idx = np.sort(rng.choice(len(side.lengths), min(half, len(side.lengths)), replace=False))
            ids, off = side.gather(idx)
            xs.append(_embed_no_grad(enc, ids, off, normalize=False, token_weights=w).float().cpu().numpy())
        if saved is not None:
            enc.load_state_dict(saved)
    return first_component(np.concatenate(xs))


class _StepContext:
    """What one training step needs besides the pair indices."""

    def __init__(self, enc, opt, gen, shuffle_gen, S: Side, T: Side, P: "Side | None", config: TrainConfig, device,
                 word_start, init_params):
        self.enc, self.opt, self.gen, self.shuffle_gen = enc, opt, gen, shuffle_gen
        self.S, self.T, self.P = S, T, P
        self.config, self.device, self.word_start, self.init_params = config, device, word_start, init_params
        self.amp = amp_enabled(config.amp, device)


def _negatives(es, et, s_text, t_text, config: TrainConfig, gen):
    """Negatives for a mega-batch (see :func:`bitextmine.loss.hardest_negatives`), by ``config.negatives``:
    max = hardest; random = a uniformly drawn other pair; mix = hardest with probability ``mix_prob``
    else random. Returns (t_neg, s_neg, t_valid, s_valid); a random pick sharing the positive's text
    is invalid (its loss term is switched off)."""
    import torch

    t_neg, s_neg, t_ok, s_ok = hardest_negatives(es, et, s_text, t_text)
    if config.negatives == "max":
        return t_neg, s_neg, t_ok, s_ok
    n = es.shape[0]
    if n < 2:
        return t_neg, s_neg, t_ok & False, s_ok & False
    ar = torch.arange(n, device=es.device)
    rt = (ar + torch.randint(1, n, (n,), generator=gen, device=es.device)) % n
    rs = (ar + torch.randint(1, n, (n,), generator=gen, device=es.device)) % n
    if config.negatives == "mix":
        use_t = torch.rand(n, generator=gen, device=es.device) < config.mix_prob
        use_s = torch.rand(n, generator=gen, device=es.device) < config.mix_prob
        rt = torch.where(use_t, t_neg, rt)
        rs = torch.where(use_s, s_neg, rs)
    return rt, rs, t_text[rt] != t_text, s_text[rs] != s_text


def _paraphrase_negatives(es, et, s_text, t_text, *, chunk: int = 2048):
    """Monolingual pairs: each sentence's negative is the most similar sentence of the pooled mega-batch
    [sources; targets] (positions 0..n-1 sources, n..2n-1 targets) whose text is neither side of its pair.
    Returns (neg_for_s, neg_for_t) int64 (n,) pool positions, and validity masks."""
    import torch

    pool = torch.cat([es, et])
    pool_text = torch.cat([s_text, t_text])
    neg_inf = torch.finfo(es.dtype).min
    out, ok = [], []
    for x in (es, et):
        idx_parts, val_parts = [], []
        for a in range(0, x.shape[0], chunk):
            b = min(x.shape[0], a + chunk)
            sim = x[a:b] @ pool.T
            mask = (pool_text[None, :] == s_text[a:b, None]) | (pool_text[None, :] == t_text[a:b, None])
            v, j = sim.masked_fill(mask, neg_inf).max(dim=1)
            idx_parts.append(j)
            val_parts.append(v > neg_inf)
        out.append(torch.cat(idx_parts))
        ok.append(torch.cat(val_parts))
    return out[0], out[1], ok[0], ok[1]


def _cat_flat(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate flat (ids, offsets) batches."""
    ids = np.concatenate([p[0] for p in parts])
    shift = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
    return ids, np.concatenate([p[1] + s for p, s in zip(parts, shift)])


def amp_enabled(amp: str, device: str) -> bool:
    """Whether TrainConfig.amp (auto | off | bf16) turns bf16 autocast on for ``device``."""
    if amp not in AMP_MODES:
        raise ConfigError(f"amp {amp!r}: expected {', '.join(AMP_MODES)}")
    if amp == "auto":
        import torch

        return device.startswith("cuda") and torch.cuda.get_device_capability()[0] >= 8
    return amp == "bf16"


def _train_megabatch(ctx: _StepContext, idx: np.ndarray) -> tuple[float, int]:
    """Find the negatives for the pairs ``idx`` and take one Adam step per mini-batch."""
    import torch

    from .negatives import hinge_loss

    config, device, S, T, P, enc = ctx.config, ctx.device, ctx.S, ctx.T, ctx.P, ctx.enc
    amp = torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=ctx.amp)

    def t(a):
        return torch.from_numpy(a).to(device)

    with amp:
        es = _embed_no_grad(enc, *S.gather(idx)).float()
        et = _embed_no_grad(enc, *T.gather(idx)).float()
    s_text, t_text = t(S.text_ids[idx]), t(T.text_ids[idx])
    if P is not None:
        ns, nt, s_ok_for, t_ok_for = _paraphrase_negatives(es, et, s_text, t_text)
        ns, nt = ns.cpu().numpy(), nt.cpu().numpy()
        n_total = len(S.lengths)
        pool_global = np.concatenate([idx, idx + n_total])  # pool position -> row of P
        # the negative for s goes with s (term cos(s, t_neg)); the negative for t with t
        t_neg_rows, s_neg_rows = pool_global[ns], pool_global[nt]
        t_ok, s_ok = s_ok_for, t_ok_for
        s_neg_side = t_neg_side = P
    else:
        t_neg, s_neg, t_ok, s_ok = _negatives(es, et, s_text, t_text, config, ctx.gen)
        t_neg_rows, s_neg_rows = idx[t_neg.cpu().numpy()], idx[s_neg.cpu().numpy()]
        s_neg_side, t_neg_side = S, T
    B = config.batch_size
    total = 0.0
    n_mb = 0
    bag = config.encoder != "blstm-sp"
    for a in range(0, len(idx), B):
        j = np.arange(a, min(a + B, len(idx)))
        m = len(j)
        # one forward per side: [positives; their negatives]
        si, so = _cat_flat(S.gather(idx[j]), s_neg_side.gather(s_neg_rows[j]))
        ti, to = _cat_flat(T.gather(idx[j]), t_neg_side.gather(t_neg_rows[j]))
        if not bag and config.shuffle_words > 0:
            si = shuffle_words(torch.from_numpy(si), torch.from_numpy(so), ctx.word_start, config.shuffle_words,
                               ctx.shuffle_gen).numpy()
            ti = shuffle_words(torch.from_numpy(ti), torch.from_numpy(to), ctx.word_start, config.shuffle_words,
                               ctx.shuffle_gen).numpy()
        si, so, ti, to = t(si), t(so), t(ti), t(to)
        ks = piece_dropout(si, so, config.dropout, ctx.gen) if bag and config.dropout > 0 else None
        kt = piece_dropout(ti, to, config.dropout, ctx.gen) if bag and config.dropout > 0 else None
        with amp:
            xs = enc(si, so, ks)
            xt = enc(ti, to, kt)
        xs, xt = xs.float(), xt.float()
        jt = torch.from_numpy(j).to(device)
        # xs[m:] are the sources that serve as negatives for the targets, xt[m:] the targets for the sources
        loss = hinge_loss(xs[:m], xt[:m], xs[m:], xt[m:], margin=config.margin,
                          s_valid=s_ok[jt], t_valid=t_ok[jt])
        if ctx.init_params is not None:
            loss = loss + config.reg_to_init * sum(((p - p0) ** 2).sum() for p, p0 in zip(enc.parameters(), ctx.init_params))
        ctx.opt.zero_grad(set_to_none=True)
        loss.backward()
        ctx.opt.step()
        total += float(loss.detach())
        n_mb += 1
    return total, n_mb


# --- checkpoints: safetensors + JSON, no pickle ---------------------------------------------------


def _save_checkpoint(ckpt_dir, enc, opt, gen, shuffle_gen, best, state, tok, data_fp, config) -> None:
    import torch
    from safetensors.torch import save_file

    tmp = ckpt_dir + ".tmp"
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    tensors = {"generator": gen.get_state().cpu(), "shuffle_generator": shuffle_gen.get_state()}
    for k, v in enc.state_dict().items():
        tensors[f"param.{k}"] = v.detach().cpu().contiguous()
        tensors[f"best.{k}"] = best[k].detach().cpu().contiguous()
    for i, ost in opt.state_dict()["state"].items():
        for key, v in ost.items():
            v = torch.as_tensor(v).detach().cpu().contiguous()
            tensors[f"adam.{i}.{key}"] = v.reshape(-1) if key == "step" else v
    save_file(tensors, os.path.join(tmp, "tensors.safetensors"))
    with open(os.path.join(tmp, TOKENIZER_CKPT), "wb") as f:
        f.write(tok.proto)
    meta = {
        "checkpoint_version": CHECKPOINT_VERSION,
        "data_fingerprint": data_fp,
        "tokenizer": tok.kind,
        "config": asdict(config),
        **{k: state[k] for k in ("epoch", "pos", "step", "history", "pairs_seen")},
        "best_score": state["best_score"] if np.isfinite(state["best_score"]) else None,
    }
    with open(os.path.join(tmp, "state.json"), "w") as f:
        json.dump(meta, f, indent=1)
    if os.path.isdir(ckpt_dir):
        shutil.rmtree(ckpt_dir)
    os.replace(tmp, ckpt_dir)


def _load_checkpoint(ckpt_dir, enc, opt, gen, shuffle_gen, data_fp, config, device):
    from safetensors.torch import load_file

    with open(os.path.join(ckpt_dir, "state.json")) as f:
        meta = json.load(f)
    if meta.get("checkpoint_version") != CHECKPOINT_VERSION:
        raise ModelFormatError(f"{ckpt_dir}: checkpoint_version {meta.get('checkpoint_version')!r}; expected {CHECKPOINT_VERSION}")
    if meta.get("data_fingerprint") != data_fp:
        raise ConfigError(f"--resume: {ckpt_dir} was made from other training data (or other cleaning/dev split)")
    saved = meta.get("config", {})
    for key in ("encoder", "dim", "batch_size", "seed", "megabatch_start", "megabatch_max", "megabatch_every",
                "dev_pairs", "negatives", "paraphrase"):
        if saved.get(key) != getattr(config, key):
            raise ConfigError(f"--resume: checkpoint has {key}={saved.get(key)}, this run {getattr(config, key)}")
    tensors = load_file(os.path.join(ckpt_dir, "tensors.safetensors"))
    enc.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("param.")})
    gen.set_state(tensors["generator"])
    shuffle_gen.set_state(tensors["shuffle_generator"])
    adam: dict[int, dict] = {}
    for k, v in tensors.items():
        if k.startswith("adam."):
            _, i, key = k.split(".", 2)
            adam.setdefault(int(i), {})[key] = v.reshape(()) if key == "step" else v.to(device)
    if adam:
        sd = opt.state_dict()
        sd["state"] = adam
        opt.load_state_dict(sd)
    state = {k: meta[k] for k in ("epoch", "pos", "step", "history", "pairs_seen")}
    state["best_score"] = meta["best_score"] if meta.get("best_score") is not None else -np.inf
    best = {k[5:]: v.to(device) for k, v in tensors.items() if k.startswith("best.")}
    return state, best
