"""Studies over many configurations: layout search (:func:`plan`) and what-if sweeps (:func:`run_sweep`)."""

from simcore.planning.plan import PlanResult, plan
from simcore.planning.space import SearchOptions, SearchSpace, build_space

__all__ = ["PlanResult", "SearchOptions", "SearchSpace", "build_space", "plan"]
