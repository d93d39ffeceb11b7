"""The session PostgreSQL server (tests/postgres.py) is real: psql writes a table, Spark's JDBC source reads it
back over TCP with the password and the driver from .cache/jars."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from tests.postgres import Postgres, PsqlError


def test_spark_reads_a_table_written_with_psql(spark: Any, postgres: Postgres) -> None:
    postgres.psql(
        """
        DROP TABLE IF EXISTS fixture_people;
        CREATE TABLE fixture_people (id integer PRIMARY KEY, name text NOT NULL, score numeric(5, 2), born date);
        INSERT INTO fixture_people VALUES
            (1, 'ada', 91.50, DATE '1815-12-10'),
            (2, 'grace', 88.25, DATE '1906-12-09'),
            (3, 'zoë 東京', NULL, NULL);
        """
    )
    assert postgres.psql("SELECT id, name FROM fixture_people ORDER BY id") == "1|ada\n2|grace\n3|zoë 東京\n"

    df = (
        spark.read.format("jdbc")
        .option("url", postgres.jdbc_url)
        .option("dbtable", "fixture_people")
        .option("user", postgres.user)
        .option("password", postgres.password)
        .option("driver", "org.postgresql.Driver")
        .load()
    )

    assert df.schema.simpleString() == "struct<id:int,name:string,score:decimal(5,2),born:date>"
    assert sorted(tuple(row) for row in df.collect()) == [
        (1, "ada", Decimal("91.50"), date(1815, 12, 10)),
        (2, "grace", Decimal("88.25"), date(1906, 12, 9)),
        (3, "zoë 東京", None, None),
    ]
    with pytest.raises(PsqlError, match="fixture_missing"):
        postgres.psql("SELECT 1; SELECT * FROM fixture_missing; SELECT 2")
