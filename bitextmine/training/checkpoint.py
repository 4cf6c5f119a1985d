"""Resumable training checkpoints: ``OUT/checkpoint/`` holds ``state.json`` (format version
CHECKPOINT_VERSION, the data fingerprint, the config, epoch, position in the epoch's order, step,
dev history, best score, the device type of the random generator: always "cpu"), ``tensors.safetensors``
(weights, Adam's moments, the best weights so far, both random generators' states) and ``tokenizer.bin``.
No pickle. They are written at mega-batch boundaries, atomically (a temporary directory renamed).

Resuming continues to the same final model as an uninterrupted run on the same device type (on
CUDA, training runs with deterministic algorithms for this; see :func:`bitextmine.training.train`).
Both generators (dropout and random negatives; word shuffling) are CPU generators whose draws are
moved to the device, so a checkpoint also resumes on another device type (CPU vs CUDA), continuing
the same random streams (the weights then differ from an uninterrupted run by float rounding only).
Earlier versions drew dropout and random negatives from the device's own generator: a checkpoint
they wrote on CUDA holds a Philox state that no CPU generator can continue, and :func:`load_checkpoint`
raises ConfigError for it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict

import numpy as np

from ..config import TrainConfig
from ..errors import ConfigError, ModelFormatError

CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_VERSION = 2
TOKENIZER_CKPT = "tokenizer.bin"
STATE_KEYS = ("epoch", "pos", "step", "history", "pairs_seen")
# the settings a resumed run must share with the checkpoint: each changes the model it trains to (data, order,
# objective, optimiser, schedule, and eval_every: the steps at which the best weights can be chosen); the others
# (device, threads, checkpoint_every, max_steps, fp16) change how it runs or is saved, not what it learns
MATCHING_KEYS = ("encoder", "dim", "batch_size", "seed", "megabatch_start", "megabatch_max", "megabatch_every",
                 "batch_order", "dev_pairs", "negatives", "mix_prob", "paraphrase", "untrained", "shuffle_words", "reg_to_init",
                 "sts_min_score", "clean", "separate_vocab", "sif_a", "sif_sample", "loss", "margin", "hinge_weight",
                 "scale", "sampling_temperature", "dropout", "lr", "warmup", "lr_decay", "init_scale", "eval_every")


def new_state() -> dict:
    """The training state of a fresh run: epoch, pos (in the epoch's order), step, best_score, history, pairs_seen;
    with batch order topic, also "order" (int64: the epoch's order, computed at its start) while an epoch runs."""
    return {"epoch": 0, "pos": 0, "step": 0, "best_score": -np.inf, "history": [], "pairs_seen": 0}


def has_checkpoint(ckpt_dir: str) -> bool:
    return os.path.isfile(os.path.join(ckpt_dir, "state.json"))


def load_checkpoint_tokenizer(ckpt_dir: str):
    """The tokenizer stored in a checkpoint (its kind from state.json)."""
    from ..tokenizer import make_tokenizer

    with open(os.path.join(ckpt_dir, "state.json")) as f:
        kind = json.load(f).get("tokenizer", "sentencepiece")
    with open(os.path.join(ckpt_dir, TOKENIZER_CKPT), "rb") as f:
        return make_tokenizer(kind, f.read(), os.path.join(ckpt_dir, TOKENIZER_CKPT))


def save_checkpoint(ckpt_dir: str, enc, opt, gen, shuffle_gen, best: dict, state: dict, tok, data_fp: str,
                    config: TrainConfig, inputs: dict | None = None) -> None:
    """Write the checkpoint of module ``enc``, Adam ``opt``, CPU generators ``gen`` (dropout, negatives)
    and ``shuffle_gen`` (word shuffling), the best weights ``best``, the ``state`` dict (see :func:`new_state`)
    and ``inputs``, what a resume must share besides data and config (tokenizer, init model, dev sets)."""
    import torch
    from safetensors.torch import save_file

    tmp = ckpt_dir + ".tmp"
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    tensors = {"generator": gen.get_state().cpu(), "shuffle_generator": shuffle_gen.get_state()}
    for k, v in enc.state_dict().items():
        tensors[f"param.{k}"] = v.detach().cpu().contiguous()
        tensors[f"best.{k}"] = best[k].detach().cpu().contiguous()
    for i, ost in opt.state_dict()["state"].items():
        for key, v in ost.items():
            v = torch.as_tensor(v).detach().cpu().contiguous()
            tensors[f"adam.{i}.{key}"] = v.reshape(-1) if key == "step" else v
    if state.get("order") is not None:  # the topic order of the epoch under way (batching.topic_order)
        tensors["epoch_order"] = torch.from_numpy(np.ascontiguousarray(state["order"]))
    save_file(tensors, os.path.join(tmp, "tensors.safetensors"))
    with open(os.path.join(tmp, TOKENIZER_CKPT), "wb") as f:
        f.write(tok.proto)
    meta = {
        "checkpoint_version": CHECKPOINT_VERSION,
        "data_fingerprint": data_fp,
        "tokenizer": tok.kind,
        "generator_device": gen.device.type,
        "config": asdict(config),
        "inputs": inputs or {},
        **{k: state[k] for k in STATE_KEYS},
        "best_score": state["best_score"] if np.isfinite(state["best_score"]) else None,
    }
    with open(os.path.join(tmp, "state.json"), "w") as f:  # last: a temporary directory with it is whole
        json.dump(meta, f, indent=1)
    old = ckpt_dir + ".old"
    if os.path.isdir(old):
        shutil.rmtree(old)
    if os.path.isdir(ckpt_dir):  # set aside, not removed, until the new one is in place (recover_checkpoint)
        os.replace(ckpt_dir, old)
    os.replace(tmp, ckpt_dir)
    shutil.rmtree(old, ignore_errors=True)


def recover_checkpoint(ckpt_dir: str) -> None:
    """Finish a :func:`save_checkpoint` stopped between setting the old checkpoint aside and putting the new one in
    its place: the new one when it is whole (its state.json, written last, is there), else the old one."""
    for there in (ckpt_dir + ".tmp", ckpt_dir + ".old"):
        if not has_checkpoint(ckpt_dir) and has_checkpoint(there):
            if os.path.isdir(ckpt_dir):
                shutil.rmtree(ckpt_dir)
            os.replace(there, ckpt_dir)
    if has_checkpoint(ckpt_dir):
        shutil.rmtree(ckpt_dir + ".old", ignore_errors=True)


def _check_inputs(ckpt_dir: str, meta: dict, inputs: dict) -> None:
    """ConfigError when the run's tokenizer, init model or dev sets differ from the checkpoint's (one made before
    they were recorded is not checked)."""
    saved = meta.get("inputs") or {}
    what = {"init_fingerprint": "--init-from model (fingerprint)", "tokenizer": "tokenizer settings",
            "dev_sets": "dev sets (file names and contents)"}
    for key, name in what.items():
        if key in saved and key in inputs and saved[key] != inputs[key]:
            then, now = _differing(saved[key], inputs[key])
            raise ConfigError(f"--resume: {ckpt_dir} was trained with other {name}: {then}, this run has {now}; "
                              "resume with the checkpoint's, or start a new run in another directory")


def _differing(a, b) -> tuple[str, str]:
    """How two recorded values differ, as short JSON: only the keys that differ, where both are dicts."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        a, b = {k: a.get(k) for k in keys}, {k: b.get(k) for k in keys}
    return tuple(t if len(t) <= 160 else t[:157] + "..." for t in (json.dumps(a, sort_keys=True),
                                                                    json.dumps(b, sort_keys=True)))


def _check_meta(ckpt_dir: str, meta: dict, data_fp: str, config: TrainConfig) -> None:
    if meta.get("checkpoint_version") != CHECKPOINT_VERSION:
        raise ModelFormatError(f"{ckpt_dir}: checkpoint_version {meta.get('checkpoint_version')!r}; "
                               f"expected {CHECKPOINT_VERSION}")
    saved_fp = meta.get("data_fingerprint") or ""
    pairs_fp = data_fp.split("/")[0]
    if saved_fp.split("/")[0] != pairs_fp:
        raise ConfigError(f"--resume: {ckpt_dir} was made from other training data (or other cleaning/dev split)")
    saved = meta.get("config", {})
    for key in MATCHING_KEYS + _schedule_keys(config):  # a key a checkpoint predates had its default then
        then = saved.get(key, getattr(TrainConfig, key))
        if then != getattr(config, key):
            raise ConfigError(f"--resume: {ckpt_dir} was trained with {key}={then!r}, this run has "
                              f"{key}={getattr(config, key)!r}; resume with the checkpoint's settings, or start a new "
                              "run in another directory")
    if saved_fp not in (data_fp, pairs_fp):  # a checkpoint older than the groups' part holds the pairs' part only
        raise ConfigError(f"--resume: {ckpt_dir} was made with other sampling groups (language pairs) for the "
                          "same training pairs; the epoch order would change")


def _schedule_keys(config: TrainConfig) -> tuple[str, ...]:
    """("epochs",) when the learning rate's schedule depends on the number of epochs (warmup or a decay), else ():
    with a constant rate, a resumed run may add epochs and trains on as the longer run would."""
    return ("epochs",) if config.warmup or config.lr_decay != "none" else ()


def _check_generator(ckpt_dir: str, meta: dict, stored, gen) -> None:
    """ConfigError unless the stored generator state (uint8 tensor) is a CPU generator's, like CPU ``gen``'s.
    Checkpoints without ``generator_device`` are told apart by the state's size (CPU and CUDA differ)."""
    there = meta.get("generator_device", "cpu")
    if there != "cpu" or stored.numel() != gen.get_state().numel():
        there = "cuda" if there == "cpu" else there
        raise ConfigError(f"--resume: {ckpt_dir} holds the state of a {there} random generator, written by an "
                          "earlier version that drew dropout and random negatives on the device; this version "
                          "draws them on the CPU and cannot continue that stream, so start a new run")


def load_checkpoint(ckpt_dir: str, enc, opt, gen, shuffle_gen, data_fp: str, config: TrainConfig, device,
                    inputs: dict | None = None):
    """Restore ``enc``, ``opt`` and both generators in place; return (state, best weights on ``device``).

    Raises ModelFormatError (another checkpoint_version), ConfigError (other data, a config that
    changes the run, or a CUDA generator state of an earlier version). The run's device may differ from the
    checkpoint's."""
    from safetensors.torch import load_file

    with open(os.path.join(ckpt_dir, "state.json")) as f:
        meta = json.load(f)
    _check_meta(ckpt_dir, meta, data_fp, config)
    _check_inputs(ckpt_dir, meta, inputs or {})
    tensors = load_file(os.path.join(ckpt_dir, "tensors.safetensors"))
    _check_generator(ckpt_dir, meta, tensors["generator"], gen)
    enc.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("param.")})
    gen.set_state(tensors["generator"])
    shuffle_gen.set_state(tensors["shuffle_generator"])
    adam: dict[int, dict] = {}
    for k, v in tensors.items():
        if k.startswith("adam."):
            _, i, key = k.split(".", 2)
            adam.setdefault(int(i), {})[key] = v.reshape(()) if key == "step" else v.to(device)
    if adam:
        sd = opt.state_dict()
        sd["state"] = adam
        opt.load_state_dict(sd)
    state = {k: meta[k] for k in STATE_KEYS}
    state["best_score"] = meta["best_score"] if meta.get("best_score") is not None else -np.inf
    if "epoch_order" in tensors:
        state["order"] = tensors["epoch_order"].numpy()
    best = {k[5:]: v.to(device) for k, v in tensors.items() if k.startswith("best.")}
    return state, best
