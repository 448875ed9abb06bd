"""Workload lowering: a model and a parallel plan become per-rank work; a measured trace becomes the same kind of work (replay)."""
