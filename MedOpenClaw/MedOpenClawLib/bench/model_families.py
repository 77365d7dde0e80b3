"""Model families, as MedFlow-Bench groups its tables: general-purpose models, medical-domain models, and native 3D
vision-language models (Track C's volumetric baselines).

``bench run --model-family`` records a run's family; without it, the family comes from the model's name by the
table below (a name matches where one of its words starts with the pattern), else ``general``.

=================  ===============================================================================
family             known model names
=================  ===============================================================================
medical            MedGemma, Lingshu, HuatuoGPT-Vision, LLaVA-Med, BiomedGPT, Meditron, Med-Flamingo,
                   HealthGPT, MedVLM, Med-PaLM
native-3d          M3D (M3D-LaMed), RadFM, Med3DVLM, CT-CHAT
=================  ===============================================================================
"""

from __future__ import annotations

import re

FAMILIES = ("general", "medical", "native-3d")
FAMILY_TITLES = {"general": "General-purpose models", "medical": "Medical-domain models",
                 "native-3d": "Native 3D VLMs"}
KNOWN_MODELS = (
    ("medgemma", "medical"), ("lingshu", "medical"), ("huatuogpt", "medical"), ("llava-med", "medical"),
    ("biomedgpt", "medical"), ("meditron", "medical"), ("med-flamingo", "medical"), ("healthgpt", "medical"),
    ("medvlm", "medical"), ("med-palm", "medical"),
    ("m3d", "native-3d"), ("radfm", "native-3d"), ("med3dvlm", "native-3d"), ("ct-chat", "native-3d"),
)


def default_family(model: str | None) -> str:
    """The family of a model name by :data:`KNOWN_MODELS` (``general`` for an unknown name or no model)."""
    name = (model or "").lower()
    for pattern, family in KNOWN_MODELS:
        if re.search(rf"(?:^|[^a-z0-9]){re.escape(pattern)}", name):
            return family
    return "general"
