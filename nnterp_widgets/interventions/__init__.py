"""The causal tools: what changes when the run is changed. One module per intervention,
its engine-side function beside its result type, on top of the questions of
`nnterp_widgets.requests` (their checks, the lens, generation):

    from nnterp_widgets.interventions import patch, PatchResult
    sweep = patch(model, clean, corrupted, " Paris", " Rome")   # on an engine; a script asks
                                                               # session.patch(...): a Job

Head ablation (`ablation`), activation patching and a pair's lens (`patching`), steering
(`steering`), branching a generation (`branching`) and occlusion (`occlusion`). Each long
one runs in chunks and reports to its ``progress`` (`requests.progress`).
"""

from .ablation import ablation
from .branching import BranchResult, branch
from .occlusion import Occlusion, occlude
from .patching import METRICS, NOISE, PairLens, PatchResult, compare, patch
from .steering import SteerResult, SteeringError, steer, steer_each, steering_vector

__all__ = [
    "METRICS",
    "NOISE",
    "BranchResult",
    "Occlusion",
    "PairLens",
    "PatchResult",
    "SteerResult",
    "SteeringError",
    "ablation",
    "branch",
    "compare",
    "occlude",
    "patch",
    "steer",
    "steer_each",
    "steering_vector",
]
