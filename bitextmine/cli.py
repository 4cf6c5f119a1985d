"""The ``bitextmine`` command line. Each command parses options and calls one library function.

Heavy modules (torch, faiss, sentencepiece) are imported inside the commands, so ``--help`` is fast.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import replace

import click

from . import __version__
from .config import (AMP_MODES, DEVICES, ENCODERS, INDEXES, LOSSES, MARGINS, MODES, NEGATIVES, PRECISIONS, SCORES,
                     TABLE_PRECISIONS, EncodeConfig, FilterConfig, MineConfig, RuleConfig, TokenizerConfig, TrainConfig)
from .config import DEFAULT_RECIPE, LR_DECAYS, RECIPES, recipe_configs
from .config import EMB_FORMATS, ENGINES, SCORE_MARGINS, SPM_NORMALIZATIONS, EmbeddingsConfig, PipelineConfig, ScoreConfig
from .errors import BitextmineError


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BitextmineError as e:
            click.echo(f"Error: {e}", err=True)
            sys.exit(1)
        except BrokenPipeError:
            # the reader of our output went away (e.g. `| head`): stop quietly, as Unix tools do
            sys.stderr.close()
            sys.exit(0)
        except KeyboardInterrupt:
            click.echo("Error: interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="bitextmine")
def main() -> None:
    """Train cross-lingual sentence encoders on bitext, encode sentences fast, mine and score translation pairs.

    \b
    Examples:
      bitextmine mine examples/de.txt examples/en.txt
      bitextmine train --src corpus.de --tgt corpus.en --out my-model
    """


def _bar(quiet: bool, **kw):
    from tqdm import tqdm

    # None = tqdm shows the bar only when stderr is a terminal (no clutter in logs and pipelines)
    return tqdm(disable=True if quiet else None, file=sys.stderr, dynamic_ncols=True, **kw)


def _info(quiet: bool, message: str) -> None:
    if not quiet:
        click.echo(message, err=True)


@contextmanager
def _output(path: str | None, *, binary: bool = False):
    """A text (or ``binary``) stream for ``path`` (None or '-' = stdout), written atomically for files:
    to ``path.partial``, renamed when the block ends without an error. Binary files are compressed
    by the extension of ``path`` (.gz, .xz, .zst)."""
    if path in (None, "-"):
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    import os

    from .corpus import open_output

    tmp = path + ".partial"
    try:
        with (open_output(tmp, path) if binary else open(tmp, "w", encoding="utf-8", newline="\n")) as f:
            yield f
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _model_option(f):
    return click.option("--model", "model_dir", metavar="DIR", default=None,
                        help="Model directory from 'bitextmine train'  [default: the bundled model]")(f)


def _device_option(default: str):
    return click.option("--device", type=click.Choice(DEVICES), default=default, show_default=True,
                        help="auto = CUDA when available, else CPU.")


def _quiet_option(f):
    return click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary on stderr.")(f)


def _marked_option(choices: tuple[str, ...]):
    return click.option("--marked", type=click.Choice(choices), default=None,
                        help="Models trained with --separate-vocab: the side whose text is in the marked language.")


def _rule_options(f):
    """One option per RuleConfig field (--X/--no-X for switches), defaults and help from the dataclass."""
    from dataclasses import fields

    for fl in reversed(fields(RuleConfig)):
        flag = "--" + fl.name.replace("_", "-")
        help_ = fl.metadata.get("help", "")
        if "choices" in fl.metadata:
            f = click.option(flag, fl.name, type=click.Choice(fl.metadata["choices"]), default=fl.default,
                             show_default=True, help=help_)(f)
        elif isinstance(fl.default, bool):
            f = click.option(f"{flag}/--no-{flag[2:]}", fl.name, default=fl.default, show_default=True, help=help_)(f)
        else:
            f = click.option(flag, fl.name, type=type(fl.default), default=fl.default, show_default=True, help=help_)(f)
    return f


def _rules_from(kw: dict) -> RuleConfig:
    from dataclasses import fields

    return RuleConfig(**{fl.name: kw.pop(fl.name) for fl in fields(RuleConfig)})


def _lang_options(f):
    f = click.option("--tgt-lang", default=None, metavar="CODE", help="Target language (ISO 639-1, e.g. de): script rule, langdetect.")(f)
    return click.option("--src-lang", default=None, metavar="CODE", help="Source language (ISO 639-1, e.g. en).")(f)


def _sif_option(f):
    return click.option("--sif", is_flag=True, default=EncodeConfig.sif,
                        help="SIF: weight tokens by a/(a+p(w)) and remove the common component (both stored in the model).")(f)


def embedding_options(f):
    """--emb-format, --dim, --fp16: how --src-emb/--tgt-emb are stored (EmbeddingsConfig); the command's
    keyword arguments emb_format, dim, fp16, which :func:`_embeddings_from` collects."""
    Em = EmbeddingsConfig
    f = click.option("--fp16", is_flag=True, default=Em.fp16,
                     help="--emb-format raw: rows of float16 instead of float32.")(f)
    f = click.option("--dim", type=click.IntRange(0), default=Em.dim, show_default=True,
                     help="Values per embedding row: required with --emb-format raw; checked for npy when > 0.")(f)
    return click.option("--emb-format", type=click.Choice(EMB_FORMATS), default=Em.format, show_default=True,
                        help="npy: a 2-D float16/float32 .npy from any encoder (no model needed unless it has the "
                             "sidecar of 'bitextmine encode', whose model is checked) or an 'encode --chunk-lines' "
                             "directory; raw: LASER's headerless float32 rows (needs --dim).")(f)


def _embeddings_from(kw: dict) -> EmbeddingsConfig:
    """The EmbeddingsConfig of :func:`embedding_options`, taken out of a command's keyword arguments."""
    return EmbeddingsConfig(format=kw.pop("emb_format"), dim=kw.pop("dim"), fp16=kw.pop("fp16"))


# --- train -----------------------------------------------------------------------------------------

T, K = TrainConfig, TokenizerConfig


def _by_recipe(name: str, tokenizer: bool = False) -> str:
    """Help text suffix: each recipe's default for the TrainConfig (or TokenizerConfig) field ``name``."""
    section, base = ("tokenizer", K) if tokenizer else ("train", T)
    values = ", ".join(f"{r}: {RECIPES[r][section].get(name, getattr(base, name))}" for r in RECIPES)
    return f"  [default: by --recipe; {values}]"


@main.command()
@click.option("--src", multiple=True, metavar="FILE", help="Source side of a line-aligned corpus (repeatable, paired with --tgt in order).")
@click.option("--tgt", multiple=True, metavar="FILE", help="Target side of a line-aligned corpus (repeatable).")
@click.option("--tsv", multiple=True, metavar="FILE", help="A TSV corpus (repeatable); columns from --scol/--tcol.")
@click.option("--scol", type=click.IntRange(1), default=1, show_default=True, help="TSV source column (1-based).")
@click.option("--tcol", type=click.IntRange(1), default=2, show_default=True, help="TSV target column (1-based).")
@click.option("--out", "-o", required=True, metavar="DIR", help="Model directory to write.")
@click.option("--recipe", type=click.Choice(["auto", *RECIPES]), default=DEFAULT_RECIPE, show_default=True,
              help="Defaults for the options marked 'by --recipe': paper = Wieting et al. 2019 as written; inbatch = "
                   "the bundled model's recipe: in-batch softmax over 2,048 pairs plus the hardest negative of 4 "
                   "mini-batches with a hinge term, learning rate 0.2 with warm-up and decay, dimension 512, "
                   "language sampling, case-folded pieces (docs/benchmarks.md); auto = inbatch for --encoder sp "
                   "on bilingual pairs from scratch, else paper. An option given explicitly wins.")
@click.option("--encoder", type=click.Choice(ENCODERS), default=T.encoder, show_default=True,
              help="sp = mean of SentencePiece pieces; word / trigram = mean of word / character-trigram vectors; "
                   "blstm-sp = BiLSTM over pieces, mean-pooled.")
@click.option("--vocab-size", type=click.IntRange(100), default=None,
              help="Vocabulary: SentencePiece pieces (sp, blstm-sp; joint over all languages)"
                   + _by_recipe("vocab_size", tokenizer=True)
                   + f"; most frequent tokens (word, trigram)  [default: {K.token_vocab_size}]")
@click.option("--spm-model", metavar="FILE", default=None, help="Reuse this SentencePiece model instead of training one.")
@click.option("--spm-sample", type=click.IntRange(1000), default=K.sample_sentences, show_default=True, help="Sentences sampled to train SentencePiece.")
@click.option("--spm-normalization", type=click.Choice(SPM_NORMALIZATIONS), default=None,
              help="SentencePiece's normalisation rule, stored in the model (nmt_nfkc_cf also folds case)."
                   + _by_recipe("normalization", tokenizer=True))
@click.option("--character-coverage", type=click.FloatRange(0.9, 1.0), default=None,
              help="Share of the training characters SentencePiece keeps as pieces; the rest read as unknown."
                   + _by_recipe("character_coverage", tokenizer=True))
@click.option("--dim", type=click.IntRange(1), default=None, help="Embedding dimension." + _by_recipe("dim"))
@click.option("--untrained", is_flag=True, help="Save the random initial model (normal(0,1) vectors): the random-encoder baseline.")
@click.option("--negatives", type=click.Choice(NEGATIVES), default=None,
              help="max = hardest in the mega-batch; mix = hardest with probability 0.5, else random; random; "
                   "none = in-batch candidates only (--loss infonce)." + _by_recipe("negatives"))
@click.option("--paraphrase", is_flag=True, help="Monolingual paraphrase pairs: negatives drawn from both sides.")
@click.option("--separate-vocab", type=click.Choice(["src", "tgt"]), default=None,
              help="Give this side's language its own token vectors (the papers' language prefix); encode its text "
                   "with --marked. Default: one shared vocabulary.")
@click.option("--shuffle-words", type=click.FloatRange(0, 1), default=T.shuffle_words, show_default=True,
              help="blstm-sp: probability that a training sentence's words are shuffled.")
@click.option("--init-from", metavar="DIR", default=None, help="Start from this model (its tokenizer, encoder and weights).")
@click.option("--reg-to-init", type=click.FloatRange(0), default=T.reg_to_init, show_default=True,
              help="With --init-from: lambda of the L2 pull toward the initial weights.")
@click.option("--sts-pairs", multiple=True, metavar="FILE",
              help="STS file (SemEval, STSb TSV or CSV) whose pairs scored >= --sts-min-score are positives (repeatable).")
@click.option("--sts-min-score", type=float, default=T.sts_min_score, show_default=True, help="Gold score cut-off for --sts-pairs.")
@click.option("--clean", is_flag=True, default=T.clean, help="Drop training pairs that break filter's default rules "
              "(lengths, ratio, identical sides, digits, URLs, repeats; no language rules).")
@click.option("--epochs", type=click.IntRange(1), default=None, help="Passes over the training pairs." + _by_recipe("epochs"))
@click.option("--batch-size", type=click.IntRange(1), default=None, help="Pairs per mini-batch." + _by_recipe("batch_size"))
@click.option("--loss", type=click.Choice(LOSSES), default=None,
              help="hinge (paper) or infonce: in-batch softmax over the mini-batch's targets (and, unless --negatives "
                   "none, their hardest negatives)." + _by_recipe("loss"))
@click.option("--margin", type=float, default=T.margin, show_default=True, help="Hinge loss margin delta.")
@click.option("--hinge-weight", type=click.FloatRange(0), default=None,
              help="infonce with mega-batch negatives: add this times the hinge loss (--margin) over the same "
                   "negatives (0 = InfoNCE alone; a recipe's weight is dropped under --loss hinge or --negatives "
                   "none)." + _by_recipe("hinge_weight"))
@click.option("--scale", type=click.FloatRange(0, min_open=True), default=T.scale, show_default=True,
              help="infonce: cosines are multiplied by this before the softmax (1 / temperature).")
@click.option("--sampling-temperature", type=click.FloatRange(1), default=None,
              help="Share of each language pair per epoch ~ its size ** (1/T); 1 = every pair once. A corpus's language "
                   "is its target file's suffix (train.de.gz -> de; a TSV file is its own group)." + _by_recipe("sampling_temperature"))
@click.option("--dropout", type=click.FloatRange(0, 1, max_open=True), default=None,
              help="Probability of dropping each token (averaging encoders; blstm-sp uses --shuffle-words)."
                   + _by_recipe("dropout"))
@click.option("--lr", type=click.FloatRange(0, min_open=True), default=None, help="Adam learning rate." + _by_recipe("lr"))
@click.option("--init-scale", type=click.FloatRange(0, min_open=True), default=None,
              help="Token vectors start as uniform(-s, s); with Adam the learning rate counts relative to it."
                   + _by_recipe("init_scale"))
@click.option("--warmup", type=click.FloatRange(0, 1, max_open=True), default=None,
              help="Share of all mini-batches over which the learning rate rises linearly from 0." + _by_recipe("warmup"))
@click.option("--lr-decay", type=click.Choice(LR_DECAYS), default=None,
              help="none = constant (paper); linear = down to 0 at the last mini-batch." + _by_recipe("lr_decay"))
@click.option("--megabatch-start", type=click.IntRange(1), default=T.megabatch_start, show_default=True, help="Mini-batches per mega-batch at the start.")
@click.option("--megabatch-max", type=click.IntRange(1), default=None, help="Largest mega-batch, in mini-batches." + _by_recipe("megabatch_max"))
@click.option("--megabatch-every", type=click.IntRange(1), default=T.megabatch_every, show_default=True, help="Grow the mega-batch by one every N mini-batches.")
@click.option("--dev-pairs", type=click.IntRange(0), default=T.dev_pairs, show_default=True, help="Training pairs held apart for dev retrieval accuracy.")
@click.option("--dev-tatoeba", nargs=2, multiple=True, metavar="SRC TGT", help="Aligned dev files for retrieval accuracy (repeatable).")
@click.option("--dev-sts", multiple=True, metavar="FILE", help="STS file (SemEval, STSb TSV or CSV) for dev Pearson r (repeatable).")
@click.option("--eval-every", type=click.IntRange(0), default=T.eval_every, show_default=True, help="Also evaluate every N mini-batches (0 = each epoch).")
@click.option("--checkpoint-every", type=click.IntRange(0), default=T.checkpoint_every, show_default=True, help="Checkpoint every N mini-batches.")
@click.option("--max-steps", type=click.IntRange(0), default=T.max_steps, show_default=True, help="Stop after N mini-batches (0 = all epochs); continue later with --resume.")
@click.option("--resume", is_flag=True, help="Continue from OUT/checkpoint.")
@click.option("--lang", "languages", multiple=True, metavar="CODE", help="Language code recorded in the model (repeatable).")
@click.option("--fp32", is_flag=True, help="Store embeddings as float32 instead of float16.")
@click.option("--seed", type=int, default=T.seed, show_default=True)
@click.option("--threads", type=click.IntRange(0), default=T.threads, show_default=True, help="Torch CPU threads (0 = default).")
@click.option("--amp", type=click.Choice(AMP_MODES), default=T.amp, show_default=True,
              help="bf16 for blstm-sp's LSTM (input and weight copies in bf16; weights, optimiser and loss stay "
                   "float32); the averaging encoders (sp, word, trigram) always compute in float32. auto = on for "
                   "CUDA GPUs with bf16, off on CPU.")
@_device_option(T.device)
@_quiet_option
def train(src, tgt, tsv, scol, tcol, out, recipe, encoder, vocab_size, spm_model, spm_sample, spm_normalization, character_coverage, dim, untrained, negatives,
          paraphrase, separate_vocab, shuffle_words, init_from, reg_to_init, sts_pairs, sts_min_score, clean, epochs, batch_size, loss,
          margin, hinge_weight, scale, sampling_temperature,
          dropout, lr, init_scale, warmup, lr_decay, megabatch_start, megabatch_max, megabatch_every, dev_pairs, dev_tatoeba, dev_sts, eval_every,
          checkpoint_every, max_steps, resume, languages, fp32, seed, threads, amp, device, quiet):
    """Train an encoder on parallel corpora (or paraphrase pairs, or STS pairs).

    \b
    Examples:
      bitextmine train --src data/train.de.gz --tgt data/train.en.gz --out de-en-model \\
          --dev-tatoeba tatoeba.deu-eng.deu tatoeba.deu-eng.eng
      bitextmine train --src train.de --tgt train.en --encoder trigram --out tri
      bitextmine train --src train.de --tgt train.en --untrained --out random-sp
      bitextmine train --init-from de-en-model --reg-to-init 0.001 --sts-pairs sts-train.csv --out tuned
    """
    from .corpus import CorpusSpec
    from .errors import ConfigError
    from .training.loop import train as run_train

    if len(src) != len(tgt):
        raise ConfigError(f"{len(src)} --src but {len(tgt)} --tgt; expected them in pairs")
    specs = [CorpusSpec(src=s, tgt=t) for s, t in zip(src, tgt)] + [CorpusSpec(tsv=p, scol=scol, tcol=tcol) for p in tsv]
    config, tok_config = recipe_configs(
        recipe, init_from=bool(init_from), encoder=encoder, untrained=untrained, negatives=negatives, paraphrase=paraphrase,
        separate_vocab=separate_vocab or "", sts_min_score=sts_min_score, clean=clean, shuffle_words=shuffle_words,
        reg_to_init=reg_to_init, dim=dim, loss=loss, margin=margin, hinge_weight=hinge_weight, scale=scale,
        sampling_temperature=sampling_temperature, batch_size=batch_size, megabatch_start=megabatch_start,
        megabatch_max=megabatch_max, megabatch_every=megabatch_every, dropout=dropout, lr=lr, init_scale=init_scale,
        warmup=warmup, lr_decay=lr_decay, epochs=epochs, seed=seed, dev_pairs=dev_pairs, eval_every=eval_every,
        checkpoint_every=checkpoint_every, max_steps=max_steps, device=device, threads=threads, amp=amp,
        fp16=not fp32, vocab_size=vocab_size, token_vocab_size=vocab_size, sample_sentences=spm_sample,
        normalization=spm_normalization, character_coverage=character_coverage)
    bar = None

    def say(message: str) -> None:
        if quiet:
            return
        if bar is not None:
            bar.write(message, file=sys.stderr)
        else:
            click.echo(message, err=True)

    def progress(e: dict) -> None:
        nonlocal bar
        if e["event"] == "log":
            say(e["message"])
        elif e["event"] == "start":
            bar = _bar(quiet, total=e["total_steps"], initial=e["step"], unit="batch", desc="train")
        elif e["event"] == "step" and bar is not None:
            bar.update(e["advance"])
            bar.set_postfix(epoch=e["epoch"], loss=f"{e['loss']:.4f}", mega=e["megabatch"],
                            pairs_s=f"{e['pairs_per_second']:.0f}", refresh=False)
        elif e["event"] == "eval":
            scores = ", ".join(f"{k} {v:.2f}" for k, v in e["scores"].items())
            say(f"dev after epoch {e['epoch']}, mini-batch {e['step']}: {scores} (best {e['best']:.2f})")

    result = run_train(specs, out, config=config, tokenizer_config=tok_config, tokenizer_path=spm_model,
                       init_from=init_from, sts_pairs=sts_pairs, dev_tatoeba=dev_tatoeba,
                       dev_sts=dev_sts, languages=languages, resume=resume,
                       progress=progress)
    if bar is not None:
        bar.close()
    _info(quiet, f"wrote {result.model_dir}: {result.steps} mini-batches in {result.seconds:.0f}s "
                 f"({result.pairs_per_second:.0f} pairs/s)")


# --- encode ----------------------------------------------------------------------------------------

E = EncodeConfig


@main.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--output", "-o", required=True, metavar="OUT.npy", help="Embeddings file; OUT.npy.json is written beside it.")
@_model_option
@click.option("--fp16", is_flag=True, default=E.fp16, help="Store float16 instead of float32.")
@click.option("--batch-size", type=click.IntRange(1), default=E.batch_size, show_default=True, help="Sentences per batch.")
@click.option("--threads", type=click.IntRange(0), default=E.threads, show_default=True, help="Worker processes for reading, tokenising and embedding (0 = one per core).")
@click.option("--batch-tokens", type=click.IntRange(0), default=E.batch_tokens, show_default=True,
              help="At most N pieces per embedding call, whole sentences (bounds device memory; 0 = no limit).")
@click.option("--precision", type=click.Choice(TABLE_PRECISIONS), default=E.precision, show_default=True,
              help="Piece table on the device (sums and norms stay float32); auto = the model's stored dtype on "
                   "CUDA (fp16 for the bundled model: lossless), fp32 on CPU. BiLSTM models run in fp32.")
@_sif_option
@click.option("--marked", is_flag=True, help="Models trained with --separate-vocab: the text is in the marked language.")
@click.option("--chunk-lines", type=click.IntRange(0), default=0, show_default=True,
              help="Write OUT as a directory of chunks of N rows with a manifest, resumable (0 = one .npy file).")
@click.option("--resume", is_flag=True, help="With --chunk-lines: continue a stopped run after its last complete chunk.")
@click.option("--max-chunks", type=click.IntRange(0), default=0, show_default=True,
              help="With --chunk-lines: stop after N new chunks (continue later with --resume).")
@_device_option(E.device)
@_quiet_option
def encode(inputs, output, model_dir, fp16, batch_size, threads, batch_tokens, precision, sif, marked, chunk_lines, resume,
           max_chunks, device, quiet):
    """Encode text files (one sentence per line; '-' = stdin; .gz read transparently).

    Writes one L2-normalised row per input line, in input order. For huge inputs, --chunk-lines
    writes a directory of chunks that a killed run continues with --resume, ending with the same
    bytes; 'mine --src-emb' and 'eval' read either form.

    \b
    Examples:
      bitextmine encode examples/de.txt -o de.npy
      bitextmine encode big.txt.gz -o big.emb --chunk-lines 1000000 --fp16   # rerun with --resume if stopped
    """
    from .encoding import encode_chunked, encode_files
    from .errors import ConfigError
    from .model import load_model

    model = load_model(model_dir)
    config = EncodeConfig(batch_size=batch_size, threads=threads, fp16=fp16, device=device, sif=sif, marked=marked,
                          batch_tokens=batch_tokens, precision=precision)
    bar = _bar(quiet, unit="sent", desc="encode")
    if chunk_lines:
        result = encode_chunked(inputs, output, model, config=config, chunk_lines=chunk_lines, resume=resume,
                                max_chunks=max_chunks, progress=bar.update)
    elif resume or max_chunks:
        raise ConfigError("--resume and --max-chunks go with --chunk-lines")
    else:
        result = encode_files(inputs, output, model, config=config, progress=bar.update)
    bar.close()
    if result is None:
        _info(quiet, f"stopped after {max_chunks} new chunk(s) in {output}; continue with --resume")
    else:
        _info(quiet, f"wrote {result.count} x {result.dim} {result.dtype} to {output}")


# --- mine ------------------------------------------------------------------------------------------

M = MineConfig


SEARCH_FIELDS = ("k", "margin", "mode", "index", "nlist", "nprobe", "train_sample", "pq_m", "recall_check", "precision",
                 "shard_rows")


def _search_from(kw: dict) -> dict:
    """The MineConfig fields that :func:`_search_options` adds, taken out of a command's keyword arguments."""
    return {name: kw.pop(name) for name in SEARCH_FIELDS}


def _search_options(f):
    """--k, --margin, --mode and the index options (mine, bench and eval bucc): the MineConfig fields in
    SEARCH_FIELDS, which :func:`_search_from` collects."""
    f = click.option("--shard-rows", type=click.IntRange(0), default=M.shard_rows, show_default=True,
                     help="Search the other side in shards of N rows, one in memory at a time, merging each query's "
                          "neighbours over the shards (global neighbour means: scores do not depend on N). 0 = automatic "
                          "(exact search: 32 MiB of rows on a CPU, what fits on a GPU; otherwise the whole side).")(f)
    f = click.option("--precision", type=click.Choice(PRECISIONS), default=M.precision, show_default=True,
                     help="Exact search: bf16 similarity tiles, candidates rescored in float32 and certified (the "
                          "result of float32 search, faster), or fp32 throughout; auto = bf16 on GPUs and CPUs "
                          "with native bf16 (AVX512-BF16, AMX).")(f)
    f = click.option("--recall-check", type=click.IntRange(0), default=M.recall_check, show_default=True,
                     help="Compare this many sampled queries with exact search and report recall@k (approximate indexes).")(f)
    f = click.option("--pq-m", type=click.IntRange(0), default=M.pq_m, show_default=True,
                     help="IVF-PQ sub-quantizers, a divisor of the embedding dimension (0 = the largest divisor up to "
                          "dim / 4 on a CPU; on a FAISS GPU the largest it accepts: 1-4, 8, 12, 16, 20, 24, 28, 32, 40, 48).")(f)
    f = click.option("--train-sample", type=click.IntRange(0), default=M.train_sample, show_default=True,
                     help="Rows sampled to train the IVF quantizer (0 = 64 per cell).")(f)
    f = click.option("--nprobe", type=click.IntRange(1), default=M.nprobe, show_default=True,
                     help="IVF cells visited per query (more: slower, higher recall).")(f)
    f = click.option("--nlist", type=click.IntRange(0), default=M.nlist, show_default=True,
                     help="IVF cells (0 = 4 x sqrt(rows)).")(f)
    f = click.option("--index", type=click.Choice(INDEXES), default=M.index, show_default=True,
                     help=f"flat = exact; ivf / ivfpq = approximate FAISS indexes; auto = flat up to "
                          f"{M.auto_flat_max:,} rows on the searched side, ivf above.")(f)
    f = click.option("--mode", type=click.Choice(MODES), default=M.mode, show_default=True, help="Retrieval mode.")(f)
    f = click.option("--margin", type=click.Choice(MARGINS), default=M.margin, show_default=True, help="Margin score.")(f)
    return click.option("--k", type=click.IntRange(1), default=M.k, show_default=True,
                        help="Nearest neighbours per direction.")(f)


def _pipeline_options(f):
    """--work-dir, --resume, --chunk-lines, --engine, --ray-address (PipelineConfig)."""
    P = PipelineConfig
    f = click.option("--ray-address", default=P.ray_address, metavar="ADDR",
                     help="--engine ray: the address of a running cluster  [default: start a local one]")(f)
    f = click.option("--engine", type=click.Choice(ENGINES), default=P.engine, show_default=True,
                     help="Run the stages in this process, or as Ray tasks (pip install 'bitextmine[ray]').")(f)
    f = click.option("--chunk-lines", type=click.IntRange(1), default=P.chunk_lines, show_default=True,
                     help="Lines per chunk: the unit of dedup, encoding and the k-NN grid.")(f)
    f = click.option("--resume", is_flag=True,
                     help="Continue the run recorded in --work-dir (same inputs; changed search, margin or selection "
                          "settings recompute only what depends on them).")(f)
    return click.option("--work-dir", default=P.work_dir, metavar="DIR",
                        help="Keep every stage's files here, so a stopped run continues with --resume  "
                             "[default: a temporary directory, removed after]")(f)


@main.command()
@click.argument("src")
@click.argument("tgt")
@click.option("--output", "-o", default=None, metavar="OUT.tsv", help="Output TSV  [default: stdout]")
@_model_option
@click.option("--src-emb", default=None, metavar="FILE", help="Embeddings of every line of SRC: 'bitextmine encode' "
              "output, or any encoder's (.npy, or LASER's raw format with --emb-format raw --dim N); no model is "
              "loaded for files without a sidecar.")
@click.option("--tgt-emb", default=None, metavar="FILE", help="Embeddings of every line of TGT.")
@embedding_options
@_search_options
@click.option("--threshold", type=float, default=M.threshold, show_default=True,
              help="Keep pairs scoring at least this (the default applies where --per-language finds no calibration).")
@click.option("--min-cosine", type=float, default=M.min_cosine, show_default=True, help="Keep pairs with at least this cosine.")
@click.option("--min-z", type=float, default=M.min_z, show_default=True,
              help="Keep pairs whose cosine stands out by at least this many standard deviations from each sentence's "
              "cosines with the other side's other lines (mean of both sentences; does not grow on small inputs as "
              "margins do; 0: off, LASER's margin mining).")
@click.option("--per-language/--no-per-language", default=M.per_language, show_default=True,
              help="Use the model's --threshold, --min-z and --min-cosine calibrated for the two sides' languages when "
              "it has them (the bundled model: each of its languages with English); the languages come from "
              f"--src-lang/--tgt-lang or are detected on each side's first {M.detect_lines} lines. Giving any of "
              "the three options turns it off. The run's summary names the settings used.")
@click.option("--ids", is_flag=True, help="Append the 1-based line numbers of each side (comma-separated for duplicates).")
@click.option("--explain", is_flag=True, help="Append the ids, then the cosine, both neighbour means, the direction "
              "that proposed the pair (fwd, bwd or both) and its z (see --min-z).")
@click.option("--block-size", type=click.IntRange(1), default=M.block_size, show_default=True, help="Query rows per k-NN block.")
@_pipeline_options
@_sif_option
@_marked_option(("src", "tgt"))
@click.option("--rules", "use_rules", is_flag=True,
              help="Drop candidates that break a rule of 'bitextmine filter' (set with the same options).")
@_lang_options
@_rule_options
@_device_option(M.device)
@_quiet_option
def mine(src, tgt, output, model_dir, src_emb, tgt_emb, threshold, min_cosine, min_z, per_language, ids, explain,
         block_size, sif, marked, use_rules, src_lang, tgt_lang, device, quiet, work_dir, resume, chunk_lines, engine,
         ray_address, **kw):
    """Mine translation pairs between two text files (one sentence per line).

    Output: score<TAB>src<TAB>tgt[<TAB>src_ids<TAB>tgt_ids], best score first. Exact search runs in
    stages through a work directory (--work-dir: resumable), in this process or on Ray (--engine ray).

    \b
    Example:
      bitextmine mine examples/de.txt examples/en.txt --ids
      bitextmine mine a.txt b.txt --src-emb a.raw --tgt-emb b.raw --emb-format raw --dim 1024 --work-dir w
    """
    from .mining import mine_files
    from .model import load_model

    rules = _rules_from(kw)
    embeddings = _embeddings_from(kw)
    given = any(click.get_current_context().get_parameter_source(p) != click.core.ParameterSource.DEFAULT
                for p in ("threshold", "min_cosine", "min_z"))
    config = MineConfig(**_search_from(kw), threshold=threshold, min_cosine=min_cosine, min_z=min_z,
                        per_language=per_language and not given, block_size=block_size, device=device)
    pipeline = PipelineConfig(work_dir=work_dir or "", resume=resume, chunk_lines=chunk_lines, engine=engine,
                              ray_address=ray_address or "")
    bars: dict = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            bars[stage] = _bar(quiet, unit="task", desc=stage, total=total)
        bars[stage].update(1)

    with _output(output) as out:
        stats = mine_files(src, tgt, out, model=load_model(model_dir) if model_dir else None, config=config,
                          encode_config=EncodeConfig(device=device, sif=sif), pipeline=pipeline, embeddings=embeddings,
                          src_emb=src_emb, tgt_emb=tgt_emb, ids=ids, explain=explain, marked=marked,
                          rules=rules if (use_rules or src_lang or tgt_lang) else None, src_lang=src_lang,
                          tgt_lang=tgt_lang, progress=progress)
    for b in bars.values():
        b.close()
    summary = (f"{stats.pairs} pairs from {stats.src_lines} x {stats.tgt_lines} lines "
               f"({stats.src_unique} x {stats.tgt_unique} distinct, {stats.src_empty} + {stats.tgt_empty} empty "
               f"lines skipped)")
    if stats.rejected:
        summary += "; dropped by rules: " + ", ".join(f"{k} {v}" for k, v in stats.rejected.items())
    if "recall" in stats.info:
        summary += f"; recall@{config.k} of the {stats.info['index']} search: " + " / ".join(
            f"{r:.3f}" for r in stats.info["recall"])
    if stats.info.get("changed"):
        summary += "; resumed with new " + ", ".join(stats.info["changed"]) + " (what depends on them recomputed)"
    _info(quiet, f"{summary}  [{stats.signature}]")


# --- score -----------------------------------------------------------------------------------------


@main.command()
@click.argument("file", default="-", required=False)
@click.option("--output", "-o", default=None, metavar="OUT.tsv", help="Output  [default: stdout]")
@_model_option
@click.option("--batch-size", type=click.IntRange(1), default=E.batch_size, show_default=True, help="Lines per batch.")
@click.option("--margin", type=click.Choice(SCORE_MARGINS), default=ScoreConfig.margin, show_default=True,
              help="none = the cosine; ratio | distance = LASER's score mode: the margin of each pair against the k "
                   "nearest neighbours of its sides among all lines of the other side of the file (exact search; "
                   "embeddings kept in temporary files in TMPDIR, the input read twice).")
@click.option("-k", "--k", type=click.IntRange(1), default=ScoreConfig.k, show_default=True,
              help="Neighbours per side for --margin.")
@_sif_option
@_device_option(E.device)
@_quiet_option
def score(file, output, model_dir, batch_size, margin, k, sif, device, quiet):
    """Append the cosine similarity (or --margin score) of src<TAB>tgt to each line (FILE or '-' = stdin).

    \b
    Examples:
      paste examples/de.txt examples/en.txt | bitextmine score | sort -t$'\\t' -k3,3gr | head
      paste examples/de.txt examples/en.txt | bitextmine score --margin ratio
    """
    from .model import load_model
    from .scoring import score_file

    model = load_model(model_dir)
    bar = _bar(quiet, unit="line", desc="score")
    with _output(output) as out:
        n = score_file(file, out, model, config=replace(EncodeConfig(), batch_size=batch_size, device=device, sif=sif),
                       score=ScoreConfig(margin=margin, k=k), progress=bar.update)
    bar.close()
    _info(quiet, f"scored {n} lines")


# --- filter --------------------------------------------------------------------------------------

R, F = RuleConfig, FilterConfig


@main.command(name="filter")
@click.argument("input", default="-", required=False)
@click.option("--output", "-o", default="-", metavar="OUT", help="Kept lines (.gz/.xz/.zst compressed by name)  [default: stdout]")
@click.option("--rejects", default=None, metavar="FILE", help="Every rejected line, unchanged, plus a reason column.")
@click.option("--annotate", is_flag=True, help="Keep every line in the output, with a reason column ('keep' for kept lines).")
@click.option("--stats", "stats_path", default=None, metavar="FILE.json", help="Lines in, kept, rejected, and per reason.")
@click.option("--scol", type=click.IntRange(1), default=F.scol, show_default=True, help="Source column (1-based).")
@click.option("--tcol", type=click.IntRange(1), default=F.tcol, show_default=True, help="Target column (1-based).")
@click.option("--score", type=click.Choice(SCORES), default=F.score, show_default=True,
              help="cosine of the two sides; margin = ratio margin against the k nearest neighbours of each side among "
                   "the other side's sentences in the same chunk (bigger chunks: denser neighbourhoods, margins closer "
                   "to whole-corpus mining; scores depend on --chunk-lines); none = rules only.")
@click.option("--min-score", type=float, default=None,
              help="Keep lines scoring at least this (written unchanged). Without it every line passing the rules is "
                   "kept with its score appended as a last column.")
@click.option("--score-column/--no-score-column", default=None,
              help="Append the score column  [default: only without --min-score]")
@click.option("--k", type=click.IntRange(1), default=F.k, show_default=True, help="Neighbours for --score margin.")
@click.option("--chunk-lines", type=click.IntRange(1), default=F.chunk_lines, show_default=True,
              help="Lines per chunk: bounds memory; the unit of parallel work and of margin neighbourhoods.")
@click.option("--workers", type=click.IntRange(0), default=F.workers, show_default=True,
              help="Worker processes (0 = one per core); the output is the same for any number.")
@_lang_options
@_rule_options
@_model_option
@_sif_option
@_quiet_option
def filter_cmd(input, output, rejects, annotate, stats_path, scol, tcol, score, min_score, score_column, k, chunk_lines,
               workers, src_lang, tgt_lang, model_dir, sif, quiet, **rule_kw):
    """Filter a noisy parallel TSV (stdin or INPUT; .gz/.xz/.zst read transparently).

    Rules, language checks and a similarity score decide; kept lines are written unchanged, every
    rejected line goes to --rejects with its reason, and lines in = kept + rejected, always.

    \b
    Examples:
      paste noisy.en noisy.de | bitextmine filter --src-lang en --tgt-lang de --min-score 0.5 \\
          --rejects rejected.tsv --stats stats.json > clean.tsv
      bitextmine filter corpus.tsv.gz -o scored.tsv.zst --score margin
    """
    from contextlib import nullcontext

    from .filtering.pipeline import filter_tsv, write_stats
    from .model import load_model

    rules = _rules_from(rule_kw)
    config = FilterConfig(score=score, min_score=min_score, chunk_lines=chunk_lines, k=k, workers=workers, scol=scol,
                          tcol=tcol)
    model = load_model(model_dir) if score != "none" else None
    bar = _bar(quiet, unit="line", desc="filter")
    try:
        with _output(output, binary=True) as out, \
                (_output(rejects, binary=True) if rejects else nullcontext(None)) as rej:
            stats = filter_tsv(input, out, model=model, rules=rules, config=config, src_lang=src_lang,
                               tgt_lang=tgt_lang, rejects=rej, annotate=annotate, score_column=score_column, sif=sif,
                               progress=bar.update)
    finally:
        bar.close()
    if stats_path:
        write_stats(stats, stats_path)
    top = ", ".join(f"{k} {v}" for k, v in sorted(stats.reasons.items(), key=lambda kv: -kv[1]))
    _info(quiet, f"{stats.lines_in} lines in, {stats.kept} kept, {stats.rejected} rejected" + (f" ({top})" if top else ""))


# --- calibrate -----------------------------------------------------------------------------------


@main.command()
@click.argument("gold", required=False)
@click.option("--src", default=None, metavar="FILE", help="Source side of the gold pairs (with --tgt, instead of GOLD).")
@click.option("--tgt", default=None, metavar="FILE", help="Target side of the gold pairs.")
@click.option("--scol", type=click.IntRange(1), default=F.scol, show_default=True, help="GOLD TSV source column.")
@click.option("--tcol", type=click.IntRange(1), default=F.tcol, show_default=True, help="GOLD TSV target column.")
@click.option("--score", type=click.Choice(["cosine", "margin"]), default="cosine", show_default=True,
              help="The score to calibrate (as in 'filter --score'; margin: neighbours within the gold set).")
@click.option("--k", type=click.IntRange(1), default=F.k, show_default=True, help="Neighbours for --score margin.")
@click.option("--plot", default=None, metavar="FILE.png", help="Plot the score distributions of good and bad pairs.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the shuffled bad pairs.")
@_model_option
@_sif_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def calibrate(gold, src, tgt, scol, tcol, score, k, plot, seed, model_dir, sif, as_json):
    """Suggest a score threshold for a model from a small set of good pairs.

    Bad pairs are generated from the gold set (shuffled pairs, and near-miss pairs: each source with
    its most similar wrong target); precision, recall and F1 are printed per threshold.

    \b
    Example:
      bitextmine calibrate gold.tsv --plot scores.png
    """
    from .evaluation.calibration import calibrate as run, plot_calibration
    from .corpus import read_parallel, read_tsv
    from .errors import ConfigError
    from .model import load_model

    if gold and (src or tgt):
        raise ConfigError("give GOLD or --src/--tgt, not both")
    if gold:
        s, t = read_tsv(gold, scol=scol, tcol=tcol)
    elif src and tgt:
        s, t = read_parallel(src, tgt)
    else:
        raise ConfigError("expected GOLD (a TSV of good pairs) or --src FILE --tgt FILE")
    report = run(s, t, load_model(model_dir), score=score, k=k, seed=seed, config=EncodeConfig(sif=sif))
    if plot:
        plot_calibration(report, plot)
    _report(report, as_json)


# --- bench ---------------------------------------------------------------------------------------


@main.command()
@click.argument("corpus", nargs=-1, required=True, metavar="FILE [FILE2]")
@_model_option
@click.option("--max-lines", type=click.IntRange(0), default=0, show_default=True, help="Use at most N lines per side (0 = all).")
@click.option("--stage", "stages", multiple=True, type=click.Choice(["tokenize", "encode", "knn", "mine"]),
              help="Measure only these stages (repeatable)  [default: all]")
@_search_options
@_device_option(M.device)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def bench(corpus, model_dir, max_lines, stages, device, as_json, **search):
    """Sentences/s and peak memory of tokenize, encode, kNN and mine on your corpus and device.

    FILE is split into halves (source, target), or FILE FILE2 are the two sides. Each stage runs in
    its own process, so its peak memory is its own.

    \b
    Example:
      bitextmine bench corpus.en --max-lines 200000 --device cpu
    """
    from .bench import run_bench
    from .model import load_model

    report = run_bench(corpus, load_model(model_dir), device=device, max_lines=max_lines,
                       stages=stages or ("tokenize", "encode", "knn", "mine"),
                       mine=MineConfig(**_search_from(search), device=device))
    _report(report, as_json)


# --- eval ------------------------------------------------------------------------------------------


@main.group(name="eval", cls=_Group)
def eval_group() -> None:
    """Standard benchmarks: STS correlation, Tatoeba retrieval, BUCC mining F1.

    Each evaluator encodes with --model (the bundled model when omitted) or reads precomputed
    embeddings from 'bitextmine encode' (tatoeba and bucc: from any encoder, --emb-format), and
    prints a plain table (--json for machines).

    \b
    Examples:
      bitextmine eval tatoeba --all tatoeba/v1
      bitextmine eval sts stsbenchmark/sts-test.csv --model my-model --sif
    """


def _report(report, as_json: bool) -> None:
    import json

    click.echo(json.dumps(report.to_json(), indent=1) if as_json else report.to_table())


def _eval_options(marked_sides: tuple[str, str]):
    """The options every evaluator shares: --sif, --marked, --device, --json."""
    def wrap(f):
        f = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)
        f = _device_option(E.device)(f)
        f = _marked_option(marked_sides)(f)
        return _sif_option(f)
    return wrap


def _pair(a, b, names: str):
    """(a, b) when both are given, None when neither; ConfigError for one alone."""
    from .errors import ConfigError

    if bool(a) != bool(b):
        raise ConfigError(f"{names} go together")
    return (a, b) if a else None


@eval_group.command(name="sts")
@click.argument("files", nargs=-1, metavar="FILE...")
@click.option("--pair", "pairs", nargs=2, multiple=True, metavar="FILE1 FILE2",
              help="Cross-lingual STS: s1 from FILE1, s2 from FILE2 (row-aligned files of two languages; repeatable).")
@_model_option
@click.option("--emb1", default=None, metavar="FILE.npy", help="Precomputed embeddings of the s1 column (one dataset).")
@click.option("--emb2", default=None, metavar="FILE.npy", help="Precomputed embeddings of the s2 column.")
@_eval_options(("s1", "s2"))
def eval_sts(files, pairs, model_dir, emb1, emb2, sif, marked, device, as_json):
    """Pearson and Spearman x 100 of cosine vs gold for STS files.

    FILE: SemEval STS.input.X.txt (gold STS.gs.X.txt found beside it; unscored pairs dropped;
    per-year averages for STS12-16), STS Benchmark TSV, or CSV sentence1,sentence2,score.

    \b
    Examples:
      bitextmine eval sts sts12-16_en/STS12-en-test/STS.input.*.txt stsbenchmark/sts-test.csv
      bitextmine eval sts --pair stsb_multi_mt/stsb-en-test.csv stsb_multi_mt/stsb-de-test.csv
    """
    from .evaluation.runners import run_sts
    from .model import load_model

    report = run_sts(files, pairs, model=load_model(model_dir), config=EncodeConfig(device=device, sif=sif),
                     emb=_pair(emb1, emb2, "--emb1 and --emb2"), marked=marked)
    _report(report, as_json)


@eval_group.command(name="tatoeba")
@click.argument("src", required=False)
@click.argument("tgt", required=False)
@click.option("--all", "folder", default=None, metavar="DIR", help="Every tatoeba.xxx-eng.{xxx,eng} pair in a Tatoeba v1 folder.")
@click.option("--lang", "languages", multiple=True, metavar="CODE", help="With --all: only these languages (repeatable).")
@_model_option
@click.option("--src-emb", default=None, metavar="FILE", help="Precomputed embeddings of SRC (any encoder; --emb-format).")
@click.option("--tgt-emb", default=None, metavar="FILE", help="Precomputed embeddings of TGT.")
@embedding_options
@_eval_options(("src", "tgt"))
def eval_tatoeba(src, tgt, folder, languages, model_dir, src_emb, tgt_emb, sif, marked, device, as_json, **kw):
    """Tatoeba similarity search: nearest-neighbour error rate (xsim) both ways, and accuracy.

    With --src-emb/--tgt-emb from another encoder (a .npy without sidecar, or --emb-format raw) no
    model is loaded.

    \b
    Examples:
      bitextmine eval tatoeba tatoeba.deu-eng.deu tatoeba.deu-eng.eng
      bitextmine eval tatoeba --all tatoeba/v1 --lang deu --lang fra
      bitextmine eval tatoeba deu.txt eng.txt --src-emb deu.raw --tgt-emb eng.raw --emb-format raw --dim 1024
    """
    from .encoding.external import embeddings_need_model
    from .evaluation.runners import run_tatoeba
    from .errors import ConfigError
    from .model import load_model

    if folder and (src or tgt):
        raise ConfigError("give SRC TGT or --all DIR, not both")
    emb, emb_config = _pair(src_emb, tgt_emb, "--src-emb and --tgt-emb"), _embeddings_from(kw)
    model = load_model(model_dir) if emb is None or embeddings_need_model(emb, emb_config.format) else None
    report = run_tatoeba(src, tgt, folder=folder, languages=languages, model=model,
                         config=EncodeConfig(device=device, sif=sif), emb=emb, emb_config=emb_config, marked=marked)
    _report(report, as_json)


@eval_group.command(name="bucc")
@click.argument("src")
@click.argument("tgt")
@click.argument("gold")
@click.option("--tune-on", nargs=3, default=None, metavar="SRC TGT GOLD",
              help="Choose the threshold that maximises F1 on this set (the official protocol).")
@click.option("--oracle", is_flag=True, help="Tune the threshold on the evaluated set itself (reported as ORACLE).")
@click.option("--threshold", type=float, default=None, help="Use this margin threshold.")
@_model_option
@click.option("--src-emb", default=None, metavar="FILE",
              help="Precomputed embeddings of SRC's sentences (any encoder; --emb-format).")
@click.option("--tgt-emb", default=None, metavar="FILE", help="Precomputed embeddings of TGT's sentences.")
@embedding_options
@_search_options
@click.option("--plot", default=None, metavar="FILE.png", help="Plot precision, recall and F1 against the threshold.")
@_eval_options(("src", "tgt"))
def eval_bucc(src, tgt, gold, tune_on, oracle, threshold, model_dir, src_emb, tgt_emb, plot, sif, marked, device, as_json,
              **kw):
    """BUCC 2018 bitext mining: precision, recall and F1 of mined pairs against the gold pairs.

    SRC and TGT hold <id><TAB><sentence> lines; GOLD holds <src-id><TAB><tgt-id> lines. With
    --src-emb/--tgt-emb from another encoder (a .npy without sidecar, or --emb-format raw) and
    --oracle or --threshold, no model is loaded (--tune-on encodes its set with the model).

    \b
    Example:
      bitextmine eval bucc de-en.test.de de-en.test.en de-en.test.gold \\
          --tune-on de-en.training.de de-en.training.en de-en.training.gold --plot bucc.png
    """
    from .encoding.external import embeddings_need_model
    from .evaluation.runners import plot_bucc, run_bucc
    from .model import load_model

    emb, emb_config = _pair(src_emb, tgt_emb, "--src-emb and --tgt-emb"), _embeddings_from(kw)
    need_model = emb is None or tune_on or embeddings_need_model(emb, emb_config.format)
    model = load_model(model_dir) if need_model else None
    bars: dict = {}

    def progress(name: str, n: int) -> None:
        if name not in bars:
            bars[name] = _bar(False, unit="sent", desc=f"search {name}")
        bars[name].update(n)

    report = run_bucc((src, tgt, gold), tune_on=tuple(tune_on) if tune_on else None, oracle=oracle,
                      threshold=threshold, model=model, config=EncodeConfig(device=device, sif=sif),
                      mine=MineConfig(**_search_from(kw), device=device), emb=emb, emb_config=emb_config,
                      marked=marked, progress=progress)
    for b in bars.values():
        b.close()
    if plot:
        plot_bucc(report, plot)
    _report(report, as_json)


if __name__ == "__main__":
    main()
