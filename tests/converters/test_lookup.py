"""``lookup`` on real Spark and Delta, checked against the same join computed in pandas: records
kept with nulls, rejected with a reason naming the key, or dropped when the reference has no row
for them; a key with several reference rows fails the batch or takes its first row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from engine.errors import ConfigError
from tests.helpers import compile_dict, json_job, run_dict, write_jsonl

ORDERS = [{"id": i, "customer_id": (i * 7) % 60, "amount": float(i)} for i in range(200)]
"""200 orders of customers 0..59; the reference knows customers 0..49 only."""
CUSTOMERS = [{"customer_id": c, "name": f"c{c}", "segment": "big" if c % 3 == 0 else "small"} for c in range(50)]


def _reference(lake: Path, rows: list[dict[str, Any]] = CUSTOMERS) -> str:
    path = lake / "ref" / "customers"
    write_deltalake(str(path), pa.Table.from_pylist(rows), mode="overwrite")
    return "ref/customers"  # relative: under the warehouse


def _run(spark: Any, lake: Path, lookup: dict[str, Any], rows: list[dict[str, Any]] = ORDERS) -> Any:
    src = write_jsonl(lake.parent / "in" / "orders.json", rows)  # type: ignore[arg-type]
    job = json_job(src, [{"type": "lookup", "name": "customer", **lookup}], source={"schema": _SCHEMA})
    result, _ = run_dict(spark, job, lake)
    return result


_SCHEMA = "id BIGINT, customer_id BIGINT, amount DOUBLE"


def _table(path: Path) -> pd.DataFrame:
    if not (path / "_delta_log").exists():
        return pd.DataFrame()
    return DeltaTable(str(path)).to_pandas()


def _expected(how: str) -> pd.DataFrame:
    merged = pd.DataFrame(ORDERS).merge(pd.DataFrame(CUSTOMERS), on="customer_id", how=how)
    return merged.sort_values("id").reset_index(drop=True)


def _out(lake: Path, columns: list[str]) -> pd.DataFrame:
    return _table(lake / "out")[columns].sort_values("id").reset_index(drop=True)


def test_keep_brings_the_columns_and_leaves_nulls_where_nothing_matches(spark: Any, lake: Path) -> None:
    result = _run(spark, lake, {"path": _reference(lake), "on": ["customer_id"]})
    assert result.status == "SUCCEEDED", result.dags[0].message
    (note,) = result.summary()["dags"][0]["notes"].values()  # in the dataset's status row too
    assert note == "step `customer` read its reference at version 0", note
    want = _expected("left")
    got = _out(lake, list(want.columns))
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert int(got["name"].isna().sum()) == sum(1 for o in ORDERS if o["customer_id"] >= 50)


def test_reject_sends_the_unmatched_to_the_error_table_naming_the_key(spark: Any, lake: Path) -> None:
    lookup = {"path": _reference(lake), "on": ["customer_id"], "columns": ["name"], "on_missing": "reject"}
    result = _run(spark, lake, lookup)
    assert result.status == "SUCCEEDED", result.dags[0].message
    want = _expected("inner")[["id", "customer_id", "amount", "name"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(_out(lake, list(want.columns)), want, check_dtype=False)
    errors = _table(lake / "_errors" / "t")
    unmatched = sorted(o["id"] for o in ORDERS if o["customer_id"] >= 50)
    assert sorted(json.loads(r)["id"] for r in errors["record"]) == unmatched
    some = errors.iloc[0]
    key = json.loads(some["record"])["customer_id"]
    assert list(some["reasons"]) == [
        f"customer: lookup `customer`: no row of {lake / 'ref' / 'customers'} with (customer_id) = ({key})"
    ]
    assert result.summary()["dags"][0]["records_rejected"] == len(unmatched)


def test_drop_counts_the_unmatched_as_dropped(spark: Any, lake: Path) -> None:
    lookup = {"path": _reference(lake), "on": ["customer_id"], "prefix": "customer_", "on_missing": "drop"}
    result = _run(spark, lake, lookup)
    assert result.status == "SUCCEEDED", result.dags[0].message
    want = _expected("inner").rename(columns={"name": "customer_name", "segment": "customer_segment"})
    pd.testing.assert_frame_equal(_out(lake, list(want.columns)), want.reset_index(drop=True), check_dtype=False)
    (dag,) = result.summary()["dags"]
    assert dag["records_dropped"] == sum(1 for o in ORDERS if o["customer_id"] >= 50), dag
    assert _table(lake / "_errors" / "t").empty


def test_a_key_with_several_reference_rows_fails_the_batch_or_takes_the_first(spark: Any, lake: Path) -> None:
    twice = [*CUSTOMERS, {"customer_id": 7, "name": "a-c7", "segment": "other"}]
    failed = _run(spark, lake, {"path": _reference(lake, twice), "on": ["customer_id"]})
    (dag,) = failed.dags
    assert failed.status == "FAILED"
    assert "(customer_id) = (7) matches 2 rows of the reference" in dag.message, dag.message
    assert "duplicates = first" in dag.message
    assert _table(lake / "out").empty  # nothing published

    first = _run(
        spark, lake / "first", {"path": _reference(lake / "first", twice), "on": ["customer_id"], "duplicates": "first"}
    )
    assert first.status == "SUCCEEDED", first.dags[0].message
    out = _table(lake / "first" / "out")
    assert set(out.loc[out["customer_id"] == 7, "name"]) == {"a-c7"}  # the first by name, ascending
    assert len(out) == len(ORDERS)  # no record doubled

    last = {"on": ["customer_id"], "duplicates": "first", "order_by": ["name DESC"], "prefix": "c_"}
    by_name = _run(spark, lake / "last", {"path": _reference(lake / "last", twice), **last})
    assert by_name.status == "SUCCEEDED", by_name.dags[0].message
    out = _table(lake / "last" / "out")
    assert set(out.loc[out["customer_id"] == 7, "c_name"]) == {"c7"}  # order_by names the reference's columns


def test_a_repeated_key_no_record_carries_fails_nothing(spark: Any, lake: Path) -> None:
    twice = [*CUSTOMERS, {"customer_id": 900, "name": "a", "segment": "x"}, {"customer_id": 900, "name": "b"}]
    twice += [{"customer_id": None, "name": "n1"}, {"customer_id": None, "name": "n2"}]  # a null key matches nothing
    result = _run(spark, lake, {"path": _reference(lake, twice), "on": ["customer_id"]})
    assert result.status == "SUCCEEDED", result.dags[0].message
    want = _expected("left")
    pd.testing.assert_frame_equal(_out(lake, list(want.columns)), want, check_dtype=False)


@pytest.mark.parametrize(
    ("on", "repeat", "said"),
    [
        (["customer_id", "id"], {"customer_id": 7, "id": 1}, "(customer_id, id) = (7, 1) matches 2 rows"),
        (["amount"], {"amount": -0.0}, "(amount) = (0.0) matches 2 rows"),  # Spark's join takes -0.0 for 0.0
    ],
)
def test_a_repeated_key_is_found_as_the_join_compares_keys(
    spark: Any, lake: Path, on: list[str], repeat: dict[str, Any], said: str
) -> None:
    """Two key columns (compared in Arrow, on the driver) and a floating-point key (counted by
    Spark, which compares as its join does): a repeat of either fails the batch."""
    rows = [{k: o[k] for k in on} | {"tag": "a"} for o in ORDERS]
    result = _run(spark, lake, {"path": _reference(lake, [*rows, repeat | {"tag": "b"}]), "on": on, "columns": ["tag"]})
    assert result.status == "FAILED"
    assert said in result.dags[0].message, result.dags[0].message
    assert _table(lake / "out").empty


@pytest.mark.parametrize(
    ("lookup", "key", "said"),
    [
        (
            {"on": ["client"]},
            "converters[0].on",
            "key column(s) client not in the records; their columns: id, customer_id, amount (key",
        ),
        ({"on": ["customer_id"], "columns": ["nope"]}, "converters[0].columns", "has no column(s) nope"),
        ({"on": ["customer_id"], "path": "ref/none"}, "converters[0].path", "no Delta table at"),
        ({"on": ["customer_id"], "schema": "id INT"}, "converters[0]", "`schema` is for a csv or json reference"),
        (
            {"on": ["customer_id"], "format": "json", "schema": "customer_id BIGINT name"},
            "converters[0].schema",
            "the schema 'customer_id BIGINT name' is not a Spark DDL list of columns",
        ),
    ],
)
def test_mistakes_are_config_errors_naming_the_key(
    spark: Any, lake: Path, lookup: dict[str, Any], key: str, said: str
) -> None:
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    src = write_jsonl(lake.parent / "in" / "orders.json", ORDERS[:5])  # type: ignore[arg-type]
    conf = {"path": _reference(lake), **lookup}
    job = json_job(src, [{"type": "lookup", **conf}], source={"schema": _SCHEMA})
    with pytest.raises(ConfigError) as raised:
        JobManager(spark).run(compile_dict(job, lake), "run-1", InMemoryRunStore())
    assert raised.value.key is not None and raised.value.key.endswith(key), raised.value
    assert said in str(raised.value)
    assert _table(lake / "out").empty and _table(lake / "_errors" / "t").empty  # nothing written


def test_the_reference_is_read_once_a_run_whatever_the_groups_and_broadcast(spark: Any, lake: Path) -> None:
    """Three datasets in three work-unit groups: one scan of the reference's files (the
    first group's read caches it), and each group's join is a broadcast hash join."""
    from tests.sqllog import SqlLog

    inbox = lake.parent / "in"
    for d in "abc":
        write_jsonl(inbox / d / "orders.json", ORDERS[:50])  # type: ignore[arg-type]
    job = json_job(
        inbox,
        [{"type": "lookup", "path": _reference(lake), "on": ["customer_id"]}],
        source={"schema": _SCHEMA, "datasets": "directory"},
        work_units={"max_groups": 3},
    )
    log = SqlLog(spark)
    result, _ = run_dict(spark, job, lake)
    assert result.status == "SUCCEEDED", result.summary()
    executions = log.executions()
    scans = [
        n.metrics.get("number of files read", "0")
        for e in executions
        for n in e.nodes
        if n.name.startswith("Scan parquet")
        and "ReadSchema: struct<customer_id:bigint,name" in n.desc  # the reference's (paths are cut short)
        and n.metrics.get("number of files read", "0") != "0"
    ]  # (the cached plan's scan shows again, reading nothing, under each read of the cache)
    assert scans == ["1"], scans
    joins = {n.name for e in executions for n in e.nodes if "Join" in n.name}
    assert joins == {"BroadcastHashJoin"}, joins
    checks = [  # what reads the cached reference's keys alone: the check that no key repeats
        [n.name for n in e.nodes]
        for e in executions
        if any(n.name == "InMemoryTableScan" and "__engine_lookup_key_" in n.desc for n in e.nodes)
        and not any(n.name.startswith("Scan json") for n in e.nodes)
    ]
    assert len(checks) == 1, checks
    assert not [n for n in checks[0] if n.startswith("Exchange")], f"the key check needs no shuffle: {checks}"
    assert len(_table(lake / "out")) == 150


def test_the_reference_is_read_inside_the_run_so_a_stop_cancels_it(spark: Any, lake: Path) -> None:
    """Planning only checks the chain: the job that counts the reference's keys (``duplicates =
    fail``) runs in the scope of the work-unit group that first joins it, under the DAG's job tag,
    which a stop cancels; not while the run plans, outside every scope."""
    inbox = lake.parent / "in"
    for d in "ab":
        write_jsonl(inbox / d / "orders.json", ORDERS[:50])  # type: ignore[arg-type]
    job = json_job(
        inbox,
        [{"type": "lookup", "path": _reference(lake), "on": ["customer_id"], "duplicates": "fail"}],
        source={"schema": _SCHEMA, "datasets": "directory"},
        work_units={"max_groups": 2},
    )
    store = spark.sparkContext._jsc.sc().statusStore()

    def jobs() -> list[Any]:
        listed = store.jobsList(None)
        return [listed.apply(i) for i in range(listed.size())]

    before = {j.jobId() for j in jobs()}
    result, _ = run_dict(spark, job, lake)
    assert result.status == "SUCCEEDED", result.summary()
    counted = [j for j in jobs() if j.jobId() not in before and "converters/lookup.py" in str(j.name())]
    assert counted, "the reference's keys are counted by a job of the lookup's"
    for j in counted:
        tags = j.jobTags()
        assert "engine:run-1:t" in {tags.apply(i) for i in range(tags.size())}, (j.name(), j.jobGroup())
        assert str(j.jobGroup().get()).startswith("run-1:t:wu"), j.jobGroup()


@pytest.mark.crash
def test_a_batch_re_executed_after_a_crash_joins_the_reference_version_it_planned(spark: Any, tmp_path: Path) -> None:
    """The reference's version is kept with the batch plan, as its input files are: a crash once
    the plan is stored, a new version of the reference, then the rerun re-executes the stored plan
    as it was (the batch joined with the version it was planned with); the next batch joins the
    new one."""
    import yaml

    from tests.commit.harness import JOB, Inputs, crash_run, run_here, write_job

    wh, jobs = tmp_path / "wh", tmp_path / "jobs"
    write_job(jobs, wh)
    days = [f"2026-11-0{d}" for d in (1, 2, 3)]
    write_deltalake(str(wh / "ref" / "days"), pa.Table.from_pylist([{"day": d, "label": "v1"} for d in days]))
    path = jobs / f"{JOB}.yaml"
    job = yaml.safe_load(path.read_text())
    job["converters"].append({"type": "lookup", "path": "ref/days", "on": ["day"]})
    path.write_text(yaml.safe_dump(job))
    inputs = Inputs(wh)
    inputs.add("a", 30)
    crashed = crash_run(jobs, wh, kill_at="after_plan_saved")
    assert crashed.returncode == -9, crashed.stderr[-3000:]

    write_deltalake(
        str(wh / "ref" / "days"), pa.Table.from_pylist([{"day": d, "label": "v2"} for d in days]), mode="overwrite"
    )
    code, rerun = run_here(jobs, wh)
    assert (code, rerun["status"]) == (0, "SUCCEEDED"), rerun
    first = set(inputs.good)
    lake = DeltaTable(str(wh / "out" / "lake")).to_pandas()
    assert set(lake["id"]) == first and set(lake["label"]) == {"v1"}, lake.groupby("label").size()
    js = [json.loads(line) for f in sorted((wh / "out" / "js").glob("*.json")) for line in f.read_text().splitlines()]
    assert {r["label"] for r in js} == {"v1"} and {r["id"] for r in js} == first

    inputs.add("b", 10)
    code, later = run_here(jobs, wh)
    assert (code, later["status"]) == (0, "SUCCEEDED"), later
    lake = DeltaTable(str(wh / "out" / "lake")).to_pandas()
    assert set(lake.loc[~lake["id"].isin(first), "label"]) == {"v2"}


def test_a_brought_column_the_records_have_is_a_config_error_until_prefixed(spark: Any, lake: Path) -> None:
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    src = write_jsonl(lake.parent / "in" / "orders.json", ORDERS[:5])  # type: ignore[arg-type]
    rows = [{"customer_id": c, "amount": 1.0} for c in range(50)]
    job = json_job(
        src, [{"type": "lookup", "path": _reference(lake, rows), "on": ["customer_id"]}], source={"schema": _SCHEMA}
    )
    with pytest.raises(ConfigError) as raised:
        JobManager(spark).run(compile_dict(job, lake), "run-1", InMemoryRunStore())
    assert raised.value.key is not None and raised.value.key.endswith("converters[0].prefix")
    assert "already have column(s) amount" in str(raised.value)

    job["converters"][0]["prefix"] = "ref_"
    result = JobManager(spark).run(compile_dict(job, lake), "run-2", InMemoryRunStore())
    assert result.status == "SUCCEEDED", result.summary()
    out = _table(lake / "out")
    assert list(out.sort_values("id")["ref_amount"]) == [1.0] * 5


def test_column_names_match_without_case_as_spark_resolves_them(spark: Any, lake: Path) -> None:
    """Spark resolves column names without case (``spark.sql.caseSensitive`` is off): a key, a
    brought column and a clash are found whatever the case the config, records or reference use."""
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    rows = [{"ID": o["id"], "Customer_ID": o["customer_id"], "Amount": o["amount"]} for o in ORDERS]
    src = write_jsonl(lake.parent / "in" / "orders.json", rows)  # type: ignore[arg-type]
    schema = {"schema": "ID BIGINT, Customer_ID BIGINT, Amount DOUBLE"}
    lookup = {"type": "lookup", "path": _reference(lake), "on": ["CUSTOMER_ID"], "columns": ["Segment"]}
    result = JobManager(spark).run(compile_dict(json_job(src, [lookup], source=schema), lake), "r1", InMemoryRunStore())
    assert result.status == "SUCCEEDED", result.summary()
    got = _table(lake / "out").sort_values("ID").reset_index(drop=True)
    assert list(got.columns) == ["ID", "Customer_ID", "Amount", "Segment"], list(got.columns)
    want = _expected("left")
    assert list(got["Segment"].fillna("-")) == list(want["segment"].fillna("-"))

    clashing = {**lookup, "columns": ["name"]}  # the reference's `name` beside the records' `NAME`
    named = [{**r, "NAME": "x"} for r in rows]
    src = write_jsonl(lake.parent / "in2" / "orders.json", named)  # type: ignore[arg-type]
    job = json_job(src, [clashing], source={"schema": f"{schema['schema']}, NAME STRING"})
    with pytest.raises(ConfigError) as raised:
        JobManager(spark).run(compile_dict(job, lake), "r2", InMemoryRunStore())
    assert raised.value.key is not None and raised.value.key.endswith("converters[0].prefix")
    assert "already have column(s) name" in str(raised.value)


def test_a_csv_reference_is_read_with_its_options(spark: Any, lake: Path) -> None:
    ref = lake / "ref" / "customers.csv"
    ref.parent.mkdir(parents=True)
    ref.write_text("customer_id,name\n" + "".join(f"{c['customer_id']},{c['name']}\n" for c in CUSTOMERS))
    lookup = {
        "path": "ref/customers.csv",
        "format": "csv",
        "options": {"header": True, "inferSchema": True},
        "on": ["customer_id"],
        "on_missing": "drop",
    }
    result = _run(spark, lake, lookup)
    assert result.status == "SUCCEEDED", result.dags[0].message
    want = _expected("inner")[["id", "customer_id", "amount", "name"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(_out(lake, list(want.columns)), want, check_dtype=False)
    assert result.summary()["dags"][0]["notes"] == {}  # files have no version to note


@pytest.mark.parametrize("declared", [True, False])
def test_a_csv_reference_with_a_schema_is_read_with_its_types_never_inferred(
    spark: Any, lake: Path, declared: bool
) -> None:
    """With ``schema`` the reference is read with the declared types (a date stays a date) and no
    Spark job reads it to infer them; without, Spark infers (``inferSchema``) by reading it."""
    from tests.sqllog import SqlLog

    ref = lake / "ref" / "customers.csv"
    ref.parent.mkdir(parents=True)
    ref.write_text(
        "customer_id,name,since\n"
        + "".join(f"{c['customer_id']},{c['name']},2020-01-0{1 + c['customer_id'] % 9}\n" for c in CUSTOMERS)
    )
    lookup = {"path": "ref/customers.csv", "format": "csv", "on": ["customer_id"], "on_missing": "drop"}
    if declared:
        lookup |= {"options": {"header": True}, "schema": "customer_id BIGINT, name STRING, since STRING"}
    else:
        lookup |= {"options": {"header": True, "inferSchema": True}}
    log = SqlLog(spark)
    result = _run(spark, lake, lookup)
    assert result.status == "SUCCEEDED", result.dags[0].message
    want = _expected("inner")[["id", "customer_id", "amount", "name"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(_out(lake, list(want.columns)), want, check_dtype=False)
    since = DeltaTable(str(lake / "out")).to_pyarrow_table(columns=["since"]).schema.field("since").type
    assert since == (pa.string() if declared else pa.date32()), since  # Spark infers a date
    inferring = [e.id for e in log.executions() if any(n.name.startswith("Scan text") for n in e.nodes)]
    assert bool(inferring) is not declared, inferring  # Spark infers a CSV's types over its text


def test_the_demo_enriches_orders_after_refreshing_its_customers(spark: Any, tmp_path: Path) -> None:
    """``jobs/demo/orders_enriched``: the customers DAG writes the reference, then the orders DAG
    looks every order's customer up in it; checked against the demo's CSV read with ``csv``."""
    import csv

    from tests.commit.harness import REPO, run_here
    from tests.runtime.test_lineage import read_file, validate

    events = tmp_path / "lineage.jsonl"
    code, summary = run_here(REPO / "jobs", tmp_path, f"lineage.file={events}", job="demo/orders_enriched")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    (done,) = [e for e in read_file(events) if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith("orders")]
    validate(done)
    inputs = [d["name"] for d in done["inputs"]]
    assert inputs[1:] == [str(tmp_path / "reference" / "customers")], inputs  # the source's, then the reference
    names = {r["customer_id"]: r["name"] for r in csv.DictReader((REPO / "jobs/demo/data/customers.csv").open())}
    out = _table(tmp_path / "orders_enriched")
    assert len(out) > 0 and out["customer_name"].notna().all()
    assert all(names[c] == n for c, n in zip(out["customer_id"], out["customer_name"], strict=True))
    lines = (REPO / "jobs/demo/data/orders.json").read_text().splitlines()
    dags = {d["name"]: d for d in summary["dags"]}
    assert dags["orders"]["records_read"] == len(lines)
    errors = _table(tmp_path / "_errors" / "orders_enriched")
    unknown = errors[errors["step"] == "customer"]
    assert {json.loads(r)["customer"] for r in unknown["record"]} == {"c006"}  # nameless: not a customer (as read)

    # the SQL step: each customer's orders numbered and totalled over the published ones (the
    # orders of no amount it leaves out are counted as dropped, not published nor rejected)
    assert (out["amount"] > 0).all()
    for _, orders in out.sort_values(["created_at", "order_id"]).groupby("customer_id"):
        assert list(orders["customer_order_no"]) == list(range(1, len(orders) + 1))
        assert set(orders["customer_total"]) == {orders["amount"].sum()}
    nothing = [line for line in lines if '"amount": "-' in line or '"amount": "0.00"' in line]
    assert dags["orders"]["records_dropped"] == len(nothing) > 0
    assert dags["orders"]["records_read"] == len(out) + dags["orders"]["records_rejected"] + len(nothing)


PRICES = [
    {"sku": s, "valid_from": start, "valid_to": start + 10, "price": float(100 * s + start)}
    for s in range(5)
    for start in range(0, 30, 10)
]
"""Each of skus 0..4 priced over days [0, 10), [10, 20) and [20, 30)."""
SALES = [{"id": i, "sku": i % 7, "day": (i * 3) % 35} for i in range(120)]
"""120 sales of skus 0..6 on days 0..34: skus 5 and 6 and days 30..34 have no price."""
_SALES_SCHEMA = "id BIGINT, sku BIGINT, day BIGINT"
_PRICED = "input.sku = ref.sku AND input.day >= ref.valid_from AND input.day < ref.valid_to"


def _in_period(prices: list[dict[str, Any]], how: str) -> pd.DataFrame:
    pairs = pd.DataFrame(SALES).merge(pd.DataFrame(prices), on="sku", how="left")
    inside = pairs[(pairs["day"] >= pairs["valid_from"]) & (pairs["day"] < pairs["valid_to"])]
    matched = pd.DataFrame(SALES).merge(inside[["id", "price"]], on="id", how=how)
    return matched.sort_values("id").reset_index(drop=True)


def _priced(spark: Any, lake: Path, lookup: dict[str, Any], prices: list[dict[str, Any]] = PRICES) -> Any:
    path = lake / "ref" / "prices"
    write_deltalake(str(path), pa.Table.from_pylist(prices), mode="overwrite")
    src = write_jsonl(lake.parent / "in" / "sales.json", SALES)  # type: ignore[arg-type]
    step = {"type": "lookup", "name": "price", "path": "ref/prices", "on": _PRICED, "columns": ["price"], **lookup}
    result, _ = run_dict(spark, json_job(src, [step], source={"schema": _SALES_SCHEMA}), lake)
    return result


@pytest.mark.parametrize("broadcast_max", ["64m", "0"])
def test_a_condition_joins_each_record_with_the_row_whose_period_holds_it(
    spark: Any, lake: Path, broadcast_max: str
) -> None:
    result = _priced(spark, lake, {"on_missing": "reject", "broadcast_max": broadcast_max})
    assert result.status == "SUCCEEDED", result.dags[0].message
    want = _in_period(PRICES, "inner")
    got = _table(lake / "out")[["id", "sku", "day", "price"]].sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want[["id", "sku", "day", "price"]], check_dtype=False)
    errors = _table(lake / "_errors" / "t")
    unmatched = sorted(set(o["id"] for o in SALES) - set(want["id"]))
    assert len(unmatched) > 20 and sorted(json.loads(r)["id"] for r in errors["record"]) == unmatched
    some = json.loads(errors.iloc[0]["record"])
    assert list(errors.iloc[0]["reasons"]) == [
        f"price: lookup `price`: no row of {lake / 'ref' / 'prices'} where {_PRICED}, with "
        f"(sku, day) = ({some['sku']}, {some['day']})"
    ]


def test_a_condition_matching_several_rows_fails_or_takes_the_first_in_order(spark: Any, lake: Path) -> None:
    overlap = [*PRICES, {"sku": 2, "valid_from": 5, "valid_to": 15, "price": -1.0}]  # over days 5..14 of sku 2
    failed = _priced(spark, lake, {}, overlap)
    (dag,) = failed.dags
    assert failed.status == "FAILED"
    assert "(sku, day) = (2, " in dag.message and "matches 2 rows of the reference" in dag.message, dag.message
    assert _table(lake / "out").empty

    latest = {"duplicates": "first", "order_by": ["valid_from DESC"]}
    first = _priced(spark, lake / "first", latest, overlap)
    assert first.status == "SUCCEEDED", first.dags[0].message
    out = _table(lake / "first" / "out").sort_values("id").reset_index(drop=True)
    assert len(out) == len(SALES)  # no record doubled
    late = out[(out["sku"] == 2) & (out["day"] >= 10) & (out["day"] < 15)]
    early = out[(out["sku"] == 2) & (out["day"] >= 5) & (out["day"] < 10)]
    assert not late.empty and set(late["price"]) == {210.0}  # [10, 20) starts after [5, 15)
    assert not early.empty and set(early["price"]) == {-1.0}  # [5, 15) starts after [0, 10)
    want = _in_period(PRICES, "left")
    elsewhere = ~((out["sku"] == 2) & (out["day"] >= 5) & (out["day"] < 15))
    pd.testing.assert_series_equal(out.loc[elsewhere, "price"], want.loc[elsewhere, "price"], check_dtype=False)


@pytest.mark.parametrize(
    ("on", "said"),
    [
        ("sku = ref.sku", "qualify each column as input.<column>"),
        ("input.sku = 3", "does not compare the records"),
        ("input.sku = ref.sku AND", "does not parse"),
        ("input.sku = ref.sku AND input.day < ref.until", "has no column(s) until"),
        ("input.part = ref.sku", "key column(s) part not in the records"),
        ("input.sku = ref.sku AND nope(input.day)", "the join condition"),
    ],
)
def test_condition_mistakes_are_config_errors_naming_the_on_key(spark: Any, lake: Path, on: str, said: str) -> None:
    from engine.runtime import JobManager
    from engine.state import InMemoryRunStore

    write_deltalake(str(lake / "ref" / "prices"), pa.Table.from_pylist(PRICES), mode="overwrite")
    src = write_jsonl(lake.parent / "in" / "sales.json", SALES[:5])  # type: ignore[arg-type]
    step = {"type": "lookup", "path": "ref/prices", "on": on, "columns": ["price"]}
    with pytest.raises(ConfigError) as raised:
        job = json_job(src, [step], source={"schema": _SALES_SCHEMA})
        JobManager(spark).run(compile_dict(job, lake), "run-1", InMemoryRunStore())
    assert raised.value.key is not None and raised.value.key.endswith("converters[0].on"), raised.value
    assert said in str(raised.value), raised.value
