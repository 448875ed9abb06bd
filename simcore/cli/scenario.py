"""``simcore scenarios``, ``simcore check`` and ``simcore schema``: scenario files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import (
    JSON_FORMATS,
    JsonOpt,
    add_row,
    app,
    console,
    emit_json,
    esc,
    of_scenario,
    output_file,
    say,
    writing,
)
from simcore.errors import SimcoreError

if TYPE_CHECKING:
    from simcore.specs.scenario import Scenario

ScenarioArgs = Annotated[list[str], typer.Argument(help="Scenario YAML files or built-in scenario names.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a field: key.path=value (repeatable)."),
]


def summary(sc: Scenario) -> dict[str, object]:
    """What a scenario describes, in a few facts."""
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster

    reg = default_registry()
    cl = resolve_cluster(sc.cluster, reg)
    m = sc.model
    out: dict[str, object] = {
        "name": sc.name,
        "kind": sc.kind,
        "system": cl.system.name,
        "device": cl.device.name,
        "nodes": cl.nodes,
        "gpus": cl.gpus,
        "fabric": f"{cl.fabric.link} {cl.fabric.topology} {cl.fabric.tiers}-tier {cl.fabric.oversubscription:g}:1",
        "model": f"{m.name}: {m.layers} layers, hidden {m.hidden}, {m.heads} heads"
        + (f" ({m.kv_heads} kv)" if m.kv_heads else "")
        + (f", MoE {m.moe.experts}x top-{m.moe.top_k}" if m.moe else ""),
        "parallel": {k: v for k, v in sc.parallel.model_dump().items() if v not in (None, False)},
    }
    if sc.training:
        out["training"] = sc.training.model_dump(exclude_none=True)
    if sc.inference:
        out["inference"] = sc.inference.model_dump(exclude_none=True)
    return out


def _jobs_summary(path: str, overrides: list[str]) -> dict[str, object]:
    """What a multi-job file describes (with ``--set cluster.*``): its cluster and each job's systems and
    scenario."""
    from simcore.specs.multijob import load_multi_job

    spec, jobs = load_multi_job(path, overrides=overrides)
    out: dict[str, object] = {"name": spec.name, "kind": spec.kind, "system": spec.cluster.system, "nodes": spec.cluster.nodes}
    for j in jobs:
        p = j.scenario.parallel
        out[f"job {j.name}"] = f"systems {list(j.systems)}: {j.scenario.model.name}, tp {p.tp} pp {p.pp} cp {p.cp}"
    return out


@app.command()
def check(scenarios: ScenarioArgs, set_: SetOpt = None, as_json: JsonOpt = False) -> None:
    """Validate scenario files and print what they describe."""
    from simcore.specs.multijob import multi_job_file
    from simcore.specs.resolve import load_scenario
    from simcore.specs.stack import check_given, load_stack

    for path in scenarios:
        if multi_job_file(path):
            s = _jobs_summary(path, set_ or [])
        else:
            sc = load_scenario(path, set_ or [])
            with of_scenario(path):
                check_given(sc, load_stack(sc.runtime.stack))  # what predict would refuse
            s = summary(sc)
        if as_json:
            emit_json({"file": path, "ok": True, **s})
            continue
        t = Table(title=esc(f"{path}: ok"))
        t.add_column("field")
        t.add_column("value")
        for k, v in s.items():
            add_row(t, k, json.dumps(v) if isinstance(v, dict) else str(v))
        console.print(t)


@app.command()
def schema(
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file (.json) instead of stdout.")
    ] = None,
    jobs: Annotated[
        bool, typer.Option("--jobs", help="The schema of multi-job files (a cluster and a jobs list) instead.")
    ] = False,
) -> None:
    """Write the JSON Schema of scenario files (for editors); ``--jobs``: of multi-job files."""
    from simcore.specs.multijob import MultiJobSpec
    from simcore.specs.scenario import Scenario

    output_file(output, "-o", JSON_FORMATS)
    text = json.dumps((MultiJobSpec if jobs else Scenario).model_json_schema(), indent=2)
    if output is None:
        print(text)
    else:
        with writing(output, "-o"):
            output.write_text(text + "\n")
        say(f"wrote {output} ({units.fmt(len(text), 'bytes')})")


_COMMANDS = {
    "training": "predict, plan, timeline, sweep",
    "inference": "predict, sweep",
    "serving": "serve, predict",
    "jobs": "predict",
}
"""The commands that take a scenario of each kind."""


def builtin_scenarios() -> list[dict[str, str]]:
    """The built-in scenarios: name (what ``simcore predict NAME`` takes), kind, description, commands."""
    import yaml

    from simcore.specs.registry import builtin_dir

    try:
        folder = builtin_dir("scenarios")
    except SimcoreError:
        return []
    out: list[dict[str, str]] = []
    for p in sorted(folder.glob("*.yaml")):
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            data = None
        d = data if isinstance(data, dict) else {}
        kind = str(d.get("kind", "?"))
        out.append(
            {
                "name": p.stem,
                "kind": kind,
                "description": " ".join(str(d.get("description") or d.get("name") or "").split()),
                "commands": _COMMANDS.get(kind, ""),
                "file": str(p),
            }
        )
    return out


@app.command("scenarios")
def scenarios_cmd(as_json: JsonOpt = False) -> None:
    """List the built-in scenarios (run one with `simcore predict NAME`; copy its file to edit it)."""
    rows = builtin_scenarios()
    if as_json:
        emit_json({"scenarios": rows})
        return
    t = Table(title="built-in scenarios")
    t.add_column("name", no_wrap=True)
    t.add_column("kind", no_wrap=True)
    t.add_column("description")
    for r in rows:
        add_row(t, r["name"], r["kind"], r["description"])
    console.print(t)
    console.print(
        "run one with simcore predict NAME; "
        + "; ".join(f"{kind}: {cmds}" for kind, cmds in _COMMANDS.items()),
        highlight=False,
    )
    if rows:
        say(f"files (copy one to edit it): {Path(rows[0]['file']).parent}")
