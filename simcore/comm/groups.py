"""Where the ranks of a communicator sit: how many share an NVLink domain, how many domains it spans.

A collective's cost depends on the shape of its group more than on its rank ids: a ring all-reduce of
16 ranks as 2 domains x 8 (one tensor-parallel group per node, data parallel across) runs at NVLink
speed inside and crosses the fabric twice per ring, while 16 ranks as 16 domains x 1 (the data-parallel
group of a TP=8 job) crosses the fabric on every step. :class:`GroupPlacement` holds that shape; every
field may be a numpy array so the planner can price a whole grid of layouts in one call.

Rank layout follows Megatron-LM: tensor parallel fastest, then context, then data/expert, then
pipeline. A group whose consecutive members are ``stride`` ranks apart (``stride`` = product of the
inner parallel degrees) is placed by :func:`placement`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from simcore.errors import SimcoreError

if TYPE_CHECKING:
    from simcore.specs.resolve import ClusterInfo

FloatArray = NDArray[np.float64]


def _arr(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


@dataclass(frozen=True)
class GroupPlacement:
    """Shape of a communicator over NVLink domains (all fields broadcast as numpy arrays).

    Attributes:
        size: ranks in the group.
        per_domain: ranks of the group inside one NVLink domain (``size`` when it fits in one).
        domains: NVLink domains the group spans (``ceil(size / per_domain)``).
    """

    size: FloatArray
    per_domain: FloatArray
    domains: FloatArray

    @staticmethod
    def of(size: ArrayLike, per_domain: ArrayLike | None = None) -> GroupPlacement:
        """A group of ``size`` ranks with ``per_domain`` of them in each NVLink domain (default: all)."""
        s = _arr(size)
        g = s if per_domain is None else np.minimum(_arr(per_domain), s)
        if np.any(s < 1) or np.any(g < 1):
            raise SimcoreError("a group needs at least one rank and one rank per domain", field="group")
        d = np.ceil(s / g)
        s, g, d = np.broadcast_arrays(s, g, d)
        return GroupPlacement(size=s.astype(np.float64), per_domain=g.astype(np.float64), domains=d)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.broadcast_shapes(self.size.shape, self.per_domain.shape, self.domains.shape))

    def __getitem__(self, idx: Any) -> GroupPlacement:
        s, g, d = np.broadcast_arrays(self.size, self.per_domain, self.domains)
        return GroupPlacement(size=s[idx], per_domain=g[idx], domains=d[idx])


def domain_size(cluster: ClusterInfo) -> int:
    """GPUs of the cluster inside one NVLink domain (fewer when the cluster uses part of a system)."""
    return min(cluster.system.nvlink_domain, cluster.gpus_per_node)


def placement(cluster: ClusterInfo, size: ArrayLike, stride: ArrayLike = 1) -> GroupPlacement:
    """Shape of a group of ``size`` ranks whose members are ``stride`` ranks apart.

    With the Megatron order (tp fastest, then cp, then dp/ep, then pp), a TP group has stride 1, a CP
    group stride ``tp``, a DP group stride ``tp*cp``, a PP group stride ``tp*cp*dp``. Ranks fill NVLink
    domains of :func:`domain_size` GPUs in order. Let ``D`` be that domain size:

    * ``size*stride <= D``: the whole group sits in one domain;
    * ``stride >= D``: every member is in a different domain (``per_domain = 1``);
    * otherwise ``D // stride`` members share a domain and the group spans ``ceil(size / that)``.
    """
    dom = float(domain_size(cluster))
    s = _arr(size)
    st = _arr(stride)
    if np.any(s < 1) or np.any(st < 1):
        raise SimcoreError("group size and stride must be at least 1", field="group")
    span = s * st
    inner = np.maximum(np.floor(dom / st), 1.0)
    per = np.where(span <= dom, s, np.where(st >= dom, 1.0, np.minimum(inner, s)))
    return GroupPlacement.of(s, per)


def contiguous(cluster: ClusterInfo, size: ArrayLike | None = None) -> GroupPlacement:
    """A group of ``size`` consecutive ranks (default: every GPU of the cluster), filling domains in order."""
    return placement(cluster, cluster.gpus if size is None else size, 1)


def megatron_groups(
    cluster: ClusterInfo, tp: ArrayLike = 1, cp: ArrayLike = 1, dp: ArrayLike = 1, pp: ArrayLike = 1
) -> dict[str, GroupPlacement]:
    """Placements of the tp, cp, dp and pp groups of a Megatron layout (tp fastest). Arrays broadcast."""
    tp_, cp_, dp_, pp_ = (_arr(x) for x in (tp, cp, dp, pp))
    return {
        "tp": placement(cluster, tp_, 1),
        "cp": placement(cluster, cp_, tp_),
        "dp": placement(cluster, dp_, tp_ * cp_),
        "pp": placement(cluster, pp_, tp_ * cp_ * dp_),
    }


__all__ = ["GroupPlacement", "contiguous", "domain_size", "megatron_groups", "placement"]
