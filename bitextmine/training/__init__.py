"""Training an encoder on parallel text: the data, the hardest negatives and the loss, the loop, checkpoints."""

from .loop import TrainResult, train

__all__ = ["TrainResult", "train"]
