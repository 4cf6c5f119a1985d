"""Training encoders on bitext (Wieting et al. 2019): negatives from a mega-batch, symmetric hinge loss.

The mega-batch holds k mini-batches (:func:`bitextmine.training.data.megabatch_pairs`). For each
mega-batch, the embeddings of all its pairs are computed once without dropout and the negatives chosen
(:mod:`bitextmine.training.negatives`); then each mini-batch takes one Adam step on the hinge loss with
piece dropout (averaging encoders) or word shuffling (the BiLSTM). With ``loss infonce`` and ``negatives
none`` there is no search: each mini-batch's own pairs are its candidates. The learning rate may warm
up and decay linearly (:func:`learning_rate`). At the end, token frequencies over
the training data and the SIF common component are stored in the model (:mod:`bitextmine.sif`).
Checkpoints are :mod:`bitextmine.training.checkpoint`; the data, :mod:`bitextmine.training.data`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from .. import __version__
from ..interop.card import write_model_card
from ..config import BATCH_ORDERS, LOSSES, LR_DECAYS, NEGATIVES, TokenizerConfig, TrainConfig
from ..corpus import CorpusSpec
from ..errors import ConfigError
from ..model import Model, make_encoder, piece_dropout, shuffle_words, tensors_from_module
from ..tokenizer import Tokenizer, sample_sentences, train_sentencepiece
from .checkpoint import (CHECKPOINT_DIR, has_checkpoint, load_checkpoint, load_checkpoint_tokenizer, new_state,
                         recover_checkpoint, save_checkpoint)
from .data import (Side, build_devsets, cat_flat, concat_sides, data_fingerprint, epoch_order, groups_fingerprint,
                   megabatch_pairs, read_training_pairs, shared_text_ids, token_counts)
from .batching import cluster_labels, largest_repeat, loose_key, pair_embeddings, topic_order
from .negatives import choose_negatives, pair_loss, paraphrase_negatives

Progress = Callable[[dict], None]
CUBLAS_WORKSPACE = ":4096:8"  # what torch.use_deterministic_algorithms needs of cuBLAS (CUDA >= 10.2)


@dataclass
class TrainResult:
    model_dir: str
    steps: int
    seconds: float
    pairs_per_second: float
    best_score: float
    history: list[dict] = field(default_factory=list)


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
    second_stage=None,
    progress: Progress | None = None,
) -> TrainResult:
    """Train a model on ``corpora`` and write the best model (by dev score) to ``out_dir``.

    ``config.encoder`` picks the encoder (sp, word, trigram, blstm-sp); ``config.untrained`` saves the
    random initial model instead (still counting token frequencies and estimating the SIF component on
    the corpus). ``init_from`` (a model directory) starts from that model's tokenizer and weights (its
    encoder kind wins over ``config.encoder``), pulled toward them by ``config.reg_to_init``.
    ``sts_pairs`` (STS files in any format :func:`bitextmine.evaluation.read_sts` reads) add their pairs
    scored >= ``config.sts_min_score`` as positives.

    Same seed, same data, same device type: same model bytes (the random draws are made on the CPU, so
    another device type draws the same and its model differs by float rounding only; not with batch order topic,
    whose k-means at each epoch's start can put a pair in another cluster over a rounding difference, and so
    reorder the epoch). ``resume=True``
    continues from ``OUT/checkpoint`` to the same final model as an uninterrupted run (up to float
    rounding when the checkpoint was written on another device type); on CUDA, training runs with
    ``torch.use_deterministic_algorithms(True, warn_only=True)`` and CUBLAS_WORKSPACE_CONFIG=:4096:8 (set
    here when unset; it must be in place before the process's first cuBLAS call), so the promise holds
    except for an operation torch warns has no deterministic implementation. A checkpoint of an earlier
    version whose generator was CUDA's is a ConfigError (:mod:`bitextmine.training.checkpoint`). ``config.amp``: bf16
    autocast for blstm-sp only (:func:`amp_dtype_for`).

    ``second_stage`` (a SecondStageConfig): then also build the model's second stage from ``corpora`` (those
    with English; :func:`bitextmine.judge.build.build_second_stage`), after the encoder is saved.

    ``progress`` receives dict events: {"event": "log", "message"}, {"event": "start", "total_steps"},
    {"event": "step", "step", "loss", "megabatch", "pairs_per_second"}, {"event": "eval", "step", "scores", "score"}.
    Returns a TrainResult. Raises CorpusError, ConfigError, ModelFormatError.
    """
    import torch

    from ..device import resolve_device
    from ..loading import load_model

    emit = progress or (lambda e: None)
    log = lambda m: emit({"event": "log", "message": m})  # noqa: E731
    init_model = load_model(init_from) if init_from else None
    config = _checked_config(config, init_model, tokenizer_path, log)
    device = resolve_device(config.device)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    ckpt_dir = os.path.join(out_dir, CHECKPOINT_DIR)
    if resume:
        recover_checkpoint(ckpt_dir)
    if resume and not has_checkpoint(ckpt_dir):
        raise ConfigError(f"--resume: no checkpoint in {ckpt_dir}")
    t0 = time.time()
    src, tgt, groups, group_names, dev_src, dev_tgt, stats = read_training_pairs(corpora, sts_pairs, config, log)
    data_fp = data_fingerprint(src, tgt) + groups_fingerprint(groups, config.sampling_temperature)
    tok = _tokenizer(src, tgt, config, tokenizer_config, tokenizer_path, init_model, ckpt_dir if resume else None, log)
    inputs = _run_inputs(_tokenizer_record(tokenizer_config, tokenizer_path, init_from), init_model, dev_tatoeba,
                          dev_sts)
    log(f"tokenising {2 * len(src)} training sentences (vocabulary {tok.vocab_size})")
    data = _TrainData.build(src, tgt, tok, config, dev_src, dev_tgt, dev_tatoeba, dev_sts, groups)
    del src, tgt
    with _deterministic(device):
        run = _Run.start(data, config, device, init_model, tok, ckpt_dir, data_fp, emit, inputs)
        if resume:
            run.state, run.best = load_checkpoint(ckpt_dir, run.enc, run.opt, run.gen, run.shuffle_gen, data_fp,
                                                  config, device, inputs)
            log(f"resumed from {ckpt_dir}: epoch {run.state['epoch'] + 1}, mini-batch {run.state['step']}")
        stopped_early, rate = run.epochs()
        if stopped_early:
            run.checkpoint()
            log(f"stopped after {run.state['step']} mini-batches (max_steps); continue with --resume")
        info = dict(corpora=corpora, stats=stats, init_from=init_from, sts_pairs=sts_pairs, languages=languages)
        _drop_stale_stage(out_dir, log)
        _save_model(run, out_dir, stopped_early, info, log)
    if not stopped_early and os.path.isdir(ckpt_dir):
        shutil.rmtree(ckpt_dir)
    calibrated = None
    if config.calibrate and not stopped_early:
        calibrated = _calibrate(out_dir, languages, dev_src, dev_tgt, config.seed, log, staged=second_stage is not None)
    if second_stage is not None and not stopped_early:
        from ..judge.build import build_second_stage

        log("second stage: lexical tables and classifier per language with English")
        report = build_second_stage(out_dir, corpora, second_stage)
        log("second stage: " + "; ".join(f"{k}: {v['candidates']:,} candidates, {v['translations']:,} translations"
                                         for k, v in report.items()))
    if calibrated is not None:  # with the second stage just built, where there is one
        _measure_defaults(out_dir, languages, dev_src, *calibrated, config.seed, log)
    best = run.state["best_score"]
    return TrainResult(out_dir, run.state["step"], time.time() - t0, rate,
                       best if np.isfinite(best) else float("nan"), run.state["history"])


def _calibrate(out_dir: str, languages, dev_src: list, dev_tgt: list, seed: int, log, staged: bool = False) -> None:
    """The saved model's mining settings for its one language pair, chosen on the held-apart dev pairs
    (:func:`bitextmine.evaluation.mining_calibration.calibrate_sets`; on the shares of
    CalibrationConfig.floor_shares where a second stage will judge the pair, ``staged`` and one language English,
    else of floor_shares_alone), when two languages are recorded and there are enough dev pairs, returned as
    (PairCalibration, distinct dev sources, their targets); else a log line saying why not, and None."""
    from ..config import CalibrationConfig
    from ..evaluation.mining_calibration import MIN_PAIRS, calibrate_sets, distinct_pairs
    from ..encoding import encode
    from ..loading import load_model
    from ..mining.calibrated import pair_key, write_section

    langs = sorted(set(languages))
    if len(langs) != 2:
        log("mining settings not calibrated: record the model's two languages (--lang XX --lang YY) to calibrate "
            "them on the held-apart pairs")
        return None
    src, tgt = distinct_pairs(dev_src, dev_tgt)
    if len(src) < MIN_PAIRS:
        log(f"mining settings not calibrated: {len(src)} distinct dev pairs, fewer than {MIN_PAIRS} (--dev-pairs)")
        return None
    model = load_model(out_dir)
    shares = CalibrationConfig.floor_shares if staged and "en" in langs else CalibrationConfig.floor_shares_alone
    c = calibrate_sets([(encode(src, model), encode(tgt, model))], seed=seed, shares=shares)
    write_section(out_dir, {pair_key(*langs): c.entry()}, f"bitextmine train: {len(src)} held-apart pairs, seed {seed}")
    s = c.settings
    log(f"mining settings for {pair_key(*langs)} on {len(src)} held-apart pairs: threshold {s['threshold']:g}, "
        f"min-z {s['min_z']:g}, min-cosine {s['min_cosine']:g} (mean F1 {c.f1:.3f}; global defaults {c.global_f1:.3f})")
    return c, src, tgt


def _measure_defaults(out_dir: str, languages, dev_src: list, c, src: list, tgt: list, seed: int, log) -> None:
    """The second stage's settings for the pair (where the model has one: min_prob and max_lines chosen on tasks
    from the held-apart pairs, :func:`bitextmine.evaluation.mining_calibration.with_stage`) and what mine's
    defaults measure end to end on other such tasks (:func:`bitextmine.evaluation.mining_calibration.measure_pair`;
    a pair with English), stored beside the settings ``c`` chose; the sides' languages told apart by reading the
    dev pairs' first side."""
    from ..config import CalibrationConfig
    from ..evaluation.mining_calibration import measure_pair, with_entry, with_stage
    from ..loading import load_model
    from ..mining.calibrated import pair_key, write_section

    langs = _side_languages(tuple(dict.fromkeys(languages)), dev_src)
    model = load_model(out_dir)
    config = CalibrationConfig(seed=seed)
    c = with_stage(model, langs, [(src, tgt)], c, config=config)
    if c.stage:
        log(f"second stage for {pair_key(*langs)} on held-apart tasks: min-prob {c.stage['min_prob']:g}, judging "
            f"its own margins up to {c.stage['max_lines']:,} lines a side (chosen on smaller tasks: calibrate-mining "
            "--stage-lines N --filler ... chooses on tasks as large as the runs)")
    c = measure_pair(with_entry(model, langs, c), langs, src, tgt, c, config=config)  # with the stage just chosen
    write_section(out_dir, {pair_key(*langs): c.entry()}, f"bitextmine train: {c.pairs} held-apart pairs, seed {seed}")
    if not c.defaults_measured:
        from ..evaluation.mining_calibration import DEFAULTS_MIN_LINES

        why = (f"{'-'.join(langs)} has no English side" if "en" not in langs else
               f"{c.pairs} held-apart pairs fill no task of {DEFAULTS_MIN_LINES} lines")
        log(f"mine's defaults not measured end to end: {why}")
        return
    log(f"mine's defaults on held-apart tasks ({'with' if c.defaults_second_stage else 'without'} the second stage): "
        + ", ".join(f"{m['share']:.0%} of {m['lines']:,} lines P {m['precision']:.2f} R {m['recall']:.2f}"
                    for m in c.defaults_measured))


def _side_languages(languages: tuple, dev_src: list) -> tuple:
    """The two recorded languages in the order of the dev pairs' sides: English first where most of the first 100
    source lines read as English rather than the other language (langdetect between the two), else as recorded."""
    from ..language import detect, has_profile

    if "en" not in languages or len(languages) != 2:
        return languages
    other = languages[1] if languages[0] == "en" else languages[0]
    if not has_profile(other):
        return languages
    sample = dev_src[:100]
    english = sum(detect(t, ("en", other))[0] == "en" for t in sample)
    return ("en", other) if 2 * english > len(sample) else (other, "en")


def _checked_config(config: TrainConfig, init_model, tokenizer_path, log) -> TrainConfig:
    """``config`` checked against itself, ``init_model`` and ``tokenizer_path``; ConfigError otherwise.
    With ``init_model``, its encoder kind and dimension replace ``config.encoder`` and ``config.dim``."""
    from ..model import ENCODERS, TOKENIZER_OF

    if config.batch_size < 1 or config.megabatch_start < 1 or config.megabatch_max < config.megabatch_start:
        raise ConfigError("batch size and mega-batch sizes must be >= 1, and megabatch_max >= megabatch_start")
    if config.megabatch_every < 1:
        raise ConfigError("megabatch_every must be >= 1")
    if not 0.0 <= config.dropout < 1.0:
        raise ConfigError(f"dropout {config.dropout}: expected a probability in [0, 1)")
    if config.negatives not in NEGATIVES:
        raise ConfigError(f"negatives {config.negatives!r}: expected one of {', '.join(NEGATIVES)}")
    if config.loss not in LOSSES:
        raise ConfigError(f"loss {config.loss!r}: expected one of {', '.join(LOSSES)}")
    if config.loss == "infonce" and (config.paraphrase or config.scale <= 0):
        raise ConfigError("--loss infonce: expected a scale > 0 and bilingual pairs (not --paraphrase)")
    if config.negatives == "none" and config.loss != "infonce":
        raise ConfigError("--negatives none: expected --loss infonce (the hinge loss needs a negative per pair)")
    if config.hinge_weight < 0 or (config.hinge_weight and (config.loss != "infonce" or config.negatives == "none")):
        raise ConfigError(f"hinge weight {config.hinge_weight}: expected >= 0, and only with --loss infonce and "
                          "negatives from the mega-batch (not --negatives none)")
    if not 0.0 <= config.warmup < 1.0 or config.lr_decay not in LR_DECAYS:
        raise ConfigError(f"warmup {config.warmup}, lr_decay {config.lr_decay!r}: expected a share in [0, 1) and "
                          f"one of {', '.join(LR_DECAYS)}")
    if config.batch_order not in BATCH_ORDERS:
        raise ConfigError(f"batch order {config.batch_order!r}: expected one of {', '.join(BATCH_ORDERS)}")
    if config.sampling_temperature < 1.0:
        raise ConfigError(f"sampling temperature {config.sampling_temperature}: expected >= 1 (1 = proportional)")
    encoder = init_model.encoder if init_model is not None else config.encoder
    if init_model is not None and encoder not in ENCODERS:
        raise ConfigError(f"--init-from {init_model.path}: a {init_model.config.get('source_format', encoder)} "
                          "model; training starts from bitextmine models only")
    if encoder not in ENCODERS:
        raise ConfigError(f"encoder {encoder!r}: expected one of {', '.join(ENCODERS)}")
    if init_model is not None and init_model.encoder != config.encoder:
        log(f"--init-from: continuing the model's own encoder, {encoder}")
        config = replace(config, encoder=encoder)
    if init_model is not None and init_model.dim != config.dim:  # its weights are the module: their dimension
        log(f"--init-from: the model's own dimension, {init_model.dim} (not {config.dim})")
        config = replace(config, dim=init_model.dim)
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
    if config.amp == "bf16" and encoder != "blstm-sp":
        log(f"--amp bf16: the {encoder} encoder averages in float32 (amp applies to blstm-sp only)")
    return config


def _tokenizer_record(tokenizer_config: TokenizerConfig, tokenizer_path: str | None, init_from: str | None) -> dict:
    """What a model records of the tokenizer its run used (:func:`_tokenizer`): the file given, the init model's,
    or the settings it was trained with."""
    if tokenizer_path and init_from is None:
        return {"path": os.path.basename(tokenizer_path)}
    if init_from:
        return {"init_from": os.path.basename(os.path.normpath(init_from))}
    return asdict(tokenizer_config)


def _run_inputs(tokenizer: dict, init_model, dev_tatoeba, dev_sts) -> dict:
    """What a resumed run must share with its checkpoint besides the training data and the config: the tokenizer
    the model will record, the init model (``--reg-to-init`` pulls toward it), the dev sets that choose the best
    weights (file names and digests)."""
    from ..corpus import file_checksum

    dev = [[os.path.basename(p), file_checksum(p)] for pair in dev_tatoeba for p in pair]
    dev += [[os.path.basename(p), file_checksum(p)] for p in dev_sts]
    return {"tokenizer": tokenizer, "init_fingerprint": init_model.fingerprint if init_model is not None else None,
            "dev_sets": dev}


def _tokenizer(src, tgt, config: TrainConfig, tokenizer_config: TokenizerConfig, tokenizer_path, init_model,
               ckpt_dir: str | None, log):
    """The run's tokenizer: the checkpoint's (``ckpt_dir`` when resuming), the init model's, the file
    ``tokenizer_path``, or one trained on the training text (SentencePiece, or a word/trigram vocabulary)."""
    from ..model import TOKENIZER_OF
    from ..tokenizer import VocabTokenizer

    tok_kind = TOKENIZER_OF[config.encoder]
    if ckpt_dir is not None:
        return load_checkpoint_tokenizer(ckpt_dir)
    if init_model is not None:
        return init_model.tokenizer
    if tokenizer_path:
        return Tokenizer.load(tokenizer_path)
    if tok_kind == "sentencepiece":
        sample = sample_sentences(src, tgt, size=tokenizer_config.sample_sentences, seed=tokenizer_config.seed)
        log(f"training SentencePiece ({tokenizer_config.model_type}, vocabulary {tokenizer_config.vocab_size}) "
            f"on {len(sample)} sentences")
        return Tokenizer(train_sentencepiece(sample, tokenizer_config))
    log(f"counting {tok_kind} tokens for a vocabulary of {tokenizer_config.token_vocab_size}")
    return VocabTokenizer.build(tok_kind, (x for side in (src, tgt) for x in side), tokenizer_config.token_vocab_size)


@dataclass
class _TrainData:
    """The tokenised training sides S, T (pair i = S[i], T[i]), the paraphrase pool P ([S; T], or None),
    the dev sets, and the table size: rows = V, or 2V with separate vocabularies (marked side offset by V)."""

    S: Side
    T: Side
    P: Side | None
    devsets: list
    V: int
    rows: int
    groups: np.ndarray | None = None  # int64 (n,): each pair's sampling group (language pair)

    @classmethod
    def build(cls, src, tgt, tok, config: TrainConfig, dev_src, dev_tgt, dev_tatoeba, dev_sts,
              groups: np.ndarray | None = None) -> "_TrainData":
        V = tok.vocab_size
        rows = 2 * V if config.separate_vocab else V

        # batch order topic: near repeats (case, end punctuation) crowd a same-topic batch, so they are one text
        key = loose_key if config.batch_order == "topic" else None

        def build(texts, name: str | None = None, key=None) -> Side:
            """Tokenise ``texts`` of side ``name`` (None: the unmarked language), text ids by ``key``."""
            side = Side.build(texts, tok, key=key)
            if name and name == config.separate_vocab:
                side.ids += V
            return side

        S, T, P = build(src, "src", key), build(tgt, "tgt", key), None
        if config.paraphrase:  # one pool of both sides; equal strings share a text id across sides
            S.text_ids, T.text_ids = shared_text_ids(src, tgt, key)
            P = concat_sides(S, T, S.text_ids, T.text_ids)
        return cls(S, T, P, build_devsets(build, dev_src, dev_tgt, dev_tatoeba, dev_sts), V, rows, groups)


def amp_dtype_for(amp: str, encoder: str, device: str):
    """The autocast dtype of training's forward passes: torch.bfloat16 or None.

    :func:`bitextmine.device.amp_dtype` (auto = bf16 on CUDA GPUs of compute capability >= 8) for
    blstm-sp, whose LSTM then runs in bf16 (inputs and weight copies; float32 master weights). None for
    the averaging encoders whatever ``amp`` says: embedding_bag has no autocast, so they stay float32."""
    from ..device import amp_dtype

    dtype = amp_dtype(amp, device)  # validates amp for every encoder
    return dtype if encoder == "blstm-sp" else None


@contextlib.contextmanager
def _deterministic(device: str):
    """On CUDA: deterministic algorithms (warn_only) and cuBLAS's fixed workspace, restored afterwards.
    On a CPU: nothing changes."""
    from ..device import is_cuda

    if not is_cuda(device):
        yield
        return
    import torch

    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             torch.backends.cudnn.benchmark)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        torch.backends.cudnn.benchmark = saved[2]


def _init_encoder(config: TrainConfig, device: str, init_model, rows: int):
    """The module to train: the init model's, or a new one (seeded uniform(-init_scale, init_scale)
    table, normal(0, 1) when untrained; the LSTM from torch's global seed, set by the caller)."""
    import torch

    from ..model import module_from_model

    if init_model is not None:
        return module_from_model(init_model, device)
    enc = make_encoder(config.encoder, rows, config.dim).to(device)
    with torch.no_grad():
        g = torch.Generator().manual_seed(config.seed)
        w = torch.empty(rows, config.dim)
        w.normal_(0.0, 1.0, generator=g) if config.untrained else w.uniform_(-config.init_scale, config.init_scale, generator=g)
        enc.weight.copy_(w)
    return enc


class _Run:
    """One training run's module, optimiser, generators and state; :meth:`epochs` runs it."""

    def __init__(self, data: _TrainData, config: TrainConfig, device: str, enc, tok, ckpt_dir: str, data_fp: str,
                 emit: Progress, inputs: dict):
        import torch

        self.data, self.config, self.device, self.enc, self.tok = data, config, device, enc, tok
        self.ckpt_dir, self.data_fp, self.emit = ckpt_dir, data_fp, emit
        self.init_params = [p.detach().clone() for p in enc.parameters()] if config.reg_to_init else None
        self.word_start = (torch.from_numpy(np.tile(tok.pieces_start_words(), data.rows // data.V))
                           if config.encoder == "blstm-sp" else None)
        # fused Adam: one kernel over the whole embedding table (measured 6x faster per step on CPU)
        self.opt = torch.optim.Adam(enc.parameters(), lr=config.lr, fused=True)
        self.state: dict[str, Any] = new_state()
        self.total_steps = 0  # mini-batches of all epochs, set by epochs() (the learning-rate schedule's length)
        self.best = {k: v.detach().clone() for k, v in enc.state_dict().items()}
        self.amp = amp_dtype_for(config.amp, config.encoder, device)
        self.inputs = inputs  # what a resume must share besides data and config (_run_inputs)

    @classmethod
    def start(cls, data, config, device, init_model, tok, ckpt_dir, data_fp, emit, inputs: dict) -> "_Run":
        """Seed the generators (CPU, seed: dropout and random negatives; CPU, seed + 1: word shuffling;
        global: the LSTM's initialisation) and build the module, in that order. Every draw of training
        is made on a CPU generator and moved to the device, so a seeded run draws the same on every
        device and a checkpoint resumes on another device type."""
        import torch

        gen = torch.Generator().manual_seed(config.seed)
        shuffle_gen = torch.Generator().manual_seed(config.seed + 1)
        torch.manual_seed(config.seed)
        run = cls(data, config, device, _init_encoder(config, device, init_model, data.rows), tok, ckpt_dir,
                  data_fp, emit, inputs)
        run.gen, run.shuffle_gen = gen, shuffle_gen
        return run

    def checkpoint(self) -> None:
        save_checkpoint(self.ckpt_dir, self.enc, self.opt, self.gen, self.shuffle_gen, self.best, self.state,
                        self.tok, self.data_fp, self.config, self.inputs)

    def evaluate(self) -> None:
        """Score the dev sets; keep the weights when the mean score is the best so far."""
        if not self.data.devsets:
            return
        state = self.state
        scores = {d.name: round(d.score(self._embed_dev), 3) for d in self.data.devsets}
        score = float(np.mean(list(scores.values())))
        rec = {"epoch": state["epoch"] + 1, "step": state["step"], "scores": scores, "score": round(score, 3)}
        state["history"].append(rec)
        if score > state["best_score"]:
            state["best_score"] = score
            for k, v in self.enc.state_dict().items():
                self.best[k].copy_(v)
        self.emit({"event": "eval", **rec, "best": state["best_score"]})

    def _embed_dev(self, ids, offsets):
        return embed_no_grad(self.enc, ids, offsets).float().cpu().numpy()

    def _crossed(self, every: int, before: int) -> bool:
        # schedules are keyed to absolute step multiples, so a resumed run keeps the same schedule
        return every > 0 and self.state["step"] // every > before // every

    def epochs(self) -> tuple[bool, float]:
        """Run the remaining epochs (none when untrained); return (stopped at max_steps, pairs per second)."""
        config, state, n_pairs = self.config, self.state, len(self.data.S.lengths)
        epochs = 0 if config.untrained else config.epochs
        total_steps = self.total_steps = -(-n_pairs // config.batch_size) * epochs
        if config.max_steps:
            total_steps = min(total_steps, config.max_steps)
        self.emit({"event": "start", "total_steps": total_steps, "step": state["step"], "pairs": n_pairs})
        self.t_start, self.pairs_run = time.time(), 0
        stopped_early = False
        while state["epoch"] < epochs and not stopped_early:
            stopped_early = self._epoch(self._order())
            if not stopped_early:
                state.pop("order", None)
                self.evaluate()
                state["epoch"] += 1
                state["pos"] = 0
                self.checkpoint()
                # max_steps reached at an epoch's end: stopped after its evaluation, unless it was the last
                stopped_early = bool(config.max_steps) and state["step"] >= config.max_steps and state["epoch"] < epochs
        if config.untrained:
            self.evaluate()  # reported, not selected on: the random model is saved as it is
        return stopped_early, self.pairs_run / max(1e-9, time.time() - self.t_start)

    def _order(self) -> np.ndarray:
        """The pairs of the current epoch in order (:func:`epoch_order`); with batch order topic, grouped by topic
        with the weights at the epoch's start (kept in the state, so a resumed epoch keeps its order)."""
        config, state = self.config, self.state
        perm = epoch_order(config.seed, state["epoch"], len(self.data.S.lengths), self.data.groups,
                           config.sampling_temperature)
        if config.batch_order != "topic":
            return perm
        if state.get("order") is not None and len(state["order"]) == len(perm):
            return state["order"]
        self.emit({"event": "log", "message": f"epoch {state['epoch'] + 1}: grouping the pairs by topic"})
        x = pair_embeddings(self._embed_rows, len(self.data.S.lengths))
        segments = largest_repeat(perm)  # the copies of a pair drawn more than once go to different segments
        labels = cluster_labels(x, max(1, len(perm) // (segments * config.batch_size * config.megabatch_max)),
                                seed=config.seed * 1000 + state["epoch"])
        del x
        state["order"] = topic_order(perm, labels, seed=config.seed * 1000 + state["epoch"])
        return state["order"]

    def _embed_rows(self, side: str, rows: np.ndarray) -> np.ndarray:
        """float32 (len(rows), d): L2-normalised embeddings of training side ``side`` ("src" or "tgt") rows."""
        S = self.data.S if side == "src" else self.data.T
        with _autocast(self.device, self.amp):
            return embed_no_grad(self.enc, *S.gather(rows)).float().cpu().numpy()

    def _epoch(self, perm: np.ndarray) -> bool:
        """Train on ``perm`` from state["pos"] to its end, one mega-batch at a time; True if max_steps stopped it
        before the end."""
        config, state, n_pairs = self.config, self.state, len(perm)
        while state["pos"] < n_pairs:
            size = megabatch_pairs(config, state["step"])
            idx = perm[state["pos"] : state["pos"] + size]
            before = state["step"]
            loss_sum, n_mb = train_megabatch(self, idx)
            state["step"] += n_mb
            state["pos"] += len(idx)
            state["pairs_seen"] += len(idx)
            self.pairs_run += len(idx)
            rate = self.pairs_run / max(1e-9, time.time() - self.t_start)
            self.emit({"event": "step", "step": state["step"], "loss": loss_sum / n_mb,
                       "megabatch": size // config.batch_size, "pairs_per_second": rate, "epoch": state["epoch"] + 1,
                       "advance": n_mb})
            if self._crossed(config.eval_every, before) and state["pos"] < n_pairs:  # epoch ends evaluate anyway
                self.evaluate()
            if config.max_steps and state["step"] >= config.max_steps and state["pos"] < n_pairs:
                return True  # within the epoch (at its end, epochs() evaluates it first)
            if self._crossed(config.checkpoint_every, before):
                self.checkpoint()
        return False


def learning_rate(config: TrainConfig, step: int, total_steps: int) -> float:
    """The learning rate of mini-batch ``step`` (0-based) of ``total_steps``: ``config.lr``, raised
    linearly from 0 over the first ``warmup`` share of the steps and, with lr_decay linear, lowered
    linearly to 0 at the last step after that."""
    warm = config.warmup * total_steps
    if step < warm:
        return config.lr * (step + 1) / (warm + 1)
    if config.lr_decay == "linear":
        return config.lr * min(1.0, max(0.0, (total_steps - step) / max(1.0, total_steps - warm)))
    return config.lr


def embed_no_grad(enc, ids: np.ndarray, offsets: np.ndarray, *, normalize: bool = True, token_weights=None):
    """Sentence embeddings (torch float (n, dim) on the module's device) of flat (ids, offsets)."""
    import torch.nn.functional as F

    from ..model import embed_in_chunks

    return embed_in_chunks(enc, ids, offsets, token_weights=token_weights,
                           post=(lambda x: F.normalize(x, dim=1)) if normalize else None)


def _autocast(device: str, dtype):
    """torch.autocast to ``dtype`` on ``device``'s type, or a no-op context when dtype is None."""
    import torch

    return torch.autocast(torch.device(device).type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def megabatch_negatives(run: _Run, idx: np.ndarray):
    """Embed the mega-batch ``idx`` (int64 (m,) pair indices) without dropout and choose its negatives.

    Returns (s_neg_side, s_neg_rows, t_neg_side, t_neg_rows, s_ok, t_ok): the negative for source i is
    the sentence t_neg_rows[i] (int64) of t_neg_side (T, or the paraphrase pool P), likewise for
    targets; s_ok, t_ok bool (m,) torch masks on the device."""
    import torch

    data, device = run.data, run.device
    S, T, P = data.S, data.T, data.P
    with _autocast(device, run.amp):
        es = embed_no_grad(run.enc, *S.gather(idx)).float()
        et = embed_no_grad(run.enc, *T.gather(idx)).float()
    s_text, t_text = torch.from_numpy(S.text_ids[idx]).to(device), torch.from_numpy(T.text_ids[idx]).to(device)
    if P is None:
        t_neg, s_neg, t_ok, s_ok = choose_negatives(es, et, s_text, t_text, run.config, run.gen)
        return S, idx[s_neg.cpu().numpy()], T, idx[t_neg.cpu().numpy()], s_ok, t_ok
    ns, nt, s_ok_for, t_ok_for = paraphrase_negatives(es, et, s_text, t_text)
    pool_global = np.concatenate([idx, idx + len(S.lengths)])  # pool position -> row of P
    # the negative for s goes with s (term cos(s, t_neg)); the negative for t with t
    return P, pool_global[nt.cpu().numpy()], P, pool_global[ns.cpu().numpy()], t_ok_for, s_ok_for


def train_megabatch(run: _Run, idx: np.ndarray) -> tuple[float, int]:
    """Take one Adam step per mini-batch of the pairs ``idx``, on the loss against the mega-batch's
    negatives or, with negatives none, against the mini-batch's own pairs only.
    Returns (sum of the mini-batch losses, number of mini-batches)."""
    losses = _in_batch_losses(run, idx) if run.config.negatives == "none" else _negatives_losses(run, idx)
    total, n_mb = 0.0, 0
    for loss in losses:  # lazily: each mini-batch's loss is computed after the previous step
        _step(run, loss, run.state["step"] + n_mb)
        total += float(loss.detach())
        n_mb += 1
    return total, n_mb


def _negatives_losses(run: _Run, idx: np.ndarray):
    """Find the negatives for the pairs ``idx`` (:func:`megabatch_negatives`); yield each mini-batch's loss."""
    import torch

    config, S, T = run.config, run.data.S, run.data.T
    s_side, s_rows, t_side, t_rows, s_ok, t_ok = megabatch_negatives(run, idx)
    for a in range(0, len(idx), config.batch_size):
        j = np.arange(a, min(a + config.batch_size, len(idx)))
        jt = torch.from_numpy(j).to(run.device)
        texts = None
        if config.loss == "infonce":
            texts = [torch.from_numpy(a).to(run.device) for a in (S.text_ids[idx[j]], T.text_ids[idx[j]],
                                                                  s_side.text_ids[s_rows[j]], t_side.text_ids[t_rows[j]])]
        yield _minibatch_loss(run, S_batch=cat_flat(S.gather(idx[j]), s_side.gather(s_rows[j])),
                              T_batch=cat_flat(T.gather(idx[j]), t_side.gather(t_rows[j])),
                              s_valid=s_ok[jt], t_valid=t_ok[jt], texts=texts)


def _in_batch_losses(run: _Run, idx: np.ndarray):
    """``negatives none``: yield the InfoNCE loss of each mini-batch of ``idx`` over its own pairs (no search,
    no negatives' forward)."""
    import torch

    config, S, T = run.config, run.data.S, run.data.T
    none = torch.empty(0, dtype=torch.int64, device=run.device)
    for a in range(0, len(idx), config.batch_size):
        rows = idx[a : a + config.batch_size]
        texts = [torch.from_numpy(x).to(run.device) for x in (S.text_ids[rows], T.text_ids[rows])] + [none, none]
        yield _minibatch_loss(run, S.gather(rows), T.gather(rows), None, None, texts=texts)


def _step(run: _Run, loss, step: int) -> None:
    """One Adam step on ``loss`` at the learning rate of mini-batch ``step``."""
    lr = learning_rate(run.config, step, run.total_steps)
    for group in run.opt.param_groups:
        group["lr"] = lr
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    run.opt.step()


def _minibatch_loss(run: _Run, S_batch, T_batch, s_valid, t_valid, texts=None):
    """The loss (``config.loss``) of one mini-batch: S_batch, T_batch flat (ids, offsets) of [m positives;
    their m negatives] per side (one forward per side; positives only when s_valid is None, as with
    negatives none), with word shuffling (BiLSTM) or piece dropout (bags). ``texts``: the text ids (int64
    tensors (m,)) of the sources, targets, source negatives and target negatives, which InfoNCE needs to
    mask repeats of a positive's text."""
    import torch

    config, device = run.config, run.device
    (si, so), (ti, to) = S_batch, T_batch
    bag = config.encoder != "blstm-sp"
    if not bag and config.shuffle_words > 0:
        si = shuffle_words(torch.from_numpy(si), torch.from_numpy(so), run.word_start, config.shuffle_words,
                           run.shuffle_gen).numpy()
        ti = shuffle_words(torch.from_numpy(ti), torch.from_numpy(to), run.word_start, config.shuffle_words,
                           run.shuffle_gen).numpy()
    si, so, ti, to = (torch.from_numpy(a).to(device) for a in (si, so, ti, to))
    ks = piece_dropout(si, so, config.dropout, run.gen) if bag and config.dropout > 0 else None
    kt = piece_dropout(ti, to, config.dropout, run.gen) if bag and config.dropout > 0 else None
    with _autocast(device, run.amp):
        xs = run.enc(si, so, ks)
        xt = run.enc(ti, to, kt)
    xs, xt = xs.float(), xt.float()
    m = len(xs) if s_valid is None else len(s_valid)
    # xs[m:] are the sources that serve as negatives for the targets, xt[m:] the targets for the sources
    loss = pair_loss(config, xs[:m], xt[:m], xs[m:], xt[m:], s_valid=s_valid, t_valid=t_valid, texts=texts)
    if run.init_params is not None:
        loss = loss + config.reg_to_init * sum(((p - p0) ** 2).sum() for p, p0 in zip(run.enc.parameters(),
                                                                                       run.init_params))
    return loss


def sif_component(enc, S: Side, T: Side, counts: np.ndarray, config: TrainConfig, device) -> np.ndarray:
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
            xs.append(embed_no_grad(enc, ids, off, normalize=False, token_weights=w).float().cpu().numpy())
        if saved is not None:
            enc.load_state_dict(saved)
    x = np.concatenate(xs)
    if not np.isfinite(x).all() or not np.isfinite(np.square(x.astype(np.float64)).sum()):
        raise ConfigError(f"training diverged: the sentence vectors are no longer finite numbers (learning rate "
                          f"{config.lr:g}); train again with a lower --lr")
    try:
        return first_component(x)
    except np.linalg.LinAlgError:
        raise ConfigError(f"training diverged: the sentence vectors have no first component (learning rate "
                          f"{config.lr:g}); train again with a lower --lr") from None


def _drop_stale_stage(out_dir: str, log) -> None:
    """Remove a second stage that ``out_dir`` holds from a model trained there before: it was fitted on that
    model's margins and cosines, and the new weights would be judged by it without a word (its check, the
    vocabulary, passes whenever the tokenizer is the same)."""
    from ..judge.store import FOLDER

    stale = os.path.join(out_dir, FOLDER)
    if os.path.isdir(stale):
        shutil.rmtree(stale)
        log(f"removed {stale}: the second stage of the model trained there before (build one for these weights "
            "with --second-stage-only)")


def _save_model(run: _Run, out_dir: str, stopped_early: bool, info: dict, log) -> None:
    """Load the best weights, add token counts and the SIF component, and save the model to ``out_dir``;
    ConfigError when the weights are no longer finite (a learning rate too high)."""
    import torch

    config, state, data, enc = run.config, run.state, run.data, run.enc
    n_pairs = len(data.S.lengths)
    if data.devsets and np.isfinite(state["best_score"]) and not config.untrained:
        enc.load_state_dict(run.best)
    if not all(bool(torch.isfinite(p).all()) for p in enc.parameters()):  # diverged: nothing to save or estimate
        raise ConfigError(f"training diverged: the weights are no longer finite numbers after {state['step']} "
                          f"mini-batches (learning rate {config.lr:g}); train again with a lower --lr")
    counts = token_counts(data.S, data.T, data.rows)
    pc = sif_component(enc, data.S, data.T, counts, config, run.device)
    log(f"SIF: token frequencies counted, common component estimated on {min(config.sif_sample, 2 * n_pairs)} sentences")
    emb, tensors = tensors_from_module(enc)
    tensors.update(piece_counts=counts, sif_pc=pc)
    init_from = info["init_from"]
    training = {
        **asdict(config),
        "tokenizer": run.inputs["tokenizer"],
        "init_from": os.path.basename(os.path.normpath(init_from)) if init_from else None,
        "init_fingerprint": run.inputs["init_fingerprint"],
        "sts_pairs": [os.path.basename(p) for p in info["sts_pairs"]],
        "pairs": n_pairs,
        "corpora": [c.describe() for c in info["corpora"]],  # file names only: no local paths in a model
        "cleaning": asdict(info["stats"]),
        "steps": state["step"],
        "complete": not stopped_early,
        "dev_history": state["history"],
        "best_dev_score": state["best_score"] if np.isfinite(state["best_score"]) else None,
    }
    model = Model(tokenizer=run.tok, embeddings=emb, tensors=tensors,
                  config={"encoder": config.encoder, "languages": list(info["languages"]),
                          "bitextmine_version": __version__, "sif_a": config.sif_a,
                          "separate_vocab": bool(config.separate_vocab), "training": training})
    model.save(out_dir, dtype="float16" if config.fp16 else "float32")
    write_model_card(model, out_dir)  # README.md: languages, data, recipe, dev figures (bitextmine.interop.card)
