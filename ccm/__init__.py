"""ccm: Cognitive Context Management.

Every word of a conversation is kept in an append-only log; what the model is
given stays small. This package is the importable core; `ccm.cli` is a thin shell.
"""

__version__ = "0.1.0"

# the embedding models of hybrid recall (`recall.model`; see ccm.semantic), default first
EMBEDDING_MODELS = ("e5-small", "minilm")
