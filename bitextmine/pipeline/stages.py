"""The stages after dedup, each a function from files in the work directory to one file (or a value).

encode     per chunk: its distinct rows' embeddings, float32 (u, d)
knn        per (source chunk, target chunk) cell: exact k-NN within the cell in the directions that search
           a flat side (one pass for both), global row ids; or per (chunk, shard): IVF search of the shard.
           With a sample (the second stage's reference margins, :mod:`bitextmine.mining.reference`), a flat
           cell's pass also keeps each row's best among the other side's sampled rows in the cell
reduce     per chunk of either side: the cells' k best merged (ties to the lower row id) and their mean
           (over the neighbours found: an IVF search may leave slots empty); with a sample, its lists too
margins    per chunk of either side: each row's best candidate by margin score, kept at or above the threshold
moments    per side (only for --min-z or --explain): sum and d x d sum of outer products of its rows
texts      per chunk: the texts and every line number of the rows the selection kept

Merging cells' k best by (value, then lower id) gives what one search over the whole side gives, since
each cell's values are exact float32 products (:func:`bitextmine.search.exact.knn_both`).
"""

from __future__ import annotations

import numpy as np

from .dedup import firsts, hash_file, rep_file
from .plan import read_chunk
from .workdir import WorkDir, atomic_path, commit, load_arrays, save_arrays, save_npy, writing

SIDES = ("src", "tgt")
_MODELS: dict = {}


def emb_file(side: str, c: int) -> str:
    return f"{side}/emb-{c:06d}.npy"


def cell_file(i: int, j: int, sample: dict | None = None) -> str:
    """Cell (i, j)'s file; with a ``sample`` (knn_cell's) its lists are in it, and the name says which."""
    tail = f"-sample{sample['lines']}" if sample else ""
    return f"knn/cell-{i:06d}-{j:06d}{tail}.npz"


def sample_file(side: str, c: int, sample: dict) -> str:
    return f"{side}/sample{sample['lines']}-{c:06d}.npz"


def sample_rows_file(side: str, sample: dict) -> str:
    return f"{side}/sample{sample['lines']}-rows.npy"


def side_sample(work: WorkDir, side: str, plan: dict, offsets: np.ndarray, sample: dict) -> None:
    """Write ``side``'s reference sample (:mod:`bitextmine.mining.reference`): int64 ascending, the
    sample["lines"] distinct rows whose line hashes (the dedup stage's) mixed with sample["seed"] are smallest,
    read chunk by chunk (``offsets`` int64 (chunks + 1,): the side's row offsets)."""
    from ..mining.reference import smallest_keys

    keys, rows = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    for c, chunk in enumerate(plan["chunks"]):
        local = firsts(work, side, plan, c) - (chunk["first_line"] - 1)
        h = load_arrays(work.path(hash_file(side, c)))["hash"][local, 1]
        keys, rows = smallest_keys(np.concatenate([keys, h]), np.concatenate([rows, offsets[c] + np.arange(len(h))]),
                                   sample["lines"], sample["seed"])
    save_npy(work.path(sample_rows_file(side, sample)), np.sort(rows).astype(np.int64))


def sample_rows(work: WorkDir, side: str, sample: dict) -> np.ndarray:
    """int64 ascending: ``side``'s reference sample (:func:`side_sample`)."""
    return np.load(work.path(sample_rows_file(side, sample)))


def nn_file(side: str, c: int) -> str:
    return f"{side}/nn-{c:06d}.npz"


def mean_file(side: str, c: int) -> str:
    return f"{side}/mean-{c:06d}.npy"


def cand_file(side: str, c: int) -> str:
    return f"{side}/cand-{c:06d}.npz"


def _model(path: str, fingerprint: str):
    """The model at ``path`` (loaded once per process), which must still be the run's (``fingerprint``): a
    directory saved again during a run would embed some chunks with other weights than the rest."""
    from ..errors import ConfigError
    from ..loading import load_model

    if (path, fingerprint) not in _MODELS:
        model = load_model(path)
        if model.fingerprint != fingerprint:
            raise ConfigError(f"{path}: the model there is {model.fingerprint}, this run's is {fingerprint}: it "
                              "changed during the run; mine again")
        _MODELS[path, fingerprint] = model
    return _MODELS[path, fingerprint]


def encode_chunk(work: WorkDir, side: str, plan: dict, c: int, model_at: tuple, encode_config) -> None:
    """Write chunk c's distinct rows' embeddings (float32 (u, d), L2-normalised; ``model_at``: the model's
    directory and fingerprint)."""
    from ..encoding import Encoder

    lines = read_chunk(work, plan, c)
    first = firsts(work, side, plan, c) - (plan["chunks"][c]["first_line"] - 1)
    x = Encoder(_model(*model_at), encode_config).encode_all([lines[p] for p in first])
    save_npy(work.path(emb_file(side, c)), np.ascontiguousarray(x, np.float32))


def import_chunk(work: WorkDir, side: str, plan: dict, c: int, source: dict, block: int = 8192) -> None:
    """Write chunk c's distinct rows of an embeddings file from any encoder, L2-normalised, as float32 (u, d)
    (read and written ``block`` rows at a time, by plain writes: no page of the output stays in this
    process's memory): what the encode stage writes for text."""
    from ..encoding import open_embeddings
    from ..search.exact import RowView

    x = open_embeddings(source["path"], fmt=source["format"], dim=source["dim"], fp16=source["fp16"])
    rows = RowView(x, firsts(work, side, plan, c), normalise=True)
    path = work.path(emb_file(side, c))
    tmp = atomic_path(path)
    with writing(tmp) as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": rows.shape})
        for a in range(0, len(rows), block):
            np.ascontiguousarray(rows[a : a + block], "<f4").tofile(f)
    commit(tmp, path)


def side_rows(work: WorkDir, side: str, plan: dict, c: int, source: dict | None):
    """Chunk c's distinct rows as a (u, d) array or memory map: from the encode or import stage, or (``source``
    with "sidecar") straight from an embeddings file of every line that ``bitextmine encode`` wrote."""
    if source is None or not source.get("sidecar"):  # encoded or imported into the work directory
        return np.load(work.path(emb_file(side, c)), mmap_mode="r")
    from ..encoding import load_embeddings
    from ..search.exact import RowView

    rows = firsts(work, side, plan, c)
    x = load_embeddings(source["path"])  # bitextmine's own, L2-normalised (checked against the model by the driver)
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1:
        return x[rows[0] : rows[-1] + 1]  # no duplicates or blank lines in the chunk: a view, no copy
    return RowView(x, rows)


def knn_cell(work: WorkDir, plans: dict, i: int, j: int, offsets: dict, sources: dict, search: dict,
             sample: dict | None = None) -> None:
    """Write cell (i, j): source chunk i's k best among target chunk j (Df float32 (n_i, k'), If int64 global
    target rows) and the reverse (Db (m_j, k''), Ib global source rows); ``search``: knn_both's options (with
    ``direction`` xy or yx, only Df/If or Db/Ib). ``sample`` {"lines", "seed", "k"}: also each row's k best
    among the cell's rows of the other side's sample (:func:`side_sample`): Sf/SIf
    and Sb/SIb (float32 / int64 global rows, (rows, k), -inf / -1 where the cell holds fewer)."""
    from ..search.exact import Sample, knn_both

    x = side_rows(work, "src", plans["src"], i, sources["src"])
    y = side_rows(work, "tgt", plans["tgt"], j, sources["tgt"])
    within = None
    if sample:
        within = Sample(_cell_sample(work, "src", offsets, j, sample), _cell_sample(work, "tgt", offsets, i, sample),
                        sample["k"])
    Df, If, Db, Ib, info = knn_both(x, y, sample=within, **search)
    out = {} if Df is None else {"Df": Df, "If": If + offsets["tgt"][j]}
    if Db is not None:
        out.update(Db=Db, Ib=Ib + offsets["src"][i])
    if sample:
        for name, D, I, first in (("f", *info["sample"][:2], offsets["tgt"][j]), ("b", *info["sample"][2:], offsets["src"][i])):
            if D is not None:
                out[f"S{name}"], out[f"SI{name}"] = _padded(D, I + first, sample["k"])
    save_arrays(work.path(cell_file(i, j, sample)), **out)


def _cell_sample(work: WorkDir, side: str, offsets: dict, c: int, sample: dict) -> np.ndarray:
    """The rows (int64, within the other side's chunk c) of the sample that ``side``'s lines are compared with."""
    other = "tgt" if side == "src" else "src"
    rows = sample_rows(work, other, sample)
    lo, hi = np.searchsorted(rows, (offsets[other][c], offsets[other][c + 1]))
    return rows[lo:hi] - offsets[other][c]


def _padded(D: np.ndarray, I: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """D float32 (r, k') and I int64 (r, k') widened to k columns with -inf and -1."""
    Dk = np.full((len(D), k), -np.inf, np.float32)
    Ik = np.full((len(D), k), -1, np.int64)
    Dk[:, : D.shape[1]], Ik[:, : D.shape[1]] = D, I
    return Dk, Ik


def reduce_chunk(work: WorkDir, side: str, c: int, others: list[int], k: int, ivf: bool = False,
                 sample: dict | None = None) -> None:
    """Write chunk c's k best over the cells with the other side's chunks ``others`` (ascending), and the
    neighbour mean of each row (float32 (u,), :func:`bitextmine.mining.margin.neighbour_means`). ``ivf``: the
    cells of :func:`search_shard` (slots no shard filled stay empty: D -inf, I -1). ``sample`` (knn_cell's):
    also each row's sample["k"] best among the sample (:func:`sample_file`: D, I)."""
    from ..mining.margin import neighbour_means
    from ..search.topk import merge_topk

    D, I, SD, SI = [], [], [], []
    f = "f" if side == "src" else "b"
    for o in others:
        if ivf:
            z = load_arrays(work.path(ivf_cell_file(side, c, o)))
            D.append(z["D"])
            I.append(z["I"])
            continue
        z = load_arrays(work.path(cell_file(c, o, sample) if side == "src" else cell_file(o, c, sample)))
        D.append(z[f"D{f}"])
        I.append(z[f"I{f}"])
        if sample:
            SD.append(z[f"S{f}"])
            SI.append(z[f"SI{f}"])
    D_, I_ = merge_topk(D, I, k)
    save_npy(work.path(mean_file(side, c)), neighbour_means(D_))
    save_arrays(work.path(nn_file(side, c)), D=D_, I=I_)
    if sample:
        SD_, SI_ = merge_topk(SD, SI, sample["k"])
        save_arrays(work.path(sample_file(side, c, sample)), D=SD_, I=SI_)


def gather_sample_lists(work: WorkDir, side: str, offsets: dict, sample: dict, rows: np.ndarray):
    """The reduce stage's lists among the sample (D float32 (r, k), I int64 (r, k)) of ``side``'s rows ``rows``
    int64 (r,) (global row ids, any order, repeats allowed)."""
    k = sample["k"]
    D, I = np.full((len(rows), k), -np.inf, np.float32), np.full((len(rows), k), -1, np.int64)
    for c, sel, local in by_chunk(offsets[side], rows):
        z = load_arrays(work.path(sample_file(side, c, sample)))
        D[sel], I[sel] = z["D"][local], z["I"][local]
    return D, I


def by_chunk(offsets: np.ndarray, ids: np.ndarray):
    """Yield (chunk c, mask of ``ids`` in it, their positions in chunk c) for each chunk that holds some of the
    global row ids ``ids`` int64 (any shape); ``offsets`` int64 (chunks + 1,): each chunk's first row id."""
    owner = np.searchsorted(offsets, ids, side="right") - 1
    for c in np.unique(owner):
        sel = owner == c
        yield int(c), sel, ids[sel] - offsets[c]


def _gather_means(work: WorkDir, side: str, offsets: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The neighbour means of ``side``'s rows ``ids`` int64 (any shape; -1: an empty slot, NaN), read chunk
    by chunk."""
    out = np.full(ids.shape, np.nan, np.float32)
    found = ids >= 0
    part = out[found]
    for c, sel, local in by_chunk(offsets, ids[found]):
        part[sel] = np.load(work.path(mean_file(side, c)), mmap_mode="r")[local]
    out[found] = part
    return out


def margins_chunk(work: WorkDir, side: str, c: int, offsets: dict, margin: str, threshold: float) -> None:
    """Write chunk c's candidates: each row's best neighbour by margin score
    (:func:`bitextmine.mining.margin.best_candidates`), where that score >= threshold: row, other (global row
    ids, int64), score, cos, mean_q, mean_o (float32)."""
    from ..mining.margin import best_candidates, candidate_scores

    other = "tgt" if side == "src" else "src"
    z = load_arrays(work.path(nn_file(side, c)))
    D, I = z["D"], z["I"]
    mean_q = np.load(work.path(mean_file(side, c)))
    mean_o = _gather_means(work, other, offsets[other], I)
    rows, o, score, cos = best_candidates(D, I, candidate_scores(D, I, mean_q, mean_o, margin))
    keep = score >= threshold
    rows, o, score, cos = rows[keep], o[keep], score[keep], cos[keep]
    save_arrays(work.path(cand_file(side, c)), row=offsets[side][c] + rows, other=o, score=score, cos=cos,
                mean_q=mean_q[rows], mean_o=_gather_means(work, other, offsets[other], o))


def texts_chunk(work: WorkDir, side: str, plan: dict, c: int, wanted: np.ndarray) -> tuple[list, list, list]:
    """For the 0-based first lines ``wanted`` int64 (sorted): (first lines in chunk c, their texts, and
    (first line, 1-based line) for each line of chunk c that repeats a wanted line, itself included)."""
    chunk = plan["chunks"][c]
    a = chunk["first_line"] - 1
    rep = np.load(work.path(rep_file(side, c)))
    hit = np.flatnonzero(np.isin(rep, wanted))
    own = hit[rep[hit] == a + hit]
    texts = []
    if len(own):
        lines = read_chunk(work, plan, c)
        texts = [lines[p] for p in own]
    return (a + own).tolist(), texts, list(zip(rep[hit].tolist(), (a + hit + 1).tolist()))


# --- approximate search: one IVF index per side, trained once, one shard per chunk -----------------------
# backend (ivf["backend"]): "faiss", a FAISS index file per side and per shard; or "torch" (ivf on a CUDA device
# without FAISS GPUs, :mod:`bitextmine.search.torch_ivf`): the side's centroids, and per chunk its rows' lists

def index_file(side: str, c: int | None = None, backend: str = "faiss") -> str:
    if backend == "torch":
        return f"index/{side}-centroids.npy" if c is None else f"index/{side}-lists-{c:06d}.npy"
    return f"index/{side}-trained.faiss" if c is None else f"index/{side}-{c:06d}.faiss"


def ivf_cell_file(side: str, c: int, o: int) -> str:
    return f"knn/ivf-{side}-{c:06d}-{o:06d}.npz"


def train_index(work: WorkDir, side: str, plans: dict, offsets: dict, sources: dict, ivf: dict) -> None:
    """Write ``side``'s trained, empty IVF (ivf["kind"] ivf | ivfpq) index, with the cells and seeded training
    sample :func:`bitextmine.search.index.knn` uses for the whole side (so the same index); with ivf["backend"]
    torch, its centroids (float32 (nlist, d), k-means on ivf["device"])."""
    from ..search.index import ivf_recipe

    nlist, rows = ivf_recipe(int(offsets[side][-1]), ivf["nlist"], ivf["train_sample"], ivf["seed"])
    x = gather_rows(work, side, plans, offsets, sources, rows)
    if ivf.get("backend") == "torch":
        from ..search import torch_ivf

        save_npy(work.path(index_file(side, backend="torch")), torch_ivf.train(x, nlist, seed=ivf["seed"],
                                                                               device=ivf["device"]))
        return
    from ..device import faiss_module
    from ..search.index import ivf_untrained

    index = ivf_untrained(x.shape[1], nlist, ivf["kind"], ivf["pq_m"], "cpu")
    index.train(x)
    _write_index(faiss_module(), index, work.path(index_file(side)))


def _write_index(faiss, index, path: str) -> None:
    tmp = atomic_path(path)
    faiss.write_index(index, tmp)
    commit(tmp, path)


def fill_shard(work: WorkDir, side: str, c: int, plans: dict, offsets: dict, sources: dict,
               ivf: dict | None = None) -> None:
    """Write chunk c's shard: the trained index with chunk c's rows added under their global row ids; with
    ivf["backend"] torch, each row's list (int32 (u,))."""
    rows = side_rows(work, side, plans[side], c, sources[side])
    if ivf and ivf.get("backend") == "torch":
        from ..search import torch_ivf

        centroids = np.load(work.path(index_file(side, backend="torch")))
        save_npy(work.path(index_file(side, c, "torch")), torch_ivf.assign(rows, centroids, device=ivf["device"]))
        return
    from ..device import faiss_module
    from ..search.index import add_rows

    faiss = faiss_module()
    index = faiss.read_index(work.path(index_file(side)))
    add_rows(index, rows, int(offsets[side][c]))
    _write_index(faiss, index, work.path(index_file(side, c)))


def search_shard(work: WorkDir, side: str, c: int, o: int, plans: dict, offsets: dict, sources: dict, k: int,
                 nprobe: int, block: int, ivf: dict | None = None) -> None:
    """Write the k best of ``side``'s chunk c among the other side's shard o (D float32, I int64 global ids;
    slots the shard cannot fill: D -inf, I -1); with ivf["backend"] torch, by
    :func:`bitextmine.search.torch_ivf.search` on ivf["device"] over chunk o's rows and lists."""
    other = "tgt" if side == "src" else "src"
    x = side_rows(work, side, plans[side], c, sources[side])
    if ivf and ivf.get("backend") == "torch":
        from ..search import torch_ivf

        y = side_rows(work, other, plans[other], o, sources[other])
        ids = np.arange(offsets[other][o], offsets[other][o] + len(y), dtype=np.int64)
        D, I = torch_ivf.search(x, y, np.load(work.path(index_file(other, o, "torch"))), ids,
                                np.load(work.path(index_file(other, backend="torch"))), k, nprobe, device=ivf["device"])
        save_arrays(work.path(ivf_cell_file(side, c, o)), D=D, I=I)
        return
    from ..device import faiss_module
    from ..search.index import faiss_search

    index = faiss_module().read_index(work.path(index_file(other, o)))
    index.nprobe = nprobe
    D, I = faiss_search(index, x, k, block)
    save_arrays(work.path(ivf_cell_file(side, c, o)), D=D, I=I)


def gather_rows(work: WorkDir, side: str, plans: dict, offsets: dict, sources: dict, rows: np.ndarray) -> np.ndarray:
    """``side``'s rows ``rows`` int64 (r,) (global row ids, ascending) as float32 (r, d)."""
    return np.concatenate([np.asarray(side_rows(work, side, plans[side], c, sources[side])[local], np.float32)
                           for c, _, local in by_chunk(offsets[side], rows)])


def assist_file(side: str, block: int) -> str:
    return f"{side}/assist-{block:06d}.npz"


def assist_block(work: WorkDir, side: str, block: int, rows: np.ndarray, texts: list[str], assist) -> int:
    """The assist's (a :class:`bitextmine.assist.AssistEncoder`) L2-normalised vectors float32 (r, d) of one block
    of ``side``'s rows int64 (r,), whose texts are ``texts``, kept in the work directory (:func:`assist_file`:
    rows, x); returns r. The assist's model is loaded once per process."""
    save_arrays(work.path(assist_file(side, block)), rows=rows, x=assist.encode(texts))
    return len(rows)


def moments_file(side: str) -> str:
    return f"{side}/moments.npz"


def side_moments(work: WorkDir, side: str, plans: dict, offsets: dict, sources: dict) -> None:
    """Write the moments of ``side``'s distinct rows (:func:`bitextmine.mining.standout.moments`, summed over
    the same fixed blocks of global rows whatever the chunks)."""
    from ..mining.standout import BLOCK, block_starts, moments

    n = int(offsets[side][-1])
    m = moments(gather_rows(work, side, plans, offsets, sources, np.arange(a, min(n, a + BLOCK)))
                for a in block_starts(n))
    save_arrays(work.path(moments_file(side)), n=np.int64(m.n), first=m.first, second=m.second)


def load_moments(work: WorkDir, side: str):
    from ..mining.standout import Moments

    z = load_arrays(work.path(moments_file(side)))
    return Moments(int(z["n"]), z["first"], z["second"])


def recall_sample(work: WorkDir, side: str, plans: dict, offsets: dict, sources: dict, rows: np.ndarray,
                  device: str) -> float:
    """recall@k (:func:`bitextmine.search.index.recall`) of the reduce stage's neighbour lists of ``side``'s
    rows ``rows`` (ascending), against exact search over every chunk of the other side on ``device``."""
    from ..search.index import recall

    other = "tgt" if side == "src" else "src"
    parts = [side_rows(work, other, plans[other], o, sources[other])  # ids run on: empty chunks add none
             for o in range(len(plans[other]["chunks"])) if offsets[other][o + 1] > offsets[other][o]]
    q = gather_rows(work, side, plans, offsets, sources, rows)
    return recall(gather_nn(work, side, offsets, rows), q, parts, device=device)


def gather_nn(work: WorkDir, side: str, offsets: dict, rows: np.ndarray) -> np.ndarray:
    """The reduce stage's neighbour ids (int64 (r, k)) of ``side``'s rows ``rows`` (ascending)."""
    return np.concatenate([load_arrays(work.path(nn_file(side, c)))["I"][local]
                           for c, _, local in by_chunk(offsets[side], rows)])
