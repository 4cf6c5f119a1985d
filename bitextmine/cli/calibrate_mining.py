"""``bitextmine calibrate-mining``: a model's mining settings for language pairs, chosen on dev pairs
(:func:`bitextmine.evaluation.mining_calibration.calibrate_mining`)."""

from __future__ import annotations

import click

from ..config import CalibrationConfig
from .common import assist_option, info, model_option, quiet_option
from .help import GroupedCommand

_DEFAULTS = CalibrationConfig()


@click.command(name="calibrate-mining", cls=GroupedCommand)
@model_option
@click.option("--pair", "pairs", nargs=4, multiple=True, metavar="LANG LANG FILE FILE",
              help="Two ISO 639-1 codes and two line-aligned files of dev pairs in those languages, never trained "
                   "on (repeatable: the same two languages again give another dev set, e.g. of another domain, "
                   "which weighs the same; at least 45 pairs, 1,500 for the largest floor tasks).")
@click.option("--distracted-pair", "distracted", nargs=5, multiple=True, metavar="LANG LANG FILE FILE DISTRACTORS",
              help="A dev set as --pair whose floor tasks take their untranslated lines in the second language from "
                   "DISTRACTORS (lines of the same domain with no partner among the set, e.g. other language pairs' "
                   "English side) instead of the set's own untaken translations (repeatable).")
@click.option("--filler", "fillers", nargs=4, multiple=True, metavar="LANG LANG FILE FILE",
              help="Line-aligned pairs of a --pair's languages, of the same domain, which the model may have trained "
                   "on: the distractors of second-stage tasks larger than the dev pairs fill (repeatable).")
@click.option("--context", "contexts", nargs=5, multiple=True, metavar="LANG LANG FILE FILE DOCS",
              help="Line-aligned pairs of a --pair's languages in document order, and a file naming each line's "
                   "document: the dev pairs among them are the gold pairs of further second-stage tasks "
                   f"({_DEFAULTS.context_lines:,} lines a side, "
                   f"{'/'.join(f'{s:.0%}'.rstrip('%') for s in _DEFAULTS.context_shares)} % translated) whose "
                   "distractors are the lines around them in their documents (repeatable).")
@click.option("--floor-lines", type=click.IntRange(30), multiple=True, default=_DEFAULTS.floor_lines,
              show_default=True, help="Source lines of the tasks the floors are chosen on (repeatable).")
@click.option("--stage-lines", type=click.IntRange(50), multiple=True, default=_DEFAULTS.stage_lines,
              show_default=True, help="Lines a side of the tasks the second stage's settings are chosen on "
                                      "(repeatable; above what the dev pairs fill, with --filler only).")
@click.option("--stage-draws", type=click.IntRange(1), default=_DEFAULTS.stage_draws, show_default=True,
              help="Tasks per dev set, size and share, for the second stage and for mine's defaults.")
@click.option("--stage-own-lines", type=click.IntRange(1), default=_DEFAULTS.stage_own_lines, show_default=True,
              help="The second stage judges a run's own margins up to the largest of its tasks or this many lines "
                   "a side, whichever is more; margins against samples of that many above.")
@click.option("--seed", type=int, default=_DEFAULTS.seed, show_default=True, help="Seed of the tasks' draws.")
@click.option("--measure-defaults/--no-measure-defaults", default=True, show_default=True,
              help="Also measure what 'mine' prints with the settings chosen and the model's second stage, end to end "
                   "on tasks drawn from the dev pairs (1/5/10/50 % translated, up to 1,000 lines a side, 2 draws; "
                   "pairs with English), and store it for mine's settings line.")
@click.option("--keep-settings", is_flag=True,
              help="Keep the settings the model holds for each pair (floors and the second stage's) and only measure "
                   "what 'mine' prints with them end to end.")
@click.option("--keep-floors", is_flag=True,
              help="Keep the floors the model holds for each pair (threshold, min-z, min-cosine) and choose only the "
                   "second stage's settings with them.")
@click.option("--stage-beta", type=click.FloatRange(0.1, 10), default=_DEFAULTS.stage_beta, show_default=True,
              help="The second stage's --min-prob has the best mean F-beta over the shares of translations: 1 weighs "
                   "precision and recall alike (F1), 0.5 precision more.")
@click.option("--score-map/--no-score-map", default=_DEFAULTS.stage_score_map, show_default=True,
              help="Map the second stage's score, fitted on the stage's tasks, so that among pairs given a score the "
                   "share of translations is near it at every share of translations; --min-prob applies to the "
                   "mapped score.")
@assist_option("Measure 'mine --assist' end to end too")
@click.option("--dry-run", is_flag=True, help="Measure and print, but do not store the settings in the model.")
@quiet_option
def calibrate_mining(model_dir, pairs, distracted, fillers, contexts, floor_lines, stage_lines, stage_draws,
                     stage_own_lines, seed, measure_defaults, keep_settings, keep_floors, stage_beta, score_map, assist,
                     dry_run, quiet):
    """Choose the threshold, standout floor and cosine floor that 'mine' applies by default to each language
    pair, on dev pairs of that pair, and store them with what they measured in the model directory
    (config.json, "mining"), where 'mine' finds them. 'train --lang XX --lang YY' does this on its held-apart
    pairs. Tasks: --floor-lines source lines, half with their translation on the other side (and, where no second
    stage judges the pair, a tenth, from 100 lines: the floors alone then decide at every share). For a pair of
    English and a language of the model's second stage, also the score a pair needs (--min-prob) and the largest
    side whose own margins the stage judges, chosen on tasks of 1/5/10/50 % translated of --stage-lines lines a
    side (--stage-draws draws each; larger than the dev pairs fill: distractors from --filler), and on the
    context tasks of --context.

    \b
    Example:
      bitextmine calibrate-mining --model my-model --pair de en dev.de dev.en
      bitextmine calibrate-mining --model my-model --distracted-pair de en dev.de dev.en other.en
      bitextmine calibrate-mining --model my-model --pair de en news.de news.en --pair de en ui.de ui.en \\
          --stage-lines 1000 --stage-lines 10000 --filler de en train.de train.en \\
          --context de en news.de news.en news.docs
    """
    from ..evaluation.mining_calibration import calibrate_mining as run
    from ..loading import load_model

    model = load_model(model_dir)
    config = CalibrationConfig(floor_lines=tuple(sorted(set(floor_lines))), stage_lines=tuple(sorted(set(stage_lines))),
                               stage_draws=stage_draws, stage_own_lines=stage_own_lines, stage_beta=stage_beta,
                               stage_score_map=score_map, seed=seed)
    got = run(model, pairs + distracted, config=config, fillers=fillers, contexts=contexts, write=not dry_run,
              defaults=measure_defaults, keep=keep_settings, keep_floors=keep_floors, assist=assist or "",
              log=lambda message: info(quiet, message))
    for key, c in got.items():
        s = c.settings
        how = ("kept, the model's" if c.kept else
               f"mean F1 {c.f1:.3f}; global defaults {c.global_f1:.3f}")
        click.echo(f"{key}: --threshold {s['threshold']:g} --min-z {s['min_z']:g} --min-cosine {s['min_cosine']:g} "
                   f"({how}; {c.pairs} dev pairs)")
        _figures(c.measured)
        if c.stage:
            how = "kept, the model's" if c.stage.get("kept") else "chosen on tasks from the dev pairs"
            found = c.stage.get("score_map")
            mapped = (f", on its score mapped by {found['score']:.3f} logit(score) + {found['share']:.3f} logit(share) "
                      f"+ {found['bias']:.3f}" if found else "")
            click.echo(f"  second stage: --min-prob {c.stage['min_prob']:g} ({how}{mapped}), its own margins up to "
                       f"{c.stage['max_lines']:,} lines a side" + (":" if c.stage["measured"] else ""))
            _figures(c.stage["measured"])
        if c.defaults_measured:
            stage = "with" if c.defaults_second_stage else "without"
            click.echo(f"  mine's defaults end to end ({stage} the second stage):")
        _figures(c.defaults_measured)
        for found in c.assist_measured.values():
            click.echo(f"  mine --assist {found['assist']} end to end:")
            _figures(found["measured"])
        if c.assist_note:
            click.echo(f"  --assist not measured: {c.assist_note}")
    if not quiet:
        click.echo("not stored (--dry-run)" if dry_run else f"stored in {model.path}/config.json", err=True)


def _figures(measured: list) -> None:
    for m in measured:
        click.echo(f"  {m['lines']:>5} lines, {m['share']:.0%} translated: precision {m['precision']:.3f}, "
                   f"recall {m['recall']:.3f}, F1 {m['f1']:.3f}")
