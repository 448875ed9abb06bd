"""Several training jobs on one fabric: each job's step alone and together with the others
(docs/parallelism.md, Several jobs on one fabric).

Each job of a multi-job file (:func:`simcore.specs.multijob.load_multi_job`) runs on its own systems of
one cluster, so jobs share no NVLink domain; what they share is the scale-out fabric. The flow model
(:func:`simcore.comm.flow.network_slowdown`) lays one round of every data-parallel group of every
pipeline stage of a job (:func:`simcore.comm.flow.data_parallel_groups`, the job's ranks on its systems:
the groups ``predict`` lays for the job alone) on the cluster's topology graph, links shared max-min
fairly: first the job's groups alone (the other jobs idle), then every job's groups together. A job's
factor is its slowest group's network slowdown; it divides the network rate of the job's data-parallel
collectives (``TrainingLayout.dp_contention``) in two analytic predictions of the job, alone and
together, whose step times give the slowdown.

"Together" is the worst case: every job reducing at the same moment. The jobs' steps are not phase-aligned,
so the phased estimate weighs each other job ``j`` by its duty cycle ``u_j`` (the seconds per step its
data-parallel collectives move bytes over its step, alone): with independent uniform phases, job ``j`` is
reducing during a fraction ``u_j`` of job ``i``'s reduction, so ``F_i = F_alone + sum_j u_j (F_ij -
F_alone)`` (``F_ij``: job ``i``'s factor with job ``j`` alone beside it; exact for two jobs under that
assumption, first order in the duty cycles beyond), at most the together factor.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from simcore.comm.flow import ROUND_BYTES, data_parallel_contention, data_parallel_groups, network_slowdown
from simcore.comm.topology import build_topology
from simcore.errors import SimcoreError, SpecError
from simcore.prediction import evaluate_training, layout_of, predict_training
from simcore.specs.multijob import PlacedJob, load_multi_job
from simcore.specs.registry import default_registry
from simcore.specs.resolve import find_scenario, resolve_cluster

_T = TypeVar("_T")


class JobResult(BaseModel):
    """One job's step alone and with the other jobs on the fabric (seconds; factors >= 1)."""

    model_config = ConfigDict(frozen=True)

    name: str
    gpus: int
    systems: list[int]
    """The cluster's systems (0-based) the job runs on."""
    layout: dict[str, Any]
    dp_contention_alone: float
    """How many times slower than the NIC share the job's data-parallel network flows move with the other
    jobs idle (:func:`simcore.comm.flow.network_slowdown`)."""
    dp_contention_together: float
    """The same with every job's data-parallel collectives on the fabric at once."""
    dp_contention_phased: float
    """The expected factor with the jobs' steps out of phase (module docstring)."""
    dp_duty: float
    """Fraction of the job's step (alone) its data-parallel collectives move bytes."""
    step_time_alone_s: float
    step_time_together_s: float
    slowdown: float
    """``step_time_together_s / step_time_alone_s`` (every job's reductions coinciding: the worst case)."""
    step_time_phased_s: float
    slowdown_phased: float
    """``step_time_phased_s / step_time_alone_s``: the expected slowdown with the steps out of phase."""
    dp_comm_alone_s: float
    """Exposed data-parallel seconds of the step alone."""
    dp_comm_together_s: float


class MultiJobResult(BaseModel):
    """Every job's step alone and together on one cluster's fabric."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: str = "jobs"
    system: str
    nodes: int
    fabric: dict[str, Any]
    jobs: list[JobResult]
    notes: list[str] = []


def _groups(job: PlacedJob, gpus_per_node: int) -> list[list[int]]:
    """The job's data-parallel groups with more than one rank, on the cluster's rank numbering."""
    sc = job.scenario
    lay = layout_of(sc, resolve_cluster(sc.cluster, default_registry()))
    if lay["dp"] <= 1:
        return []
    local = data_parallel_groups(lay["tp"], lay["cp"], lay["dp"], lay["pp"])
    return [[job.rank(r, gpus_per_node) for r in g] for g in local]


def predict_jobs(
    path: str | os.PathLike[str] | dict[str, Any], overrides: list[str] | tuple[str, ...] = ()
) -> MultiJobResult:
    """Each job's step time alone and together with the others on the file's cluster (see the module
    docstring), with ``cluster.*`` overrides (:func:`~simcore.specs.multijob.load_multi_job`); bad input
    raises one :class:`~simcore.errors.SpecError` naming the file and field. The notes carry each job's
    stack-defaults note (``job NAME: stack ...``)."""
    reg = default_registry()
    spec, jobs = load_multi_job(path, reg, overrides)
    file = None if isinstance(path, dict) else str(find_scenario(os.fspath(path)))
    cluster = resolve_cluster(spec.cluster, reg, file)
    topo = build_topology(cluster)

    def of_job(i: int, fn: Callable[[], _T]) -> _T:
        """``fn()`` with an error about job ``i``'s scenario named under ``jobs[i].scenario`` of the file."""
        try:
            return fn()
        except SimcoreError as e:
            field = f"jobs[{i}].scenario" + (f".{e.field}" if e.field else "")
            raise SpecError(e.problem, file=file, field=field) from None

    groups = [of_job(i, functools.partial(_groups, j, cluster.gpus_per_node)) for i, j in enumerate(jobs)]
    calls = [[("all_reduce", ROUND_BYTES, g) for g in gs] for gs in groups]
    together = network_slowdown(topo, [c for cs in calls for c in cs]) if any(calls) else []
    alone = [data_parallel_contention(topo, gs) for gs in groups]
    starts = [sum(len(c) for c in calls[:i]) for i in range(len(calls))]
    with_f = [
        max(max(together[a : a + len(cs)], default=1.0), f)
        for a, cs, f in zip(starts, calls, alone, strict=True)
    ]
    first = [
        of_job(i, functools.partial(predict_training, job.scenario, dp_contention=alone[i]))
        for i, job in enumerate(jobs)
    ]
    duty = []
    for i, job in enumerate(jobs):
        ev = of_job(i, functools.partial(evaluate_training, job.scenario, dp_contention=alone[i]))[2]
        duty.append(min(float(ev.stage_times["dp_busy_s"]) / first[i].step_time_s, 1.0))
    phased = list(alone)
    for i, k in itertools.combinations(range(len(jobs)), 2):
        if not calls[i] or not calls[k]:
            continue
        pair = network_slowdown(topo, calls[i] + calls[k])
        phased[i] += duty[k] * (max(max(pair[: len(calls[i])]), alone[i]) - alone[i])
        phased[k] += duty[i] * (max(max(pair[len(calls[i]) :]), alone[k]) - alone[k])
    out: list[JobResult] = []
    for i, (job, a) in enumerate(zip(jobs, first, strict=True)):
        ph = min(phased[i], with_f[i])
        t = of_job(i, functools.partial(predict_training, job.scenario, dp_contention=with_f[i]))
        p = of_job(i, functools.partial(predict_training, job.scenario, dp_contention=ph))
        out.append(
            JobResult(
                name=job.name,
                gpus=a.gpus,
                systems=list(job.systems),
                layout=a.layout,
                dp_contention_alone=alone[i],
                dp_contention_together=with_f[i],
                dp_contention_phased=ph,
                dp_duty=duty[i],
                step_time_alone_s=a.step_time_s,
                step_time_together_s=t.step_time_s,
                slowdown=t.step_time_s / a.step_time_s,
                step_time_phased_s=p.step_time_s,
                slowdown_phased=p.step_time_s / a.step_time_s,
                dp_comm_alone_s=a.breakdown.get("dp_comm", 0.0),
                dp_comm_together_s=t.breakdown.get("dp_comm", 0.0),
            )
        )
    notes = [
        "contention of the data-parallel collectives only (every stage's groups, one round each, at once); "
        "tensor-, pipeline- and expert-parallel traffic stays inside each job's systems or is priced alone",
        "'together' assumes every job's data-parallel reductions coincide (the worst case); 'phased' weighs "
        "each other job by its duty cycle (the fraction of its step its reductions move bytes), the steps' "
        "phases independent and uniform",
    ]
    notes += [n for j in jobs for n in j.notes]
    notes += [f"job {j.name}: {n}" for j, a in zip(jobs, first, strict=True) for n in a.notes if n.startswith("stack ")]
    idle = cluster.nodes - sum(len(j.systems) for j in jobs)
    if idle:
        notes.append(f"{idle} of {cluster.nodes} systems idle")
    fab = cluster.fabric
    return MultiJobResult(
        name=spec.name,
        system=cluster.system.name,
        nodes=cluster.nodes,
        fabric={"topology": fab.topology, "oversubscription": fab.oversubscription, "tiers": fab.tiers},
        jobs=out,
        notes=notes,
    )


__all__ = ["JobResult", "MultiJobResult", "predict_jobs"]
