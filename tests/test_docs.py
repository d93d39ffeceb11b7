"""The documentation site (issue 59, item 7): the README stays short, and the generated config
reference names every key of every registered plugin and of the job-level models, so it cannot
drift from them. No JVM."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

from engine.converters import CONVERTERS
from engine.plugins import Registry
from engine.sinks import SINKS
from engine.sources import SOURCES
from engine.spec.model import DagConf, JobConf

REPO = Path(__file__).resolve().parents[1]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_reference", REPO / "docs" / "hooks" / "config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference() -> str:
    text: str = generator().render()
    return text


def section(reference: str, title: str, after: str = "") -> str:
    start = reference.index(f"### {title}", reference.index(after))
    end = reference.find("\n### ", start + 1)
    return reference[start : end if end >= 0 else len(reference)]


def keys(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def test_the_readme_is_at_most_10_kb() -> None:
    assert (REPO / "README.md").stat().st_size <= 10 * 1024


@pytest.mark.parametrize("registry", [SOURCES, CONVERTERS, SINKS], ids=lambda r: r.kind)
def test_every_key_of_every_registered_plugin_is_in_the_reference(reference: str, registry: Registry) -> None:  # type: ignore[type-arg]
    assert registry.names()  # the registry is walked
    for name in registry.names():
        kind = {"source": "Sources", "converter": "Converters", "sink": "Sinks"}[registry.kind]
        part = section(reference, f"`{name}`", after=f"\n## {kind}\n")
        listed = set(re.findall(r"^\| `([^`]+)` \|", part, re.MULTILINE))
        assert keys(registry.get(name).conf) - listed == set(), name
        assert "```hocon" in part, name


@pytest.mark.parametrize("model", [JobConf, DagConf], ids=lambda m: m.__name__)
def test_every_job_level_key_is_in_the_reference(reference: str, model: type[BaseModel]) -> None:
    part = section(reference, f"{'Job' if model is JobConf else 'DAG'} (`{model.__name__}`")
    listed = set(re.findall(r"^\| `([^`]+)` \|", part, re.MULTILINE))
    assert keys(model) - listed == set()


def test_the_site_has_a_page_for_every_nav_entry() -> None:
    nav = re.findall(r":\s+([\w/.-]+\.md)$", (REPO / "mkdocs.yml").read_text(), re.MULTILINE)
    generated = {"reference/config.md"}
    assert nav and [p for p in nav if p not in generated and not (REPO / "docs" / p).is_file()] == []
