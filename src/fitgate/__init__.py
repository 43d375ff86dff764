"""fitgate: plan vLLM's per-GPU memory before a deployment reaches a GPU."""

__version__ = "0.1.0"
