"""bitextmine: train cross-lingual sentence encoders on bitext, encode fast, mine and score translation pairs."""

__version__ = "0.1.0"
