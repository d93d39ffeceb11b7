"""Files on any Hadoop file system, read by Spark's built-in formats."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import ConfigError
from engine.sources.base import CORRUPT_RECORD, Source
from engine.sources.conf import FilesSourceConf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_KEEPS_CORRUPT = ("json", "csv")


class FilesSource(Source):
    """See :class:`~engine.sources.conf.FilesSourceConf` for its config."""

    Conf = FilesSourceConf
    conf: FilesSourceConf

    def check(self, spark: SparkSession) -> None:
        jvm = spark.sparkContext._jvm
        hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
        assert jvm is not None
        for path in self.conf.paths():
            jpath = jvm.org.apache.hadoop.fs.Path(path)
            matches = jpath.getFileSystem(hadoop_conf).globStatus(jpath)
            if matches is None or len(matches) == 0:
                raise ConfigError(f"input path does not exist: {path}", key=f"{self.key}.path")

    def _read(self, spark: SparkSession) -> DataFrame:
        conf = self.conf
        reader = spark.read.format(conf.format).options(**{k: str(v) for k, v in conf.options.items()})
        if conf.format in _KEEPS_CORRUPT:
            reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_RECORD)
        if self.schema_ddl is not None:
            ddl = self.schema_ddl
            if conf.format in _KEEPS_CORRUPT:
                ddl = f"{ddl}, `{CORRUPT_RECORD}` STRING"
            reader = reader.schema(ddl)
        return reader.load(conf.paths())
