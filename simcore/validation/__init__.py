"""Validation: predicted vs measured, on data the models were not fitted on.

Each module returns its report as data (and a text formatter); ``python -m simcore.validation`` runs every
report, ``python -m simcore.validation REPORT [options]`` one (steps, published, own, kernels, comm, traces,
devices, moe); see docs/validation.md.
"""
