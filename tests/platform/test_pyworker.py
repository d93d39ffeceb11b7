"""Python workers keep each zip archive's directory between tasks, unless switched off."""

from __future__ import annotations

import sys
import zipfile
import zipimport
from pathlib import Path

import pytest

from engine.platform.pyworker import steady_zip_imports


def _zip_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    archive = tmp_path / "mod.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("steady_probe_mod.py", "X = 1\n")
    monkeypatch.setattr(sys, "path_importer_cache", {str(archive): zipimport.zipimporter(str(archive))})
    return str(archive)


def test_plain_zip_importers_are_swapped_for_steady_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _zip_on_path(tmp_path, monkeypatch)
    assert steady_zip_imports() == 1
    finder = sys.path_importer_cache[archive]
    assert type(finder) is not zipimport.zipimporter and isinstance(finder, zipimport.zipimporter)
    assert steady_zip_imports() == 0, "a steady importer is not swapped again"


def test_the_off_switch_keeps_the_plain_importers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _zip_on_path(tmp_path, monkeypatch)
    monkeypatch.setenv("ENGINE_STEADY_ZIP", "off")
    assert steady_zip_imports() == 0
    assert type(sys.path_importer_cache[archive]) is zipimport.zipimporter
