"""Field descriptions of the JSON Schema (``simcore schema``) from the fields' docstrings.

A field's docstring (the string literal after its annotated assignment) is its description, as pydantic's
``use_attribute_docstrings`` makes it; but pydantic reads them while each class is created, from the
module's source, which costs tens of milliseconds of every start of the command line. Specs that are
documented this way set ``json_schema_extra=field_docstrings`` instead: the source is read only when a
schema is generated, once per module (docs/architecture.md, Speed).
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache
from typing import Any


@cache
def _module_docstrings(module: str) -> dict[str, dict[str, str]]:
    """Class name -> {field name: docstring} of the classes defined at the top level of ``module``."""
    tree = ast.parse(inspect.getsource(sys.modules[module]))
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs: dict[str, str] = {}
        for a, b in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(a, ast.AnnAssign)
                and isinstance(a.target, ast.Name)
                and isinstance(b, ast.Expr)
                and isinstance(b.value, ast.Constant)
                and isinstance(b.value.value, str)
            ):
                docs[a.target.id] = inspect.cleandoc(b.value.value)
        out[node.name] = docs
    return out


def field_docstrings(schema: dict[str, Any], cls: type[Any]) -> None:
    """``json_schema_extra`` of a pydantic model: each property without a description gets the docstring of
    its field, from the nearest class of ``cls``'s bases that declares the field."""
    props = schema.get("properties", {})
    for name, info in cls.model_fields.items():
        key = info.alias or name
        if key not in props or info.description is not None or "description" in props[key]:
            continue
        for base in cls.__mro__:
            if name in base.__dict__.get("__annotations__", {}):
                doc = _module_docstrings(base.__module__).get(base.__name__, {}).get(name)
                if doc:
                    props[key]["description"] = doc
                break


__all__ = ["field_docstrings"]
