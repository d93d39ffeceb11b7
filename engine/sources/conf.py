"""Config of the built-in sources (no pyspark here: compiling a job needs no JVM)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from engine.plugins.conf import PluginConf
from engine.sources.avro_schema import avro_to_ddl, load_avro_schema


class FilesSourceConf(PluginConf):
    """Files on any Hadoop file system, read with one of Spark's built-in formats.

    A relative ``path`` or schema file is resolved against the job file's directory. The schema is
    an Avro schema file (``.avsc``), an inline Avro JSON schema, or a Spark DDL string; without one
    Spark infers it. Malformed JSON/CSV records (and values that do not fit the schema) are not
    dropped: they go to the error table from the ``read`` step.

    .. code-block:: hocon

        sources.orders {
          type = files
          format = json
          path = data/orders/*.json
          schema = schemas/order.avsc
          options { multiLine = false }
        }
    """

    type: Literal["files"] = "files"
    path: str | list[str]
    """A path or glob (or a list of them); relative paths are relative to the job file."""
    format: Literal["json", "csv", "parquet", "avro", "text"]
    """The file format, read by Spark's own reader."""
    schema_: str | None = Field(default=None, alias="schema")
    """An ``.avsc`` file, an inline Avro schema (JSON) or a Spark DDL string; inferred when unset."""
    options: dict[str, str | int | float | bool] = {}
    """Extra options handed to Spark's reader (``header``, ``sep``, ``multiLine``, ...)."""

    def paths(self) -> list[str]:
        return [self.path] if isinstance(self.path, str) else list(self.path)

    def resolve(self, base_dir: Path) -> FilesSourceConf:
        """A copy whose relative local paths are made absolute against ``base_dir``."""
        paths = [_resolve(p, base_dir) for p in self.paths()]
        schema = self.schema_
        if schema is not None and schema.endswith(".avsc"):
            schema = _resolve(schema, base_dir)
        return self.model_copy(update={"path": paths, "schema_": schema})

    def schema_ddl(self) -> str | None:
        """The schema as a Spark DDL string (Avro schemas converted), or ``None`` to infer."""
        if self.schema_ is None:
            return None
        if self.schema_.endswith(".avsc"):
            return avro_to_ddl(load_avro_schema(Path(self.schema_)))
        if self.schema_.lstrip().startswith("{"):
            return avro_to_ddl(load_avro_schema(self.schema_))
        return self.schema_


def _resolve(path: str, base_dir: Path) -> str:
    if "://" in path or path.startswith("/"):
        return path
    return str((base_dir / path).resolve())
