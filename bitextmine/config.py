"""Defaults for every stage, written once. The CLI reads its option defaults from these dataclasses.

Sources: "paper" = Wieting et al. 2019 ("Simple and effective paraphrastic similarity from
parallel translations") and Wieting et al. 2021 ("Paraphrastic representations at scale");
"LASER" = Artetxe & Schwenk 2019 ("Margin-based parallel corpus mining").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

LANGID_MODELS = ("ensemble", "fasttext", "py3langid", "langdetect")  # filter --langid-model
SPM_NORMALIZATIONS = ("nmt_nfkc", "nmt_nfkc_cf", "nfkc", "nfkc_cf", "identity")  # train --spm-normalization


@dataclass(frozen=True)
class TokenizerConfig:
    vocab_size: int = 20000  # paper: joint SentencePiece vocabulary of 20k
    model_type: str = "unigram"  # paper: SentencePiece unigram model
    normalization: str = "nmt_nfkc"  # SentencePiece's rule (its default); nmt_nfkc_cf also folds case (SPM_NORMALIZATIONS)
    sample_sentences: int = 2_000_000  # cap on sentences fed to SentencePiece training (~2-3 GB peak)
    character_coverage: float = 0.9995  # SentencePiece's recommendation for CJK-bearing corpora
    seed: int = 1234  # sample and shuffle seed
    token_vocab_size: int = 200_000  # word / trigram encoders: the 200,000 most frequent tokens (Wieting et al. 2016)


@dataclass(frozen=True)
class TrainConfig:
    encoder: str = "sp"  # sp | word | trigram | blstm-sp (ENCODERS)
    negatives: str = "max"  # max | mix | random (Wieting et al. 2016: MAX = hardest in the mega-batch) | none (infonce: in-batch only)
    mix_prob: float = 0.5  # MIX: hardest negative with this probability, else a random one
    paraphrase: bool = False  # monolingual pairs: negatives drawn from both sides
    untrained: bool = False  # save the initial (random) model: normal(0, 1) token vectors
    shuffle_words: float = 0.3  # blstm-sp: probability that a training sentence's words are shuffled (paper)
    reg_to_init: float = 0.0  # with an initial model: lambda of the L2 pull toward its weights
    sts_min_score: float = 3.8  # --sts-pairs: gold scores >= this are positive pairs (as in the DCU STS system)
    clean: bool = False  # drop training pairs that break filter's default rules (no language declared)
    separate_vocab: str = ""  # "src" or "tgt": that side's tokens get their own vectors (the papers' language prefix)
    sif_a: float = 1e-3  # SIF: a in a / (a + p(w)) (Arora et al. 2017)
    sif_sample: int = 20_000  # SIF: training sentences used to estimate the common component
    dim: int = 300  # paper: dimension 300 (1024 also reported)
    loss: str = "hinge"  # hinge (paper) | infonce: in-batch softmax over the mini-batch's targets and their hardest negatives (LOSSES)
    margin: float = 0.4  # paper: hinge margin delta = 0.4
    hinge_weight: float = 0.0  # infonce with negatives: plus this times the hinge loss (margin) over the same negatives (0 = InfoNCE alone)
    scale: float = 20.0  # infonce: cosines times this before the softmax (1 / temperature; sentence-transformers' MNRL: 20)
    sampling_temperature: float = 1.0  # 1 = every pair once per epoch; T > 1: group (language) shares ~ size ** (1/T)
    batch_size: int = 128  # paper: mini-batch of 128 pairs
    megabatch_start: int = 1  # paper: mega-batch starts at 1 mini-batch
    megabatch_max: int = 60  # paper: grows up to 60 mini-batches
    megabatch_every: int = 150  # paper: +1 mini-batch every 150 mini-batches
    batch_order: str = "random"  # random (paper) | topic: each mega-batch holds near pairs (k-means at each epoch's start; BATCH_ORDERS)
    dropout: float = 0.3  # paper: dropout 0.3 (here: each piece dropped with this probability)
    lr: float = 0.001  # paper: Adam, learning rate 0.001
    warmup: float = 0.0  # share of all mini-batches over which the learning rate rises linearly from 0 (paper: none)
    lr_decay: str = "none"  # none (paper: constant) | linear: to 0 at the last mini-batch of the last epoch (LR_DECAYS)
    epochs: int = 10  # paper: 10 epochs
    seed: int = 1  # seeds data order, dropout and initialisation
    dev_pairs: int = 1000  # held-apart training pairs for dev retrieval accuracy (never trained on)
    # with two languages recorded (train --lang XX --lang YY): choose the model's mining settings for that pair on
    # its held-apart dev pairs after training (bitextmine/evaluation/mining_calibration.py)
    calibrate: bool = True
    eval_every: int = 0  # also evaluate every N mini-batches (0 = only after each epoch)
    checkpoint_every: int = 1000  # save a resumable checkpoint every N mini-batches (0 = epoch ends only)
    max_steps: int = 0  # stop after N mini-batches (0 = run all epochs); resumable with --resume
    init_scale: float = 0.1  # piece embeddings start as uniform(-s, s)
    device: str = "auto"  # auto | cpu | cuda
    # bf16 for blstm-sp: its LSTM runs in bf16 (input and weight copies; the negatives are searched on the
    # float32 outputs); the averaging encoders always compute in float32 (embedding_bag has no autocast).
    # auto = on for CUDA GPUs with bf16 (compute capability >= 8), off on CPU. Weights, Adam state and the
    # loss stay float32.
    amp: str = "auto"
    threads: int = 0  # torch CPU threads (0 = torch's default)
    fp16: bool = True  # store the model's embeddings as float16 (half the size)


@dataclass(frozen=True)
class ColumnsConfig:
    """The columns read from Parquet and JSONL inputs (:mod:`bitextmine.tabular`); a text input of pairs given one
    is refused (`filter`, `mine`)."""

    column: str = "text"  # the text column of one-sided inputs (the usual name in Hugging Face datasets)
    src_col: str = ""  # the source text column (pairs: required; mine: "" = column)
    tgt_col: str = ""  # the target text column (pairs: required; mine: "" = column)
    id_col: str = ""  # a row id column (string or integer) carried to the output; "" = none

    def side(self, side: str) -> str:
        """The text column of mine's "src" or "tgt" input."""
        return (self.src_col if side == "src" else self.tgt_col) or self.column

    def pair(self, path: str) -> tuple[str, str]:
        """(source, target) columns of the pairs input ``path``; ConfigError unless both are named."""
        if not (self.src_col and self.tgt_col):
            from .errors import ConfigError

            raise ConfigError(f"{path}: a Parquet or JSONL input of pairs needs --src-col NAME and --tgt-col NAME")
        return self.src_col, self.tgt_col


@dataclass(frozen=True)
class EncodeConfig:
    batch_size: int = 8192  # sentences per batch (files: ~128 bytes per sentence per block); one batch per worker task
    threads: int = 0  # worker processes for tokenising and embedding (0 = one per core)
    fp16: bool = False  # store float16 instead of float32
    device: str = "auto"  # auto | cpu | cuda
    sif: bool = False  # apply SIF weighting and common-component removal (stored in the model)
    marked: bool = False  # separate-vocabulary models: the text is in the marked language
    batch_tokens: int = 0  # at most this many pieces per embedding call (bounds device memory; 0 = no limit)
    # piece table on the device: fp32 | fp16 | bf16; auto = the model's stored dtype on CUDA (fp16 for the
    # bundled model: lossless, half the memory traffic), float32 on CPU. Sums and the norm stay float32.
    precision: str = "auto"


@dataclass(frozen=True)
class Floors:
    """The selection settings of a run whose model holds none calibrated for its languages (or with
    per_language off), for the MineConfig fields left None."""

    # Chosen with min_z for the bundled model by tools/calibrate_threshold.py on dev data over every language
    # (docs/mining.md, "The default threshold")
    threshold: float = 1.18
    min_cosine: float = 0.0  # off, as in margin mining in the literature
    min_z: float = 4.5  # unlike a margin it does not grow on small inputs; 0 = off (LASER's margin mining)
    min_prob: float = 0.5  # the second stage's floor where its calibration gives none


FLOOR_KEYS = ("threshold", "min_z", "min_cosine", "min_prob")  # the MineConfig fields None leaves to the model


@dataclass(frozen=True)
class MineConfig:
    k: int = 4  # LASER: k = 4 nearest neighbours in each direction
    margin: str = "ratio"  # LASER: ratio margin works best (ratio | distance | absolute)
    mode: str = "max"  # LASER: "max" retrieval, best pairs first, each sentence used once
    # The selection settings. None (the default) means: the value the model holds calibrated for the sides'
    # languages (per_language below; bitextmine/mining/calibrated.py), else the global default in Floors; a
    # number is used as given. mine's options set them the same way (an option not given is None).
    threshold: float | None = None  # keep pairs scoring at least this margin
    min_cosine: float | None = None  # keep pairs with at least this cosine
    # keep pairs that stand out: z, the mean over its two sentences of how many standard deviations its cosine
    # lies above the sentence's cosines with every other line of the other side (bitextmine/mining/standout.py)
    min_z: float | None = None
    # The second stage (bitextmine/judge/): where the model has one for the sides' languages (English and one of
    # its languages, known as for per_language), each candidate gets a score from its margin, cosine, z, length
    # ratio and IBM model 1 scores, and pairs below min_prob are dropped (besides the floors above).
    second_stage: bool = True
    min_prob: float | None = None
    # ... from this many distinct lines a side: below, the share of translations its probabilities adjust to is
    # guessed from a few dozen candidates, and the floors alone measured as well (dense dev tasks of 30 lines: the
    # stage lost a translation in fr and cs, gained one in de, tr and ar; from 300 lines it gains: benchmarks.md)
    second_stage_min_lines: int = 100
    # An assisting encoder (bitextmine/assist/): "" (none), auto (use where it knows both languages, else e5),
    # use, e5, or a local sentence-transformers model directory. Its cosine of each pair the second stage judges
    # joins the stage's score (docs/assist.md)
    assist: str = ""
    # With the assist: each line's candidate is the neighbour of its k nearest by the fast model that the two
    # encoders rank first together (their mean cosine's ratio margin, which becomes its score), instead of the fast
    # model's best (bitextmine/assist/pick.py; docs/assist.md). None: for the languages where that was measured to
    # help (bitextmine.assist.pick.PICKED_FOR)
    assist_pick: bool | None = None
    # Fail safe: where the stage's own estimate of the share of translations among the candidates it judged
    # (their mean score before its prior step) reaches fail_safe_share and it keeps fewer than fail_safe_keep of
    # the pairs the floors alone print, those are printed instead: where translations are common the floors are
    # precise, and a stage out of its depth drops translations (Arabic on dense tasks: F1 56 -> 71 on everyday
    # sentences, 90 -> 92 on manuals; it never fired at 1-10 % translations: docs/second-stage.md)
    fail_safe_share: float = 0.15
    fail_safe_keep: float = 0.8
    # Use the model's threshold, min_z, min_cosine and min_prob calibrated for the two sides' languages when it
    # has them, for those of them left None; the languages are given (src_lang/tgt_lang) or detected on the
    # first detect_lines lines of each side. Off: Floors' values for those left None.
    per_language: bool = True
    detect_lines: int = 200
    # A declared language (src_lang/tgt_lang) is checked against the side's text: refused when at least this
    # share of its first detect_lines lines read as one other language (the identifiers confuse close languages
    # on some lines; a wrong declaration reads as another language on most of them)
    lang_check_share: float = 0.8
    trust_langs: bool = False  # take the declared languages without reading the text (a checked run's escape)
    block_size: int = 8192  # query rows per k-NN block (exact search: rows streamed per block); bounds memory
    device: str = "auto"  # auto | cpu | cuda
    index: str = "auto"  # auto | flat | ivf | ivfpq: exact search, or approximate (FAISS IVF) for large sides
    # index auto: exact search up to this many rows on the searched side, IVF above. Exact search is one
    # bf16 pass for both directions (docs/benchmarks.md: 1M x 1M on 2 CPU cores in about 25 minutes, recall 1;
    # IVF needs nearly as many products for recall@4 0.95 on real sentence embeddings)
    auto_flat_max: int = 1_000_000
    nlist: int = 0  # IVF cells (0 = 4 * sqrt(rows), at least 16)
    nprobe: int = 32  # IVF cells visited per query (more: slower, higher recall)
    train_sample: int = 0  # rows sampled to train the IVF quantizer (0 = min(rows, 64 * nlist))
    pq_m: int = 0  # ivfpq: sub-quantizers (0 = the largest divisor of the dimension <= dim / 4)
    recall_check: int = 0  # compare this many sampled queries with exact search and report recall@k
    seed: int = 1  # IVF training sample and recall-check queries
    # search the other side in shards of this many rows (sides larger than memory). 0 = automatic: exact
    # search of both sides holds 32 MiB of rows on a CPU and what fits in half the free memory on a GPU;
    # other searches take the whole side
    shard_rows: int = 0
    # exact search: similarity tiles in bf16, candidates rescored in float32 and certified (the result of
    # float32 search), or fp32 throughout; auto: bf16 on GPUs and CPUs with native bf16 dot products
    precision: str = "auto"
    candidates: int = 16  # exact search: candidates kept per row before rescoring (more: fewer rows searched again)

    def given(self) -> tuple[str, ...]:
        """The selection settings (FLOOR_KEYS) set to a number, which no calibration replaces."""
        return tuple(k for k in FLOOR_KEYS if getattr(self, k) is not None)

    def resolved(self, values: dict | None = None) -> "MineConfig":
        """This config with each selection setting left None taken from ``values`` ({field: number}, e.g. a
        model's calibration), else from :class:`Floors`; those set to a number stay."""
        values, fallback = values or {}, Floors()
        return replace(self, **{k: float(values.get(k, getattr(fallback, k))) for k in FLOOR_KEYS
                                if getattr(self, k) is None})


ENGINES = ("local", "ray")  # the staged run: in this process, or as Ray tasks


@dataclass(frozen=True)
class PipelineConfig:
    """The staged mining run (:mod:`bitextmine.pipeline`): work directory, chunking and engine."""

    work_dir: str = ""  # keep the stages' files here (resumable); empty: a temporary directory, removed after
    resume: bool = False  # continue the run recorded in work_dir (same inputs; other search settings: redone)
    chunk_lines: int = 1_000_000  # lines per chunk: the unit of dedup, encoding and the k-NN grid
    bucket_lines: int = 50_000_000  # dedup: about this many lines per hash bucket (a bucket task's memory)
    engine: str = "local"  # local (in this process) | ray
    ray_address: str = ""  # --engine ray: an existing cluster's address; empty: start a local one


@dataclass(frozen=True)
class EmbeddingsConfig:
    """Precomputed embeddings from any encoder (``--src-emb/--tgt-emb``), read by
    :func:`bitextmine.encoding.external.open_embeddings`."""

    # npy: a 2-D float16/float32 .npy (with the sidecar of 'bitextmine encode' the model is checked; without it
    # none is needed) or a chunked 'encode --chunk-lines' directory; raw: LASER's headerless rows of floats
    format: str = "npy"
    dim: int = 0  # raw: floats per row (required: the file has no header); npy: checked when > 0
    fp16: bool = False  # raw: rows of float16 instead of float32 (a .npy names its own dtype)


# filter and score --margin prob: pairs per chunk, the neighbourhood of a pair's margin
PAIR_CHUNK_LINES = 20_000
# filter --score prob and score --margin prob: pairs per block the second stage judges together (a pair's margin
# among its block's other pairs); within the sizes the stage was trained on, and its search costs a quarter of
# a 20,000-line chunk's per pair (docs/benchmarks.md, "Filtering noisy parallel data")
JUDGE_LINES = 5_000
PROB_MIN_PAIRS = 10  # --score prob / --margin prob: fewer pairs given together are not judged (k = 4 neighbours among
# a handful of lines make every margin near 1; from 10 pairs up its decisions match larger blocks': docs/benchmarks.md)


@dataclass(frozen=True)
class ScoreConfig:
    # none: the cosine of each pair; ratio | distance: LASER's "score" mode, the margin of each pair against the
    # k nearest neighbours of its sides among all lines of the other side of the file (Artetxe & Schwenk 2019)
    # prob: the model's second stage (bitextmine/judge/), the probability of translation, the neighbourhoods taken
    # within chunks of chunk_lines pairs as 'filter --score prob' takes them (needs src_lang/tgt_lang)
    margin: str = "none"
    k: int = MineConfig.k  # neighbours per side, as in mining (LASER: 4)
    chunk_lines: int = PAIR_CHUNK_LINES
    judge_lines: int = JUDGE_LINES  # prob: pairs judged together (at most the stage's max_lines), within a chunk
    assist: str = ""  # prob: an assisting encoder joined to the stage's score, as mine's (MineConfig.assist)
    src_lang: str = ""
    tgt_lang: str = ""


def options_set(config, names) -> list[str]:
    """"--name value" of each field among ``names`` that ``config`` (a config dataclass) holds at another value
    than its class's default: the options given, for a message refusing those the command would not use."""
    return [f"--{n.replace('_', '-')} {getattr(config, n)}" for n in names if getattr(config, n) != getattr(type(config), n)]


def _h(default, help: str):
    """A dataclass field with its help text (the CLI shows it)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class RuleConfig:
    """Rules for noisy pairs (filter, and mine's candidates). A number of 0 switches its rule off."""

    empty: bool = _h(True, "Reject a pair with an empty (or only blank) side.")
    min_words: int = _h(1, "Reject a side with fewer words (whitespace-separated).")
    max_words: int = _h(250, "Reject a side with more words.")
    max_chars: int = _h(5000, "Reject a side with more characters (also bounds the work per line).")
    max_ratio: float = _h(3.0, "Reject when the longer side has more than this many times the length of the shorter, "
                               "in characters, a wide one (CJK, kana, hangul) counting 3.")
    ratio_min_bytes: int = _h(20, "Apply --max-ratio only when the longer side has at least this many bytes.")
    identical: bool = _h(True, "Reject sides equal after case folding and whitespace normalisation.")
    digits: bool = _h(True, "Reject when a number in digits on one side is on the other neither in digits nor "
                             "in words (bitextmine/filtering/numbers.py).")
    urls: bool = _h(True, "Reject when the two sides' URLs or e-mail addresses differ.")
    script: bool = _h(True, "With --src-lang/--tgt-lang: reject a side with too few letters in its language's script.")
    min_script: float = _h(0.1, "Share of a side's letters that must be in the expected script (0.1 keeps mixed-script "
                                "UI strings such as 'git notes [<选项>]'; chosen with tools/bench_langid.py).")
    repeats: int = _h(5, "Reject a pair when one side only has a repeat: a character other than a digit this many "
                         "times in a row ('!!!!!'), a piece of 2-4 characters one time fewer ('lalala...'), a word or "
                         "phrase 3 times in a row, or a phrase of 3+ words twice in a row (a doubled side). Such a repeat "
                         "on both sides is kept ('ooooo', a quoted 'stop, stop, stop') unless a character run is twice "
                         "this long. 0 = off.")
    langid: str = field(default="probs", metadata={"choices": ("off", "probs", "pair", "full"), "help":
        "With --src-lang/--tgt-lang: probs = reject a side whose declared language the identifier (--langid-model) "
        "gives less than --langid-max-prob while ranking another language above it (catches wrong-language, swapped "
        "and untranslated sides); pair = langdetect: is it more like the other side's declared language?; full = "
        "langdetect: is it confidently any other of 55 languages?; off = script rule only."})
    langid_model: str = field(default="ensemble", metadata={"choices": LANGID_MODELS, "help":
        "probs: ensemble = mean of fastText lid.176.ftz's and py3langid's probabilities (best on dev data); or one "
        "of them; or langdetect (slow)."})
    langid_max_prob: str = _h("en=0.01,*=0.05", "probs: reject when the declared language's probability is below "
                                                "this (LANG=P per language, * for the others).")
    langid_probs_min_chars: int = _h(3, "probs: sides shorter than this are not checked.")
    langid_min_chars: int = _h(30, "full: sides shorter than this get only the script rule (langdetect's guesses on "
                                   "short text are unreliable).")
    langid_pair_min_chars: int = _h(20, "pair: sides shorter than this are not checked.")
    langid_min_prob: float = _h(0.9, "pair, full: reject only when another language is detected with at least this "
                                     "probability.")
    dedup_pairs: bool = _h(True, "Reject a repeated (source, target) pair; the first is kept.")
    dedup_src: bool = _h(False, "Reject a repeated source; the first is kept.")
    dedup_tgt: bool = _h(False, "Reject a repeated target; the first is kept.")


@dataclass(frozen=True)
class FilterConfig:
    # cosine | margin (within the chunk) | prob: the model's second stage (bitextmine/judge/), the probability
    # of translation within the chunk (needs --src-lang/--tgt-lang: English and a language it holds) | none
    score: str = "cosine"
    min_score: float | None = None  # keep lines scoring at least this; None = keep all, append the score
    # Misaligned pairs: where the model knows both declared languages (its "languages"), a pair whose ratio
    # margin within the chunk (its cosine over the mean cosine of each side's k nearest lines of the other side)
    # is below this is rejected as misaligned, whatever the score. A translation's margin is about 1 or above,
    # a shuffled pair's far below. Chosen on held-out pairs (Tatoeba v1, manuals) with a fifth of them shuffled:
    # docs/filtering.md. 0 = off.
    min_aligned: float = 0.75
    chunk_lines: int = PAIR_CHUNK_LINES  # lines per chunk: memory bound, unit of parallel work, margin neighbourhood
    k: int = MineConfig.k  # margin: neighbours of each side among the other side of the chunk
    judge_lines: int = JUDGE_LINES  # prob: pairs judged together (at most the stage's max_lines), within a chunk
    assist: str = ""  # prob: an assisting encoder joined to the stage's score, as mine's (MineConfig.assist)
    workers: int = 0  # worker processes (0 = one per core); output is identical for any number
    scol: int = 1  # source column (1-based)
    tcol: int = 2  # target column (1-based)


SCORES = ("cosine", "margin", "prob", "none")
INDEXES = ("auto", "flat", "ivf", "ivfpq")
PRECISIONS = ("auto", "bf16", "fp32")  # exact search tiles
TABLE_PRECISIONS = ("auto", "fp32", "fp16", "bf16")  # encoding: the piece table on the device
AMP_MODES = ("auto", "off", "bf16")  # training: autocast
MARGINS = ("ratio", "distance", "absolute")
SCORE_MARGINS = ("none", "ratio", "distance", "prob")  # score --margin
EMB_FORMATS = ("npy", "raw")  # precomputed embeddings (EmbeddingsConfig.format)
ENCODERS = ("sp", "word", "trigram", "blstm-sp")
NEGATIVES = ("max", "mix", "random", "none")
LR_DECAYS = ("none", "linear")
BATCH_ORDERS = ("random", "topic")  # TrainConfig.batch_order (training.batching)
LOSSES = ("hinge", "infonce")
MODES = ("max", "forward", "backward", "intersect", "union")
DEVICES = ("auto", "cpu", "cuda")


# Training recipes: the fields each one sets on top of the dataclass defaults (train --recipe). "paper"
# is Wieting et al. 2019 as written (the defaults themselves). "inbatch" is the recipe of the bundled model
# (docs/tried.md, "The encoder"; docs/benchmarks.md, "The bundled model"): the in-batch softmax of
# sentence-transformers' MultipleNegativesRankingLoss over mini-batches of 2,048 pairs plus the hardest
# negative of a mega-batch of 4 mini-batches, with the paper's hinge loss over those negatives beside it
# (hinge_weight), a high learning rate for vectors that start large (its ratio to their spread is what
# counts under Adam), warm-up and linear decay, no dropout, languages sampled at temperature 4,
# dimension 512 and a case-folded SentencePiece model of 32,000 pieces that keeps rare CJK characters.
RECIPES: dict[str, dict[str, dict]] = {
    "paper": {"train": {}, "tokenizer": {}},
    "inbatch": {
        "train": dict(loss="infonce", negatives="max", megabatch_max=4, hinge_weight=6.0, epochs=6, batch_size=2048,
                      lr=0.2, init_scale=1.732, warmup=0.1, lr_decay="linear", dropout=0.0, sampling_temperature=4.0,
                      dim=512),
        "tokenizer": dict(vocab_size=32000, normalization="nmt_nfkc_cf", character_coverage=0.99995),
    },
}
# auto: inbatch where it was measured (the sp encoder on bilingual pairs, trained from scratch), else paper:
# its learning rate is set for token vectors that start large, not for an LSTM's weights or another
# model's vectors (--init-from), and its loss needs two languages (not --paraphrase).
DEFAULT_RECIPE = "auto"  # train --recipe


def auto_recipe(encoder: str, paraphrase: bool, init_from: bool) -> str:
    """The recipe ``auto`` stands for with this encoder, --paraphrase and --init-from."""
    return "inbatch" if encoder == "sp" and not paraphrase and not init_from else "paper"


def recipe_configs(name: str, init_from: bool = False, **given) -> tuple[TrainConfig, TokenizerConfig]:
    """The TrainConfig and TokenizerConfig of recipe ``name`` (RECIPES, or auto: :func:`auto_recipe`),
    with every field in ``given`` that is not None set on top (a field name of either dataclass;
    KeyError for another name). A recipe's hinge weight is dropped (0) where the options given leave no
    place for it (--loss hinge, --negatives none); a hinge weight given explicitly is kept (and checked by
    training)."""
    from dataclasses import fields, replace

    if name == "auto":
        name = auto_recipe(given.get("encoder") or TrainConfig.encoder, bool(given.get("paraphrase")), init_from)
    train_fields = {f.name for f in fields(TrainConfig)}
    tok_fields = {f.name for f in fields(TokenizerConfig)}
    unknown = set(given) - train_fields - tok_fields
    if unknown:
        raise KeyError(f"not a training or tokenizer setting: {', '.join(sorted(unknown))}")
    set_ = {k: v for k, v in given.items() if v is not None}
    train = replace(TrainConfig(**RECIPES[name]["train"]), **{k: v for k, v in set_.items() if k in train_fields})
    if "hinge_weight" not in set_ and (train.loss != "infonce" or train.negatives == "none"):
        train = replace(train, hinge_weight=0.0)  # the recipe's hinge term needs both; a given weight is checked
    tok = replace(TokenizerConfig(**RECIPES[name]["tokenizer"]), **{k: v for k, v in set_.items() if k in tok_fields})
    return train, tok


@dataclass(frozen=True)
class LexiconConfig:
    """IBM model 1 lexical tables (lexicon/ibm1.py)."""

    iters: int = 5  # EM iterations: GIZA++'s default for model 1 (Och & Ney 2003)
    null: bool = True  # a NULL source token that can explain any target token (Brown et al. 1993)
    floor: float = 1e-4  # entries below it pruned after training: 5x fewer than none, same separation (docs/tried.md)
    max_len: int = 128  # training skips pairs with a longer side (GIZA++ skips > 100 words): bounds the l x m cost
    min_prob: float = 1e-6  # scoring's floor per target token (unseen, pruned): separates better than 1e-4 or 1e-3 (docs/tried.md)
    batch: int = 1 << 22  # co-occurrences per batch in training and scoring: bounds the memory of one step


@dataclass(frozen=True)
class SecondStageConfig:
    """Training the second stage (bitextmine/judge/train.py): tasks drawn from the training pairs, mined with
    the model, its candidates labelled (gold or not) and a logistic regression fitted per language."""

    sizes: tuple[int, ...] = (1000, 3000)  # lines a side of the tasks
    shares: tuple[float, ...] = (0.01, 0.03, 0.1, 0.5)  # gold pairs per side: from sparse to dense mining
    draws: int = 1  # tasks per corpus, size and share
    floor: float = 1.0  # margin below which a candidate is not judged (dropped): bounds the cost
    # the stage judges a run's own margins up to this many distinct lines a side: the largest dev tasks its min_prob
    # was calibrated on (calibrate-mining, which replaces this); margins fall as the sides grow, so a larger run gives it
    # margins as sides of this many lines give them (bitextmine/mining/reference.py)
    max_lines: int = 30000
    # the classifier: "trees" (gradient-boosted, scikit-learn to train, numpy to apply) or "logistic"; measured on
    # the sparse dev tasks: trees trained on tasks free of repeats, French news at 4 % translations F1 80.9 -> 89.7
    classifier: str = "trees"
    trees: int = 300  # boosting rounds
    leaves: int = 31  # leaves a tree
    depth: int = 6  # splits on a path: bounds the cost of applying them
    rate: float = 0.05  # learning rate
    l2: float = 1.0  # L2 weight: the logistic regression's (standardised features), the trees' leaves
    min_prob: float = 0.5  # stored with the classifier until calibrated on dev data
    # pairs per corpus set aside for the tasks (at most half of a corpus), left out of the lexical tables, so
    # that the classifier learns what the tables say of pairs they never saw
    task_pairs: int = 8000
    # the deficit features' expected links: each piece's mean log best link over up to this many of the tables'
    # own pairs (seeded), drawn toward the mean of all pieces as if it had this many more occurrences
    expected_pairs: int = 40000
    expected_shrink: float = 5.0
    seed: int = 1


@dataclass(frozen=True)
class CalibrationConfig:
    """The dev tasks `calibrate-mining` chooses a model's mining settings on and measures them with
    (bitextmine/evaluation/mining_calibration.py)."""

    # source lines of the floors' tasks (half of them translated), each where the dev pairs allow (1.5 pairs a line)
    floor_lines: tuple[int, ...] = (30, 100, 300, 1000)
    # shares of translations whose mean F1 the floors are chosen on (0.5 and 0.1, from tasks of 100 lines, are
    # drawn): where a second stage judges the pair, the dense tasks (the stage decides where translations are
    # rare); where none does, the floors alone decide at every share, so the sparse tasks count too
    floor_shares: tuple[float, ...] = (0.5,)
    floor_shares_alone: tuple[float, ...] = (0.5, 0.1)
    # lines a side of the second stage's tasks: the smallest shrinks to what the dev pairs fill; a larger one takes
    # its gold pairs from the dev pairs and, where they run out, its distractors from filler pairs (none: left out)
    stage_lines: tuple[int, ...] = (1000,)
    stage_shares: tuple[float, ...] = (0.01, 0.05, 0.1, 0.5)  # shares of translations of the stage's tasks
    stage_draws: int = 2  # tasks per dev set, size and share (mine's defaults are measured on as many)
    # the stage judges a run's own margins up to the largest of its tasks or this many lines a side, whichever is
    # more (its max_lines), margins against samples of that many above: a stage chosen on 1,000-line tasks given
    # margins against 1,000-line samples measured precision 7-29 % at 1 % translated on tasks of 10,000-30,000
    # lines, 47-80 % with their own margins (docs/tried.md, "Mining settings")
    stage_own_lines: int = 30000
    # the stage's score floor has the best mean F-beta over the shares of translations: 1 weighs precision and
    # recall alike (F1); below 1, precision more (0.5: the usual precision-weighted F)
    stage_beta: float = 1.0
    # fit a map of the stage's score on the stage's tasks (its candidates, each kind of task and share weighing the
    # same) so that among candidates given a score the share of translations is near it, at every share of
    # translations; min_prob then applies to the mapped score (bitextmine.evaluation.stage_calibration)
    stage_score_map: bool = True
    # context tasks (calibrate-mining --context): gold dev pairs among their documents' other lines, the hardest
    # distractors prose has (sentences of the same story); lines a side and shares of translations
    context_lines: int = 1500
    context_shares: tuple[float, ...] = (0.01, 0.04, 0.1)
    measure_lines: int = 1000  # lines a side of the tasks mine's defaults are measured on end to end
    seed: int = 0


@dataclass(frozen=True)
class Defaults:
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    encode: EncodeConfig = field(default_factory=EncodeConfig)
    mine: MineConfig = field(default_factory=MineConfig)
