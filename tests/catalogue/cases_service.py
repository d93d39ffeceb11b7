"""The flow service's defects (issue 58, items 9, 11 and 12) that a command line shows: a flow's
values taken only as their own type, datasets that are names, names that fit the files a run
makes, and a flow the service stored confined to its roots when its execution compiles it.

The rest of these items happen only over HTTP, and are proved by dedicated tests against a real
``serve.sh``:

- item 9, ``tests/service/test_confinement.py``: paths outside the roots (``/etc``, a relative
  climb, a write into a read-only root, the service's own store, an Avro schema file probed
  outside), datasets that climb, a symbolic link out of the warehouse, a flow stored before the
  limit refused when run with no execution started; ``tests/flow/test_roots.py``: roots by data
  node, by flow group and for every flow, read only unless ``write``, globs that climb, a
  template's own default path;
- item 11, ``tests/service/test_limits.py``: names too long (422, no server path, also on the
  status page), fields too large (422), bodies over 64 KiB (413, also chunked), lists without the
  flows' bulk and in pages, partial requests timed out (408, connection closed), and a flow with
  the longest names running to SUCCEEDED;
- item 12, ``tests/service/test_strict.py``: ``runImmediately: "yes"/"on"/1``, ``catchup:
  "true"``, ``parallelism: 1e30/4.0/"4"``, ``owner: null``, a key given twice, ``NaN``, a PUT
  without ``owner`` keeping the owner, flow group names, bad and unknown query parameters, an
  execution request's keys.
"""

from __future__ import annotations

from tests.catalogue.case import Case, case

PACK = {"jobs/templates/p/pack.conf": 'principals = ["*"]\n'}
COPY = {
    "jobs/templates/p/copy.conf": (
        "parameters { required = [src, dst] }\ncopy { source = ${params.src}, target = ${params.dst} }\n"
    )
}
GRAPH = {"topology/graph.conf": "nodes { }\n"}
WORLD = {**PACK, **COPY, **GRAPH}
"""A template pack anyone may use, a copy template of two parameters, and an empty flow graph."""
TOPOLOGY = "topology_dir={dir}/topology"
LISTED = 'templateUris = [p/copy]\nproperties { src = "{dir}/wh/in", dst = "{dir}/wh/out" }\n'
"""A flow of the copy template, from and to the warehouse."""
STORED = "wh/_engine/service/runs/20260101T000000Z-0123abcd/flows"
"""Where the flow service writes the flow an execution runs (ENGINE_FLOWS_DIR of the run)."""


def flow_file(text: str, *, group: str = "g", name: str = "f") -> dict[str, str]:
    return {f"jobs/flows/{group}/{name}.conf": text, **WORLD}


def strict(id: str, line: str, key: str) -> Case:
    """A flow file whose one value is of the wrong type: exit 2 naming its key, before Spark."""
    return case(
        id, "58.12", ("flow=g/f", "mode=validate", TOPOLOGY), 2, (f"flow.{key}",), files=flow_file(LISTED + line)
    )


CASES: list[Case] = [
    strict("flow-catchup-text", 'catchup = "true"\n', "catchup"),
    strict("flow-run-immediately-number", "runImmediately = 1\n", "runImmediately"),
    strict("flow-run-immediately-yes", 'runImmediately = "yes"\n', "runImmediately"),
    strict("flow-parallelism-float", "parallelism = 4.0\n", "parallelism"),
    strict("flow-parallelism-huge", "parallelism = 1000000000\n", "parallelism"),
    case(
        "flow-dataset-climbs",
        "58.9",
        ("flow=g/f", "mode=validate", TOPOLOGY),
        2,
        ("flow.datasets[1]", "not a path"),
        files=flow_file(LISTED + 'datasets = [orders, "../../etc"]\n'),
    ),
    case(
        "flow-names-too-long-for-its-files",
        "58.11",
        ("flow=" + "g" * 32 + "/" + "n" * 64, "mode=validate", TOPOLOGY),
        2,
        ("flow.flowName", "at most 255"),
        files={
            f"jobs/flows/{'g' * 32}/{'n' * 64}.conf": LISTED.replace("p/copy", "p/" + "t" * 120),
            f"jobs/templates/p/{'t' * 120}.conf": COPY["jobs/templates/p/copy.conf"],
            **PACK,
            **GRAPH,
        },
    ),
    case(
        "flow-stored-by-the-service-reads-outside-its-roots",
        "58.9",
        ("flow=g/f", TOPOLOGY),
        2,
        ("flow.properties.src", "would read /etc", "outside the places this flow may read"),
        files={
            f"{STORED}/g/f.yaml": 'templateUris: [p/copy]\nproperties: {src: /etc, dst: "{dir}/wh/out"}\n',
            **WORLD,
        },
        env={"ENGINE_FLOWS_DIR": "{dir}/" + STORED},
        tables={"out": None},
    ),
    case(
        "flow-file-of-the-deployment-is-not-confined",
        "58.9",
        ("flow=g/f", "mode=plan", TOPOLOGY),
        0,
        ('"source": "/etc"',),
        files=flow_file('templateUris = [p/copy]\nproperties { src = /etc, dst = "{dir}/wh/out" }\n'),
    ),
]
