"""Replay buffers as pytrees of tensors: pure functions, storage written in place.

buf = buffers.init(example, capacity=100_000, prioritized=True)
buf = buffers.add(buf, batch)                         # leaves [n, ...]
batch, info = buffers.sample(buf, key, 256)           # info["index"], info["weight"]
buf = buffers.update_priorities(buf, info["index"], td_error.abs())
windows, info = buffers.sample_sequences(buf, key, 32, 16)  # [32, 16, ...], is_init
buffers.save(buf, "run/buffer"); buf = buffers.load("run/buffer")
"""

from fxrl.buffers.core import Buffer, add, init, sample
from fxrl.buffers.io import load, save
from fxrl.buffers.prioritized import update_priorities
from fxrl.buffers.sequences import sample_sequences

__all__ = [
    "Buffer",
    "add",
    "init",
    "load",
    "sample",
    "sample_sequences",
    "save",
    "update_priorities",
]
