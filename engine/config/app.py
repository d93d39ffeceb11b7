"""Hydra owns the command line: overrides, config groups, multirun, ``--cfg``.

:func:`run_app` composes the config and hands each composed run to a task as a plain dict (no
OmegaConf past this package). What Hydra refuses (a missing job, an unknown key, a job file that
does not parse) is one ``config error:`` line (:mod:`engine.config.refusals`) instead of Hydra's
own report, and exit code 2 (a config or usage error). ``--cfg`` is answered here so that secrets
are redacted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import hydra
import hydra._internal.utils as hydra_utils
from hydra._internal.hydra import Hydra
from hydra._internal.sources_registry import SourcesRegistry
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from engine.config.defaults import DocumentedDefaults, strip
from engine.config.jobs_source import JobsConfigSource, locate_flow, locate_job
from engine.config.paths import conf_dir
from engine.config.redact import redact
from engine.config.refusals import check_folders, refusal
from engine.errors import EXIT_CONFIG, ConfigError


@dataclass(frozen=True)
class AppConfig:
    """One composed run: the resolved config and where its job came from."""

    data: dict[str, Any]
    job_choice: str | None
    job_file: str | None
    overrides: tuple[str, ...] = ()
    """The command-line overrides of this run (in a multirun, the swept values)."""
    multirun: bool = False
    flow_choice: str | None = None
    """``flow=<group>/<name>``: the run is a flow's (its file in :attr:`flow_file`), not a job's."""
    flow_file: str | None = None


def say_refused(error: ConfigError) -> None:
    """How :func:`run_app` reports what it refuses unless told otherwise: one line on stderr."""
    print(f"config error: {error}", file=sys.stderr, flush=True)


def run_app(
    argv: list[str],
    task: Callable[[AppConfig], int],
    *,
    documented: DocumentedDefaults | None = None,
    on_refused: Callable[[ConfigError], None] = say_refused,
) -> int:
    """Run ``task`` once per composed config (several times with ``-m``); the worst exit code.
    ``documented`` lists the documented keys a job leaves out, so that ``key=value`` overrides
    them as it does the keys the job file sets. A command line or config that cannot be composed
    goes to ``on_refused`` as one :class:`ConfigError` (exit code 2)."""
    # Hydra discovers config sources only as installed plugins; registering ours directly keeps
    # the engine importable from a --py-files zip.
    SourcesRegistry.instance().register(JobsConfigSource)
    JobsConfigSource.documented = documented
    try:
        check_folders(argv)
    except ConfigError as exc:
        on_refused(exc)
        return EXIT_CONFIG
    if "--cfg" in argv or "-c" in argv:
        return _show_config(argv, on_refused)
    codes: list[int] = []

    @hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")
    def _main(cfg: DictConfig) -> None:
        try:
            app = _app_config(cfg)
        except ConfigError as exc:  # reported here: raised, Hydra would print its own line first
            on_refused(exc)
            codes.append(EXIT_CONFIG)
            return
        codes.append(task(app))

    saved, saved_mode, saved_report = sys.argv, Hydra.get_mode, hydra_utils.run_and_report
    sys.argv = [saved[0], *argv]
    if not _may_set_mode(argv):
        Hydra.get_mode = _no_mode  # type: ignore[method-assign]
    hydra_utils.run_and_report = _refusing
    try:
        _main()
    except _Refused as exc:
        on_refused(exc.error)
        codes.append(EXIT_CONFIG)
    except SystemExit as exc:
        if not codes:
            return 0 if exc.code in (0, None) else EXIT_CONFIG
    finally:
        sys.argv, Hydra.get_mode = saved, saved_mode  # type: ignore[method-assign]
        hydra_utils.run_and_report = saved_report
    return max(codes, default=0)


class _Refused(Exception):
    """What composing raised, carried past Hydra as one config error."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


def _refusing(func: Callable[[], Any]) -> Any:
    """Hydra's ``run_and_report`` (which prints what Hydra raised, often as a traceback, and
    exits 1) in the engine's words: the exception becomes one :class:`ConfigError`
    (:func:`~engine.config.refusals.refusal`); ``HYDRA_FULL_ERROR=1`` still shows Hydra's."""
    try:
        return func()
    except _Refused:
        raise
    except Exception as exc:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        raise _Refused(refusal(exc)) from exc


def _may_set_mode(argv: list[str]) -> bool:
    """Whether something else than the engine's own config tree could set ``hydra.mode``: another
    tree (``ENGINE_CONF_DIR``, ``--config-dir``, ``--config-name``, any flag but ``-m``), or an
    argument that overrides Hydra's config (``hydra.mode=...``, ``hydra/sweeper=...``,
    ``+hydra.x``) or adds a config group that may (``+experiment=x``)."""
    if os.environ.get("ENGINE_CONF_DIR"):
        return True
    for arg in argv:
        if arg.startswith("-") and arg not in ("-m", "--multirun"):
            return True
        if arg.startswith(("+", "~")) and "=" in arg and "." not in arg.split("=", 1)[0]:
            return True  # a config group added or removed: its file may be global
        if arg.lstrip("+~").startswith("hydra"):
            return True
    return False


def _no_mode(self: Hydra, config_name: str | None, overrides: list[str]) -> None:
    """Hydra composes the whole config once more only to read ``hydra.mode`` (most of a second).
    Neither the engine's config tree nor a job (under ``job``) sets it, so unless
    :func:`_may_set_mode` it is None, as Hydra would find: ``-m`` picks multirun, else a single run."""
    return None


def _app_config(cfg: DictConfig) -> AppConfig:
    choices = HydraConfig.get().runtime.choices
    choice, flow = choices.get("job"), choices.get("flow")
    file = locate_job(choice) if choice else None
    flow_file = locate_flow(flow) if flow else None
    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as exc:
        problem = str(getattr(exc, "msg", None) or exc).splitlines()[0]
        key = getattr(exc, "full_key", None)
        raise ConfigError(f"cannot resolve config: {problem}", key=str(key) if key else None) from exc
    assert isinstance(data, dict)
    hydra_cfg = HydraConfig.get()
    strip(data.get("job"), job_keys(hydra_cfg.overrides.task))
    return AppConfig(
        data={str(k): v for k, v in data.items()},
        job_choice=choice,
        job_file=str(file) if file else None,
        overrides=tuple(hydra_cfg.overrides.task),
        multirun=str(hydra_cfg.mode) == "RunMode.MULTIRUN",
        flow_choice=flow,
        flow_file=str(flow_file) if flow_file else None,
    )


def job_keys(overrides: Iterable[str]) -> list[str]:
    """The keys inside the job that ``overrides`` set, add or delete (``job.a.b=1``: ``a.b``); the
    choice of the job itself (``job=t/flights``) and other groups' are none of them."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return [o.key_or_group.removeprefix("job.") for o in parsed if o.key_or_group.startswith("job.") and not o.package]


def _show_config(argv: list[str], on_refused: Callable[[ConfigError], None]) -> int:
    """Hydra's ``--cfg job|hydra|all`` (and ``--resolve``), with secret-looking values redacted."""
    args = list(argv)
    flag = "--cfg" if "--cfg" in args else "-c"
    at = args.index(flag)
    kind = args[at + 1] if at + 1 < len(args) else "job"
    del args[at : at + 2]
    resolve = "--resolve" in args
    overrides = [a for a in args if a != "--resolve"]
    try:
        with hydra.initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            cfg = hydra.compose("config", overrides=overrides, return_hydra_config=kind != "job")
        data = OmegaConf.to_container(cfg, resolve=resolve)
    except Exception as exc:  # Hydra raises many kinds for a bad override or a missing config
        on_refused(refusal(exc))
        return EXIT_CONFIG
    assert isinstance(data, dict)
    strip(data.get("job"), job_keys(overrides))
    if kind == "hydra":
        data = {"hydra": data.get("hydra", {})}
    elif kind == "job":
        data.pop("hydra", None)
    print(OmegaConf.to_yaml(redact(data)), end="")
    return 0
