"""Models that move between bitextmine, sentence-transformers and model2vec.

- :mod:`.spm_json`: a SentencePiece model as a ``tokenizers`` tokenizer.json giving the same piece ids;
- :mod:`.export`: a bitextmine SP model written as a StaticEmbedding or model2vec model (``bitextmine export``);
- :mod:`.load`: a StaticEmbedding or model2vec directory read as a bitextmine model (``--model DIR``);
- :mod:`.card`: the model card (README.md) of a model directory.

Reading and writing tokenizer.json needs the ``tokenizers`` package (``pip install 'bitextmine[interop]'``).
"""
