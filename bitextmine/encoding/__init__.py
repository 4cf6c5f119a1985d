"""Sentence embeddings: the embedding maths, the worker pipeline that encodes texts and files, and the
embedding store (the ``.npy`` sidecar, chunked encodings and their manifest, loading)."""

from .pipeline import (EncodeResult, Encoder, SentenceEmbedder, embed_pieces, encode, encode_chunked, encode_files,
                       load_embeddings, side_configs, vectors_fingerprint)

__all__ = ["EncodeResult", "Encoder", "SentenceEmbedder", "embed_pieces", "encode", "encode_chunked", "encode_files",
           "load_embeddings", "side_configs", "vectors_fingerprint"]
