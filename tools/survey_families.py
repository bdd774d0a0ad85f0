#!/usr/bin/env python
"""Survey which model families vLLM's CPU backend runs, on the tiny local checkpoints.

    python tools/survey_families.py                 # every family (nnterp_widgets/families/vllm/)
    python tools/survey_families.py gemma2 falcon   # only these; the others keep their results

For each family: build its tiny checkpoint (``nnterp_widgets.checkpoints``), run the
prompt in transformers (eager attention, float32), then run the same token ids in
plain vLLM on CPU, in a subprocess of its own (one engine at a time; a failure or a
crash there does not stop the survey). The vLLM subprocess keeps the model in-process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and records what the explorer needs to know of
the torch module: the decoder layer, its forward and what it returns, the attention and
MLP submodules, the activation, the tie of lm_head and the logits processor.

Results go to ``docs/families_survey.json`` (raw, merged with what is there) and
``docs/families_survey.md`` (written from the whole JSON). The engine logs go to
``$TMPDIR/families_survey/<family>.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
JSON_PATH = DOCS / "families_survey.json"
MD_PATH = DOCS / "families_survey.md"
LOG_DIR = Path(tempfile.gettempdir()) / "families_survey"

PROMPT = "The Eiffel Tower is in"
TOP = 5
#: Per family, for the vLLM subprocess (the engine starts in ~40 s on 2 cores).
TIMEOUT_S = 900


VLLM_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}

sys.path.insert(0, str(ROOT))


def family_names() -> list[str]:
    """Every family with a tiny checkpoint: the family modules' own declarations."""
    from nnterp_widgets.checkpoints import specs

    return list(specs())


# --------------------------------------------------------------------------- transformers


def run_transformers(name: str) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nnterp_widgets.checkpoints import checkpoint, specs

    spec = specs()[name]
    out: dict = {
        "spec": {"model_type": spec.model_type, "config": spec.config, "init_std": spec.init_std, "seed": spec.seed}
    }
    path = checkpoint(name)
    out["path"] = str(path)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    ids = tokenizer(PROMPT).input_ids
    out["token_ids"] = ids
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, attn_implementation="eager")
    model.eval()
    out["class"] = type(model).__name__
    out["architectures"] = list(getattr(model.config, "architectures", None) or [])
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    top = torch.topk(logprobs, TOP)
    greedy = int(logits.argmax())
    out.update(
        finite=bool(torch.isfinite(logits).all()),
        greedy=greedy,
        greedy_text=tokenizer.decode([greedy]),
        logit_absmax=float(logits.abs().max()),
        top=[[int(i), float(v)] for i, v in zip(top.indices, top.values, strict=True)],
        logprobs=logprobs.tolist(),  # dropped before writing; used for the comparison
    )
    # A second transformers reference, for telling a transformers eager quirk from a
    # vLLM one: the same weights under SDPA attention.
    try:
        sdpa = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, attn_implementation="sdpa")
        with torch.no_grad():
            sdpa_logits = sdpa(torch.tensor([ids])).logits[0, -1].float()
        out["sdpa_greedy"] = int(sdpa_logits.argmax())
        out["sdpa_logprobs"] = torch.log_softmax(sdpa_logits, dim=-1).tolist()
        out["sdpa_vs_eager_max_abs_logprob_diff"] = float((torch.log_softmax(sdpa_logits, -1) - logprobs).abs().max())
    except Exception as error:  # noqa: BLE001
        out["sdpa_error"] = f"{type(error).__name__}: {error}"
    # Does the sliding window bite on this prompt? The same weights with it off.
    if spec.config.get("sliding_window"):
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(path))
        config.sliding_window = 1 << 20
        wide = AutoModelForCausalLM.from_pretrained(
            str(path), config=config, dtype=torch.float32, attn_implementation="eager"
        )
        with torch.no_grad():
            wide_logits = wide(torch.tensor([ids])).logits[0, -1].float()
        out["window_off_max_abs_logit_change"] = float((wide_logits - logits).abs().max())
        out["window_off_greedy"] = int(wide_logits.argmax())
    return out


# --------------------------------------------------------------------------- vLLM worker


def _trim_tree(text: str) -> str:
    """``print(model)`` cut after the first decoder layer (the others are elided)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"^\s*\((0|0-\d+)\): ", line)), None)
    if start is None:
        return text
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and not (len(lines[end]) - len(lines[end].lstrip()) == indent and lines[end].strip() == ")"):
        end += 1
    # Skip the following layers, up to the ModuleList's closing bracket.
    rest = end + 1
    skipped = 0
    while rest < len(lines) and len(lines[rest]) - len(lines[rest].lstrip()) >= indent:
        if re.match(r"^\s*\(\d+(-\d+)?\): ", lines[rest]) and (len(lines[rest]) - len(lines[rest].lstrip()) == indent):
            skipped += 1
        rest += 1
    elided = [" " * indent + f"... ({skipped} more layer entries trimmed)"] if skipped else []
    return "\n".join(lines[: end + 1] + elided + lines[rest:])


def _describe(value) -> object:
    """A module output's structure: tensors as their shape."""
    import torch

    if isinstance(value, torch.Tensor):
        return f"Tensor{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return [_describe(v) for v in value]
    if value is None:
        return None
    return type(value).__name__


def _qualname(obj) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _find_layers(model, n_layers: int):
    import torch

    best = None
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.ModuleList) or "expert" in name.lower():
            continue
        if len(module) != n_layers:
            continue
        score = 2 if re.search(r"(^|\.)(layers|h|blocks|decoder_layers)$", name) else 1
        if best is None or score > best[0]:
            best = (score, name, module)
    return (best[1], best[2]) if best else (None, None)


_ATTN = re.compile(r"attn|attention", re.I)
_MLP = re.compile(r"mlp|feed_forward|ffn|moe|experts", re.I)
_NORM = re.compile(r"norm|dropout|(^|_)ln", re.I)
_MOE_CLASS = re.compile(r"(FusedMoE|SparseMoe\w*|MoE|Moe|MoeBlock)$")


def _is_attention(name: str) -> bool:
    return bool(_ATTN.search(name)) and not _NORM.search(name)


def _is_mlp(name: str) -> bool:
    return bool(_MLP.search(name)) and not _NORM.search(name) and not _ATTN.search(name)


_ACT = re.compile(r"act|gelu|silu|swish|relu|tanh|mul\b", re.I)


def _layer_info(layer) -> dict:
    import torch

    children = {name: _qualname(child) for name, child in layer.named_children()}
    info: dict = {
        "class": _qualname(layer),
        "children": children,
        "attention": {n: c for n, c in children.items() if _is_attention(n)},
        "mlp": {n: c for n, c in children.items() if _is_mlp(n)},
    }
    activations = {}
    moe = {}
    attention_impls = {}
    for name, module in layer.named_modules():
        cls = type(module)
        if name and (
            "activation" in cls.__module__
            or (
                _ACT.search(cls.__name__)
                and not isinstance(module, torch.nn.Linear)
                and not list(module.children())
                and "Norm" not in cls.__name__
                and "Attention" not in cls.__name__
            )
        ):
            activations[name] = _qualname(module)
        if (
            name
            and (_MOE_CLASS.search(cls.__name__) or hasattr(module, "global_num_experts"))
            and "Method" not in cls.__name__
        ):
            entry = {"class": _qualname(module)}
            for attr in (
                "activation",
                "top_k",
                "global_num_experts",
                "renormalize",
                "scoring_func",
                "routed_scaling_factor",
                "use_grouped_topk",
            ):
                if hasattr(module, attr):
                    entry[attr] = repr(getattr(module, attr))
            config = getattr(module, "moe_config", None)
            if config is not None and hasattr(config, "activation"):
                entry["moe_config.activation"] = repr(config.activation)
            moe[name] = entry
            if "activation" in entry:
                activations[name + " (fused experts)"] = entry["activation"]
        impl = getattr(module, "impl", None)
        if impl is not None and hasattr(impl, "scale"):
            entry = {"class": _qualname(module), "impl": _qualname(impl)}
            for attr in (
                "head_size",
                "num_heads",
                "num_kv_heads",
                "scale",
                "sliding_window",
                "logits_soft_cap",
                "kv_lora_rank",
            ):
                if hasattr(impl, attr):
                    v = getattr(impl, attr)
                    entry[attr] = v if isinstance(v, (int, float, type(None))) else repr(v)
            slopes = getattr(impl, "alibi_slopes", None)
            entry["alibi"] = slopes is not None
            if slopes is not None:
                entry["alibi_slopes"] = [round(float(s), 6) for s in slopes]
            attention_impls[name] = entry
    info["activations"] = activations
    info["moe"] = moe
    info["attention_impls"] = attention_impls
    return info


def vllm_worker(name: str, ids: list[int], out_path: Path) -> None:
    """Run in its own process: one engine, then write what was found as JSON."""
    import inspect

    out: dict = {"ok": False, "stage": "import"}

    def dump():
        out_path.write_text(json.dumps(out, indent=1, default=repr))

    try:
        import torch  # noqa: F401 - the survey needs it installed
        import vllm

        from nnterp_widgets.checkpoints import checkpoint

        path = checkpoint(name)
        out["stage"] = "engine"
        started = time.time()
        llm = vllm.LLM(
            str(path),
            dtype="float32",
            enforce_eager=True,
            max_model_len=512,
            gpu_memory_utilization=0.3,
        )
        out["engine_start_s"] = round(time.time() - started, 1)
        out["stage"] = "inspect"
        model = llm.llm_engine.model_executor.driver_worker.worker.model_runner.model
        out["model_path"] = "llm.llm_engine.model_executor.driver_worker.worker.model_runner.model"
        out["model_class"] = _qualname(model)
        hf_config = llm.llm_engine.model_config.hf_config
        text_config = getattr(hf_config, "text_config", None) or hf_config
        n_layers = getattr(text_config, "num_hidden_layers", None) or text_config.n_layer
        out["tree"] = _trim_tree(str(model))
        layers_name, layers = _find_layers(model, n_layers)
        out["layers_path"] = layers_name
        hooks = []
        seen: dict = {}
        if layers is not None:
            layer = layers[0]
            out["layers"] = [_layer_info(layer) for layer in layers]
            forward = type(layer).forward
            out["forward_signature"] = str(inspect.signature(forward))
            try:
                source = inspect.getsource(forward)
            except (OSError, TypeError) as error:
                source = f"<no source: {error!r}>"
            out["forward_source"] = source
            out["forward_returns"] = [line.strip() for line in source.splitlines() if line.strip().startswith("return")]

            def hook(key):
                def record(module, args, kwargs, output):
                    if key not in seen:
                        seen[key] = {
                            "args": _describe(list(args)),
                            "kwargs": {k: _describe(v) for k, v in kwargs.items()},
                            "output": _describe(output),
                        }

                return record

            for index, each in enumerate(layers):
                hooks.append(each.register_forward_hook(hook(f"layer{index}"), with_kwargs=True))
                for child_name, child in each.named_children():
                    if _is_attention(child_name) or _is_mlp(child_name):
                        hooks.append(child.register_forward_hook(hook(f"layer{index}.{child_name}"), with_kwargs=True))
        # Tie: the lm_head's weight is the input embedding's.
        lm_head = getattr(model, "lm_head", None)
        embedding = None
        for mod_name, module in model.named_modules():
            cls = type(module).__name__
            if cls in ("VocabParallelEmbedding", "Embedding") and re.search(r"embed|wte|word_embeddings", mod_name):
                embedding = (mod_name, module)
                break
        tie: dict = {
            "lm_head": _qualname(lm_head) if lm_head is not None else None,
            "embedding": embedding[0] if embedding else None,
        }
        if lm_head is not None and embedding is not None:
            w1 = getattr(lm_head, "weight", None)
            w2 = getattr(embedding[1], "weight", None)
            tie["tied"] = bool(
                lm_head is embedding[1] or (w1 is not None and w2 is not None and w1.data_ptr() == w2.data_ptr())
            )
        if lm_head is None and embedding is not None:
            # No lm_head module: compute_logits reads the embedding (Gemma 2 does this).
            source = inspect.getsource(type(model).compute_logits)
            tie["tied"] = "embed_tokens" in source or "wte" in source
            tie["note"] = "no lm_head module; compute_logits uses the input embedding"
        out["tie"] = tie
        processors = [m for m in model.modules() if type(m).__name__ == "LogitsProcessor"]
        if processors:
            lp = processors[0]
            out["logits_processor"] = {
                "class": _qualname(lp),
                "scale": getattr(lp, "scale", None),
                "soft_cap": getattr(lp, "soft_cap", None),
            }
        dump()  # what was found so far survives a crash in generate
        out["stage"] = "generate"
        params = vllm.SamplingParams(temperature=0, max_tokens=1, logprobs=TOP)
        result = llm.generate([{"prompt_token_ids": ids}], params)[0]
        for each in hooks:
            each.remove()
        completion = result.outputs[0]
        out["greedy"] = int(completion.token_ids[0])
        out["greedy_text"] = completion.text
        out["prompt_token_ids"] = list(result.prompt_token_ids)
        out["logprobs"] = {str(token): float(lp.logprob) for token, lp in completion.logprobs[0].items()}
        out["hook_io"] = seen
        out["ok"] = True
        out["stage"] = "done"
    except BaseException as error:  # noqa: BLE001 - the survey records whatever the engine raises
        out["error"] = f"{type(error).__name__}: {error}"
        out["traceback"] = traceback.format_exc()
    dump()


# --------------------------------------------------------------------------- driver


_KEY_LINE = re.compile(r"(Error|ERROR|error:|Exception|raise |assert|not supported|Unsupported|NotImplemented)")


def _key_lines(log: str, limit: int = 12) -> list[str]:
    keep = []
    for line in log.splitlines():
        if _KEY_LINE.search(line) and "FutureWarning" not in line and "warnings.warn" not in line:
            line = line.strip()
            if line and line not in keep:
                keep.append(line)
    return keep[-limit:]


def run_vllm(name: str, ids: list[int]) -> dict:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{name}.log"
    out_path = LOG_DIR / f"{name}.json"
    out_path.unlink(missing_ok=True)
    env = dict(os.environ, **VLLM_ENV)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--vllm-worker",
        name,
        "--ids",
        json.dumps(ids),
        "--out",
        str(out_path),
    ]
    started = time.time()
    with open(log_path, "w") as log:
        try:
            rc = subprocess.run(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=TIMEOUT_S, cwd=str(ROOT)
            ).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    result = json.loads(out_path.read_text()) if out_path.exists() else {"ok": False}
    result["returncode"] = rc
    result["wall_s"] = round(time.time() - started, 1)
    result["log"] = str(log_path)
    log_text = log_path.read_text(errors="replace")
    if not result.get("ok"):
        if "error" not in result:
            tail = [line for line in log_text.splitlines() if line.strip()][-1:]
            result["error"] = f"process ended with {rc} before reporting" + (
                f"; last line: {tail[0].strip()}" if tail else ""
            )
        result["key_lines"] = _key_lines(log_text)
        result["log_tail"] = log_text.splitlines()[-40:]
    arch = re.search(r"Resolved architecture: (\S+)", log_text)
    result["resolved_architecture"] = arch.group(1) if arch else None
    backends = sorted(set(re.findall(r"Using (\S+) backend", log_text)))
    result["backends_logged"] = backends
    return result


def compare(hf: dict, vl: dict) -> dict:
    if not (hf.get("ok") and vl.get("ok")):
        return {}
    hf_lp = hf["logprobs"]
    diffs = {token: abs(lp - hf_lp[int(token)]) for token, lp in vl["logprobs"].items()}
    vl_top = sorted(vl["logprobs"], key=lambda t: -vl["logprobs"][t])[:TOP]
    extra = {}
    if "sdpa_logprobs" in hf:
        sd = hf["sdpa_logprobs"]
        extra = {
            "sdpa_greedy_agrees": hf["sdpa_greedy"] == vl["greedy"],
            "sdpa_logprob_max_abs_diff": max(abs(lp - sd[int(token)]) for token, lp in vl["logprobs"].items()),
        }
    return {
        **extra,
        "greedy_agrees": hf["greedy"] == vl["greedy"],
        "logprob_max_abs_diff": max(diffs.values()),
        "top_ids_agree": [int(t) for t in vl_top] == [t for t, _ in hf["top"]],
        "same_prompt_ids": vl.get("prompt_token_ids") == hf.get("token_ids"),
    }


def survey(name: str) -> dict:
    print(f"== {name}", flush=True)
    entry: dict = {"family": name, "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        hf = run_transformers(name)
        hf["ok"] = True
    except Exception as error:  # noqa: BLE001
        hf = {"ok": False, "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
    print(
        f"   transformers: {'ok' if hf['ok'] else hf['error']}"
        + (f" greedy={hf['greedy']} finite={hf['finite']}" if hf["ok"] else ""),
        flush=True,
    )
    if hf["ok"]:
        vl = run_vllm(name, hf["token_ids"])
    else:
        vl = {"ok": False, "error": "not run: the transformers side failed"}
    print(
        f"   vLLM: {'RUNS greedy=' + str(vl['greedy']) if vl['ok'] else 'FAILS ' + vl['error'][:300]}"
        f" ({vl.get('wall_s')} s)",
        flush=True,
    )
    entry["comparison"] = compare(hf, vl)
    if entry["comparison"]:
        print(f"   {entry['comparison']}", flush=True)
    hf.pop("logprobs", None)
    hf.pop("sdpa_logprobs", None)
    entry["transformers"] = hf
    entry["vllm"] = vl
    return entry


# --------------------------------------------------------------------------- report


#: What the survey found that its numbers alone do not say (kept by hand, from the runs
#: of 2 Dec with vllm-cpu 0.32.0 / transformers 5.19; recheck them when either moves).
NOTES: dict[str, str] = {
    "mistral": "Same parameter names and seed as the llama spec, so the same weights and"
    " the same greedy token as llama: expected.",
    "gemma2": "Softcaps visible in vLLM: attention 50.0 is the CPU attention kernel's"
    " `logits_soft_cap`, final 30.0 is `LogitsProcessor.soft_cap`. Layer 0 slides"
    " (window 4), layer 1 is full. vLLM's Gemma2ForCausalLM has no `lm_head` module:"
    " `compute_logits` uses `model.embed_tokens`. The SDPA column is not a vLLM"
    " problem: transformers' SDPA path cannot apply the attention softcap (eager vs SDPA"
    " differ by 0.32 themselves); vLLM matches eager to 1e-5.",
    "gemma3_text": "layer_types [sliding, full]: layer 0's kernel has sliding_window 4,"
    " layer 1 -1; the window bites and vLLM agrees.",
    "phi3": "vLLM runs Phi-3 on its Llama classes (the layer is `LlamaDecoderLayer`).",
    "gpt_neox": "No native vLLM model: the registry maps GPTNeoXForCausalLM to the"
    " Transformers backend (`TransformersForCausalLM`), so the layer is transformers'"
    " `GPTNeoXLayer` (attention swapped for vLLM's), which returns a [1, T, hidden]"
    " tensor (batch dim kept). use_parallel_residual=True.",
    "gptj": "Native vLLM GPT-J (parallel block: attention and MLP read the same ln_1"
    " output). rotary_dim 16 of the head's 32. transformers' GPT-J has no SDPA path.",
    "phi": "Transformers backend, as gpt_neox (Phi's parallel block is transformers' code).",
    "falcon": "Falcon-7B's shape with ALiBi: alibi=True, new_decoder_architecture=False,"
    " multi_query=True, parallel_attn=True; vLLM's FalconAttention passes the slopes to the"
    " CPU kernel. First try with ffn_hidden_size=256 FAILED at weight loading"
    " (`RuntimeError: start (0) + length (512) exceeds dimension size (256).` in"
    " RowParallelLinear's loader): vLLM's FalconMLP is hard-wired to 4 x hidden and ignores"
    " ffn_hidden_size, so the spec uses 512. The eager gap (3.4e-2, top-5 order differs) is"
    " transformers' eager Falcon adding ALiBi twice (folded into the causal mask as"
    " alibi/sqrt(head_dim) by FalconModel, and again as (scores + alibi) * inv_norm_factor in"
    " FalconAttention); vLLM matches transformers' SDPA path to 2e-6.",
    "bloom": "ALiBi in the CPU kernel (alibi_slopes set). The 3.1e-4 gap is the MLP's GELU:"
    " vLLM's BloomMLP uses exact erf GELU (`get_act_fn(\"gelu\")`), transformers' Bloom the"
    " tanh approximation (`bloom_gelu_forward`); with transformers patched to exact GELU the"
    " gap is 2.9e-6. Bloom's MLP is always 4 x hidden (512); transformers' Bloom has no SDPA.",
    "mpt": "MPT was removed from vLLM in 0.28.0 (`_PREVIOUSLY_SUPPORTED_MODELS`). The spec"
    " (ALiBi, expansion_ratio 2) stays for the transformers side.",
    "olmo2": "Transformers backend, as gpt_neox; its MLP's act_fn is swapped for vLLM's SiluAndMul.",
    "olmo3": "Transformers backend; window 4 on layer 0 bites (turning it off changes the"
    " greedy token) and vLLM agrees.",
    "mixtral": "The layer's forward is annotated `-> torch.Tensor` but returns"
    " `(hidden_states, residual)`; trust the hook, not the annotation (also qwen2_moe,"
    " olmoe, deepseek). The experts are one fused module (no per-expert submodules, no"
    " activation module: the activation is an enum on the experts).",
    "qwen2_moe": "mlp_only_layers=[0]: layer 0 is a dense Qwen2MoeMLP, layer 1 the sparse"
    " block with its shared expert.",
    "qwen3_moe": "mlp_only_layers=[0] as qwen2_moe; norm_topk_prob=True.",
    "deepseek_v2": "MLA (q_lora_rank None, as V2-Lite); layer 0 dense, layer 1 MoE"
    " (first_k_dense_replace=1). Two spec changes were needed. (1) vLLM's MLA serves only"
    " kv_lora_rank + qk_rope_head_dim in {320, 512, 576} (MLACommonBackend) and the CPU MLA"
    " backend only 576: kv_lora_rank 32 + rope 16 FAILED at the first forward with"
    " `ValueError: Head dimension 48 is not supported by MLA.`, so the spec uses DeepSeek's"
    " 512 + 64. (2) With plain RoPE (rope_type default) the engine then RAN BUT DISAGREED"
    " (v2: greedy 9 vs 621, max |Δ logprob| 3.2; v3: 210 vs 553, 2.0). Layer 0's attention"
    " output equalled transformers' with RoPE removed (diff < 5e-4 at every position): the"
    " CPU `ops.rotary_embedding` behind RotaryEmbedding.forward_cpu does not rotate MLA's 3-D"
    " q_pe / k_pe views (a standalone call on a [T, heads, 64] query gives wrong values; the"
    " 2-D [T, heads*head] layout the other families pass is right). With YaRN, as DeepSeek's"
    " own configs have it, vLLM uses DeepseekScalingRotaryEmbedding (a PyTorch path) and"
    " both versions agree to 1e-5, so the spec uses YaRN. A DeepSeek config with plain RoPE"
    " is silently wrong on vLLM CPU.",
    "deepseek_v3": "As deepseek_v2 (same spec changes and the same silent RoPE problem"
    " without YaRN), plus q_lora_rank 64, sigmoid scoring with e_score_correction_bias"
    " (topk_method noaux_tc), norm_topk_prob, routed_scaling_factor 2.5. vLLM runs it on the"
    " DeepseekV2 classes (`DeepseekV2DecoderLayer`).",
}

#: The survey's headline findings, shown above the table.
FINDINGS = [
    "All families but mpt run (mpt: removed from vLLM in 0.28.0). Every running family's"
    " greedy token agrees with transformers, and the logprobs agree to ~1e-5, after the"
    " spec changes below and once two transformers-side differences are accounted for.",
    "Spec changes forced by vLLM: falcon ffn_hidden_size = 4 x hidden (vLLM ignores the"
    " field); deepseek kv_lora_rank 512 + qk_rope_head_dim 64 (the only MLA size the CPU"
    " backend serves) and YaRN RoPE (with plain RoPE vLLM CPU silently skips MLA's rotary:"
    " wrong tokens, no error).",
    "Gaps that are not vLLM's: falcon (transformers' eager path adds ALiBi twice; vLLM"
    " matches transformers' SDPA), bloom (exact vs tanh GELU, 3e-4), gemma2's SDPA column"
    " (SDPA cannot softcap).",
    "Return conventions: vLLM-native decoder layers return (hidden_states, residual)"
    " except gpt2, gptj, falcon and bloom (one [T, hidden] tensor). gpt_neox, phi, olmo2 and"
    " olmo3 have no native vLLM model and run on the Transformers backend: their layers are"
    " transformers' classes returning one [1, T, hidden] tensor.",
    "Several MoE layers (mixtral, qwen2_moe, olmoe, deepseek) are annotated `-> torch.Tensor`"
    " but return a pair. MoE experts are one fused module in vLLM; the activation is an enum"
    " on it, not a module.",
]


def _status(entry: dict) -> str:
    vl = entry["vllm"]
    if vl.get("ok"):
        return "RUNS"
    return "FAILS: " + _short_error(vl.get("error", "?"))


def _no_machine_paths(text: str) -> str:
    """A traceback line without this machine's folders (the docs are read elsewhere)."""
    import site
    import sysconfig

    for folder in {sysconfig.get_paths()["purelib"], *site.getsitepackages()}:
        text = text.replace(folder, "<site-packages>")
    return text.replace(str(Path(__file__).resolve().parents[1]), "<repo>")


def _short_error(error: str, limit: int = 300) -> str:
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    # pydantic puts the engine's own message on a later line ("Value error, ...").
    for line in lines[1:]:
        if line.startswith("Value error,"):
            error = f"{lines[0].split(':')[0]}: {line.split('[type=')[0].strip()}"
            break
    error = " ".join(error.split())
    return error if len(error) <= limit else error[: limit - 3] + "..."


def _returns(entry: dict) -> str:
    io = entry["vllm"].get("hook_io", {}).get("layer0")
    if not io:
        return "—"
    output = io["output"]
    if isinstance(output, list):
        return f"tuple of {len(output)}: {output}"
    return f"single {output}"


def _md_table(entries: list[dict]) -> list[str]:
    rows = [
        "| family | vLLM | vLLM class | layer class | layer returns | greedy HF / vLLM"
        " | max abs Δ logprob (eager) | (sdpa) | tied | final softcap |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        vl, hf, cmp_ = e["vllm"], e["transformers"], e["comparison"]
        status = "RUNS" if vl.get("ok") else "FAILS"
        layer = (vl.get("layers") or [{}])[0].get("class", "—").rsplit(".", 1)[-1]
        model_class = (vl.get("model_class") or "—").rsplit(".", 1)[-1]
        ret = _returns(e)
        ret = "pair" if ret.startswith("tuple of 2") else ("tensor" if ret.startswith("single") else ret[:20])
        greedy = f"{hf.get('greedy', '—')} / {vl.get('greedy', '—')}"
        if cmp_:
            greedy += " ✓" if cmp_["greedy_agrees"] else " ✗"
        diff = f"{cmp_['logprob_max_abs_diff']:.2e}" if cmp_ else "—"
        sdiff = f"{cmp_['sdpa_logprob_max_abs_diff']:.2e}" if "sdpa_logprob_max_abs_diff" in cmp_ else "—"
        tied = vl.get("tie", {}).get("tied", "—")
        lp = vl.get("logits_processor") or {}
        soft = lp.get("soft_cap", "—") if lp else "—"
        rows.append(
            f"| {e['family']} | {status} | {model_class} | {layer} | {ret} | {greedy} | {diff} | {sdiff} | {tied} | {soft} |"
        )
    return rows


def write_docs(results: dict) -> None:
    DOCS.mkdir(exist_ok=True)
    JSON_PATH.write_text(json.dumps(results, indent=1, default=repr) + "\n")
    names = family_names()
    order = [f for f in names if f in results] + [f for f in results if f not in names]
    entries = [results[f] for f in order]
    from importlib.metadata import version

    md = [
        "# Model families on vLLM's CPU backend",
        "",
        "Written by `tools/survey_families.py` (rerun it to refresh; raw results in",
        "`docs/families_survey.json`). Each family runs its tiny checkpoint from",
        "`nnterp_widgets/checkpoints/specs.py` (hidden 128, 2 layers, float32, seeded",
        f"random weights) on the prompt {PROMPT!r}: once in transformers (eager attention),",
        "once in plain vLLM on CPU (`enforce_eager=True`, `max_model_len=512`, one engine",
        "per subprocess, `VLLM_ENABLE_V1_MULTIPROCESSING=0`), on the same token ids.",
        "",
        f"Versions: vllm-cpu {version('vllm-cpu')}, transformers {version('transformers')}, torch {version('torch')}.",
        "",
        "The vLLM torch module is at",
        "`llm.llm_engine.model_executor.driver_worker.worker.model_runner.model`.",
        "'max |Δ logprob|' is over vLLM's top-5 logprobs against transformers' log_softmax",
        "of the last position. 'layer returns' is what a forward hook on the first decoder",
        "layer saw during the vLLM run ('pair' = `(hidden_states, residual)`).",
        "",
        "## Findings",
        "",
        *[f"- {finding}" for finding in FINDINGS],
        "",
        "## Summary",
        "",
        *_md_table(entries),
        "",
    ]
    for e in entries:
        md += _md_section(e)
    MD_PATH.write_text("\n".join(md) + "\n")


def _md_section(e: dict) -> list[str]:
    hf, vl, cmp_ = e["transformers"], e["vllm"], e["comparison"]
    spec = hf.get("spec") or {}
    lines = [f"## {e['family']}", "", f"**Status: {_status(e)}**", ""]
    if e["family"] in NOTES:
        lines += [f"> {NOTES[e['family']]}", ""]
    if spec:
        lines += [f"- spec: `{spec.get('model_type')}` with `{json.dumps(spec.get('config'))}`"]
    if hf.get("ok"):
        lines += [
            f"- transformers: `{hf['class']}`, greedy {hf['greedy']} ({hf['greedy_text']!r}),"
            f" logits finite: {hf['finite']}, |logit| max {hf['logit_absmax']:.2f}"
        ]
    else:
        lines += [f"- transformers FAILS: `{_short_error(hf.get('error', '?'))}`"]
    if vl.get("resolved_architecture"):
        lines += [
            f"- vLLM resolved architecture: `{vl['resolved_architecture']}`; model class `{vl.get('model_class', '?')}`"
        ]
    if cmp_:
        lines += [
            f"- greedy: transformers {hf['greedy']}, vLLM {vl['greedy']}"
            f" → {'agree' if cmp_['greedy_agrees'] else '**DISAGREE**'};"
            f" top-5 ids in the same order: {cmp_['top_ids_agree']};"
            f" max |Δ logprob| over vLLM's top-5: {cmp_['logprob_max_abs_diff']:.3e}"
        ]
        if "sdpa_logprob_max_abs_diff" in cmp_:
            lines += [
                f"- against transformers with SDPA attention: greedy {hf['sdpa_greedy']}"
                f" ({'agrees' if cmp_['sdpa_greedy_agrees'] else 'disagrees'} with vLLM),"
                f" max |Δ logprob| {cmp_['sdpa_logprob_max_abs_diff']:.3e}"
                f" (transformers eager vs SDPA: {hf['sdpa_vs_eager_max_abs_logprob_diff']:.3e})"
            ]
    if "window_off_max_abs_logit_change" in hf:
        lines += [
            f"- sliding window bites on this prompt: turning it off in transformers changes"
            f" the last logits by up to {hf['window_off_max_abs_logit_change']:.3f}"
            f" (greedy {hf['greedy']} → {hf['window_off_greedy']})"
        ]
    if not vl.get("ok"):
        lines += ["", "Engine error (last exception line):", "", "```", _short_error(vl.get("error", "?"), 2000), "```"]
        key = vl.get("key_lines") or []
        if key:
            lines += ["", "Key lines of the engine log:", "", "```", *key, "```"]
        tb = vl.get("traceback")
        if tb:
            tail = [_no_machine_paths(line) for line in tb.strip().splitlines()[-14:]]
            lines += ["", "Traceback (tail):", "", "```", *tail, "```"]
    if vl.get("layers"):
        first = vl["layers"][0]
        lines += [
            f"- decoder layers: `{vl.get('layers_path')}`, class `{first['class']}`",
            f"- forward signature: `forward{vl.get('forward_signature', '?')}`",
            "- forward's return statements: " + ", ".join(f"`{r}`" for r in vl.get("forward_returns", [])),
            f"- layer 0 output seen by a hook: {_returns(e)}",
        ]
        io = vl.get("hook_io") or {}
        for index, layer in enumerate(vl["layers"]):
            attn = ", ".join(f"`{n}`: `{c}`" for n, c in layer["attention"].items()) or "—"
            mlp = ", ".join(f"`{n}`: `{c}`" for n, c in layer["mlp"].items()) or "—"
            acts = ", ".join(f"`{n}`: `{c}`" for n, c in layer["activations"].items()) or "—"
            lines += [f"- layer {index}: attention {attn}; MLP {mlp}; activation {acts}"]
            for n, impl in layer.get("attention_impls", {}).items():
                bits = {k: v for k, v in impl.items() if k not in ("class", "alibi_slopes")}
                lines += [f"  - attention kernel `{n}`: `{json.dumps(bits, default=repr)}`"]
            for n, moe in layer.get("moe", {}).items():
                lines += [f"  - MoE `{n}`: `{json.dumps(moe)}`"]
            key = f"layer{index}"
            if key in io:
                lines += [
                    f"  - called with args {io[key]['args']}, kwargs {io[key]['kwargs']}; output {io[key]['output']}"
                ]
            for sub in sorted(k for k in io if k.startswith(key + ".")):
                lines += [f"  - `{sub[len(key) + 1 :]}` output: {io[sub]['output']}"]
    if vl.get("tie"):
        lines += [
            f"- lm_head `{vl['tie'].get('lm_head')}`, embedding `{vl['tie'].get('embedding')}`,"
            f" tied: {vl['tie'].get('tied')}"
            f" (config tie_word_embeddings: {spec.get('config', {}).get('tie_word_embeddings')})"
        ]
    if vl.get("logits_processor"):
        lp = vl["logits_processor"]
        lines += [f"- LogitsProcessor: scale {lp.get('scale')}, soft_cap {lp.get('soft_cap')}"]
    if vl.get("tree"):
        lines += [
            "",
            "<details><summary>module tree (first decoder layer)</summary>",
            "",
            "```",
            vl["tree"],
            "```",
            "",
            "</details>",
        ]
    lines += [""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help="default: every family")
    parser.add_argument("--vllm-worker", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--docs-only", action="store_true", help="rewrite the .md from the .json")
    args = parser.parse_args()
    if args.vllm_worker:
        vllm_worker(args.vllm_worker, json.loads(args.ids), Path(args.out))
        return
    results = json.loads(JSON_PATH.read_text()) if JSON_PATH.exists() else {}
    if not args.docs_only:
        for name in args.families or family_names():
            results[name] = survey(name)
            write_docs(results)  # after each family, so a long run can be read as it goes
    write_docs(results)


if __name__ == "__main__":
    main()
