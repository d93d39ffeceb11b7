"""``serve.sh``: start the flow service, or manage its users.

    serve.sh [--host 127.0.0.1] [--port 8080] [--request-timeout 30] [warehouse=...] [topology_dir=...]
    serve.sh users add <name> --group <group> [--group ...] [--admin] [warehouse=...]
    serve.sh users remove <name> [warehouse=...]
    serve.sh users list [warehouse=...]

Every command takes the same ``warehouse=...`` as jobs (default ``$ENGINE_WAREHOUSE``, else
``./warehouse``); users, token hashes, flows and executions are kept under its ``_engine/service/``.
A mistake on the command line exits 2 with one line saying which.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from engine.config.jobs_source import flows_root
from engine.errors import EXIT_CONFIG, ConfigError, EngineError, did_you_mean
from engine.flow.roots import service_store
from engine.storage.options import local_path

SETTINGS = ("warehouse", "topology_dir")
"""The ``key=value`` settings every command takes."""
SOURCE_TREE = Path(__file__).resolve().parents[2]
SUBMIT = SOURCE_TREE / "spark-submit.sh"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    settings = {k: v for k, _, v in (a.partition("=") for a in args if "=" in a and not a.startswith("-"))}
    rest = [a for a in args if not ("=" in a and not a.startswith("-"))]
    try:
        for key in settings:
            if key not in SETTINGS:
                raise ConfigError(
                    f"unknown setting `{key}`{did_you_mean(key, SETTINGS)}; known: {', '.join(SETTINGS)}", key=key
                )
        warehouse = _warehouse(settings.get("warehouse"))
        if rest[:1] == ["users"]:
            return _users(rest[1:], warehouse)
        return _serve(rest, warehouse, settings.get("topology_dir"))
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def _warehouse(given: str | None) -> str:
    value = given or os.environ.get("ENGINE_WAREHOUSE") or "./warehouse"
    local = local_path(value)
    if local is None:
        raise ConfigError(
            f"`{value}`: the flow service keeps its store on a local or shared file system (so far), "
            "not an object store",
            key="warehouse",
        )
    return os.path.abspath(local)


def store_root(warehouse: str) -> str:
    return service_store(warehouse)


def _users(args: list[str], warehouse: str) -> int:
    from engine.service.users import Users

    parser = _parser("serve.sh users", "manage the flow service's users")
    sub = parser.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="add a user (or give it a new token); prints the token as the last line")
    add.add_argument("name")
    add.add_argument("--group", action="append", default=[], help="a group of the user (repeat for several)")
    add.add_argument("--admin", action="store_true", help="may change and run every flow")
    remove = sub.add_parser("remove", help="disable a user: its token stops working")
    remove.add_argument("name")
    sub.add_parser("list", help="the users, their groups and role")
    parsed = parser.parse_args(args)
    users = Users.under(store_root(warehouse))
    if parsed.action == "add":
        token = users.add(parsed.name, parsed.group, admin=parsed.admin)
        role = "admin" if parsed.admin else "user"
        print(f"user {parsed.name} ({role}, groups: {', '.join(parsed.group) or 'none'}); its token, shown once:")
        print(token)
        return 0
    if parsed.action == "remove":
        if not users.remove(parsed.name):
            raise ConfigError(f"no user `{parsed.name}`", key="name")
        print(f"user {parsed.name} removed: its token no longer works")
        return 0
    for name, row in sorted(users.listed().items()):
        state = "removed" if row["disabled"] else ("admin" if row["admin"] else "user")
        print(f"{name}\t{state}\tgroups={row['groups']}")
    return 0


def _serve(args: list[str], warehouse: str, topology: str | None) -> int:
    import uvicorn

    from engine.service.access import FlowGroups
    from engine.service.app import Service, create_app
    from engine.service.checks import FlowChecks
    from engine.service.deadline import REQUEST_SECONDS, deadline_protocol
    from engine.service.executions import Executions, Launch
    from engine.service.flowstore import FlowStore
    from engine.service.scheduler import SCHEDULER, Scheduler, SchedulerConf
    from engine.service.users import Users

    parser = _parser("serve.sh", "run the flow service (HTTP, JSON)")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--no-scheduler", action="store_true", help="never schedule flows (API only)")
    parser.add_argument("--tick", type=float, default=2.0, help="seconds between the scheduler's looks")
    parser.add_argument("--leader-ttl", type=float, default=30.0, help="seconds a dead leader blocks the others")
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=REQUEST_SECONDS,
        help="seconds a request (its head and body) may take to arrive whole; then 408 and the connection closed",
    )
    parsed = parser.parse_args(args)
    if parsed.request_timeout <= 0:
        raise ConfigError("serve.sh: --request-timeout must be a number of seconds above 0", key="request-timeout")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = store_root(warehouse)
    overrides = (f"topology_dir={os.path.abspath(topology)}",) if topology else ()
    service = Service(
        users=Users.under(root),
        flows=FlowStore(root, flows_root()),
        groups=FlowGroups(root),
        checks=FlowChecks(warehouse=warehouse, topology=topology),
        executions=Executions(root, Launch(SUBMIT, warehouse, overrides)),
    )
    if not parsed.no_scheduler:
        service.scheduler = Scheduler(
            root,
            flows=service.flows.listed,
            start=lambda flow, trigger: service.start(flow, by=SCHEDULER, trigger=trigger),
            conf=SchedulerConf(tick_seconds=parsed.tick, lease_seconds=parsed.leader_ttl),
        )
        service.scheduler.run_in_background()
    ended = service.executions.recover()
    service.executions.watch_orphans()
    if ended:
        logging.getLogger("engine.service").warning(
            "executions that ended while the service was down: %s", ", ".join(ended)
        )
    try:
        uvicorn.run(
            create_app(service),
            host=parsed.host,
            port=parsed.port,
            log_level="info",
            http=deadline_protocol(parsed.request_timeout),
        )
    finally:
        if service.scheduler is not None:
            service.scheduler.stop()  # the leader lease is given back: another instance leads at once
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{self.prog}: {message}")


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    return _Parser(prog=prog, description=description)


if __name__ == "__main__":
    sys.exit(main())
