"""The seed's reason strings and messages, verbatim: the contract the tests hold the engine to."""

SEED_LM_HEAD = (
    "vLLM never calls lm_head: its logits processor projects with lm_head's weight and "
    "applies any softcap and scale in the same call, on the last position only; read logits"
)

SEED_NO_MASK = "a vLLM request is one unpadded sequence; there is no mask"

SEED_GATED = (
    "a gated MLP on vLLM: act(gate) is never a module's output (gate_up_proj feeds act_fn, "
    "an act-and-multiply kernel, whose output is already act(gate) * up), so it is not "
    "served; mlp_neurons is the product"
)

SEED_ROUTED = "routed experts, inside vLLM's fused MoE kernel: there is no single activation or down projection"

SEED_LATENT = (
    "vLLM runs DeepSeek's latent attention in its own kernel, on compressed keys and values; not mapped on vLLM"
)

SEED_PROBS = (
    "AttributeError: next_token_probs is derived from the logits and cannot be assigned; assign model.logits instead"
)

SEED_DECODE = (
    "recomputed from this step's queries and keys, and on a decode step the earlier tokens' "
    "keys are in vLLM's cache, which only its kernel reads; read it on the prefill"
)
