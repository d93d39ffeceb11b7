"""A JDBC query's dataset is named the same by every process, whatever its ``PYTHONHASHSEED``:
as spark-submit (seed 0) named it when its watermark was stored."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

from engine.sources.stable_hash import seed0_str_hash

CHARS = [(32, 126), (128, 255), (256, 0xD7FF), (0x10000, 0x10FFFF)]  # each width of CPython's strings


def texts() -> list[str]:
    rng = random.Random(58)
    fixed = ["", "a", "SELECT id, ts FROM orders WHERE region = 'eu'", "é", "日本語", "😀", "x" * 7, "x" * 8, "x" * 9]
    drawn = ["".join(chr(rng.randint(*rng.choice(CHARS))) for _ in range(rng.randint(0, 40))) for _ in range(200)]
    return fixed + drawn + ["q" * 1000]


def in_a_process(code: str, seed: str, *args: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_it_is_the_hash_a_process_started_with_seed_0_gives() -> None:
    samples = texts()
    code = "import json, sys; print(json.dumps([hash(t) for t in json.loads(sys.stdin.read())]))"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(samples), env=env, capture_output=True, text=True, check=True
    )
    assert [seed0_str_hash(t) for t in samples] == json.loads(done.stdout)


def test_a_query_source_names_its_dataset_alike_in_processes_of_other_seeds() -> None:
    code = (
        "import sys; from engine.sources.conf import JdbcSourceConf; "
        "print(JdbcSourceConf(type='jdbc', url='jdbc:postgresql://db/shop?user=u', query=sys.argv[1]).dataset_urn())"
    )
    query = "SELECT id, total FROM orders JOIN customers USING (customer_id)"
    urns = {in_a_process(code, seed, query).strip() for seed in ("0", "1", "12345", "random")}
    assert len(urns) == 1, urns
    assert "/query:" in urns.pop()
