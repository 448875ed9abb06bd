"""Several training jobs on one cluster's fabric: the file ``simcore jobs`` reads (docs/parallelism.md,
Several jobs on one fabric).

A multi-job file names one cluster (system, systems, fabric) and a list of jobs; each job is a training
scenario (a file, a built-in name, or its fields inline) without a cluster of its own, and the systems it
runs on (a count, filled from the lowest free system in the order listed, or the systems' indices).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from simcore.errors import SpecError
from simcore.specs.docstrings import field_docstrings
from simcore.specs.loader import read_yaml, validate
from simcore.specs.quantities import Int, Spec
from simcore.specs.registry import Registry, default_registry
from simcore.specs.resolve import apply_overrides, find_scenario, scenario_from_dict
from simcore.specs.scenario import ClusterSpec, Scenario


class JobSpec(Spec):
    """One job of a multi-job file."""

    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    name: str | None = None
    """The job's name in the report; default: its scenario's name."""
    nodes: Int | list[Int] = Field(union_mode="left_to_right")
    """Where the job runs, on whole systems (nodes, or racks of an NVL72 system): a count (the
    lowest-numbered systems no other job holds, in the order the jobs are listed) or the systems'
    indices, 0-based (a scheduler's scattered placement, e.g. ``[0, 2]``)."""
    scenario: str | dict[str, Any]
    """The job: a training scenario file or built-in name, or its fields inline (``kind: training``,
    ``model``, ``training``, ``parallel``, ``runtime``...), without ``cluster``: the job runs on the
    file's cluster."""


class MultiJobSpec(Spec):
    """Several training jobs sharing one cluster's scale-out fabric: each job's step time alone and
    with the others, whose data-parallel collectives share the fabric's links."""

    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    name: str = "jobs"
    description: str = ""
    kind: Literal["jobs"] = "jobs"
    """A multi-job file (``simcore predict`` takes it)."""
    cluster: ClusterSpec
    """The shared cluster: its system, its fabric (``fabric.oversubscription``, ``topology``,
    ``switch_radix``) and ``nodes`` (default: the jobs' systems together). ``gpus`` is not taken: jobs
    run on whole systems."""
    jobs: list[JobSpec] = Field(min_length=1)
    """The jobs; those that give a count of systems take the lowest free ones in this order."""


@dataclass(frozen=True)
class PlacedJob:
    """A job resolved to its scenario (on its own share of the cluster) and the systems it holds."""

    name: str
    scenario: Scenario
    systems: tuple[int, ...]
    """The cluster's systems (0-based) the job's ranks fill in order."""
    notes: tuple[str, ...] = ()
    """What loading changed about the job (a job file's own cluster replaced by the file's)."""

    def rank(self, local: int, gpus_per_node: int) -> int:
        """The cluster rank of the job's rank ``local`` (its systems filled in order)."""
        return self.systems[local // gpus_per_node] * gpus_per_node + local % gpus_per_node


def _place(spec: MultiJobSpec, file: str | None) -> tuple[list[tuple[int, ...]], int]:
    """Each job's systems and the cluster's system count: listed indices as given, counts from the lowest
    free system in order; overlaps and a cluster too small are errors naming the field."""
    held: dict[int, int] = {}
    out: list[tuple[int, ...]] = [() for _ in spec.jobs]
    for i, job in enumerate(spec.jobs):
        if isinstance(job.nodes, list):
            if not job.nodes or min(job.nodes) < 0 or len(set(job.nodes)) != len(job.nodes):
                raise SpecError(
                    "give distinct system indices (0-based), at least one",
                    file=file,
                    field=f"jobs[{i}].nodes",
                )
            for n in job.nodes:
                if n in held:
                    raise SpecError(
                        f"system {n} is held by jobs[{held[n]}] already", file=file, field=f"jobs[{i}].nodes"
                    )
                held[n] = i
            out[i] = tuple(job.nodes)
    for i, job in enumerate(spec.jobs):
        if isinstance(job.nodes, int):
            if job.nodes < 1:
                raise SpecError("a job runs on at least one system", file=file, field=f"jobs[{i}].nodes")
            free = (n for n in range(len(held) + job.nodes + 1) if n not in held)
            out[i] = tuple(next(free) for _ in range(job.nodes))
            held.update(dict.fromkeys(out[i], i))
    need = max(held) + 1
    nodes = spec.cluster.nodes if spec.cluster.nodes is not None else need
    if need > nodes:
        raise SpecError(
            f"the jobs reach system {need - 1}, the cluster has {nodes} (0 to {nodes - 1})",
            file=file,
            field="cluster.nodes",
        )
    return out, nodes


def load_multi_job(
    path: str | os.PathLike[str] | dict[str, Any],
    reg: Registry | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> tuple[MultiJobSpec, list[PlacedJob]]:
    """Read a multi-job file (or a dict of its fields) and resolve each job's scenario on its systems;
    bad input raises one :class:`SpecError` naming the file and the field (``jobs[1].scenario...``).
    ``overrides``: ``--set``-style ``cluster.*=value`` changes of the shared cluster (its fabric's
    ``oversubscription``, ``topology``...); a job is changed in its own scenario, so any other key is an
    error."""
    reg = reg or default_registry()
    if isinstance(path, dict):
        file, data = None, copy.deepcopy(path)
    else:
        file = str(find_scenario(os.fspath(path)))
        data = read_yaml(file)
    for item in overrides:
        if not item.strip().startswith("cluster."):
            raise SpecError(
                f"--set {item!r}: a multi-job file takes --set cluster.* only (edit the jobs' scenarios)",
                file=file,
            )
    apply_overrides(data, overrides, file)
    spec = validate(MultiJobSpec, data, file)
    c = spec.cluster
    if c.gpus is not None:
        raise SpecError(
            "jobs run on whole systems: give cluster.nodes, not gpus", file=file, field="cluster.gpus"
        )
    systems, nodes = _place(spec, file)
    placed: list[PlacedJob] = []
    for i, job in enumerate(spec.jobs):
        where = f"jobs[{i}].scenario"
        sc_file = file
        notes: tuple[str, ...] = ()
        if isinstance(job.scenario, str):
            p = find_scenario(job.scenario)
            if not p.is_file():
                raise SpecError(f"scenario file {job.scenario} not found", file=file, field=where)
            sc_file = str(p)
            sc_data = read_yaml(p)
            own = sc_data.get("cluster")
            if isinstance(own, dict):
                # a job file written to run alone: its system must be the file's; its size and fabric give way
                if own.get("system", c.system) != c.system:
                    raise SpecError(
                        f"{sc_file} runs on {own.get('system')}, this file's cluster is {c.system}: "
                        "a job runs on the file's cluster",
                        file=file,
                        field=where,
                    )
                notes = (
                    f"{where} ({sc_file}): its own cluster replaced by this file's ({c.system}, "
                    f"{len(systems[i])} of its systems, its fabric)",
                )
        else:
            sc_data = copy.deepcopy(job.scenario)
            if "cluster" in sc_data:
                raise SpecError(
                    "a job runs on the file's cluster: leave out its cluster and give the job's nodes",
                    file=file,
                    field=f"{where}.cluster",
                )
        sc_data["cluster"] = {**c.model_dump(exclude_none=True, exclude={"gpus"}), "nodes": len(systems[i])}
        try:
            sc = scenario_from_dict(sc_data, reg, sc_file)
        except SpecError as e:
            if sc_file == file:  # inline: the field sits under the job
                raise SpecError(
                    e.problem, file=file, field=f"{where}.{e.field}" if e.field else where
                ) from None
            raise
        if sc.kind != "training":
            raise SpecError(
                f"a job is a training scenario (got kind: {sc.kind})", file=file, field=f"{where}.kind"
            )
        placed.append(PlacedJob(job.name or sc.name, sc, systems[i], notes))
    names = [p.name for p in placed]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SpecError(f"two jobs are named {dup!r}; give each a name", file=file, field="jobs")
    object.__setattr__(spec, "cluster", c.model_copy(update={"nodes": nodes}))
    return spec, placed


def multi_job_file(path: str | Path) -> bool:
    """Whether the YAML at ``path`` is a multi-job file (a top-level ``jobs`` list)."""
    try:
        return "jobs" in read_yaml(find_scenario(os.fspath(path)))
    except SpecError:
        return False


__all__ = ["JobSpec", "MultiJobSpec", "PlacedJob", "load_multi_job", "multi_job_file"]
