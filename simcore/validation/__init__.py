"""Validation: predicted vs measured, on data the models were not fitted on.

Run ``python -m simcore.validation`` for every report, or name one (``steps``, ``published``,
``kernels``, ``comm``); see docs/validation.md.
"""
