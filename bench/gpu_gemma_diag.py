"""What Gemma 3 270M reads and answers on this machine (GPU run 10's diagnosis).

Prints the converted tokenizer's ids for the known prompt, the engine's prompt request (its
ids, the lens's top-1 at the last position by layer, with and without BOS) and transformers'
own top-3 (float32, eager) on the same ids. Run after `bench/gpu_gemma.sh run` on the
device, with ``/tmp/site-extra`` on ``PYTHONPATH``, or here with the gemma extra::

    python3 bench/gpu_gemma_diag.py
"""

from __future__ import annotations

import importlib


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nnterp_widgets.session import Session

    provider = importlib.import_module("nnterp_widgets.checkpoints.trained")
    gemma = provider.GEMMA3
    prompt, _ = gemma.known_answer
    path = str(provider.trained(gemma.name))
    session = Session.open(path, progress=False, dtype="float32", gpu_memory_utilization=0.3, max_model_len=256)
    session = session.wait()
    tokenizer = session.tokenizer()
    print("tokenizer", type(tokenizer).__name__, "bos", tokenizer.bos_token_id, "ids", tokenizer(prompt).input_ids)
    result = session.prompt(prompt).result()
    ids = list(result.tokens.ids)
    print("request ids", ids)
    print("lens top-1 by layer", [row[-1][0] for row in result.lens.top_texts])
    for bos in (True, False):
        print("bos", bos, "top-3", session.prompt(prompt, bos=bos).result().lens.top_texts[-1][-1][:3])
    session.close()

    reference_tokenizer = AutoTokenizer.from_pretrained(path)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").to(device)
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=device)).logits[0, -1]
    print("transformers top-3", [reference_tokenizer.decode([i]) for i in logits.topk(3).indices.tolist()])


if __name__ == "__main__":
    main()
