"""Write ``simcore/validation/data/mbridge_moe_recipes.csv``: the MoE dispatcher and the 1F1B A2A overlap
that each Megatron-Bridge release's performance recipes set, per model, GPU and precision.

Reads ``scripts/performance/configs/<family>/*workload_base_configs.py`` at each release tag of a local
clone of NVIDIA-NeMo/Megatron-Bridge (``git show``; nothing is imported or run): every config named
``<MODEL>_[PRETRAIN_CONFIG_]<GPU>_<PRECISION>_{V1,V2,BASE_CONFIG}`` is resolved through its ``replace(...)``
chain, and its ``expert_model_parallel_size``, ``global_batch_size``, ``moe_flex_dispatcher_backend`` (none: the model's
``alltoall``) and ``moe_a2a_overlap`` are written out.

Usage: python tools/mbridge_moe_recipes.py /path/to/Megatron-Bridge.git
"""

from __future__ import annotations

import ast
import csv
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

TAGS = ("v0.2.0", "v0.3.0", "v0.3.1", "v0.4.0", "v0.4.1", "v0.4.2", "v0.5.0")
FILES = (
    "deepseek/workload_base_configs.py",
    "qwen3/workload_base_configs.py",
    "gpt_oss/workload_base_configs.py",
    "deepseek/deepseek_workload_base_configs.py",
    "qwen/qwen3_workload_base_configs.py",
    "gpt_oss/gpt_oss_workload_base_configs.py",
)
NAME = re.compile(
    r"(DEEPSEEK_V3|QWEN3_235B_A22B|QWEN3_30B_A3B|GPT_OSS_120B)_(?:PRETRAIN_CONFIG_)?"
    r"(GB300|GB200|B300|B200|H100)_(BF16|FP8_CS|FP8_MX|FP8_SC|NVFP4)_(?:V1|V2|BASE_CONFIG)$"
)
OUT = Path(__file__).resolve().parent.parent / "simcore/validation/data/mbridge_moe_recipes.csv"


def _configs(src: str) -> dict[str, dict[str, Any]]:
    """Every module-level ``NAME = replace(PARENT, k=v, ...)`` / ``NAME = OTHER`` resolved to its fields."""
    env: dict[str, dict[str, Any]] = {}
    for node in ast.parse(src).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        v = node.value
        if isinstance(v, ast.Name):
            env[node.targets[0].id] = dict(env.get(v.id, {}))
        elif isinstance(v, ast.Call):
            parent = v.args[0] if v.args and isinstance(v.args[0], ast.Name) else None
            fields = dict(env.get(parent.id, {})) if parent is not None else {}
            for kw in v.keywords:
                try:
                    fields[str(kw.arg)] = ast.literal_eval(kw.value)
                except ValueError:
                    fields[str(kw.arg)] = ast.unparse(kw.value)
            env[node.targets[0].id] = fields
    return env


def main(repo: str) -> None:
    rows = []
    for tag in TAGS:
        for f in FILES:
            path = f"{tag}:scripts/performance/configs/{f}"
            r = subprocess.run(["git", "-C", repo, "show", path], capture_output=True, text=True)
            if r.returncode:
                continue
            for name, cfg in _configs(r.stdout).items():
                m = NAME.match(name)
                if m is None:
                    continue
                model, gpu, prec = m.groups()
                rows.append(
                    (
                        tag,
                        model.lower(),
                        gpu,
                        prec.lower().replace("_", "-"),
                        cfg.get("expert_model_parallel_size") or "",
                        cfg.get("global_batch_size") or "",
                        cfg.get("moe_flex_dispatcher_backend") or "alltoall",
                        str(bool(cfg.get("moe_a2a_overlap"))).lower(),
                        name,
                    )
                )
    with OUT.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["tag", "model", "gpu", "precision", "ep", "global_batch", "dispatcher", "a2a_overlap", "config"])
        w.writerows(sorted(set(rows)))
    print(f"{OUT}: {len(set(rows))} configs")


if __name__ == "__main__":
    main(sys.argv[1])
