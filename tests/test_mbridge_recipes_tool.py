"""tools/mbridge_moe_recipes.py: a Nemotron 3 workload config resolved through its ``replace`` chain (the source text
of v0.5.0's ``nemotron_3_workload_base_configs.py`` pattern, no clone needed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("simcore_tools_mbridge", ROOT / "tools" / "mbridge_moe_recipes.py")
assert spec is not None and spec.loader is not None
tool = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = tool
spec.loader.exec_module(tool)

SRC = '''
BASE_NEMOTRON_3_SUPER_CONFIG = WorkloadBaseConfig(
    num_gpus=64, global_batch_size=512, tensor_model_parallel_size=1, expert_model_parallel_size=64,
    moe_flex_dispatcher_backend="hybridep", cuda_graph_impl="transformer_engine",
    cuda_graph_scope=["attn", "mamba", "moe_router", "moe_preprocess"],
)
BASE_NEMOTRON_3_SUPER_CONFIG_B300 = replace(BASE_NEMOTRON_3_SUPER_CONFIG, expert_model_parallel_size=8)
NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B300_BF16_V1 = replace(
    BASE_NEMOTRON_3_SUPER_CONFIG_B300, recompute_modules=["moe_act", "layernorm"],
)
NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B300_NVFP4_V1 = NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B300_BF16_V1
NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B200_FP8_MX_V1 = replace(BASE_NEMOTRON_3_SUPER_CONFIG, cuda_graph_impl="none")
'''


def test_a_nemotron_config_resolves_through_its_chain() -> None:
    cfgs = tool._configs(SRC)
    b300 = cfgs["NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B300_NVFP4_V1"]
    assert b300["expert_model_parallel_size"] == 8 and b300["recompute_modules"] == ["moe_act", "layernorm"]
    assert b300["moe_flex_dispatcher_backend"] == "hybridep"
    assert tool._graphs(b300) == "attn;mamba;moe_router;moe_preprocess"
    assert tool._graphs(cfgs["NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B200_FP8_MX_V1"]) == ""  # cuda_graph_impl none
    m = tool.NAME.match("NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B300_NVFP4_V1")
    assert m is not None and m.groups() == ("NEMOTRON_3_SUPER", "B300", "NVFP4")
    assert tool.NAME.match("BASE_NEMOTRON_3_SUPER_CONFIG_B300") is None
