"""Compute cost models: roofline-based kernel times for GEMM, attention, bandwidth-bound ops and
optimizer steps, with efficiencies from calibration profiles (:mod:`simcore.specs.profile`).

Public entry points live in :mod:`simcore.compute.ops` (``gemm``, ``attention``, ``memory_op``,
``optimizer_step``, ``launch_overhead``, ``op_time``).
"""
