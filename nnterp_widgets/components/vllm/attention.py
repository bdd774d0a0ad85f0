"""The attention block: ``attention_output``, its contribution to the stream."""

from __future__ import annotations

from .layer import StandardEnvoy, _output, _tensor_out, _tensor_out_back
from .values import StandardValue

#: The standard names an attention block serves, in ``support()`` order.
ATTENTION_VALUES = ("attention_output",)


class Attention(StandardEnvoy):
    """A block's self-attention, output after its output projection."""

    attention_output = StandardValue("attention_output", _output, _tensor_out, _tensor_out_back)
