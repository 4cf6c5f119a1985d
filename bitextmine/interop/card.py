"""Model cards: the ``README.md`` of a model directory, as the Hugging Face hub, sentence-transformers and
model2vec expect one (YAML metadata between ``---`` lines, then Markdown).

:func:`model_card` writes the body from what a model's ``config.json`` records (languages, training data,
recipe, the dev figures measured during training, mining settings); nothing in it is typed by hand.
``train`` writes it beside every new model (:func:`write_model_card`); ``export`` puts a model's own card
(the hand-kept one of the bundled model, with its benchmark figures) under the target library's metadata.
"""

from __future__ import annotations

import os
from collections import OrderedDict

CARD_FILE = "README.md"

# the training settings a reader needs to repeat a run, in this order (the rest stay in config.json)
RECIPE_KEYS = ("encoder", "dim", "loss", "negatives", "hinge_weight", "margin", "scale", "epochs", "steps",
               "batch_size", "megabatch_max", "lr", "lr_decay", "warmup", "init_scale", "dropout", "shuffle_words",
               "sampling_temperature", "separate_vocab", "paraphrase", "clean", "fp16", "seed")
ENCODER_TEXT = {
    "sp": "a sentence is the mean of its SentencePiece piece embeddings, L2-normalised (Wieting et al. 2019)",
    "word": "a sentence is the mean of its word embeddings, L2-normalised (Wieting et al. 2016)",
    "trigram": "a sentence is the mean of its character-trigram embeddings, L2-normalised (Wieting et al. 2016)",
    "blstm-sp": "a bidirectional LSTM over SentencePiece piece embeddings, its states mean-pooled, L2-normalised "
                "(Wieting et al. 2019)",
}


def front_matter(meta: dict) -> str:
    """YAML metadata block for ``meta`` (values: str, bool, number or list of str)."""
    lines = ["---"]
    for k, v in meta.items():
        if isinstance(v, list):
            lines.append(f"{k}:")
            lines += [f"- {_yaml_str(x)}" for x in v]
        elif isinstance(v, bool):
            lines.append(f"{k}: {'true' if v else 'false'}")
        else:
            lines.append(f"{k}: {_yaml_str(v) if isinstance(v, str) else v}")
    return "\n".join(lines + ["---", ""]) + "\n"


YAML_WORDS = {"yes", "no", "on", "off", "true", "false", "y", "n", "null", "~"}  # YAML 1.1 reads them as bool or null


def _yaml_str(s: str) -> str:
    """``s`` as a YAML string: bare where YAML reads it back as that string, quoted otherwise (Norwegian "no" bare
    is false, "1e3" a number)."""
    plain = s.replace("-", "").replace("_", "").replace(".", "").isalnum() and s.lower() not in YAML_WORDS
    try:
        float(s)
        plain = False
    except ValueError:
        pass
    return s if plain else '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def strip_front_matter(text: str) -> str:
    """``text`` without a leading YAML block (``---`` ... ``---``)."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return text[end + 5 :].lstrip("\n")
    return text


def model_card(model) -> str:
    """The Markdown body of a bitextmine model's card (no metadata block), from its config."""
    cfg = model.config
    training = cfg.get("training") or {}
    parts = [f"# bitextmine model `{model.fingerprint}`\n",
             f"A sentence encoder made by bitextmine for mining and scoring "
             f"translation pairs: {ENCODER_TEXT.get(model.encoder, model.encoder)}. {model.dim} dimensions, "
             f"{model.tokenizer.vocab_size:,} tokens, table stored in {model.stored_dtype}.\n"]
    if cfg.get("languages"):
        parts.append("## Languages\n\n" + ", ".join(cfg["languages"]) + "\n")
    if training:
        parts.append(_training_data(training))
        parts.append(_recipe(training))
        if training.get("dev_history"):
            parts.append(_dev_figures(training))
    if cfg.get("mining"):
        parts.append(_mining(cfg["mining"]))
    stage = model.second_stage if model.path else None
    if stage is not None:
        parts.append(second_stage_section(stage))
    parts.append("## Use\n\n```\nbitextmine encode --model DIR sentences.txt -o sentences.npy\n"
                 "bitextmine mine --model DIR src.txt tgt.txt -o pairs.tsv\n"
                 "bitextmine export DIR OUT --format sentence-transformers   # or model2vec\n```\n")
    return "\n".join(parts)


def _training_data(t: dict) -> str:
    groups: "OrderedDict[str, list[str]]" = OrderedDict()
    for c in t.get("corpora", []):  # "folder/a.src + folder/a.tgt" or "folder/a.tsv (columns 0, 1)"
        name = os.path.dirname(c.split(" + ")[0]) or "."
        files = " + ".join(os.path.basename(part) for part in c.split(" + "))
        if files not in groups.setdefault(name, []):
            groups[name].append(files)
    lines = ["## Training data\n"]
    cleaning = t.get("cleaning") or {}
    if "pairs" in t:
        line = f"{t['pairs']:,} training pairs"
        if cleaning:
            dropped = ", ".join(f"{k} {v:,}" for k, v in cleaning.items() if k not in ("read", "kept"))
            line += f" (read {cleaning.get('read', 0):,}, kept {cleaning.get('kept', 0):,}; dropped: {dropped})"
        lines.append(line + ", from these corpora (folder: source + target files):\n")
    lines += [f"- {name}: {', '.join(files)}" for name, files in groups.items()]
    if t.get("sts_pairs"):
        lines.append(f"- STS pairs: {', '.join(t['sts_pairs'])}")
    return "\n".join(lines) + "\n"


def _recipe(t: dict) -> str:
    rows = [f"| {k} | {t[k]} |" for k in RECIPE_KEYS if k in t and t[k] not in (None, "")]
    tok = t.get("tokenizer") or {}
    if "path" in tok:
        rows.append(f"| tokenizer | the SentencePiece model {tok['path']} given to train |")
    elif "init_from" in tok:
        rows.append(f"| tokenizer | the one of {tok['init_from']}, the model training started from |")
    else:
        rows += [f"| tokenizer {k} | {v} |" for k, v in tok.items() if k in ("vocab_size", "model_type",
                                                                           "normalization", "character_coverage")]
    if t.get("init_from"):
        rows.append(f"| initialised from | {t['init_from']} ({t.get('init_fingerprint')}) |")
    return "## Recipe\n\n`bitextmine train` with these settings (all of them are in config.json):\n\n" \
           "| setting | value |\n|---|---|\n" + "\n".join(rows) + "\n"


def _dev_figures(t: dict) -> str:
    hist = t["dev_history"]
    keys = list(OrderedDict.fromkeys(k for h in hist for k in h.get("scores", {})))
    head = "| epoch | step | " + " | ".join(_short(k) for k in keys) + " | selection score |"
    rows = [head, "|" + "---|" * (len(keys) + 3)]
    for h in hist:
        s = h.get("scores", {})
        rows.append(f"| {h.get('epoch')} | {h.get('step')} | " + " | ".join(
            f"{s[k]:.2f}" if k in s else "" for k in keys) + f" | {h.get('score', 0):.2f} |")
    return ("## Dev figures measured during training\n\nMeasured by `bitextmine train` after each epoch on its "
            "dev sets (held-out training pairs: retrieval accuracy %; Tatoeba: accuracy %, both directions; "
            "STS: Pearson r x 100). The model kept is the one with the best selection score "
            f"({_num(t.get('best_dev_score'))}).\n\n" + "\n".join(rows) + "\n")


def _num(x) -> str:
    return "none" if x is None else f"{x:.2f}"


def _short(key: str) -> str:
    """``tatoeba:tatoeba.deu-eng.deu`` -> ``tatoeba deu``; ``sts:sts-dev.csv`` -> ``sts sts-dev``."""
    kind, _, name = key.partition(":")
    if kind == "tatoeba":
        return "tatoeba " + name.rsplit(".", 1)[-1]
    if kind == "sts":
        return "sts " + name.rsplit(".", 1)[0]
    return key


def _mining(m: dict) -> str:
    rows = [f"| {lang} | {s.get('threshold')} | {s.get('min_z')} | {s.get('min_cosine')} |"
            for lang, s in sorted((m.get("languages") or {}).items())]
    return ("## Mining settings per language\n\n`bitextmine mine` uses these for a run's language pair (named "
            f"or detected). Chosen by {m.get('chosen_on', 'calibration')}.\n\n| language | threshold | min z | min cosine |\n|---|---|---|---|\n"
            + "\n".join(rows) + "\n")


def _features_named(stage) -> str:
    """What the stage's classifier takes, in words."""
    from ..judge.features import BASE, DEFICIT

    named = "margin, cosine, z, length ratio, IBM model 1 scores"
    if len(stage.features) == len(BASE):
        return named + " and the texts' surface"
    space = "how well each line's pieces find a counterpart among the other's in the model's space"
    if DEFICIT[0] not in stage.features:
        return f"{named}, the texts' surface and {space}"
    return (f"{named}, the texts' surface, {space} and which pieces the other line leaves unexplained where "
            "translations usually explain them")


def second_stage_section(stage) -> str:
    """The card's section on a model's second stage (:class:`bitextmine.judge.SecondStage`)."""
    rows = [f"| {lang} | {c['min_prob']:g} | {c['floor']:g} | {int(c['max_lines']):,} | {c.get('trained_on', '')} |"
            for lang, c in sorted(stage.languages.items())]
    mapped = sorted(lang for lang, c in stage.languages.items() if c.get("score_map"))
    score = (f"score, adjusted to the run's share of translations and, for {', '.join(mapped)}, mapped by the "
             "calibration to follow the share of translations among pairs given it," if mapped else
             "score (not a calibrated probability), adjusted to the run's share of translations,")
    return ("## Second stage\n\n`bitextmine mine` judges each candidate pair of these languages with English by a "
            f"classifier over its {_features_named(stage)} (`second_stage/`), and keeps "
            f"pairs whose {score} reaches min-prob; `filter --score prob` and `score --margin prob` give the same judgement. min-prob and "
            "max lines: the model's calibration (config.json, \"mining\") where it holds them, else "
            f"{stage.chosen_on or 'not calibrated'}. In a run with a side of more than max lines, the stage gets "
            "margins as sides of max lines give them (neighbour means among that many lines drawn at random).\n\n"
            "| language | min-prob | margin floor | max lines | trained on |\n|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def write_model_card(model, path: str) -> str:
    """Write ``path``/README.md for a bitextmine model directory; returns its path."""
    meta = {"library_name": "bitextmine", "language": list(model.config.get("languages") or []),
            "tags": ["sentence-similarity", "bitext-mining", "static-embeddings"]}
    if not meta["language"]:
        del meta["language"]
    out = os.path.join(path, CARD_FILE)
    with open(out, "w", encoding="utf-8") as f:
        f.write(front_matter(meta) + model_card(model))
    return out


def card_body(model) -> str:
    """A model's own card without its metadata (``README.md`` in its directory), else :func:`model_card`."""
    if model.path and os.path.exists(os.path.join(model.path, CARD_FILE)):
        with open(os.path.join(model.path, CARD_FILE), encoding="utf-8") as f:
            return strip_front_matter(f.read())
    return model_card(model)
