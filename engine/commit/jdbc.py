"""Publishing into a database over JDBC: one transaction applies a staged batch and records it.

A JDBC sink stages its branch into a table of its own (``engine_stage_<hash>``). Its commit steps:

- :class:`JdbcPublish`: in one database transaction, apply the staging table to the target
  (insert, delete-then-insert, or upsert) and insert ``(app_id, batch)`` into the control table.
  ``verify()`` is that row: a batch replayed after a crash anywhere is applied at most once, and the
  control table's primary key refuses a second record even if two publishers raced.
- :class:`JdbcDropStaging`: drop the staging table (after the commit: some databases commit on DDL).

Steps store the URL and the user, never the password: the run hands the logins of its job's
sinks to the steps (:attr:`~engine.commit.steps.StepContext.locations`, under :func:`login_key`).
The connection is the driver's own (``Driver.connect``), through the driver JVM: a driver added
with the job's jars is not visible to ``DriverManager``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from engine.commit.errors import StepError
from engine.commit.steps import CommitStep, StepContext
from engine.plugins.lineage import shown_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROW_ID = "engine_row"
"""A staged row's number (fixed by the staged frame), so the apply takes each staged row once."""
DRIVERS = {
    "postgresql": "org.postgresql.Driver",
    "mysql": "com.mysql.cj.jdbc.Driver",
    "mariadb": "org.mariadb.jdbc.Driver",
    "sqlserver": "com.microsoft.sqlserver.jdbc.SQLServerDriver",
    "oracle": "oracle.jdbc.OracleDriver",
    "db2": "com.ibm.db2.jcc.DB2Driver",
    "sqlite": "org.sqlite.JDBC",
    "h2": "org.h2.Driver",
}


def scheme(url: str) -> str:
    """``postgresql`` of ``jdbc:postgresql://...``."""
    return url.split(":")[1] if url.count(":") >= 2 else ""


def connection_options(
    url: str, *, user: str | None = None, password: str | None = None, driver: str | None = None
) -> dict[str, str]:
    """Spark JDBC reader/writer options for a connection, the driver class inferred from the URL."""
    opts = {"url": url}
    for key, value in (("user", user), ("password", password), ("driver", driver)):
        if value is not None:
            opts[key] = value
    if "driver" not in opts and scheme(url) in DRIVERS:  # jars added at submit time are not visible to DriverManager
        opts["driver"] = DRIVERS[scheme(url)]
    return opts


def login_key(dag: str, sink: str) -> str:
    """Where a run keeps the login of ``sink`` of ``dag`` for the steps (two sinks never share one)."""
    return f"jdbc-login:{dag}:{sink}"


@dataclass(frozen=True)
class JdbcLogin:
    """How to connect: the URL, the user, the password (never stored in a step) and driver options."""

    url: str = field(repr=False)
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    driver: str | None = None
    options: dict[str, str] = field(default_factory=dict, repr=False)

    def spark_options(self) -> dict[str, str]:
        return {
            **connection_options(self.url, user=self.user, password=self.password, driver=self.driver),
            **self.options,
        }

    def quote(self, name: str) -> str:
        """A column name quoted as the database and Spark's JDBC writer quote it."""
        if scheme(self.url) in ("mysql", "mariadb"):
            return "`" + name.replace("`", "``") + "`"
        return '"' + name.replace('"', '""') + '"'


class Database:
    """One JDBC connection through the driver JVM (use as a context manager)."""

    def __init__(self, spark: SparkSession, login: JdbcLogin) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        opts = login.spark_options()
        name = opts.pop("driver", None)
        if name is None:
            raise StepError(f"no JDBC driver known for {login.url}: set the sink's `driver`")
        props = jvm.java.util.Properties()
        for key, value in opts.items():
            if key != "url":
                props.setProperty(key, str(value))
        self.url = shown_url(login.url)
        try:
            driver = functools.reduce(getattr, name.split("."), jvm)()
            self.conn = driver.connect(login.url, props)
        except Exception as exc:
            raise StepError(f"cannot connect to {self.url}: {_first_line(exc)}") from exc
        if self.conn is None:
            raise StepError(f"the driver {name} does not accept the URL {self.url}")

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def update(self, sql: str) -> int:
        stmt = self.conn.createStatement()
        try:
            return int(stmt.executeUpdate(sql))
        finally:
            stmt.close()

    def rows(self, sql: str, *params: str | int) -> list[list[Any]]:
        stmt = self.conn.prepareStatement(sql)
        try:
            for i, value in enumerate(params, start=1):
                if isinstance(value, int):
                    stmt.setLong(i, value)
                else:
                    stmt.setString(i, value)
            found = stmt.executeQuery()
            width = found.getMetaData().getColumnCount()
            out = []
            while found.next():
                out.append([found.getObject(i) for i in range(1, width + 1)])
            return out
        finally:
            stmt.close()

    def columns(self, table: str) -> list[str] | None:
        """The table's column names, ``None`` if there is no such table (SQLSTATE class 42: the
        name does not resolve). Any other failure (rights, the network) is raised."""
        from py4j.protocol import Py4JJavaError

        stmt = self.conn.createStatement()
        try:
            meta = stmt.executeQuery(f"SELECT * FROM {table} WHERE 1 = 0").getMetaData()
            return [str(meta.getColumnName(i)) for i in range(1, meta.getColumnCount() + 1)]
        except Py4JJavaError as exc:
            state = exc.java_exception.getSQLState() if hasattr(exc.java_exception, "getSQLState") else None
            if state is not None and str(state).startswith("42"):
                if not self.conn.getAutoCommit():
                    self.conn.rollback()
                return None
            raise StepError(f"cannot look at table {table} at {self.url}: {_first_line(exc)}") from exc
        finally:
            stmt.close()

    def unique_keys(self, table: str) -> list[list[str]]:
        """PostgreSQL: the column sets of ``table``'s unique indexes (what ``ON CONFLICT`` needs)."""
        sql = (
            "SELECT string_agg(a.attname, ',' ORDER BY a.attname) FROM pg_index i JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = CAST(? AS regclass) "
            "AND i.indisunique GROUP BY i.indexrelid"
        )
        return [str(r[0]).split(",") for r in self.rows(sql, table)]

    def ensure_control(self, control: str) -> None:
        if self.columns(control) is None:
            self.update(
                f"CREATE TABLE {control} (app_id VARCHAR(512) NOT NULL, batch BIGINT NOT NULL, "
                "target VARCHAR(512), row_count BIGINT, committed_at TIMESTAMP, PRIMARY KEY (app_id, batch))"
            )

    def recorded(self, control: str, app_id: str, batch: int) -> bool:
        return bool(self.rows(f"SELECT 1 FROM {control} WHERE app_id = ? AND batch = ?", app_id, batch))


def login_for(ctx: StepContext, key: str, sink: str) -> JdbcLogin:
    login = ctx.locations.get(key)
    if not isinstance(login, JdbcLogin):
        raise StepError(
            f"sink `{sink}`: this job has no such JDBC sink any more: the batch it staged can only be published by "
            "a run of a job that still has that sink"
        )
    return login


@dataclass
class JdbcPublish(CommitStep):
    """Apply a staged batch to a table and record it, in one transaction."""

    kind: ClassVar[str] = "jdbc_publish"
    sink: str
    login: str
    """The key of the sink's login in :attr:`StepContext.locations` (:func:`login_key`)."""
    url: str
    """Where, as shown (:func:`shown_url`): never a password."""
    table: str
    staging: str
    mode: str
    """``append``, ``overwrite`` or ``upsert``."""
    columns: list[str]
    keys: list[str]
    app_id: str
    batch: int
    control: str

    def verify(self, ctx: StepContext) -> bool:
        with Database(ctx.spark, login_for(ctx, self.login, self.sink)) as db:
            return db.recorded(self.control, self.app_id, self.batch)

    def execute(self, ctx: StepContext) -> None:
        login = login_for(ctx, self.login, self.sink)
        with Database(ctx.spark, login) as db:
            if db.recorded(self.control, self.app_id, self.batch):
                return
            if db.columns(self.staging) is None:
                raise StepError(
                    f"sink `{self.sink}`: the staging table {self.staging} is gone and batch {self.batch} is not in "
                    f"{self.control}: it was dropped before the batch was published"
                )
            db.conn.setAutoCommit(False)
            try:
                if self.mode == "overwrite":
                    db.update(f"DELETE FROM {self.table}")
                rows = db.update(self.apply_sql(login))
                db.update(
                    f"INSERT INTO {self.control} (app_id, batch, target, row_count, committed_at) "
                    f"VALUES ('{_sql_text(self.app_id)}', {int(self.batch)}, '{_sql_text(self.table)}', {rows}, "
                    "CURRENT_TIMESTAMP)"
                )
                ctx.midway()
                db.conn.commit()
            except Exception as exc:
                db.conn.rollback()
                raise StepError(
                    f"sink `{self.sink}`: publishing batch {self.batch} into {self.table} failed, "
                    f"nothing of it applied: {_first_line(exc)}"
                ) from exc

    def apply_sql(self, login: JdbcLogin) -> str:
        q = login.quote
        cols = ", ".join(q(c) for c in self.columns)
        # Once per staged row: a JDBC write task retried after its commit stages its rows twice.
        rows = (
            f"(SELECT s.*, ROW_NUMBER() OVER (PARTITION BY {q(ROW_ID)} ORDER BY {q(ROW_ID)}) AS engine_nth "
            f"FROM {self.staging} s) d WHERE engine_nth = 1"
        )
        if self.mode != "upsert":
            return f"INSERT INTO {self.table} ({cols}) SELECT {cols} FROM {rows}"
        rest = [c for c in self.columns if c not in self.keys]
        if scheme(self.url) == "postgresql":
            keys = ", ".join(q(k) for k in self.keys)
            action = "DO UPDATE SET " + ", ".join(f"{q(c)} = EXCLUDED.{q(c)}" for c in rest) if rest else "DO NOTHING"
            return f"INSERT INTO {self.table} ({cols}) SELECT {cols} FROM {rows} ON CONFLICT ({keys}) {action}"
        if scheme(self.url) in ("mysql", "mariadb"):
            action = ", ".join(f"{q(c)} = VALUES({q(c)})" for c in rest or self.keys)
            return f"INSERT INTO {self.table} ({cols}) SELECT {cols} FROM {rows} ON DUPLICATE KEY UPDATE {action}"
        on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in self.keys)
        update = f"WHEN MATCHED THEN UPDATE SET {', '.join(f'{q(c)} = s.{q(c)}' for c in rest)} " if rest else ""
        values = ", ".join(f"s.{q(c)}" for c in self.columns)
        return (
            f"MERGE INTO {self.table} t USING (SELECT {cols} FROM {rows}) s ON ({on}) {update}"
            f"WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({values})"
        )

    def describe(self) -> str:
        return f"{self.mode} batch {self.batch} into {self.table} at {self.url} (sink `{self.sink}`)"


@dataclass
class JdbcDropStaging(CommitStep):
    kind: ClassVar[str] = "jdbc_drop_staging"
    sink: str
    login: str
    staging: str

    def verify(self, ctx: StepContext) -> bool:
        with Database(ctx.spark, login_for(ctx, self.login, self.sink)) as db:
            return db.columns(self.staging) is None

    def execute(self, ctx: StepContext) -> None:
        with Database(ctx.spark, login_for(ctx, self.login, self.sink)) as db:
            if db.columns(self.staging) is not None:  # no IF EXISTS: Oracle and DB2 have none
                db.update(f"DROP TABLE {self.staging}")

    def describe(self) -> str:
        return f"drop the staging table {self.staging} (sink `{self.sink}`)"


def _sql_text(value: str) -> str:
    return value.replace("'", "''")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    java = getattr(exc, "java_exception", None)
    if java is not None:
        text = str(java.getMessage() or java.getClass().getName())
    return text.splitlines()[0] if text else type(exc).__name__
