"""The model's root values: which it serves and which vLLM cannot, with the reasons.

The engine's root (`StandardizedVLLM`) serves them; the reasons live here, below the
families, so the families' table can name them without importing the engine.
"""

#: Why there is no ``lm_head_output`` on vLLM.
LM_HEAD = (
    "vLLM never calls lm_head: its logits processor projects with lm_head's weight and "
    "applies any softcap and scale in the same call, on the last position only; read logits"
)
#: Why there is no ``attention_mask`` on vLLM.
NO_MASK = "a vLLM request is one unpadded sequence; there is no mask"
#: Root value names, in ``support()`` order.
ROOT_VALUES = (
    "token_embeddings",
    "input_ids",
    "input_size",
    "logits",
    "next_token_probs",
    "lm_head_output",
    "attention_mask",
)
ROOT_UNAVAILABLE = {"lm_head_output": LM_HEAD, "attention_mask": NO_MASK}
