"""The vendors' SDK types as validators, one per type for the whole test process: a ``TypeAdapter`` compiles its
type's schema when it is made (0.04-0.16 s of CPU for an openai or anthropic request TypedDict), and validating with
it is cheap. Made anew for every request a fake server read, the compiling was most of the providers tests' CPU."""

from __future__ import annotations

from functools import cache

import pydantic


@cache
def adapter(kind: object) -> pydantic.TypeAdapter:
    """The validator of ``kind`` (an SDK type: a TypedDict, a model, a list of models, an annotated union)."""
    return pydantic.TypeAdapter(kind)
