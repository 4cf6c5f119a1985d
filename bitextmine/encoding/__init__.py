"""Sentence embeddings.

embed.py     the embedding maths: mean of piece embeddings, SentenceEmbedder (token table on the device, BiLSTM, SIF)
pipeline.py  the worker pipeline: Encoder, encode, encode_files (worker processes, streaming .npy output)
chunks.py    encode_chunked: chunked, resumable encoding into a directory with a manifest
store.py     the embedding store: EncodeResult, the .npy sidecar and chunk manifest formats, load_embeddings
npyfile.py   streaming .npy files written in place by several processes
external.py  open_embeddings: precomputed embeddings of any encoder (.npy with or without sidecar, LASER raw)
"""

from .chunks import encode_chunked
from .embed import SentenceEmbedder, embed_pieces
from .external import has_sidecar, open_embeddings
from .pipeline import Encoder, encode, encode_files, side_configs
from .store import EncodeResult, load_embeddings, vectors_fingerprint

__all__ = ["EncodeResult", "Encoder", "SentenceEmbedder", "embed_pieces", "encode", "encode_chunked", "encode_files",
           "has_sidecar", "load_embeddings", "open_embeddings", "side_configs", "vectors_fingerprint"]
