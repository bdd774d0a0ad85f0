"""The prompts and tokens the tour (notebooks/tour.ipynb) makes its claims about.

`tests/test_trained_model.py` asserts each claim on the trained model with these;
`tests/test_notebooks.py` checks the tour uses the same ones.
"""

#: The fact: SmolLM2-135M answers " Paris" (transformers: 0.656).
CLEAN = "The Eiffel Tower is in the city of"
#: The same number of tokens (9), another landmark: the model answers " Rome".
CORRUPTED = "The Colosseum is in the city of"
ANSWER = " Paris"
FOIL = " Rome"
#: Positions of the subject's tokens in CLEAN: ' E', 'iffel', ' Tower'.
SUBJECT = (1, 2, 3)
#: Causal tracing's noised span of CLEAN: the subject's tokens, (start, stop).
NOISED = (1, 4)
#: The position of ' Tower' in CLEAN: the contribution graph's route starts there.
TOWER = 3
#: A longer prompt for the heads' roles (more queries to average over).
ROLES_TEXT = "The Eiffel Tower is in the city of Paris, and the Colosseum is in the city of Rome."
GENERATE = "The capital of France is"
#: Steering: a vector from two prompts about the other city, added at a middle layer.
STEER_POSITIVE = "Rome is in Italy. Rome is in Italy."
STEER_NEGATIVE = "Paris is in France. Paris is in France."
STEER_LAYER = 8
STEER_COEFFICIENT = 2.0
STEERED_ANSWER = " Rome"

#: Over a dataset: countries whose capital is one token of the trained model's vocabulary
#: (with its leading space), each asked in every one of `CAPITAL_TEMPLATES`.
CAPITALS = {
    "France": "Paris", "Italy": "Rome", "Germany": "Berlin", "Spain": "Madrid", "England": "London",
    "Japan": "Tokyo", "Russia": "Moscow", "Egypt": "Cairo", "Greece": "Athens", "Portugal": "Lisbon",
    "Austria": "Vienna", "Ireland": "Dublin", "Norway": "Oslo", "Sweden": "Stockholm", "Poland": "Warsaw",
    "Hungary": "Budapest", "Canada": "Ottawa", "China": "Beijing", "India": "Delhi", "Korea": "Seoul",
    "Peru": "Lima", "Chile": "Santiago", "Cuba": "Havana", "Kenya": "Nairobi", "Australia": "Canberra",
    "Finland": "Helsinki", "Denmark": "Copenhagen", "Belgium": "Brussels", "Netherlands": "Amsterdam",
    "Switzerland": "Bern", "Afghanistan": "Kabul", "Iraq": "Baghdad", "Iran": "Tehran", "Syria": "Damascus",
    "Philippines": "Manila", "Czechia": "Prague", "Scotland": "Edinburgh", "Wales": "Cardiff",
    "Israel": "Jerusalem", "Tunisia": "Tunis", "Bulgaria": "Sofia", "Jamaica": "Kingston",
}  # fmt: skip
CAPITAL_TEMPLATES = [
    "The capital of {} is",
    "The capital city of {} is",
    "{}'s capital is the city of",
    "The seat of government of {} is in",
    "Q: What is the capital of {}? A:",
    "If you fly to the capital of {}, you land in",
]
