"""A Hydra config source that serves the ``job`` group from ``jobs/``, in HOCON or YAML.

``job=demo/orders`` selects ``jobs/demo/orders.conf`` (or ``.yaml``/``.yml``). Only the selected
file is read. Because the job is a regular Hydra config node, every key in it can be overridden
or swept from the command line, and a mistyped key is refused by Hydra. The documented keys the
file leaves out are filled in while it composes (:mod:`engine.config.defaults`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import DictConfig, OmegaConf

from engine.config.defaults import DocumentedDefaults, fill
from engine.config.hocon import load_hocon
from engine.errors import ConfigError

GROUP = "job"
SUFFIXES = (".conf", ".yaml", ".yml")


def jobs_root() -> Path:
    """``$ENGINE_JOBS_DIR``, else ``jobs/`` beside the engine package in its source tree, else (an
    installed package) ``jobs/`` in the working directory."""
    env = os.environ.get("ENGINE_JOBS_DIR")
    if env:
        return Path(env).resolve()
    tree = Path(__file__).resolve().parents[2]
    return tree / "jobs" if (tree / "conf" / "config.yaml").is_file() else Path.cwd() / "jobs"


def locate_job(choice: str) -> Path | None:
    """The file behind ``job=<choice>``."""
    base = jobs_root() / choice
    return next((base.with_name(base.name + s) for s in SUFFIXES if base.with_name(base.name + s).is_file()), None)


BACKFILL_KEYS = ("from", "to")


def _open_backfill_keys(config: Any) -> None:
    """Give every source node ``from``/``to`` (null) so a backfill is an ordinary override
    (``job.sources.orders.from=2026-11-01``) rather than Hydra's ``+key=value``."""
    if not isinstance(config, DictConfig):
        return
    nodes = [config.get("sources")]
    dags = config.get("dags")
    if isinstance(dags, DictConfig):
        nodes += [d.get("sources") for d in dags.values() if isinstance(d, DictConfig)]
    for sources in nodes:
        if isinstance(sources, DictConfig):
            for source in sources.values():
                if isinstance(source, DictConfig):
                    for key in BACKFILL_KEYS:
                        if key not in source:
                            source[key] = None


class JobsConfigSource(ConfigSource):
    documented: ClassVar[DocumentedDefaults | None] = None
    """Lists the documented keys a job leaves out, to fill in (:mod:`engine.config.defaults`); set
    by :func:`~engine.config.run_app` on the class, since Hydra makes its sources itself."""

    @staticmethod
    def scheme() -> str:
        return "jobs"

    def load_config(self, config_path: str) -> ConfigResult:
        choice = self._choice(config_path)
        file = locate_job(choice) if choice else None
        if file is None:
            raise ConfigLoadError(f"Config not found : {config_path}")
        try:
            data = load_hocon(file) if file.suffix == ".conf" else OmegaConf.to_container(OmegaConf.load(file))
        except ConfigError as exc:
            raise ConfigLoadError(str(exc)) from exc
        if isinstance(data, dict):  # the class's, not bound to this instance
            data = fill({str(k): v for k, v in data.items()}, JobsConfigSource.documented)
        config = OmegaConf.create(data)
        _open_backfill_keys(config)
        return ConfigResult(
            config=config,
            path=f"{self.scheme()}://{jobs_root()}",
            provider="engine",
            header=ConfigSource._get_header_dict(""),
        )

    def available(self) -> bool:
        return jobs_root().is_dir()

    def is_group(self, config_path: str) -> bool:
        choice = self._choice(config_path)
        return choice is not None and (jobs_root() / choice).is_dir()

    def is_config(self, config_path: str) -> bool:
        choice = self._choice(config_path)
        return bool(choice) and locate_job(choice) is not None  # type: ignore[arg-type]

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        choice = self._choice(config_path)
        folder = jobs_root() / (choice or "")
        if choice is None or not folder.is_dir():
            return []
        found = set()
        for entry in folder.iterdir():
            rel = f"{config_path}/{entry.stem if entry.is_file() else entry.name}"
            if (entry.is_dir() and results_filter in (None, ObjectType.GROUP)) or (
                entry.is_file() and entry.suffix in SUFFIXES and results_filter in (None, ObjectType.CONFIG)
            ):
                found.add(rel)
        return sorted(found)

    @staticmethod
    def _choice(config_path: str) -> str | None:
        """``job/demo/orders.yaml`` -> ``demo/orders``; ``None`` outside the job group."""
        path = config_path.removesuffix(".yaml").strip("/")
        if path == GROUP:
            return ""
        if not path.startswith(GROUP + "/"):
            return None
        return path[len(GROUP) + 1 :]
