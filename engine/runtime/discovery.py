"""Finding a fan-out's datasets when the job runs: the matches of a glob, the tables of a schema.

Discovery runs once per run, on the driver, before planning: one glob call on the file system,
or one query of the database's ``information_schema`` through Spark's JDBC reader.
"""

from __future__ import annotations

import logging
import posixpath
from typing import TYPE_CHECKING

from engine.commit.jdbc import connection_options
from engine.converters.base import first_line
from engine.errors import ConfigError, JobFailedError
from engine.spec.fanout import Found
from engine.spec.model import GlobDiscoverConf, JdbcTablesDiscoverConf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
KEY = "job.fan_out.discover"


def discover(spark: SparkSession, conf: GlobDiscoverConf | JdbcTablesDiscoverConf, *, file: str | None) -> list[Found]:
    found = _glob(spark, conf, file) if isinstance(conf, GlobDiscoverConf) else _tables(spark, conf, file)
    log.info("fan-out: discovery %s found %d dataset(s)", conf.type, len(found))
    return found


def _glob(spark: SparkSession, conf: GlobDiscoverConf, file: str | None) -> list[Found]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pattern = jvm.org.apache.hadoop.fs.Path(conf.path)
    try:
        fs = pattern.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[union-attr]
        statuses = fs.globStatus(pattern) or []
    except Exception as exc:
        raise ConfigError(f"cannot list `{conf.path}`: {first_line(exc)}", key=f"{KEY}.path", file=file) from exc
    found = []
    for status in statuses:
        path = status.getPath()
        uri = path.toUri().getPath() if path.toUri().getScheme() == "file" else path.toString()
        base = posixpath.basename(uri.rstrip("/"))
        if base.startswith(("_", ".")) or not _wanted(conf.match, bool(status.isDirectory())):
            continue
        name = base if status.isDirectory() else base.split(".", 1)[0]
        found.append(Found(name, {"path": uri}))
    return found


def _wanted(match: str, is_dir: bool) -> bool:
    return match == "any" or (match == "directories") == is_dir


def _tables(spark: SparkSession, conf: JdbcTablesDiscoverConf, file: str | None) -> list[Found]:
    types = "'BASE TABLE', 'VIEW'" if conf.views else "'BASE TABLE'"
    schema = conf.schema_.replace("'", "''")
    sql = (
        f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}' AND table_type IN ({types})"
    )
    opts = connection_options(conf.url, user=conf.user, password=conf.password, driver=conf.driver)
    try:
        rows = spark.read.format("jdbc").options(**opts).option("query", sql).load().collect()
    except Exception as exc:  # the database is unreachable or refused us: the environment, not the config
        raise JobFailedError(
            f"fan-out discovery (`{KEY}`): cannot list the tables of schema `{conf.schema_}`: {first_line(exc)}"
        ) from exc
    names = sorted(str(r[0]) for r in rows)
    return [Found(n, {"table": f"{conf.schema_}.{n}", "schema": conf.schema_}) for n in names]
