"""Hypothesis profiles for the chunker tests: `HYPOTHESIS_PROFILE=dev` skips shrinking
(fast feedback while developing); the default profile shrinks failures as usual."""

from __future__ import annotations

import os

from hypothesis import Phase, settings

settings.register_profile(
    "dev", phases=[Phase.explicit, Phase.reuse, Phase.generate], print_blob=True
)
if os.environ.get("HYPOTHESIS_PROFILE") == "dev":
    settings.load_profile("dev")
