"""OpenLineage events of real runs, read back as received: by an HTTP receiver on loopback (what
Marquez's ``POST /api/v1/lineage`` gets) and from the file transport's JSON lines. Every event is
validated against OpenLineage's own JSON schema and the schema of each facet it carries (vendored
under ``openlineage_spec/``, Apache-2.0), and what it says is held against the outputs as delta-rs
reads them. A receiver nobody answers on leaves the run alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from engine.plugins.lineage import DatasetName, of_jdbc, of_kafka, of_path
from engine.runtime.lineage import Parent, event_type, run_uuid
from tests.commit.harness import run_here
from tests.helpers import Receiver, receiving

REPO = Path(__file__).resolve().parents[2]
SPEC = Path(__file__).parent / "openlineage_spec"


# -- the receiver and the validator -------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving(status=201) as server:
        yield server


def posted(receiver: Receiver) -> list[dict[str, Any]]:
    """The events ``receiver`` got, each POSTed to OpenLineage's endpoint."""
    assert {(method, path) for method, path, _ in receiver.received} == {("POST", "/api/v1/lineage")}
    return [json.loads(body) for _, _, body in receiver.received]


def _registry() -> Registry:
    resources = []
    for path in [SPEC / "OpenLineage.json", *sorted((SPEC / "facets").glob("*.json"))]:
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


REGISTRY = _registry()


def validate(event: dict[str, Any]) -> None:
    """``event`` against the spec's RunEvent, and each facet against the schema it names, which
    must be a facet of the kind its place holds (a run's, a job's, a dataset's, an input's...)."""
    url = event["schemaURL"]
    Draft202012Validator({"$ref": url}, registry=REGISTRY, format_checker=FormatChecker()).validate(event)
    for kind, facet in _facets(event):
        Draft202012Validator({"$ref": facet["_schemaURL"]}, registry=REGISTRY, format_checker=FormatChecker()).validate(
            facet
        )
        assert kind in _kinds(facet["_schemaURL"]), f"{facet['_schemaURL']} is not a {kind}"


def _kinds(url: str) -> set[str]:
    """The facet kinds (``RunFacet``, ``InputDatasetFacet``...) the facet schema ``url`` extends."""
    schema = REGISTRY.contents(url.partition("#")[0])
    name = url.rpartition("/")[2]
    return {ref["$ref"].rpartition("/")[2] for ref in schema["$defs"][name].get("allOf", []) if "$ref" in ref}


def _facets(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from (("RunFacet", f) for f in event["run"].get("facets", {}).values())
    yield from (("JobFacet", f) for f in event["job"].get("facets", {}).values())
    places = {"facets": "DatasetFacet", "inputFacets": "InputDatasetFacet", "outputFacets": "OutputDatasetFacet"}
    for d in [*event.get("inputs", []), *event.get("outputs", [])]:
        for key, kind in places.items():
            yield from ((kind, f) for f in d.get(key, {}).values())


def read_file(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- the jobs -----------------------------------------------------------------------------------


def jobs(tmp_path: Path, gate: str = "count(*) > 0") -> Path:
    land = tmp_path / "land" / "events.json"
    land.parent.mkdir(parents=True)
    land.write_text("".join(json.dumps({"id": i, "amount": i - 2}) + "\n" for i in range(6)))
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "traced.conf").write_text(
        f'sources.in {{ type = files, format = json, path = "{land}", schema = "id INT, amount INT" }}\n'
        "converters = [\n"
        '  { type = check, expr = "id != 5" }\n'
        '  { type = expect, name = positive, expr = "amount > 0" }\n'
        "]\n"
        f'gates = ["{gate}"]\n'
        "sinks.out { type = delta, path = out }\n"
    )
    return jobs


# -- naming, without Spark ----------------------------------------------------------------------


def test_datasets_are_named_as_openlineage_names_them() -> None:
    assert of_path("/data/in") == DatasetName("file", "/data/in")
    assert of_path("file:///data/in") == DatasetName("file", "/data/in")
    assert of_path("s3a://lake/orders/") == DatasetName("s3://lake", "orders")
    assert of_path("hdfs://nn:8020/data") == DatasetName("hdfs://nn:8020", "/data")
    assert of_jdbc("jdbc:postgresql://db:5432/shop", "orders") == DatasetName(
        "postgres://db:5432", "shop.public.orders"
    )
    assert of_jdbc("jdbc:postgresql://db/shop?ssl=true", "s.t") == DatasetName("postgres://db:5432", "shop.s.t")
    assert of_jdbc("jdbc:mysql://h/db", "t") == DatasetName("mysql://h:3306", "db.t")
    assert of_jdbc("jdbc:sqlserver://h:1433;databaseName=x", "t") == DatasetName("sqlserver://h:1433", "x.dbo.t")
    assert of_jdbc("jdbc:oracle:thin:@//h:1521/svc", "s.t") == DatasetName("oracle://h:1521", "svc.s.t")
    assert of_kafka("b1:9092,b2:9092", "orders") == DatasetName("kafka://b1:9092", "orders")


def test_a_name_never_holds_credentials_and_odd_urls_still_name_something() -> None:
    assert of_path("sftp://alice:s3cret@host/out/") == DatasetName("sftp://host", "/out")
    assert of_jdbc("jdbc:postgresql://u:pw@db/shop?password=pw", '"s"."t"') == DatasetName(
        "postgres://db:5432", "shop.s.t"
    )
    assert of_jdbc("jdbc:sqlserver://h;databaseName=x;password=pw", "t") == DatasetName("sqlserver://h:1433", "x.dbo.t")
    assert of_jdbc("jdbc:postgresql://h1:5432,h2:5432/db", "t") == DatasetName("postgres://h1:5432", "db.public.t")
    assert of_jdbc("jdbc:postgresql://[::1]:5433/db", "t") == DatasetName("postgres://[::1]:5433", "db.public.t")


def test_the_listener_never_raises_into_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from engine.runtime.lineage import DagLineage, Sender
    from engine.runtime.progress import DagProgress
    from engine.spec import compile_job
    from engine.spec.app import LineageConf

    spec = compile_job(
        {
            "sources": {"in": {"type": "files", "format": "json", "path": str(tmp_path)}},
            "sinks": {"out": {"type": "console"}},
        },
        name="j",
        file=None,
        warehouse=str(tmp_path / "wh"),
    )
    file = tmp_path / "events.jsonl"
    lineage = DagLineage(Sender(LineageConf(file=str(file))), spec, "r1")
    lineage.on_progress(DagProgress("no_such_dag", "running"))  # nothing to name: logged, not raised
    lineage.on_progress(DagProgress("j", "running"))
    lineage.close()
    assert "lineage: no event for dag no_such_dag" in caplog.text
    assert [e["eventType"] for e in read_file(file)] == ["START", "FAIL"], "a DAG open at close fails"


def test_statuses_end_runs_as_openlineage_says() -> None:
    ends = {s: event_type(s).value for s in ("SUCCEEDED", "PARTIAL", "FAILED", "QUARANTINED", "CANCELLED", "SKIPPED")}
    assert ends == {
        "SUCCEEDED": "COMPLETE",
        "PARTIAL": "COMPLETE",
        "FAILED": "FAIL",
        "QUARANTINED": "FAIL",
        "CANCELLED": "ABORT",
        "SKIPPED": "ABORT",
    }
    assert run_uuid("j.d", "r1") == run_uuid("j.d", "r1") != run_uuid("j.d", "r2")


def test_a_scheduler_parent_is_taken_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = "airflow/dag_x.task/0192f8e4-7c3a-7bde-9a4e-2b1f0e6c5d11"
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", parent)
    assert str(Parent.from_env()) == parent
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", "airflow/no-uuid")
    assert Parent.from_env() is None


# -- real runs ----------------------------------------------------------------------------------


def test_a_run_sends_start_then_complete_with_what_it_read_wrote_and_judged(
    spark: Any, receiver: Receiver, tmp_path: Path
) -> None:
    file = tmp_path / "lineage" / "events.jsonl"
    file.parent.mkdir()
    wh = tmp_path / "wh"
    code, summary = run_here(
        jobs(tmp_path),
        wh,
        f"lineage.url={receiver.url}",
        f"lineage.file={file}",
        "lineage.namespace=test",
        job="traced",
    )
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    events = posted(receiver)
    assert events == read_file(file), "both transports carry the same events"
    for event in events:
        validate(event)
    start, end = events
    assert (start["eventType"], end["eventType"]) == ("START", "COMPLETE")
    assert start["job"] == end["job"] and end["job"]["namespace"] == "test" and end["job"]["name"] == "traced.traced"
    assert start["run"]["runId"] == end["run"]["runId"] == run_uuid("traced.traced", summary["run_id"])
    assert start["eventTime"] <= end["eventTime"]

    (source,) = end["inputs"]
    assert (source["namespace"], source["name"]) == ("file", str(tmp_path / "land" / "events.json"))
    assert source["inputFacets"]["inputStatistics"]["rowCount"] == summary["records_read"] == 6
    assert [f["name"] for f in source["facets"]["schema"]["fields"]] == ["id", "amount"]
    (assertion,) = source["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert (assertion["assertion"], assertion["name"], assertion["success"]) == ("custom_sql", "count(*) > 0", True)
    assert (assertion["content"], assertion["contentType"]) == ("count(*) > 0", "sql")

    outputs = {o["name"]: o for o in end["outputs"]}
    lake = DeltaTable(str(wh / "out")).to_pyarrow_table()
    errors = DeltaTable(str(wh / "_errors" / "traced")).to_pyarrow_table()
    assert set(outputs) == {str(wh / "out"), str(wh / "_errors" / "traced")}
    assert outputs[str(wh / "out")]["outputFacets"]["outputStatistics"]["rowCount"] == lake.num_rows == 5
    assert outputs[str(wh / "_errors" / "traced")]["outputFacets"]["outputStatistics"]["rowCount"] == errors.num_rows
    sink_schema = [f["name"] for f in outputs[str(wh / "out")]["facets"]["schema"]["fields"]]
    assert sink_schema == lake.schema.names
    assert "errorMessage" not in end["run"]["facets"]


def test_a_batch_a_gate_refuses_fails_with_the_gate_and_why(spark: Any, tmp_path: Path) -> None:
    file = tmp_path / "events.jsonl"
    code, summary = run_here(
        jobs(tmp_path, gate="count(*) > 100"), tmp_path / "wh", f"lineage.file={file}", job="traced"
    )
    assert (code, summary["status"]) == (1, "FAILED")
    events = read_file(file)
    for event in events:
        validate(event)
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    end = events[-1]
    assert "count(*) > 100" in end["run"]["facets"]["errorMessage"]["message"]
    (assertion,) = end["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert (assertion["name"], assertion["success"]) == ("count(*) > 100", False)
    assert "count(*) = 5" in assertion["description"]
    assert "inputStatistics" not in end["inputs"][0]["inputFacets"], "statistics of a completed run only"
    assert "outputStatistics" not in json.dumps(end["outputs"]), "nothing was written"


def test_a_lineage_url_that_is_not_http_is_a_config_error(spark: Any, tmp_path: Path) -> None:
    code, summary = run_here(jobs(tmp_path), tmp_path / "wh", "lineage.url=marquez.internal:5000", job="traced")
    assert (code, summary["status"]) == (2, "CONFIG_ERROR")
    assert "lineage.url" in summary["message"] and "http://" in summary["message"]
    assert not (tmp_path / "wh" / "out").exists()


def test_a_receiver_nobody_answers_on_leaves_the_run_alone(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = Receiver()
    url = closed.url
    closed.server_close()  # nothing listens there any more
    file = tmp_path / "events.jsonl"
    code, summary = run_here(
        jobs(tmp_path), tmp_path / "wh", f"lineage.url={url}", f"lineage.file={file}", "lineage.timeout=2", job="traced"
    )
    assert (code, summary["status"]) == (0, "SUCCEEDED")
    assert [e["eventType"] for e in read_file(file)] == ["START", "COMPLETE"], "the file still gets every event"
    assert f"to {url} failed" in capsys.readouterr().err


def test_a_flow_is_the_parent_run_of_its_hops_dags(spark: Any, receiver: Receiver, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    code, summary = run_here(REPO / "jobs", wh, f"lineage.url={receiver.url}", job="flow=demo/orders_to_replica")
    assert (code, summary["status"]) == (0, "SUCCEEDED"), summary
    events = posted(receiver)
    for event in events:
        validate(event)
    flow_job = summary["job"]
    flow = [e for e in events if e["job"]["name"] == flow_job]
    assert [e["eventType"] for e in flow] == ["START", "COMPLETE"]
    assert flow[0]["job"]["facets"]["jobType"]["jobType"] == "FLOW"
    flow_run = run_uuid(flow_job, summary["run_id"])
    assert {e["run"]["runId"] for e in flow} == {flow_run}

    dags = [e for e in events if e["job"]["name"] != flow_job]
    by_run: dict[str, list[str]] = {}
    for e in sorted(dags, key=lambda e: e["eventTime"]):
        by_run.setdefault(e["run"]["runId"], []).append(e["eventType"])
    assert by_run and all(types == ["START", "COMPLETE"] for types in by_run.values()), by_run
    for event in dags:
        parent = event["run"]["facets"]["parent"]
        assert (parent["run"]["runId"], parent["job"]["name"]) == (flow_run, flow_job)
    assert min(e["eventTime"] for e in flow) <= min(e["eventTime"] for e in dags)
    assert max(e["eventTime"] for e in flow) >= max(e["eventTime"] for e in dags)
