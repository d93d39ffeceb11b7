"""Columns declared in config as a Spark DDL list (``id BIGINT, name STRING``): a source's
``schema``, a lookup reference's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def declared_columns(ddl: str, *, what: str, key: str) -> StructType:
    """``ddl`` parsed by Spark on the driver (no job). A :class:`ConfigError` naming ``key`` when
    Spark's parser refuses it or reads one type (``int``) rather than columns; ``what`` names
    whose schema it is (``source `orders```)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException
    from pyspark.sql.types import StructType

    refused = f"{what}: the schema {ddl!r} is not a Spark DDL list of columns"
    try:
        schema = StructType.fromDDL(ddl)
    except (PySparkException, Py4JJavaError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{refused} (`name TYPE, ...`): {why}", key=key) from exc
    if not isinstance(schema, StructType):  # Spark reads a lone type (`int`) as that type
        raise ConfigError(f"{refused}: it is one type, {schema.simpleString()}", key=key)
    return schema
