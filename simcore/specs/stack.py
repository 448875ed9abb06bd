"""Software stacks (``runtime.stack``): the defaults PyTorch, torchtitan, Megatron-Core, DeepSpeed, vLLM,
SGLang and TensorRT-LLM apply, as data (``hardware_specs/stacks/<name>.yaml``, each default with its source).

A stack sets defaults only: :func:`apply_stack` fills the scenario fields the scenario did not give (a
field counts as given when the file, a ``--set`` or an API dict named it, pydantic's ``model_fields_set``)
with the stack's values, and returns which it chose so that a prediction can say so. Its attention entry
is the ordered list of kernels the software tries on each GPU generation; which of them accepts a shape
is :func:`simcore.compute.ops.pick_attention_backend`'s question. See ``docs/stacks.md``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal, NamedTuple

from pydantic import Field, model_validator

from simcore.errors import SpecError
from simcore.specs.hardware import Device
from simcore.specs.loader import load_file
from simcore.specs.quantities import Spec
from simcore.specs.scenario import InferenceSpec, ParallelSpec, RuntimeSpec, Scenario, TrainingSpec

STACKS = ("pytorch", "torchtitan", "megatron", "deepspeed", "vllm", "sglang", "trtllm")
"""The stacks simcore knows (``RuntimeSpec.stack``)."""

PricedBackend = Literal["cudnn", "flash", "efficient", "eager"]

GENERATIONS = ("ampere", "hopper", "blackwell")
"""GPU generations a stack's attention entry may name (``other``: any device not listed)."""

# scenario sections a stack may set defaults in (and the kinds of scenario that have them)
_SECTIONS = ("training", "inference", "parallel", "runtime")


class StackDefault(Spec):
    """One default: the value the stack uses for a scenario field, and where that is written."""

    value: Any
    source: str = Field(min_length=1)
    """The framework's code (file, function, commit) or docs that set it."""
    when: dict[str, list[Any]] = {}
    """Only where each named field (``section.field``) already has one of the listed values (DeepSpeed's
    ``overlap_comm`` is on only for ZeRO stage 3)."""


class AttentionChoice(Spec):
    """What the stack runs for attention on one GPU generation."""

    kernel: str = Field(min_length=1)
    """The kernels the software runs, by name (``cuDNN fused attention via SDPA``, ``FlashAttention-3``)."""
    order: list[PricedBackend] = Field(min_length=1)
    """The backends it tries, first that accepts the shape wins, in simcore's priced kernels: ``cudnn``,
    ``flash`` (FlashAttention-2), ``efficient`` (PyTorch's memory-efficient kernels), ``eager`` (no fused
    kernel: batched GEMMs and a softmax, SDPA's math fallback)."""
    priced_as: str = ""
    """Where ``kernel`` is not one simcore has measured: which measured kernel stands in, and why."""
    cudnn_max_head_dim: int = Field(default=128, gt=0)
    """Largest head dimension the ``cudnn`` entry takes (cuDNN's limit for the bundled version)."""
    source: str = Field(min_length=1)


class StackSpec(Spec):
    """A software stack's defaults (one ``hardware_specs/stacks/*.yaml``)."""

    name: Literal["pytorch", "torchtitan", "megatron", "deepspeed", "vllm", "sglang", "trtllm"]
    display_name: str
    version: str = Field(min_length=1)
    """The release (or commit) the defaults were read at."""
    kinds: list[Literal["training", "inference", "serving"]] = Field(min_length=1)
    """The scenario kinds the stack runs."""
    description: str = ""
    attention: dict[Literal["ampere", "hopper", "blackwell", "other"], AttentionChoice]
    defaults: dict[str, StackDefault] = {}
    """``section.field`` -> the stack's value (sections: training, inference, parallel, runtime); a second
    default of the same field under another condition is keyed ``section.field@tag``."""

    @model_validator(mode="after")
    def _keys(self) -> StackSpec:
        if "other" not in self.attention:
            raise ValueError("attention needs an 'other' entry (devices of no listed generation)")
        for key in self.defaults:
            section, _, fld = field_of(key).partition(".")
            if section not in _SECTIONS or not fld or "." in fld:
                raise ValueError(f"default {key!r}: expected section.field with a section of {', '.join(_SECTIONS)}")
            if fld not in _section_class(section).model_fields:
                raise ValueError(f"default {key!r}: {section} has no field {fld!r}")
            for cond in self.defaults[key].when:
                c_sec, _, c_fld = cond.partition(".")
                if c_sec not in _SECTIONS or c_fld not in _section_class(c_sec).model_fields:
                    raise ValueError(f"default {key!r}: unknown field {cond!r} in 'when'")
        return self


def _section_class(section: str) -> Any:
    return {"training": TrainingSpec, "inference": InferenceSpec, "parallel": ParallelSpec, "runtime": RuntimeSpec}[
        section
    ]


@lru_cache(maxsize=16)
def load_stack(name: str) -> StackSpec:
    """The built-in stack ``name`` (``hardware_specs/stacks/<name>.yaml``)."""
    from simcore.specs.registry import builtin_dir

    if name not in STACKS:
        raise SpecError(f"unknown stack {name!r}; known: {', '.join(STACKS)}", field="runtime.stack")
    path = builtin_dir() / "stacks" / f"{name}.yaml"
    spec = load_file(StackSpec, path)
    if spec.name != name:
        raise SpecError(f"names stack {spec.name!r}, expected {name!r}", file=str(path), field="name")
    return spec


def generation(dev: Device) -> str:
    """The GPU generation of ``dev`` a stack's attention entry is keyed by: ``ampere``, ``hopper`` or
    ``blackwell`` (Blackwell Ultra included) from the device's ``architecture``, else ``other``."""
    first = dev.architecture.split()[0].lower() if dev.vendor == "nvidia" and dev.architecture else ""
    return first if first in GENERATIONS else "other"


def attention_choice(stack: StackSpec, dev: Device) -> AttentionChoice:
    """The stack's attention entry for ``dev``'s generation (its ``other`` entry where none is listed)."""
    return stack.attention.get(generation(dev)) or stack.attention["other"]  # type: ignore[call-overload]


class Chosen(NamedTuple):
    """A default the stack chose for a field the scenario did not give."""

    key: str
    value: Any
    source: str


MOE_TRAINING_KEYS = ("moe_expert_calls", "moe_host_sync", "moe_dispatcher", "moe_a2a_overlap", "moe_fused_mlp")
"""``runtime`` keys that apply only to training an MoE model."""


def _changed(sc: Scenario, stack: StackSpec, section: str, fld: str) -> bool:
    """``section.fld`` is given with a value other than the one ``sc`` gets without it: its stack's default where
    the stack sets one, else the field's own (a scenario written out whole, as the planner does, passes)."""
    part = getattr(sc, section)
    if part is None or fld not in part.model_fields_set:
        return False
    key = f"{section}.{fld}"
    quiet = [d.value for k, d in stack.defaults.items() if field_of(k) == key]
    quiet.append(type(part).model_fields[fld].default)
    return getattr(part, fld) not in quiet


def check_given(sc: Scenario, stack: StackSpec) -> None:
    """Keys the scenario gives that its workload cannot honour, each one :class:`SpecError` naming it: the
    ``runtime.moe_*`` keys (:data:`MOE_TRAINING_KEYS`) on a dense model or outside training, DeepSeek-V4's
    hybrid attention (``model.csa``) outside training or on an attention backend other than cuDNN's, and
    ``parallel.pipeline_library`` without pipeline stages. The stack's own defaults for them stay silent
    (:func:`apply_stack` sets them only on fields the scenario did not give)."""
    moe = [f"runtime.{k}" for k in MOE_TRAINING_KEYS if _changed(sc, stack, "runtime", k)]
    if moe and sc.kind != "training":
        raise SpecError(f"is modelled for training an MoE model (this one is kind: {sc.kind})", field=moe[0])
    if moe and sc.model.moe is None:
        raise SpecError(f"applies to an MoE model ({sc.model.name} has no experts: model.moe)", field=moe[0])
    if sc.model.csa is not None and sc.kind != "training":
        raise SpecError(
            f"DeepSeek-V4's hybrid attention is modelled for training only (this one is kind: {sc.kind})",
            field="model.csa",
        )
    if sc.model.csa is not None and sc.runtime.attention_backend not in ("auto", "cudnn"):
        raise SpecError(
            f"{sc.runtime.attention_backend} is not modelled for DeepSeek-V4's hybrid attention (model.csa), which "
            "runs its own fused sparse kernels: auto or cudnn",
            field="runtime.attention_backend",
        )
    if _changed(sc, stack, "parallel", "pipeline_library") and sc.parallel.pp <= 1:
        raise SpecError(
            "applies to a layout with pipeline stages (parallel.pp > 1; this one: pp 1)",
            field="parallel.pipeline_library",
        )


def apply_stack(sc: Scenario) -> tuple[Scenario, list[Chosen]]:
    """``sc`` with every default of its stack (``runtime.stack``) that the scenario did not give, and
    the list of those chosen (in the stack file's order). Fields the scenario gave always win; a section
    the scenario's kind has not got (``training`` in an inference scenario) is skipped."""
    stack = load_stack(sc.runtime.stack)
    if sc.kind not in stack.kinds:
        raise SpecError(
            f"stack {stack.name} runs {' and '.join(stack.kinds)} scenarios, not {sc.kind}", field="runtime.stack"
        )
    check_given(sc, stack)
    updates: dict[str, dict[str, Any]] = {}
    chosen: list[Chosen] = []
    for key, d in stack.defaults.items():
        section, _, fld = field_of(key).partition(".")
        part = getattr(sc, section)
        if part is None or fld in part.model_fields_set or fld in updates.get(section, {}):
            continue
        if section == "parallel" and sc.kind != "training":
            continue  # data-parallel and pipeline defaults mean nothing to one inference replica
        if field_of(key) in PIPELINE_ONLY and sc.parallel.pp <= 1:
            continue  # nor the pipelining code to a layout without pipeline stages
        if any(_value(sc, updates, k) not in vals for k, vals in d.when.items()):
            continue
        updates.setdefault(section, {})[fld] = d.value
        chosen.append(Chosen(field_of(key), d.value, d.source))
    if not updates:
        return sc, chosen
    new: dict[str, Any] = {}
    for section, vals in updates.items():
        part = getattr(sc, section)
        # the stack's values validated as a scenario file's would be
        checked = type(part).model_validate(vals)
        new[section] = part.model_copy(update={f: getattr(checked, f) for f in vals})
    return sc.model_copy(update=new), chosen


PIPELINE_ONLY = ("parallel.pipeline_library",)
"""Defaults a stack sets only where the layout has pipeline stages (``parallel.pp > 1``)."""


def field_of(key: str) -> str:
    """The ``section.field`` a defaults key names (``parallel.dp_overlap@3`` -> ``parallel.dp_overlap``)."""
    return key.partition("@")[0]


def _value(sc: Scenario, updates: dict[str, dict[str, Any]], key: str) -> Any:
    section, _, fld = key.partition(".")
    if fld in updates.get(section, {}):
        return updates[section][fld]
    return getattr(getattr(sc, section), fld)
