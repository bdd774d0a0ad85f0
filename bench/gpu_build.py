"""Build a bench checkpoint on the GPU, in bfloat16: a real model's exact shape with seeded
random weights (`checkpoints.BENCH_SPECS`), too large to build on the CPU in float32.

    python bench/gpu_build.py llama3.1_8b /tmp/ckpt     # prints the folder

The same recipe as `checkpoints._build` (the local tokenizer padded to the vocabulary,
a norm's scale 1 + 0.1 noise, weights init_std * noise, biases 0.1 * noise), drawn from
one seeded CUDA generator per parameter in name order, then saved as safetensors.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path


def build(name: str, root: str, device: str = "cuda") -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from nnterp_widgets.checkpoints import BENCH_SPECS
    from nnterp_widgets.checkpoints.tokenizer import SPECIAL, save_tokenizer

    spec = BENCH_SPECS[name]
    folder = Path(root) / name
    done = folder / "built.json"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    fields = dict(spec.config)
    vocab = save_tokenizer(folder, fields.pop("vocab_size"))
    special = AutoTokenizer.from_pretrained(str(folder)).convert_tokens_to_ids(SPECIAL)
    config = AutoConfig.for_model(
        spec.model_type, vocab_size=vocab, bos_token_id=special, eos_token_id=special, pad_token_id=special, **fields
    )
    config.dtype = "bfloat16"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    generator = torch.Generator(device=device).manual_seed(spec.seed)
    with torch.no_grad():
        for pname, parameter in sorted(model.named_parameters()):
            noise = torch.randn(parameter.shape, generator=generator, device=device, dtype=torch.float32)
            if pname.endswith("bias"):
                parameter.copy_(0.1 * noise)
            elif parameter.dim() == 1:
                parameter.copy_(1.0 + 0.1 * noise)
            else:
                parameter.copy_(spec.init_std * noise)
    model.save_pretrained(str(folder), safe_serialization=True, max_shard_size="5GB")
    done.write_text(json.dumps({"spec": asdict(spec), "dtype": "bfloat16"}))
    del model
    torch.cuda.empty_cache()
    return folder


if __name__ == "__main__":
    start = time.monotonic()
    path = build(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "/tmp/bench-checkpoints")
    print(f"{path} built in {time.monotonic() - start:.0f} s", flush=True)
