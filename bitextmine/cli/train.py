"""``bitextmine train``: train an encoder (:func:`bitextmine.training.loop.train`)."""

from __future__ import annotations

import sys

import click

from ..config import AMP_MODES, BATCH_ORDERS, DEFAULT_RECIPE, ENCODERS, LOSSES, LR_DECAYS, NEGATIVES, RECIPES, SPM_NORMALIZATIONS
from ..config import SecondStageConfig, TokenizerConfig, TrainConfig, recipe_configs
from .common import device_option, info, progress_bar, quiet_option, refuse_unused, FINITE, FiniteRange
from .help import GroupedCommand

T, K = TrainConfig, TokenizerConfig


def _by_recipe(name: str, tokenizer: bool = False) -> str:
    """Help text suffix: each recipe's default for the TrainConfig (or TokenizerConfig) field ``name``."""
    section, base = ("tokenizer", K) if tokenizer else ("train", T)
    values = ", ".join(f"{r}: {RECIPES[r][section].get(name, getattr(base, name))}" for r in RECIPES)
    return f"  [default: by --recipe; {values}]"


OPTION_GROUPS = (
    ("Data", ("scol", "tcol", "clean", "paraphrase", "sts_pairs", "sts_min_score", "languages", "calibrate")),
    ("Model", ("encoder", "vocab_size", "spm_model", "spm_sample", "spm_normalization", "character_coverage", "dim",
               "untrained", "separate_vocab", "init_from", "reg_to_init", "fp32")),
    ("Recipe and loss", ("loss", "negatives", "margin", "hinge_weight", "scale", "sampling_temperature", "dropout",
                         "shuffle_words", "init_scale")),
    ("Schedule", ("epochs", "batch_size", "lr", "warmup", "lr_decay", "megabatch_start", "megabatch_max",
                  "megabatch_every", "batch_order", "max_steps")),
    ("Evaluation", ("dev_tatoeba", "dev_sts", "dev_pairs", "eval_every")),
    ("Second stage", ("second_stage", "second_stage_only")),
    ("Run", ("checkpoint_every", "seed", "threads", "amp")),
)


SECOND_STAGE_ONLY = {"src", "tgt", "tsv", "scol", "tcol", "out", "seed", "quiet", "second_stage_only"}  # its options


@click.command(cls=GroupedCommand, option_groups=OPTION_GROUPS)
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
@click.option("--character-coverage", type=FiniteRange(0.9, 1.0), default=None,
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
@click.option("--shuffle-words", type=FiniteRange(0, 1), default=T.shuffle_words, show_default=True,
              help="blstm-sp: probability that a training sentence's words are shuffled.")
@click.option("--init-from", metavar="DIR", default=None, help="Start from this model (its tokenizer, encoder and weights).")
@click.option("--reg-to-init", type=FiniteRange(0), default=T.reg_to_init, show_default=True,
              help="With --init-from: lambda of the L2 pull toward the initial weights.")
@click.option("--sts-pairs", multiple=True, metavar="FILE",
              help="STS file (SemEval, STSb TSV or CSV) whose pairs scored >= --sts-min-score are positives (repeatable).")
@click.option("--sts-min-score", type=FINITE, default=T.sts_min_score, show_default=True, help="Gold score cut-off for --sts-pairs.")
@click.option("--clean", is_flag=True, default=T.clean, help="Drop training pairs that break filter's default rules "
              "(lengths, ratio, identical sides, digits, URLs, repeats; no language rules).")
@click.option("--epochs", type=click.IntRange(1), default=None, help="Passes over the training pairs." + _by_recipe("epochs"))
@click.option("--batch-size", type=click.IntRange(1), default=None, help="Pairs per mini-batch." + _by_recipe("batch_size"))
@click.option("--loss", type=click.Choice(LOSSES), default=None,
              help="hinge (paper) or infonce: in-batch softmax over the mini-batch's targets (and, unless --negatives "
                   "none, their hardest negatives)." + _by_recipe("loss"))
@click.option("--margin", type=FINITE, default=T.margin, show_default=True, help="Hinge loss margin delta.")
@click.option("--hinge-weight", type=FiniteRange(0), default=None,
              help="infonce with mega-batch negatives: add this times the hinge loss (--margin) over the same "
                   "negatives (0 = InfoNCE alone; a recipe's weight is dropped under --loss hinge or --negatives "
                   "none)." + _by_recipe("hinge_weight"))
@click.option("--scale", type=FiniteRange(0, min_open=True), default=T.scale, show_default=True,
              help="infonce: cosines are multiplied by this before the softmax (1 / temperature).")
@click.option("--sampling-temperature", type=FiniteRange(1), default=None,
              help="Share of each language pair per epoch ~ its size ** (1/T); 1 = every pair once. A corpus's language "
                   "is its target file's suffix (train.de.gz -> de; a TSV file is its own group)." + _by_recipe("sampling_temperature"))
@click.option("--dropout", type=FiniteRange(0, 1, max_open=True), default=None,
              help="Probability of dropping each token (averaging encoders; blstm-sp uses --shuffle-words)."
                   + _by_recipe("dropout"))
@click.option("--lr", type=FiniteRange(0, min_open=True), default=None, help="Adam learning rate." + _by_recipe("lr"))
@click.option("--init-scale", type=FiniteRange(0, min_open=True), default=None,
              help="Token vectors start as uniform(-s, s); with Adam the learning rate counts relative to it."
                   + _by_recipe("init_scale"))
@click.option("--warmup", type=FiniteRange(0, 1, max_open=True), default=None,
              help="Share of all mini-batches over which the learning rate rises linearly from 0." + _by_recipe("warmup"))
@click.option("--lr-decay", type=click.Choice(LR_DECAYS), default=None,
              help="none = constant (paper); linear = down to 0 at the last mini-batch." + _by_recipe("lr_decay"))
@click.option("--megabatch-start", type=click.IntRange(1), default=T.megabatch_start, show_default=True, help="Mini-batches per mega-batch at the start.")
@click.option("--megabatch-max", type=click.IntRange(1), default=None, help="Largest mega-batch, in mini-batches." + _by_recipe("megabatch_max"))
@click.option("--megabatch-every", type=click.IntRange(1), default=T.megabatch_every, show_default=True, help="Grow the mega-batch by one every N mini-batches.")
@click.option("--batch-order", type=click.Choice(BATCH_ORDERS), default=T.batch_order, show_default=True,
              help="random = pairs in a random order; topic = each mega-batch holds pairs of one topic (k-means over "
                   "the pairs' embeddings at each epoch's start), so its negatives are same-topic sentences.")
@click.option("--dev-pairs", type=click.IntRange(0), default=T.dev_pairs, show_default=True, help="Training pairs held apart for dev retrieval accuracy.")
@click.option("--dev-tatoeba", nargs=2, multiple=True, metavar="SRC TGT", help="Aligned dev files for retrieval accuracy (repeatable).")
@click.option("--dev-sts", multiple=True, metavar="FILE", help="STS file (SemEval, STSb TSV or CSV) for dev Pearson r (repeatable).")
@click.option("--eval-every", type=click.IntRange(0), default=T.eval_every, show_default=True, help="Also evaluate every N mini-batches (0 = each epoch).")
@click.option("--checkpoint-every", type=click.IntRange(0), default=T.checkpoint_every, show_default=True, help="Checkpoint every N mini-batches.")
@click.option("--max-steps", type=click.IntRange(0), default=T.max_steps, show_default=True, help="Stop after N mini-batches (0 = all epochs); continue later with --resume.")
@click.option("--resume", is_flag=True, help="Continue from OUT/checkpoint.")
@click.option("--lang", "languages", multiple=True, metavar="CODE", help="Language code recorded in the model (repeatable); "
              "with two, the model's mining settings for that pair are calibrated on the held-apart pairs.")
@click.option("--calibrate/--no-calibrate", default=T.calibrate, show_default=True,
              help="With two --lang codes: choose the mining settings 'mine' applies to that pair on the held-apart "
                   "dev pairs (as 'bitextmine calibrate-mining').")
@click.option("--fp32", is_flag=True, help="Store embeddings as float32 instead of float16.")
@click.option("--seed", type=int, default=T.seed, show_default=True)
@click.option("--threads", type=click.IntRange(0), default=T.threads, show_default=True, help="Torch CPU threads (0 = default).")
@click.option("--amp", type=click.Choice(AMP_MODES), default=T.amp, show_default=True,
              help="bf16 for blstm-sp's LSTM (input and weight copies in bf16; weights, optimiser and loss stay "
                   "float32); the averaging encoders (sp, word, trigram) always compute in float32. auto = on for "
                   "CUDA GPUs with bf16, off on CPU.")
@click.option("--second-stage", is_flag=True,
              help="After training, build the model's second stage (mine --min-prob): IBM model 1 tables and a "
                   "classifier per language paired with English, from the --src/--tgt corpora with an English side "
                   "(a file named *.en or *.en.gz); each corpus is one domain of its training tasks.")
@click.option("--second-stage-only", is_flag=True,
              help="Build the second stage of the existing model in --out from the --src/--tgt corpora; no training.")
@device_option(T.device)
@quiet_option
def train(src, tgt, tsv, scol, tcol, out, recipe, encoder, vocab_size, spm_model, spm_sample, spm_normalization, character_coverage, dim, untrained, negatives,
          paraphrase, separate_vocab, shuffle_words, init_from, reg_to_init, sts_pairs, sts_min_score, clean, epochs, batch_size, loss,
          margin, hinge_weight, scale, sampling_temperature,
          dropout, lr, init_scale, warmup, lr_decay, megabatch_start, megabatch_max, megabatch_every, batch_order, dev_pairs, dev_tatoeba, dev_sts, eval_every,
          checkpoint_every, max_steps, resume, languages, calibrate, fp32, seed, threads, amp, second_stage, second_stage_only,
          device, quiet):
    """Train an encoder on parallel corpora (or paraphrase pairs, or STS pairs).

    \b
    Examples:
      bitextmine train --src data/train.de.gz --tgt data/train.en.gz --out de-en-model \\
          --dev-tatoeba tatoeba.deu-eng.deu tatoeba.deu-eng.eng
      bitextmine train --src train.de --tgt train.en --encoder trigram --out tri
      bitextmine train --src train.de --tgt train.en --untrained --out random-sp
      bitextmine train --init-from de-en-model --reg-to-init 0.001 --sts-pairs sts-train.csv --out tuned
    """
    from ..corpus import CorpusSpec
    from ..errors import ConfigError
    from ..training.loop import train as run_train

    if len(src) != len(tgt):
        raise ConfigError(f"{len(src)} --src but {len(tgt)} --tgt; expected them in pairs")
    specs = [CorpusSpec(src=s, tgt=t) for s, t in zip(src, tgt)] + [CorpusSpec(tsv=p, scol=scol, tcol=tcol) for p in tsv]
    if second_stage_only:
        from ..judge.build import build_second_stage

        ctx = click.get_current_context()
        refuse_unused({p.name for p in ctx.command.params} - SECOND_STAGE_ONLY,
                      "training a model, not --second-stage-only (which reads the corpora, --out and --seed)")
        report = build_second_stage(out, specs, SecondStageConfig(seed=seed))
        for lang, r in report.items():
            info(quiet, f"second stage {lang}-en: {r['pairs']:,} pairs, {r['candidates']:,} candidates "
                        f"({r['translations']:,} translations)")
            if r.get("calibration_cleared"):
                info(quiet, f"  the calibration's second-stage settings and end-to-end figures for {lang}-en were "
                            "another stage's and are removed: choose them again with 'bitextmine calibrate-mining'")
        info(quiet, f"wrote {out}/second_stage")
        return
    _refuse_unused_sources(tsv, spm_model, init_from)
    config, tok_config = recipe_configs(
        recipe, init_from=bool(init_from), encoder=encoder, untrained=untrained, negatives=negatives, paraphrase=paraphrase,
        separate_vocab=separate_vocab or "", sts_min_score=sts_min_score, clean=clean, shuffle_words=shuffle_words,
        reg_to_init=reg_to_init, dim=dim, loss=loss, margin=margin, hinge_weight=hinge_weight, scale=scale,
        sampling_temperature=sampling_temperature, batch_size=batch_size, megabatch_start=megabatch_start,
        megabatch_max=megabatch_max, megabatch_every=megabatch_every, batch_order=batch_order, dropout=dropout, lr=lr, init_scale=init_scale,
        warmup=warmup, lr_decay=lr_decay, epochs=epochs, seed=seed, dev_pairs=dev_pairs, eval_every=eval_every,
        checkpoint_every=checkpoint_every, max_steps=max_steps, device=device, threads=threads, amp=amp, calibrate=calibrate,
        fp16=not fp32, vocab_size=vocab_size, token_vocab_size=vocab_size, sample_sentences=spm_sample,
        normalization=spm_normalization, character_coverage=character_coverage)
    _refuse_unused_settings(config, bool(sts_pairs), bool(dev_tatoeba or dev_sts))
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
            bar = progress_bar(quiet, total=e["total_steps"], initial=e["step"], unit="batch", desc="train")
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
                       second_stage=SecondStageConfig(seed=seed) if second_stage else None, progress=progress)
    if bar is not None:
        bar.close()
    info(quiet, f"wrote {result.model_dir}: {result.steps} mini-batches in {result.seconds:.0f}s "
                 f"({result.pairs_per_second:.0f} pairs/s)")


def _refuse_unused_sources(tsv, spm_model, init_from) -> None:
    """Refuse the options that the corpora, tokenizer and starting weights given leave unread."""
    spm = ("vocab_size", "spm_sample", "spm_normalization", "character_coverage")
    if not tsv:
        refuse_unused(("scol", "tcol"), "--tsv (the columns of a TSV corpus)")
    if init_from:
        refuse_unused(("spm_model", *spm, "init_scale"), "a model trained from scratch, not --init-from (which brings "
                                                          "its tokenizer and weights)")
    elif spm_model:
        refuse_unused(spm, "a SentencePiece model trained here, not --spm-model")


def _refuse_unused_settings(config, sts_pairs: bool, dev_sets: bool) -> None:
    """Refuse the training options that the run's encoder, loss and data leave unread (``config``: the TrainConfig
    the recipe and options give)."""
    if config.untrained:
        refuse_unused(("lr", "epochs", "dropout", "warmup", "lr_decay", "batch_size", "loss", "margin", "scale",
                       "hinge_weight", "negatives", "shuffle_words", "max_steps", "init_scale", "batch_order"),
                      "training, not --untrained (which saves the random initial model)")
    if config.loss == "hinge":
        refuse_unused(("scale",), "--loss infonce (the logits' scale)")
    elif not config.hinge_weight:
        refuse_unused(("margin",), "--loss hinge, or a --hinge-weight above 0")
    if config.encoder == "blstm-sp":
        refuse_unused(("dropout",), "an averaging encoder (--encoder sp, word or trigram; the BiLSTM shuffles words)")
    else:
        refuse_unused(("shuffle_words",), "--encoder blstm-sp")
    if not sts_pairs:
        refuse_unused(("sts_min_score",), "--sts-pairs")
    if not dev_sets and not config.dev_pairs:
        refuse_unused(("eval_every",), "dev data (--dev-pairs above 0, --dev-tatoeba or --dev-sts)")

