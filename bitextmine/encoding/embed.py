"""The embedding maths: sentence embeddings from a model's pieces.

:func:`embed_pieces` is the mean of piece embeddings, L2-normalised (the one implementation behind every
averaging encoder); :class:`SentenceEmbedder` holds one model's token table on the device at a precision
(optionally the SIF table), or runs its BiLSTM module, and turns flat (ids, offsets) batches into float32
(n, dim) rows. Nothing here reads files or starts processes (see :mod:`bitextmine.encoding.pipeline`).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..model import Model


def embed_pieces(weight, ids: np.ndarray, offsets: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Mean of piece embeddings, L2-normalised: (n, dim) of ``dtype`` (float32 or float16: rounded from the
    float32 rows on the device, as numpy's astype rounds them, so a GPU copies half the bytes back); an empty
    sentence gives zeros (and :class:`SentenceEmbedder` gives zeros to a sentence of unknown pieces alone).

    weight: torch tensor (vocab, dim) on the device to use; ids int (total,), offsets int (n,) (flat
    layout, see bitextmine.tokenizer). The one implementation behind every encoding path.
    """
    import torch
    import torch.nn.functional as F

    if len(offsets) == 0:
        return np.zeros((0, weight.shape[1]), dtype)
    with torch.no_grad():
        dev = weight.device
        x = F.embedding_bag(torch.from_numpy(ids).to(dev), weight, torch.from_numpy(offsets).to(dev), mode="mean")
        x = x.float()  # a half-precision table still gives float32 rows (no copy for a float32 table)
        x.div_(torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_min_(1e-12))  # in place: no copy
    return _host(x, dtype)


def _host(x, dtype) -> np.ndarray:
    """The float32 torch rows x as a numpy array of ``dtype`` (float16 rounded on x's device)."""
    return (x.half() if np.dtype(dtype) == np.float16 else x).cpu().numpy()


def nothing_known(ids: np.ndarray, offsets: np.ndarray, blank: np.ndarray) -> np.ndarray:
    """bool (n,): the sentences (flat ids int (total,), offsets int (n,)) with pieces, every one of them among
    ``blank`` (int (b,): a tokenizer's ``blank_ids``, ``<unk>`` and a bare word start). Emoji and scripts the
    vocabulary lacks all become those pieces, so such sentences would share one vector and match each other as
    translations (cosine 1); they are embedded as empty ones instead (zeros: cosine 0 with everything)."""
    ids, offsets = np.asarray(ids), np.asarray(offsets, np.int64)
    is_blank = np.zeros(max(int(ids.max(initial=0)), int(np.max(blank, initial=0))) + 1, bool)
    is_blank[blank] = True  # a look-up table: one gather a piece
    ends = np.append(offsets[1:], len(ids))
    out, pieces = np.zeros(len(offsets), bool), ends > offsets
    if pieces.any():  # one pass: whether each sentence with pieces holds a known one (empty ones hold none)
        out[pieces] = ~np.logical_or.reduceat(~is_blank[ids], offsets[pieces])
    return out


class SentenceEmbedder:
    """Callable (ids, offsets) -> float32 (n, dim) L2-normalised sentence embeddings for one model.

    Averaging encoders go through :func:`embed_pieces` with the token table (with ``sif``, the SIF
    table of :func:`bitextmine.sif.sif_table`), held on the device at ``precision`` (fp32 | fp16 | bf16;
    see :func:`bitextmine.device.table_precision`); the BiLSTM runs its torch module in chunks of
    ``chunk`` sentences, weighting states and removing the common component when ``sif`` is set.
    """

    def __init__(self, model: Model, *, sif: bool = False, device: str = "cpu", chunk: int = 2048,
                 marked: bool = False, precision: str = "fp32", batch_tokens: int = 0):
        import torch

        from ..model import module_from_model
        from ..sif import sif_parts, sif_table

        self.dim = model.dim
        self.blank = model.tokenizer.blank_ids()
        self.offset = 0
        if marked:
            if not model.marked_offset:
                raise ConfigError(f"{model.path or 'model'}: has one shared vocabulary; marking a language needs a "
                                  "model trained with --separate-vocab")
            self.offset = model.marked_offset
        self.module = None
        self.chunk = chunk
        self.batch_tokens = batch_tokens
        self.token_weights = self.pc = None
        if model.is_bag:
            table = model.embeddings
            if sif:
                w, pc, a = sif_parts(model)
                table = sif_table(table, model.tensors["piece_counts"], pc, a)
            dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
            self.weight = torch.from_numpy(np.ascontiguousarray(table, np.float32)).to(device, dtype)
        else:
            self.module = module_from_model(model, device).eval()
            self.weight = self.module.weight
            if sif:
                w, pc, _ = sif_parts(model)
                self.token_weights = torch.from_numpy(w).to(device)
                self.pc = torch.from_numpy(pc).to(device)

    def __call__(self, ids: np.ndarray, offsets: np.ndarray, dtype=np.float32) -> np.ndarray:
        """ids int (total,), offsets int (n,) (flat layout) -> (n, dim) of ``dtype`` (float32, or float16 rounded
        from them on the device). With ``batch_tokens``, embedded in runs of whole sentences of at most that
        many pieces (a longer sentence alone)."""
        budget = self.batch_tokens
        if not budget or len(ids) <= budget:
            return self._embed(ids, offsets, dtype)
        offsets = np.asarray(offsets, np.int64)
        ends = np.append(offsets[1:], len(ids))
        parts, a = [], 0
        while a < len(offsets):
            b = max(a + 1, int(np.searchsorted(ends, offsets[a] + budget, side="right")))
            parts.append(self._embed(ids[offsets[a] : ends[b - 1]], offsets[a:b] - offsets[a], dtype))
            a = b
        return np.concatenate(parts)

    def _embed(self, ids: np.ndarray, offsets: np.ndarray, dtype=np.float32) -> np.ndarray:
        """One run of sentences: ids int (total,), offsets int (n,) -> (n, dim) of ``dtype``, L2-normalised; zeros,
        as for an empty sentence, where no piece is known (:func:`nothing_known`)."""
        x = self._vectors(ids, offsets, dtype)
        blank = nothing_known(ids, offsets, self.blank)
        if blank.any():
            x[blank] = 0
        return x

    def _vectors(self, ids: np.ndarray, offsets: np.ndarray, dtype=np.float32) -> np.ndarray:
        if self.offset:
            ids = np.asarray(ids, np.int64) + self.offset
        if self.module is None:
            return embed_pieces(self.weight, ids, offsets, dtype)
        import torch

        from ..model import embed_in_chunks

        def post(x):
            if self.pc is not None:
                x = x - (x @ self.pc).unsqueeze(1) * self.pc
            return x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_min(1e-12)

        x = embed_in_chunks(self.module, ids, offsets, chunk=self.chunk, token_weights=self.token_weights, post=post)
        return _host(x.float(), dtype)
