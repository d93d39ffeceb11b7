"""``sql`` on real Spark and Delta, checked against the same statement computed in pandas: a filter
and a window function (the filtered-out records counted as dropped, the rejected ones kept out of
the windows and in the error table with their raw record), an aggregation per dataset, and the
statements the step refuses as config errors naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from deltalake import DeltaTable

from engine.errors import ConfigError
from tests.helpers import compile_dict, json_job, run_dict, write_jsonl

ORDERS = [{"id": i, "customer_id": (i * 7) % 13, "amount": float((i * 37) % 101)} for i in range(300)]
_SCHEMA = "id BIGINT, customer_id BIGINT, amount DOUBLE"
_BAD = "id % 10 != 3"
"""The check before the statement: it rejects every id ending in 3."""


def _table(path: Path) -> pd.DataFrame:
    if not (path / "_delta_log").exists():
        return pd.DataFrame()
    return DeltaTable(str(path)).to_pandas()


def _job(lake: Path, steps: list[dict[str, Any]], rows: list[dict[str, Any]] = ORDERS, **extra: Any) -> dict[str, Any]:
    src = write_jsonl(lake.parent / "in" / "orders.json", rows)  # type: ignore[arg-type]
    return json_job(src, [{"type": "check", "name": "ok", "expr": _BAD}, *steps], source={"schema": _SCHEMA}, **extra)


def _rejected_ids(lake: Path) -> list[int]:
    return sorted(json.loads(r)["id"] for r in _table(lake / "_errors" / "t")["record"])


def test_a_filter_and_a_window_see_the_live_records_and_the_filtered_are_dropped(spark: Any, lake: Path) -> None:
    statement = """
        SELECT *, amount * 2 AS doubled,
               row_number() OVER (PARTITION BY customer_id ORDER BY amount DESC, id) AS rank,
               sum(amount) OVER (PARTITION BY customer_id) AS customer_total
        FROM input
        WHERE amount >= 20
    """
    later = {"type": "check", "name": "top", "expr": "rank <= 5"}  # rejects after the statement
    result, _ = run_dict(spark, _job(lake, [{"type": "sql", "statement": statement}, later]), lake)
    assert result.status == "SUCCEEDED", result.dags[0].message

    orders = pd.DataFrame(ORDERS)
    live = orders[orders["id"] % 10 != 3]
    kept = live[live["amount"] >= 20].sort_values(["customer_id", "amount", "id"], ascending=[True, False, True])
    kept = kept.assign(doubled=kept["amount"] * 2, rank=kept.groupby("customer_id").cumcount() + 1)
    kept["customer_total"] = kept.groupby("customer_id")["amount"].transform("sum")
    want = kept[kept["rank"] <= 5].sort_values("id").reset_index(drop=True)
    got = _table(lake / "out")[list(want.columns)].sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)

    (dag,) = result.summary()["dags"]
    assert dag["records_read"] == len(ORDERS), dag
    assert dag["records_dropped"] == len(live) - len(kept), dag  # filtered out: counted, not lost
    over = sorted(kept.loc[kept["rank"] > 5, "id"])
    assert _rejected_ids(lake) == sorted([*orders.loc[orders["id"] % 10 == 3, "id"], *over])
    errors = _table(lake / "_errors" / "t")
    top = errors[errors["step"] == "top"].iloc[0]
    record = json.loads(top["record"])  # the raw record as read, though the statement named none of it
    assert record == next(o for o in ORDERS if o["id"] == record["id"]), record


def test_an_aggregation_makes_new_records_per_dataset_and_the_rejected_still_reach_the_error_table(
    spark: Any, lake: Path
) -> None:
    """Two datasets in one work-unit group: each customer's total is per dataset (the batch), and a
    check after the statement judges the aggregated rows."""
    inbox = lake.parent / "in"
    for d, rows in (("a", ORDERS[:200]), ("b", ORDERS[100:])):
        write_jsonl(inbox / d / "orders.json", rows)  # type: ignore[arg-type]
    statement = "SELECT customer_id, count(*) AS n, sum(amount) AS total FROM input GROUP BY customer_id"
    steps = [
        {"type": "check", "name": "ok", "expr": _BAD},
        {"type": "sql", "statement": statement},
        {"type": "check", "name": "big", "expr": "n < 14"},
    ]
    job = json_job(inbox, steps, source={"schema": _SCHEMA, "datasets": "directory"}, work_units={"max_groups": 1})
    result, _ = run_dict(spark, job, lake)
    assert result.status == "SUCCEEDED", result.summary()

    frames = []
    for d, rows in (("a", ORDERS[:200]), ("b", ORDERS[100:])):
        live = pd.DataFrame(rows).query("id % 10 != 3")
        sums = live.groupby("customer_id").agg(n=("id", "size"), total=("amount", "sum")).reset_index()
        frames.append(sums.assign(dataset=d))
    want = pd.concat(frames)
    out = _table(lake / "out")
    got = out.sort_values(["customer_id", "n", "total"]).reset_index(drop=True)
    expected = want[want["n"] < 14].sort_values(["customer_id", "n", "total"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got[["customer_id", "n", "total"]], expected[["customer_id", "n", "total"]])

    errors = _table(lake / "_errors" / "t")
    raw = errors[errors["step"] == "ok"]
    assert len(raw) == sum(1 for o in ORDERS[:200] if o["id"] % 10 == 3) + sum(
        1 for o in ORDERS[100:] if o["id"] % 10 == 3
    )
    assert all(json.loads(r)["id"] % 10 == 3 for r in raw["record"])  # the raw record, as read
    big = errors[errors["step"] == "big"]
    assert len(big) == int((want["n"] >= 14).sum()) > 0
    assert {tuple(json.loads(r)) for r in big["record"]} == {("customer_id", "n", "total")}  # the row it judged


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        ("SELECT id FROM input WHERE", "does not parse"),
        ("SELECT amont FROM input", "amont"),
        ("DROP TABLE input", "is a DROP statement"),
        ("SELECT * FROM other", "reads `other`"),
        ("SELECT * FROM range(10)", "table function"),
        ("SELECT id FROM input ORDER BY id LIMIT 3", "LIMIT"),
        ("SELECT a.id FROM input a JOIN input b ON a.id = b.id", "with themselves"),
        (
            "WITH t AS (SELECT customer_id, max(amount) AS m FROM input GROUP BY customer_id) "
            "SELECT i.* FROM input i JOIN t ON i.customer_id = t.customer_id",
            "LEFT JOIN",
        ),
        ("SELECT id FROM input UNION ALL SELECT id FROM input", "UNION"),
        ("SELECT explode(array(id, id)) AS x FROM input", "repeats records"),
        ("SELECT 1 AS x", "does not read `input`"),
        ("SELECT * FROM input TABLESAMPLE (10 PERCENT)", "lost uncounted"),
        ("SELECT * FROM input UNPIVOT (v FOR c IN (amount, id))", "UNPIVOT"),
        ("SELECT stack(2, id, amount) AS v FROM input", "repeats records"),
        (
            "WITH t AS (SELECT customer_id, id FROM input GROUP BY customer_id, id) "
            "SELECT input.*, t.id AS other FROM input LEFT JOIN t ON input.customer_id = t.customer_id",
            "may match several times (not equated: id)",
        ),
        ("SELECT sum(amount) OVER w AS x FROM input WINDOW w AS (PARTITION BY customer_id)", "names a window"),
        ("SELECT *, true AS __engine_dropped FROM input", "names starting with __engine_"),
        (
            "WITH c AS (SELECT 1 AS k) SELECT c.k, count(i.id) AS n FROM c LEFT JOIN input i ON i.customer_id = c.k "
            "GROUP BY c.k",
            "put them first, in FROM",
        ),
        (
            "SELECT customer_id, listagg(CAST(id AS STRING)) AS ids FROM input GROUP BY customer_id",
            "cannot be rewritten faithfully",
        ),
        (
            "SELECT * FROM input i NATURAL LEFT JOIN (SELECT customer_id, max(amount) AS m FROM input GROUP BY 1) t",
            "NATURAL join",
        ),
    ],
)
def test_statements_it_does_not_run_are_config_errors_naming_the_key(
    spark: Any, lake: Path, statement: str, said: str
) -> None:
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    with pytest.raises(ConfigError) as raised:
        job = _job(lake, [{"type": "sql", "statement": statement}], rows=ORDERS[:5])
        JobManager(spark).run(compile_dict(job, lake), "run-1", InMemoryRunStore())
    assert raised.value.key is not None and raised.value.key.endswith("converters[1].statement"), raised.value
    assert said in str(raised.value), raised.value
    assert not (lake / "out").exists()


def test_a_left_join_of_a_per_customer_aggregate_keeps_every_record(spark: Any, lake: Path) -> None:
    statement = """
        WITH best AS (SELECT customer_id, max(amount) AS best FROM input GROUP BY ALL)
        SELECT i.*, b.best, i.amount = b.best AS is_best
        FROM input i LEFT JOIN best b ON i.customer_id = b.customer_id
    """
    result, _ = run_dict(spark, _job(lake, [{"type": "sql", "statement": statement}]), lake)
    assert result.status == "SUCCEEDED", result.dags[0].message
    live = pd.DataFrame(ORDERS).query("id % 10 != 3")
    want = live.assign(best=live.groupby("customer_id")["amount"].transform("max"))
    want = want.assign(is_best=want["amount"] == want["best"]).sort_values("id").reset_index(drop=True)
    got = _table(lake / "out")[list(want.columns)].sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert result.summary()["dags"][0]["records_dropped"] == 0


def test_mode_validate_names_the_statement_s_mistake_without_running_a_spark_job(spark: Any, lake: Path) -> None:
    from tests.helpers import run_cli
    from tests.sqllog import SqlLog

    jobs = lake.parent / "jobs"
    (jobs / "t").mkdir(parents=True)
    src = write_jsonl(lake.parent / "in" / "orders.json", ORDERS[:5])  # type: ignore[arg-type]
    conf = (
        f'sources.orders {{ type = files, format = json, path = "{src}", schema = "{_SCHEMA}" }}\n'
        'converters = [ { type = sql, statement = "SELECT id, amount * 2 AS twice FROM input WHERE amont > 0" } ]\n'
        "sinks.lake { type = delta, path = out }\n"
    )
    (jobs / "t" / "orders.conf").write_text(conf)
    log = SqlLog(spark)
    code, _, said = run_cli(jobs, "job=t/orders", f"warehouse={lake}", "mode=validate")
    assert code == 2, said
    assert "converters[0].statement" in said and "`amont` cannot be resolved" in said, said
    assert "`amount`" in said  # Spark's suggestion names the records' own columns
    assert [e for e in log.executions() if e.jobs] == []  # parsed and analysed, nothing run

    (jobs / "t" / "orders.conf").write_text(conf.replace("amont", "amount"))
    code, summary, said = run_cli(jobs, "job=t/orders", f"warehouse={lake}", "mode=validate")
    assert (code, summary["status"]) == (0, "VALID"), said
    assert [e for e in log.executions() if e.jobs] == []


def test_an_aggregating_statement_reads_the_source_once(spark: Any, lake: Path) -> None:
    """The statement reads the live records and the others go straight to the output: two readers
    of the records, which the step persists, so the plan holds one scan of the files (a second
    would show as a second FileScan of other attribute ids)."""
    from tests.sqllog import SqlLog

    statement = "SELECT customer_id, count(*) AS n FROM input GROUP BY customer_id"
    log = SqlLog(spark)
    result, _ = run_dict(spark, _job(lake, [{"type": "sql", "statement": statement}]), lake)
    assert result.status == "SUCCEEDED", result.dags[0].message
    scans = {
        n.desc.split("]")[0]  # "FileScan json [id#12L,customer_id#13L,...": one per scan in the plans
        for e in log.executions()
        for n in e.nodes
        if n.name.startswith("Scan json") and "orders.json" in e.plan
    }
    assert len(scans) == 1, scans
    assert len(_table(lake / "out")) == 13


def test_a_pipeline_of_with_names_filters_at_each_level_and_a_guarded_cast_never_sees_what_it_guards(
    spark: Any, lake: Path
) -> None:
    """``a`` keeps the amounts of 20 and more, ``b`` those under 90 of them; the cast of ``code``
    is guarded by the ``WHERE`` (ANSI mode fails a cast of 'n/a'), and so is the window's argument."""
    rows = [{**o, "code": str(o["id"]) if o["id"] % 4 else "n/a"} for o in ORDERS]
    statement = """
        WITH a AS (SELECT * FROM input WHERE amount >= 20),
             b AS (SELECT * FROM a WHERE amount < 90)
        SELECT id, customer_id, amount, CAST(code AS INT) * 2 AS twice,
               sum(CAST(code AS INT)) OVER (PARTITION BY customer_id) AS codes
        FROM b
        WHERE code <> 'n/a'
    """
    src = write_jsonl(lake.parent / "in" / "orders.json", rows)  # type: ignore[arg-type]
    job = json_job(
        src,
        [{"type": "check", "name": "ok", "expr": _BAD}, {"type": "sql", "statement": statement}],
        source={"schema": f"{_SCHEMA}, code STRING"},
    )
    result, _ = run_dict(spark, job, lake)
    assert result.status == "SUCCEEDED", result.dags[0].message

    frame = pd.DataFrame(rows)
    live = frame[frame["id"] % 10 != 3]
    kept = live[(live["amount"] >= 20) & (live["amount"] < 90) & (live["code"] != "n/a")].copy()
    kept["twice"] = kept["code"].astype(int) * 2
    kept["codes"] = kept.groupby("customer_id")["code"].transform(lambda c: c.astype(int).sum())
    want = kept[["id", "customer_id", "amount", "twice", "codes"]].sort_values("id").reset_index(drop=True)
    got = _table(lake / "out")[list(want.columns)].sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert result.summary()["dags"][0]["records_dropped"] == len(live) - len(kept)
