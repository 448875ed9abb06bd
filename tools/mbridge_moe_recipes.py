"""Write ``simcore/validation/data/mbridge_moe_recipes.csv``: the MoE dispatcher and the 1F1B A2A overlap
that each Megatron-Bridge release's performance recipes set, per model, GPU and precision, with the recipe's
tensor parallelism, selective-recompute modules and CUDA-graph scope.

Reads ``scripts/performance/configs/<family>/*workload_base_configs.py`` at each release tag of a local
clone of NVIDIA-NeMo/Megatron-Bridge (``git show``; nothing is imported or run): every config named
``<MODEL>_[PRETRAIN_CONFIG_]<GPU>_<PRECISION>_{V1,V2,BASE_CONFIG}`` is resolved through its ``replace(...)``
chain, and its ``expert_model_parallel_size``, ``global_batch_size``, ``moe_flex_dispatcher_backend``
(none: the model's ``alltoall``), ``moe_a2a_overlap``, ``tensor_model_parallel_size``, ``recompute_modules``
(``;``-separated; empty: none), ``cuda_graph_scope`` (``cuda_graph_impl`` ``none``: empty) and
``cutedsl_fused_grouped_mlp`` (``fused_mlp``: the experts' Transformer Engine op-fuser path, which
``utils/overrides.py`` turns on with ``use_transformer_engine_op_fuser``) are written out; a GPU's pretrain function in
``*_llm_pretrain.py`` that sets ``moe_token_dispatcher_type = "alltoall"`` overrides the backend (the
flex backend is then not used: Qwen3-235B on B200 and H100 from v0.3.1).

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
    "nemotronh/nemotron_3_workload_base_configs.py",
)
NAME = re.compile(
    r"(DEEPSEEK_V3|QWEN3_235B_A22B|QWEN3_30B_A3B|GPT_OSS_120B|NEMOTRON_3_NANO|NEMOTRON_3_SUPER)_(?:PRETRAIN_CONFIG_)?"
    r"(GB300|GB200|B300|B200|H100)_(BF16|FP8_CS|FP8_MX|FP8_SC|NVFP4)_(?:V1|V2|BASE_CONFIG)$"
)
PRETRAIN = ("qwen/qwen3_llm_pretrain.py", "deepseek/deepseek_llm_pretrain.py", "gpt_oss/gpt_oss_llm_pretrain.py")
FUNC = re.compile(r"(deepseek_v3|qwen3_235b_a22b|qwen3_30b_a3b|gpt_oss_120b)_pretrain_config_(gb300|gb200|b300|b200|h100)\(")
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


def _show(repo: str, tag: str, path: str) -> str | None:
    r = subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], capture_output=True, text=True)
    return None if r.returncode else r.stdout


def _alltoall_forced(repo: str, tag: str) -> set[tuple[str, str]]:
    """(model, GPU) whose pretrain function sets ``moe_token_dispatcher_type = "alltoall"``."""
    out = set()
    for f in PRETRAIN:
        src = _show(repo, tag, f"scripts/performance/configs/{f}") or ""
        for body in src.split("\ndef ")[1:]:
            m = FUNC.match(body)
            if m and re.search(r"moe_token_dispatcher_type\s*=\s*[\"']alltoall[\"']", body):
                out.add((m.group(1), m.group(2).upper()))
    return out


def _graphs(cfg: dict[str, Any]) -> str:
    """The config's CUDA-graph scope, ``;``-separated (empty where ``cuda_graph_impl`` is unset or ``none``)."""
    if cfg.get("cuda_graph_impl") in (None, "none"):
        return ""
    scope = cfg.get("cuda_graph_scope") or []
    return ";".join(scope) if isinstance(scope, list) else str(scope)


def main(repo: str) -> None:
    rows = []
    for tag in TAGS:
        forced = _alltoall_forced(repo, tag)
        for f in FILES:
            src = _show(repo, tag, f"scripts/performance/configs/{f}")
            if src is None:
                continue
            for name, cfg in _configs(src).items():
                m = NAME.match(name)
                if m is None:
                    continue
                model, gpu, prec = m.groups()
                backend = cfg.get("moe_flex_dispatcher_backend") or "alltoall"
                if (model.lower(), gpu) in forced:
                    backend = "alltoall"
                rows.append(
                    (
                        tag,
                        model.lower(),
                        gpu,
                        prec.lower().replace("_", "-"),
                        cfg.get("expert_model_parallel_size") or "",
                        cfg.get("global_batch_size") or "",
                        backend,
                        str(bool(cfg.get("moe_a2a_overlap"))).lower(),
                        name,
                        cfg.get("tensor_model_parallel_size") or "",
                        ";".join(cfg.get("recompute_modules") or []),
                        _graphs(cfg),
                        str(bool(cfg.get("cutedsl_fused_grouped_mlp"))).lower(),
                    )
                )
    with OUT.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(
            [
                "tag", "model", "gpu", "precision", "ep", "global_batch", "dispatcher", "a2a_overlap", "config", "tp",
                "recompute_modules", "cuda_graph_scope", "fused_mlp",
            ]
        )  # fmt: skip
        w.writerows(sorted(set(rows)))
    print(f"{OUT}: {len(set(rows))} configs")


if __name__ == "__main__":
    main(sys.argv[1])
