"""Field docstrings become JSON Schema descriptions when a schema is generated (simcore.specs.docstrings)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from simcore.specs.docstrings import field_docstrings
from simcore.specs.scenario import MoESpec, RuntimeSpec


class _Base(BaseModel):
    model_config = ConfigDict(json_schema_extra=field_docstrings)

    a: int = 1
    """First line.

    Second paragraph."""
    b: int = Field(default=2, description="given")
    """not used: the field has a description"""


class _Child(_Base):
    c: str = "x"
    """The child's own."""
    d: int = 0


def test_docstrings_are_descriptions_inherited_fields_included() -> None:
    props = _Child.model_json_schema()["properties"]
    assert props["a"]["description"] == "First line.\n\nSecond paragraph."
    assert props["b"]["description"] == "given"
    assert props["c"]["description"] == "The child's own."
    assert "description" not in props["d"]


def test_scenario_sections_carry_their_docstrings() -> None:
    stack = RuntimeSpec.model_json_schema()["properties"]["stack"]["description"]
    assert stack.startswith("The software that runs the scenario")


def test_every_moe_key_has_a_description() -> None:
    props = MoESpec.model_json_schema()["properties"]
    # capacity_factor is described by the change that makes it priced (issue 44)
    missing = [k for k, v in props.items() if "description" not in v and k != "capacity_factor"]
    assert missing == []
    assert props["expert_bias"]["description"].startswith("The routed experts' projections carry biases")
