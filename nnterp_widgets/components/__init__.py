"""What the engine is built from: vLLM's modules wrapped with nnterp's standard names."""


def module_of(envoy):
    """The torch module behind an nnsight envoy: nnsight keeps it as ``_module``, the one
    handle it gives, so it is read here and nowhere else."""
    return envoy._module  # noqa: SLF001 - nnsight's envoy holds its module there
