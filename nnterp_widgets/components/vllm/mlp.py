"""The MLP block: ``mlp_output``, ``mlp_neurons`` and ``mlp_activation``."""

from __future__ import annotations

from .layer import StandardEnvoy, contribution_site, tensor_out, tensor_out_back
from .values import StandardValue, batched, first_arg, unbatched, with_first_arg

#: Why a gated MLP's ``mlp_activation`` is not served on vLLM.
GATED = (
    "a gated MLP on vLLM: act(gate) is never a module's output (gate_up_proj feeds act_fn, "
    "an act-and-multiply kernel, whose output is already act(gate) * up), so it is not "
    "served; mlp_neurons is the product"
)
#: Why a mixture of experts serves nothing inside ``mlp_output``.
ROUTED = "routed experts, inside vLLM's fused MoE kernel: there is no single activation or down projection"

#: The standard names an MLP block serves, in ``support()`` order.
MLP_VALUES = ("mlp_output", "mlp_neurons", "mlp_activation")


def _down_input(mlp) -> str:
    return f"{mlp.path}.{mlp.DOWN}.input"


def _neurons(mlp, raw):
    return batched(first_arg(raw))


def _neurons_back(mlp, raw, value):
    return with_first_arg(raw, unbatched(value, first_arg(raw)))


class MLP(StandardEnvoy):
    """A dense MLP; its neurons are the input of ``DOWN``, the down projection.

    Both neuron values are read there: vLLM builds one activation module by name and
    shares it between every block, so that module's output cannot tell blocks apart.
    """

    DOWN = "down_proj"

    mlp_output = StandardValue("mlp_output", contribution_site, tensor_out, tensor_out_back)
    mlp_neurons = StandardValue("mlp_neurons", _down_input, _neurons, _neurons_back)


class PlainMLP(MLP):
    """``act(up(x))`` then down: the activation is the neurons, the same tensor."""

    mlp_activation = StandardValue("mlp_activation", _down_input, _neurons, _neurons_back)


class GatedMLP(MLP):
    """``act(gate(x)) * up(x)`` in one fused kernel: only the product is a tensor."""

    UNAVAILABLE = {"mlp_activation": GATED}
    mlp_activation = StandardValue("mlp_activation", _down_input, _neurons, _neurons_back)


class RoutedMLP(StandardEnvoy):
    """A mixture of experts: its output only."""

    UNAVAILABLE = {"mlp_neurons": ROUTED, "mlp_activation": ROUTED}
    mlp_output = StandardValue("mlp_output", contribution_site, tensor_out, tensor_out_back)
    mlp_neurons = StandardValue("mlp_neurons", contribution_site, tensor_out)
    mlp_activation = StandardValue("mlp_activation", contribution_site, tensor_out)
