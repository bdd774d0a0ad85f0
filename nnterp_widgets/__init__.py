"""nnterp-widgets: explore an LLM's internals from a notebook, answered by one vLLM engine."""
