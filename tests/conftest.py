"""Test-wide settings: hypothesis draws the same examples on every run (``derandomize``), so a property
test's verdict is reproducible on any machine and CI; set ``HYPOTHESIS_PROFILE=explore`` to draw fresh
random examples while developing."""

import os

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
