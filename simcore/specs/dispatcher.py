"""MoE token dispatchers priced from their kernels' published bandwidths (``runtime.moe_dispatcher``:
``deepep``, ``hybridep``), as data: ``hardware_specs/comm/moe_dispatchers.yaml``, each number with its
source. See docs/parallelism.md, "The MoE dispatcher"."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field

from simcore.errors import SpecError
from simcore.specs.loader import load_file
from simcore.specs.quantities import Spec


class DispatcherSpec(Spec):
    """One hierarchical dispatcher: the fraction of each link's per-direction rate its kernels reach."""

    display_name: str = Field(min_length=1)
    nvlink_efficiency: float = Field(gt=0.0, le=1.0)
    """Achieved NVLink bandwidth of the dispatch/combine kernels over the link's per-direction rate."""
    network_efficiency: float = Field(gt=0.0, le=1.0)
    """Achieved RDMA bandwidth per GPU over its NIC's per-direction rate."""
    sources: dict[str, str] = Field(min_length=1)


class DispatcherTable(Spec):
    dispatchers: dict[str, DispatcherSpec]


@lru_cache(maxsize=1)
def _table() -> DispatcherTable:
    from simcore.specs.registry import builtin_dir

    return load_file(DispatcherTable, builtin_dir() / "comm" / "moe_dispatchers.yaml")


def load_dispatcher(name: str) -> DispatcherSpec:
    """The built-in dispatcher ``name`` (``deepep`` or ``hybridep``)."""
    table = _table().dispatchers
    if name not in table:
        raise SpecError(
            f"unknown MoE dispatcher {name!r}; priced from kernel data: {', '.join(sorted(table))}",
            field="runtime.moe_dispatcher",
        )
    return table[name]
