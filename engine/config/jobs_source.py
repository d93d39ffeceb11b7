"""A Hydra config source that serves the ``job`` group from ``jobs/`` and the ``flow`` group from
``jobs/flows/``, in HOCON or YAML.

``job=demo/orders`` selects ``jobs/demo/orders.conf`` (or ``.yaml``/``.yml``);
``flow=demo/orders_to_replica`` selects ``jobs/flows/demo/orders_to_replica.conf``. Only the
selected file is read. Because the job is a regular Hydra config node, every key in it can be overridden
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
from engine.config.hocon import load_hocon, load_yaml
from engine.config.paths import jobs_root
from engine.errors import ConfigError

GROUP = "job"
FLOW_GROUP = "flow"
FLOWS_DIR = "flows"
"""Flows live under ``jobs/flows/<group>/<name>``; templates under ``jobs/templates/<pack>/``."""
SUFFIXES = (".conf", ".yaml", ".yml")


def locate_job(choice: str) -> Path | None:
    """The file behind ``job=<choice>``."""
    return locate(jobs_root() / choice)


FLOWS_DIR_ENV = "ENGINE_FLOWS_DIR"
"""Where ``flow=<group>/<name>`` files are found instead of ``jobs/flows/``: the flow service
points a run at the version of the flow it stored (templates stay under ``jobs/templates/``)."""


def flows_root() -> Path:
    """``$ENGINE_FLOWS_DIR``, else ``jobs/flows/``."""
    env = os.environ.get(FLOWS_DIR_ENV)
    return Path(env).resolve() if env else jobs_root() / FLOWS_DIR


def locate_flow(choice: str) -> Path | None:
    """The file behind ``flow=<choice>`` (``<flowGroup>/<flowName>``)."""
    return locate(flows_root() / choice)


def locate(base: Path) -> Path | None:
    """``base`` with the first of :data:`SUFFIXES` that names a file."""
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
        found = self._chosen(config_path)
        file = locate(found[0] / found[1]) if found and found[1] else None
        if found is None or file is None:
            raise ConfigLoadError(f"Config not found : {config_path}")
        try:
            data = load_hocon(file) if file.suffix == ".conf" else load_yaml(file)
        except ConfigError as exc:  # the message Hydra is given; the engine reports the error itself
            raise ConfigLoadError(str(exc)) from exc
        if isinstance(data, dict) and found[0] == jobs_root():  # a job: the class's, not bound to this instance
            data = fill({str(k): v for k, v in data.items()}, JobsConfigSource.documented)
        config = OmegaConf.create(data)
        if found[0] == jobs_root():
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
        found = self._chosen(config_path)
        return found is not None and (found[0] / found[1]).is_dir()

    def is_config(self, config_path: str) -> bool:
        found = self._chosen(config_path)
        return found is not None and bool(found[1]) and locate(found[0] / found[1]) is not None

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        found = self._chosen(config_path)
        if found is None or not (found[0] / found[1]).is_dir():
            return []
        folder = found[0] / found[1]
        names = set()
        for entry in folder.iterdir():
            rel = f"{config_path}/{entry.stem if entry.is_file() else entry.name}"
            if (entry.is_dir() and results_filter in (None, ObjectType.GROUP)) or (
                entry.is_file() and entry.suffix in SUFFIXES and results_filter in (None, ObjectType.CONFIG)
            ):
                names.add(rel)
        return sorted(names)

    @staticmethod
    def _chosen(config_path: str) -> tuple[Path, str] | None:
        """``job/demo/orders.yaml`` -> (``jobs/``, ``demo/orders``), ``flow/demo/x`` -> (``jobs/flows/``,
        ``demo/x``); ``None`` outside the two groups."""
        path = config_path.removesuffix(".yaml").strip("/")
        for group, root in ((GROUP, jobs_root()), (FLOW_GROUP, flows_root())):
            if path == group:
                return root, ""
            if path.startswith(group + "/"):
                return root, path[len(group) + 1 :]
        return None
