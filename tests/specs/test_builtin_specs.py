"""The built-in hardware spec library and model presets: they load, name their sources, and hold
numbers that agree with first-principles arithmetic (dense rates, per-direction bandwidths)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcore.errors import SpecError
from simcore.specs import Device, Link, System, scenario_from_dict
from simcore.specs.loader import load_file, read_yaml
from simcore.specs.registry import Registry, builtin_dir, registry, set_user_dirs
from simcore.specs.resolve import cluster_for
from tests.cli_runner import run_cli

SPECS = builtin_dir()

DEVICES = {"a100", "h100", "h100-pcie", "h800", "h200", "b200", "gb200", "b300", "gb300", "mi300x"}
LINKS = {
    "nvlink3",
    "nvlink4",
    "nvlink5",
    "nvswitch2",
    "nvswitch3",
    "nvswitch4",
    "nvlink-c2c",
    "pcie4",
    "pcie5",
    "pcie6",
    "ib-hdr",
    "ib-ndr",
    "ib-xdr",
    "roce-400",
    "spectrum-x",
    "infinity-fabric",
}
SYSTEMS = {
    "hgx-a100",
    "hgx-h100",
    "hgx-h200",
    "hgx-h800",
    "dgx-b200",
    "dgx-b300",
    "gb200-nvl72",
    "gb300-nvl72",
}
MODELS = {
    "gpt3-175b",
    "gpt3-1.3b",
    "gpt3-2.7b",
    "gpt3-6.7b",
    "gpt3-13b",
    "llama3-8b",
    "llama3-70b",
    "llama3-405b",
    "llama3.1-8b",
    "llama3.1-70b",
    "llama3.1-405b",
    "llama3.3-70b",
    "llama2-7b",
    "llama2-70b",
    "mixtral-8x7b",
    "deepseek-v3",
    "gpt2-small",
    "gpt2-medium",
    "gpt2-large",
    "gpt2-xl",
    "gpt-1t",
}


@pytest.fixture(autouse=True)
def _builtin_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SIMCORE_SPECS", raising=False)
    set_user_dirs([])
    yield
    set_user_dirs([])


@pytest.fixture
def reg() -> Registry:
    return registry()


# --- every file loads, names match files ------------------------------------------------------------


@pytest.mark.parametrize(
    "folder,cls",
    [("devices", Device), ("links", Link), ("systems", System)],
)
def test_every_builtin_file_loads_and_is_named_after_its_file(folder: str, cls: type[Any]) -> None:
    files = sorted((SPECS / folder).glob("*.yaml"))
    assert files, folder
    for path in files:
        spec = load_file(cls, path)
        assert spec.name == path.stem, path


def test_registry_holds_the_required_specs(reg: Registry) -> None:
    assert set(reg.devices) >= DEVICES
    assert set(reg.links) >= LINKS
    assert set(reg.systems) >= SYSTEMS
    assert set(reg.models) >= MODELS


@pytest.mark.parametrize(
    "alias,kind,name",
    [
        ("dgx-a100", "system", "hgx-a100"),
        ("dgx-h100", "system", "hgx-h100"),
        ("DGX_H200", "system", "hgx-h200"),
        ("nvl72", "system", "gb200-nvl72"),
        ("h100-sxm", "device", "h100"),
        ("nvlink5-switch", "link", "nvswitch4"),
        ("cx7", "link", "ib-ndr"),
    ],
)
def test_aliases_resolve(reg: Registry, alias: str, kind: str, name: str) -> None:
    k, spec = reg.find(alias)
    assert (k, spec.name) == (kind, name)


def test_only_measured_devices_have_their_own_calibration(reg: Registry) -> None:
    # the H200 (traces/h200) and, since round 118, the H100 SXM (traces/h100); every other GPU transfers
    assert {d.name for d in reg.devices.values() if d.calibration} == {"h200", "h100"}
    assert reg.devices["h200"].calibration == "h200"
    assert reg.devices["h100"].calibration == "h100"


# --- CLI facts named in the brief ----------------------------------------------------------------------


def test_hw_show_h200_reports_capacity_and_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "show", "h200")
    assert code == 0
    assert "141 GB" in out
    assert "4.8 TB/s" in out


def test_gb200_nvl72_is_one_72_gpu_nvlink_domain(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "show", "gb200-nvl72", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["gpus"] == 72 and d["nvlink_domain"] == 72
    assert d["derived"]["nvlink_domains"] == 1
    per_dir = d["derived"]["nvlink_bandwidth_per_gpu"]
    assert per_dir == pytest.approx(900e9)
    assert 2 * per_dir == pytest.approx(1.8e12)  # the 1.8 TB/s headline is bidirectional
    assert d["nvswitch_count"] == 18 and d["cpus"] == 36 and d["nics"] == 72
    assert d["cooling"] == "liquid"


def test_part_used_racks_spread_in_whole_trays() -> None:
    """A GPU count that does not fill whole NVL72 racks takes as few racks as hold it evenly in
    4-GPU trays; whole-node systems without trays still ask for cluster.nodes."""
    from simcore.comm.groups import domain_size
    from simcore.errors import SpecError

    for gpus, nodes in ((256, 4), (1024, 16), (144, 2), (8, 1)):
        c = cluster_for("gb200-nvl72", gpus=gpus)
        assert (c.nodes, c.gpus_per_node) == (nodes, gpus // nodes)
        assert domain_size(c) == min(72, gpus // nodes)
    with pytest.raises(SpecError, match="cluster.nodes"):
        cluster_for("hgx-h100", gpus=12)
    c = cluster_for("hgx-h100", gpus=12, nodes=2)
    assert domain_size(c) == 6  # 6 GPUs of each node share its NVLink


def test_gb200_nvl72_text_states_both_directions() -> None:
    env = {**os.environ, "COLUMNS": "400"}
    env.pop("SIMCORE_SPECS", None)
    out = subprocess.run(
        [sys.executable, "-c", "from simcore.cli import main; main()", "hw", "show", "gb200-nvl72"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "1.8 TB/s bidirectional" in out
    assert "900 GB/s" in out
    assert re.search(r"nvlink_domain\s*│\s*72\b", out)


def test_hw_list_names_hopper_blackwell_and_racks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "list", "--json")
    assert code == 0
    d = json.loads(out)
    assert {"h100", "h200", "b200", "gb200"} <= set(d["devices"])
    assert {"gb200-nvl72", "gb300-nvl72"} <= set(d["systems"])


# --- dense, not sparse -----------------------------------------------------------------------------------

# Vendor headline bf16 tensor rates *with 2:4 sparsity* (datasheets; reference hardware_specs.md).
SPARSE_BF16_TFLOPS = {
    "a100": 624,
    "h100": 1979,
    "h100-pcie": 1513,
    "h800": 1979,
    "h200": 1979,
    "b200": 4500,
    "gb200": 5000,
    "b300": 4500,
    "gb300": 5000,
    "mi300x": 2614.9,
}


def test_h100_bf16_is_the_dense_rate(reg: Registry) -> None:
    assert reg.device("h100").peak["bf16"] == 989e12
    assert reg.device("h100").peak_flops("bf16") != 1979e12


@pytest.mark.parametrize("name", sorted(SPARSE_BF16_TFLOPS))
def test_dense_is_at_most_half_the_sparse_headline(reg: Registry, name: str) -> None:
    d = reg.device(name)
    assert d.peak_flops("bf16") <= SPARSE_BF16_TFLOPS[name] * 1e12 / 2 * 1.001


@pytest.mark.parametrize(
    "name,sms,tensor_cores_per_sm,dense_flop_per_clock_per_tc,clock_hz",
    [
        # A100: 4 third-gen tensor cores per SM, 256 FP16 FMA/clock each, at the 1410 MHz boost.
        ("a100", 108, 4, 2 * 256, 1.41e9),
        # H100 SXM: 4 fourth-gen tensor cores per SM, 512 FP16 FMA/clock each, at 1830 MHz (S1).
        ("h100", 132, 4, 2 * 512, 1.83e9),
    ],
)
def test_bf16_peak_matches_tensor_core_arithmetic(
    reg: Registry,
    name: str,
    sms: int,
    tensor_cores_per_sm: int,
    dense_flop_per_clock_per_tc: int,
    clock_hz: float,
) -> None:
    expected = sms * tensor_cores_per_sm * dense_flop_per_clock_per_tc * clock_hz
    assert reg.device(name).peak["bf16"] == pytest.approx(expected, rel=0.005)


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_peak_ordering(reg: Registry, name: str) -> None:
    p = reg.device(name).peak
    assert p["bf16"] == p["fp16"]
    assert p["fp32"] < p["tf32"] < p["bf16"]
    if "fp8" in p:
        assert p["fp8"] == pytest.approx(2 * p["bf16"], rel=0.01)
    if "fp4" in p:
        assert p["fp4"] >= p["fp8"]
    # tf32 tensor rate is half the bf16 rate on every generation here
    assert p["tf32"] == pytest.approx(p["bf16"] / 2, rel=0.03)


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_ridge_point_is_plausible(reg: Registry, name: str) -> None:
    d = reg.device(name)
    ridge = d.peak_flops("bf16") / d.memory.bandwidth  # FLOP per byte
    assert 100 < ridge < 400


# --- bandwidths are per direction ----------------------------------------------------------------------


# NVLink per-link bandwidth per direction, bytes/s, by generation (25 GB/s for NVLink 3/4, 50 for 5).
PER_LINK_PER_DIR = {3: 25e9, 4: 25e9, 5: 50e9}


@pytest.mark.parametrize("name", sorted(DEVICES - {"mi300x"}))
def test_nvlink_is_per_direction(reg: Registry, name: str) -> None:
    d = reg.device(name)
    assert d.nvlink is not None
    full = d.nvlink.links * PER_LINK_PER_DIR[d.nvlink.generation]
    if name == "h800":
        assert d.nvlink.bandwidth == pytest.approx(200e9)  # export-limited: 400 GB/s bidirectional
    else:
        assert d.nvlink.bandwidth == pytest.approx(full)


@pytest.mark.parametrize("gen,per_dir", [(4, 32e9), (5, 64e9), (6, 128e9)])
def test_pcie_is_per_direction_x16(reg: Registry, gen: int, per_dir: float) -> None:
    assert reg.link(f"pcie{gen}").bandwidth == per_dir
    for d in reg.devices.values():
        if d.pcie_generation == gen:
            assert d.pcie_bandwidth == per_dir, d.name


@pytest.mark.parametrize(
    "name,gbit", [("ib-hdr", 200), ("ib-ndr", 400), ("ib-xdr", 800), ("roce-400", 400), ("spectrum-x", 800)]
)
def test_network_port_rates(reg: Registry, name: str, gbit: int) -> None:
    assert reg.link(name).bandwidth == gbit * 1e9 / 8


def test_switch_radix(reg: Registry) -> None:
    assert reg.link("ib-hdr").radix == 40
    assert reg.link("ib-ndr").radix == 64
    assert reg.link("ib-xdr").radix == 144
    assert reg.link("spectrum-x").radix == 64
    assert reg.link("nvswitch3").in_network_reduction and reg.link("nvswitch4").in_network_reduction
    assert not reg.link("nvswitch2").in_network_reduction


# --- sources ---------------------------------------------------------------------------------------------

_CITES = re.compile(r"\bS\d+|arXiv|NVIDIA|nccl|ESTIMATE|ASSUMED|Megatron|datasheet|SECONDARY", re.I)


def _check_sources(spec: Device | Link | System, required: set[str]) -> None:
    missing = required - set(spec.sources)
    assert not missing, f"{spec.name}: no source for {sorted(missing)}"
    for key, text in spec.sources.items():
        assert _CITES.search(text), f"{spec.name}: source for {key!r} cites nothing: {text!r}"


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_every_device_number_has_a_source(reg: Registry, name: str) -> None:
    d = reg.device(name)
    required = {"sm_count", "boost_clock", "peak", "memory", "l2_cache", "tdp", "pcie"}
    if d.nvlink is not None:
        required.add("nvlink")
    if d.idle_power is not None:
        required.add("idle_power")
        src = d.sources["idle_power"]
        # an estimate says so; otherwise a reference source (S-number) or our own measurement in traces/
        assert "ESTIMATE" in src or re.search(r"\bS\d+", src) or "traces/" in src
    if d.smem_per_sm is not None:
        required.add("smem_per_sm")
    _check_sources(d, required)


@pytest.mark.parametrize("name", sorted(LINKS))
def test_every_link_number_has_a_source(reg: Registry, name: str) -> None:
    lk = reg.link(name)
    _check_sources(lk, {"bandwidth", "latency"} | ({"radix"} if lk.radix else set()))


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_every_system_number_has_a_source(reg: Registry, name: str) -> None:
    s = reg.system(name)
    required = {"gpus", "nics", "power_max"}
    if s.nvlink_bandwidth is not None:
        required.add("nvlink_bandwidth")
    _check_sources(s, required)


# --- systems --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "system,gpus,domain,nic_gbit,nvlink_per_dir",
    [
        ("hgx-a100", 8, 8, 200, 300e9),
        ("hgx-h100", 8, 8, 400, 450e9),
        ("hgx-h200", 8, 8, 400, 450e9),
        ("hgx-h800", 8, 8, 400, 200e9),
        ("dgx-b200", 8, 8, 400, 900e9),
        ("dgx-b300", 8, 8, 800, 900e9),
        ("gb200-nvl72", 72, 72, 400, 900e9),
        ("gb300-nvl72", 72, 72, 800, 900e9),
    ],
)
def test_system_shapes(
    reg: Registry, system: str, gpus: int, domain: int, nic_gbit: int, nvlink_per_dir: float
) -> None:
    c = cluster_for(system, reg=reg)
    assert c.gpus == gpus and c.system.nvlink_domain == domain
    assert c.nics_per_node == gpus  # one compute NIC (rail) per GPU
    assert c.nic_bandwidth == nic_gbit * 1e9 / 8
    assert c.nvlink_bandwidth == nvlink_per_dir
    assert c.fabric_link.kind in ("infiniband", "ethernet")
    assert c.fabric.topology == "rail_optimized" and c.fabric.tiers == 2


def test_nvswitch_bandwidth_matches_device_nvlink(reg: Registry) -> None:
    for s in reg.systems.values():
        if s.nvswitch is None:
            continue
        dev = reg.device(s.device)
        assert dev.nvlink is not None
        assert reg.link(s.nvswitch).bandwidth == dev.nvlink.bandwidth or s.nvlink_bandwidth is not None


def test_multi_rack_gb200(reg: Registry) -> None:
    c = cluster_for("gb200-nvl72", gpus=144, reg=reg)
    assert c.nodes == 2 and c.gpus_per_node == 72


# --- model presets --------------------------------------------------------------------------------------


def _params(m: Any) -> float:
    """Parameter count from the preset's shape (hand formula; norms and biases ignored)."""
    h, L, V = m.hidden, m.layers, m.vocab
    emb = V * h * (1 if m.tied_embeddings else 2)
    if m.activation == "gelu":  # GPT-2/3 style: learned positions
        emb += m.seq_len * h
    if m.mla is not None:
        a = m.mla
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        attn = (
            h * a.q_lora_rank
            + a.q_lora_rank * m.heads * qk
            + h * (a.kv_lora_rank + a.qk_rope_head_dim)
            + a.kv_lora_rank * m.heads * (a.qk_nope_head_dim + a.v_head_dim)
            + m.heads * a.v_head_dim * h
        )
    else:
        attn = 2 * h * m.heads * m.d_head + 2 * h * m.n_kv_heads * m.d_head
    mats = 3 if m.activation == "swiglu" else 2
    if m.moe is None:
        mlp = L * mats * h * m.ffn_hidden
    else:
        e = m.moe
        dense = e.dense_layers * mats * h * m.ffn_hidden
        per_moe = (e.experts + e.shared_experts) * mats * h * e.expert_ffn_hidden + e.experts * h
        mlp = dense + (L - e.dense_layers) * per_moe
    return float(emb + L * attn + mlp)


# Published parameter counts (papers / model cards), for checking the preset shapes.
PUBLISHED_PARAMS = {
    "gpt3-175b": 175e9,
    "gpt3-13b": 13e9,
    "gpt3-6.7b": 6.7e9,
    "gpt3-2.7b": 2.7e9,
    "gpt3-1.3b": 1.3e9,
    "gpt-1t": 1008e9,
    "gpt2-small": 124e6,
    "gpt2-medium": 355e6,
    "gpt2-large": 774e6,
    "gpt2-xl": 1558e6,
    "llama3-8b": 8.03e9,
    "llama3-70b": 70.6e9,
    "llama3-405b": 405.9e9,
    "llama3.1-8b": 8.03e9,
    "llama3.1-70b": 70.6e9,
    "llama3.1-405b": 405.9e9,
    "llama3.3-70b": 70.6e9,
    "llama2-7b": 6.74e9,
    "llama2-70b": 68.98e9,
    "mixtral-8x7b": 46.7e9,
    "deepseek-v3": 671e9,
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_preset_validates_in_a_scenario(reg: Registry, name: str) -> None:
    sc = scenario_from_dict(
        {"kind": "training", "cluster": {"system": "hgx-h200"}, "model": {"preset": name}}, reg
    )
    assert sc.model.name == name
    assert sc.model.seq_len > 0
    assert _params(sc.model) == pytest.approx(PUBLISHED_PARAMS[name], rel=0.02)


@pytest.mark.parametrize(
    ("name", "context"),
    [("llama3-8b", 8192), ("llama3-70b", 8192), ("llama3-405b", 8192), ("llama3.1-8b", 131072),
     ("llama3.1-70b", 131072), ("llama3.1-405b", 131072), ("llama3.3-70b", 131072)],
)
def test_llama3_context_lengths(reg: Registry, name: str, context: int) -> None:
    """Llama 3 presets keep the 8K pre-training context; Llama 3.1/3.3 have 128K (max_position_embeddings
    131072 in their config.json, reached by RoPE scaling); the 3.1 names resolve to the 3.1 presets."""
    assert reg.model_preset(name)["seq_len"] == context
    assert reg.model_preset(name.replace("llama3", "llama-3"))["name"] == name


def test_preset_fields_can_be_overridden(reg: Registry) -> None:
    sc = scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": "hgx-h200"},
            "model": {"preset": "llama3-8b", "seq_len": 2048},
        },
        reg,
    )
    assert sc.model.seq_len == 2048 and sc.model.layers == 32


def test_deepseek_v3_shape(reg: Registry) -> None:
    m = scenario_from_dict(
        {"kind": "training", "cluster": {"system": "hgx-h800"}, "model": {"preset": "deepseek-v3"}}, reg
    ).model
    assert m.moe is not None and m.mla is not None
    assert (m.moe.experts, m.moe.top_k, m.moe.shared_experts, m.moe.dense_layers) == (256, 8, 1, 3)
    assert (m.mla.kv_lora_rank, m.mla.q_lora_rank) == (512, 1536)


def test_model_files_carry_source_comments() -> None:
    for path in sorted((SPECS / "models").glob("*.yaml")):
        head = path.read_text().split("\nname:")[0]
        assert re.search(r"arXiv|config|Table", head), f"{path.name}: no source comment"
        assert "source" not in read_yaml(path), path.name  # ModelSpec forbids unknown keys


def test_power_and_memory_sanity(reg: Registry) -> None:
    for s in reg.systems.values():
        dev = reg.device(s.device)
        assert s.power_max > s.gpus * dev.tdp, s.name  # a system draws more than its GPUs
        assert s.host_memory > 0
    assert math.isclose(reg.system("gb300-nvl72").power_max, 142e3)


def test_builtin_dir_is_the_repo_folder() -> None:
    assert (SPECS / "devices" / "h200.yaml").is_file()
    assert Path(SPECS).name == "hardware_specs"


def test_inference_longer_than_the_context_is_an_error(reg: Registry) -> None:
    """A prompt + output over the model's context is one error naming the fields, not a clipped run."""
    base = {"kind": "inference", "cluster": {"system": "hgx-h100", "gpus": 1}}
    with pytest.raises(SpecError, match="output_len = 20100 tokens exceed llama3-8b's context of 8192"):
        scenario_from_dict(
            {**base, "model": {"preset": "llama3-8b"}, "inference": {"prompt_len": 20000, "output_len": 100}}, reg
        )
    sc = scenario_from_dict(
        {**base, "model": {"preset": "llama3.1-8b"}, "inference": {"prompt_len": 20000, "output_len": 100}}, reg
    )
    assert sc.model.seq_len == 131072
