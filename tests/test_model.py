import json
import os
import shutil
from dataclasses import replace

import numpy as np
import pytest

from bitextmine.errors import ModelFormatError
from bitextmine.loading import load_model
from bitextmine.model import default_model_dir


def own(model):
    """A copy of the toy model shared by the test run to save: Model.save moves the model it saves to its new directory."""
    return replace(model, config=dict(model.config))


def test_save_load_roundtrip(tmp_path, toy_model):
    model = own(toy_model)
    model.save(str(tmp_path / "m"), dtype="float32")
    m = load_model(str(tmp_path / "m"))
    np.testing.assert_array_equal(m.embeddings, model.embeddings)
    assert m.tokenizer.proto == model.tokenizer.proto
    assert m.config["format_version"] == 2 and m.config["encoder"] == "sp"
    assert m.fingerprint == model.fingerprint and model.path == str(tmp_path / "m") != toy_model.path


@pytest.mark.parametrize("damage, message", [
    (lambda d: json.dump({**json.load(open(d + "/config.json")), "format_version": 3}, open(d + "/config.json", "w")),
     "format_version 3; this bitextmine reads format_version 1 or 2"),
    (lambda d: json.dump({**json.load(open(d + "/config.json")), "format_version": True}, open(d + "/config.json", "w")),
     "format_version True; this bitextmine reads"),  # true == 1 in Python: not a version
    (lambda d: json.dump({**json.load(open(d + "/config.json")), "format_version": 2.0}, open(d + "/config.json", "w")),
     "format_version 2.0; this bitextmine reads"),
    (lambda d: os.remove(d + "/config.json"), "config.json: missing"),
    (lambda d: os.remove(d + "/embeddings.safetensors"), "embeddings.safetensors: missing"),
    (lambda d: open(d + "/embeddings.safetensors", "wb").write(b"garbage"), "not a readable safetensors file"),
    (lambda d: open(d + "/config.json", "w").write("{"), "not valid JSON"),
    (lambda d: json.dump({**json.load(open(d + "/config.json")), "encoder": "lstm"}, open(d + "/config.json", "w")),
     "encoder 'lstm'"),
])
def test_damaged_model_directory_is_refused(tmp_path, toy_model_dir, damage, message):
    d = str(tmp_path / "m")
    shutil.copytree(toy_model_dir, d)
    damage(d)
    with pytest.raises(ModelFormatError, match=message):
        load_model(d)


def _rescore_a_piece(d: str) -> None:
    """Another tokenizer of the same pieces (one piece's score lowered: other segmentations)."""
    import sentencepiece.sentencepiece_model_pb2 as pb

    m = pb.ModelProto.FromString(open(d + "/sentencepiece.model", "rb").read())
    m.pieces[-1].score -= 1.0
    open(d + "/sentencepiece.model", "wb").write(m.SerializeToString())


def _scale_embeddings(d: str) -> None:
    from safetensors.numpy import load_file, save_file

    tensors = load_file(d + "/embeddings.safetensors")
    save_file({**tensors, "embeddings": tensors["embeddings"] * 2}, d + "/embeddings.safetensors")


@pytest.mark.parametrize("change", [_rescore_a_piece, _scale_embeddings])
def test_a_model_whose_files_changed_after_saving_is_refused(tmp_path, toy_model, change):
    """The fingerprint names a model's vectors (caches, sidecars): a model whose tokenizer or table was replaced
    after it was saved (same shapes, other bytes) would pass as the model it was; it is refused, naming both."""
    d, model = str(tmp_path / "m"), own(toy_model)
    model.save(d)
    assert load_model(d).fingerprint == model.fingerprint
    change(d)
    with pytest.raises(ModelFormatError, match=f"config.json: fingerprint {model.fingerprint}, but the model's "
                                               "tokenizer and tensors give [0-9a-f]{16}: a file of the model changed"):
        load_model(d)


def test_not_a_directory(tmp_path):
    with pytest.raises(ModelFormatError, match="not a model directory"):
        load_model(str(tmp_path / "nothing"))


def test_bundled_default_model_loads():
    m = load_model(None)
    assert m.path == default_model_dir()
    assert m.embeddings.shape == (m.config["vocab_size"], m.config["dim"])
    assert os.path.getsize(os.path.join(m.path, "embeddings.safetensors")) < 50e6  # the size budget in the package


def test_format_version_1_directories_still_load(tmp_path, toy_model):
    """Version 1 (SP only): no 'tokenizer' or 'emb_dim' in config.json, no extra tensors."""
    from safetensors.numpy import save_file

    d = str(tmp_path / "v1")
    own(toy_model).save(d, dtype="float16")
    cfg = json.load(open(d + "/config.json"))
    for key in ("tokenizer", "emb_dim", "sif_a", "separate_vocab"):
        cfg.pop(key, None)
    cfg["format_version"] = 1
    emb = toy_model.embeddings.astype(np.float16)
    from bitextmine.model import compute_fingerprint

    cfg["fingerprint"] = compute_fingerprint(toy_model.tokenizer.proto, emb)
    json.dump(cfg, open(d + "/config.json", "w"))
    save_file({"embeddings": emb}, d + "/embeddings.safetensors")
    m = load_model(d)
    assert m.encoder == "sp" and m.dim == toy_model.dim and not m.tensors
    np.testing.assert_array_equal(m.embeddings, emb.astype(np.float32))


@pytest.mark.parametrize("a", [0, -1e-3, "0.001", None])
def test_a_sif_weight_that_is_not_a_positive_number_is_refused(tmp_path, toy_model_dir, a):
    """sif_a 0 weighed every seen piece 0: every --sif score was 0, with a numpy warning as the only sign."""
    from bitextmine.encoding import encode
    from bitextmine.config import EncodeConfig

    d = str(tmp_path / "m")
    shutil.copytree(toy_model_dir, d)
    cfg = json.load(open(d + "/config.json"))
    cfg["sif_a"] = a
    json.dump(cfg, open(d + "/config.json", "w"))
    with pytest.raises(ModelFormatError, match=f"config.json sif_a {a!r}; expected a positive number"):
        encode(["kalo mire"], load_model(d), config=EncodeConfig(sif=True))


def test_a_model_file_that_is_a_pipe_is_refused_at_once(toy_model_dir, tmp_path):
    """A named pipe in a model file's place blocked the load for ever (a FIFO tokenizer.json hung mine)."""
    import shutil

    from bitextmine.errors import ModelFormatError
    from bitextmine.loading import load_model

    bad = str(tmp_path / "m")
    shutil.copytree(toy_model_dir, bad)
    os.remove(os.path.join(bad, "sentencepiece.model"))
    os.mkfifo(os.path.join(bad, "sentencepiece.model"))
    with pytest.raises(ModelFormatError, match=r"sentencepiece.model: not a regular file"):
        load_model(bad)
