"""The bad-input catalogue: every case of every ``cases_*.py`` module, run as a user runs it (the
command line of ``./spark-submit.sh``, through ``main()``, in this process on the test session's
Spark), its exit code, its message and its tables checked (see :mod:`tests.catalogue.case`)."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import tests.catalogue
from tests.catalogue.case import Case, Step
from tests.catalogue.readers import check_rows, read_table


def _cases() -> list[Case]:
    found: list[Case] = []
    for module in pkgutil.iter_modules(tests.catalogue.__path__):
        if module.name.startswith("cases_"):
            found.extend(importlib.import_module(f"tests.catalogue.{module.name}").CASES)
    return found


CASES = _cases()


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in CASES])
def test_case(case: Case, spark: Any, tmp_path: Path) -> None:
    _write(tmp_path, case.files)
    for i, step in enumerate(case.steps):
        code, printed = _run(tmp_path, step)
        where = f"step {i + 1} ({' '.join(step.args)})"
        assert code == step.code, f"{where}: exit code {code}, expected {step.code}:\n{printed}"
        for fragment in step.says:
            assert _filled(fragment, tmp_path) in printed, f"{where}: {fragment!r} not said:\n{printed}"
        for fragment in step.never:
            assert _filled(fragment, tmp_path) not in printed, f"{where}: {fragment!r} printed:\n{printed}"
        for path, rows in step.tables.items():
            check_rows(f"{where}: {path}", read_table(tmp_path / "wh" / path), rows)
        made = [path for path in step.absent if (tmp_path / _filled(path, tmp_path)).exists()]
        assert not made, f"{where}: made {made}"


def _run(root: Path, step: Step) -> tuple[int, str]:
    """Write the step's files, then run its command line through ``main()``: the exit code and
    what it printed (stderr, then stdout)."""
    from engine.cli.app import main

    _write(root, step.files)
    for name, text in step.append.items():
        with (root / name).open("ab") as f:
            f.write(_filled(text, root).encode() if isinstance(text, str) else text)
    if step.before is not None:
        step.before(root)
    args = [_filled(a, root) for a in step.args]
    if not any(a.startswith("warehouse=") for a in args):
        args.append(f"warehouse={root / 'wh'}")
    env = {"ENGINE_JOBS_DIR": str(root / "jobs"), **{k: _filled(v, root) for k, v in step.env.items()}}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([*args, "progress=off"])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert code is not None, "main() returned without exiting"
    return code, err.getvalue() + out.getvalue()


def _write(root: Path, files: Any) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(_filled(content, root))


def _filled(text: str, root: Path) -> str:
    return text.replace("{dir}", str(root))
