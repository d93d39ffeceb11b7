"""The flow service under read load: N concurrent API clients listing and reading flows for a while
against a store of many flows. Prints p50/p95/p99 latency per request kind, requests per second
and errors (any non-2xx or a refused connection).

    .venv/bin/python bench/service_api.py                       # 1,000 flows, 50 clients, 30 s
    .venv/bin/python bench/service_api.py --flows 200 --clients 10 --seconds 5   # quick check

The service is started as users start it (``serve.sh``, one uvicorn process, scheduler on) on a
loopback port with a fresh warehouse under bench/out/; the flows are created through the API
(``POST /flowconfigs``, each compiled and stored as a Delta version), by 4 clients at once. The
clients are threads of this process, on the same machine as the service: what they cost is part
of what is measured.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import statistics
import subprocess
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out" / "service_api"
FLOW = {"source": "demo_landing", "destinations": ["demo_replica"], "datasets": ["orders"]}
GROUPS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flows", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()

    shutil.rmtree(OUT, ignore_errors=True)
    warehouse = OUT / "wh"
    token = _user(warehouse)
    port = _free_port()
    started = time.monotonic()
    with open(OUT / "serve.log", "wb") as log:
        proc = subprocess.Popen(
            [str(REPO / "serve.sh"), "--port", str(port), f"warehouse={warehouse}"], stdout=log, stderr=log
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, proc)
        print(f"service up in {time.monotonic() - started:.2f} s (serve.sh, whole command)")
        session = _session(token)
        created = _create(session, url, args.flows)
        print(
            f"created {args.flows} flows in {created['seconds']:.1f} s by 4 clients: "
            f"p50 {created['p50']:.0f} ms, p99 {created['p99']:.0f} ms, errors {created['errors']}"
        )
        _load(url, token, args.clients, args.seconds, args.flows)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _user(warehouse: Path) -> str:
    done = subprocess.run(
        [str(REPO / "serve.sh"), "users", "add", "bench", "--group", "analysts", f"warehouse={warehouse}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the service exited: see {OUT / 'serve.log'}")
        try:
            if requests.get(f"{url}/healthz", timeout=1).ok:
                return
        except requests.ConnectionError:
            time.sleep(0.1)
    raise SystemExit("the service did not start")


def _session(token: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    return session


def _create(session: requests.Session, url: str, flows: int) -> dict[str, float]:
    local = threading.local()

    def one(i: int) -> tuple[float, bool]:
        if not hasattr(local, "s"):
            local.s = _session(session.headers["Authorization"].split()[-1])
        body = {"flowGroup": f"group{i % GROUPS:02d}", "flowName": f"flow{i:05d}", **FLOW}
        t = time.perf_counter()
        ok = local.s.post(f"{url}/flowconfigs", data=json.dumps(body), timeout=60).status_code == 201
        return (time.perf_counter() - t) * 1000, ok

    t0 = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(flows)))
    times = sorted(r[0] for r in results)
    return {
        "seconds": time.perf_counter() - t0,
        "p50": _pct(times, 50),
        "p99": _pct(times, 99),
        "errors": sum(not r[1] for r in results),
    }


def _load(url: str, token: str, clients: int, seconds: float, flows: int) -> None:
    kinds = {
        "list all": lambda: "/flowconfigs",
        "list a group": lambda: f"/flowconfigs?flowGroup=group{random.randrange(GROUPS):02d}",
        "read one": lambda: f"/flowconfigs/group{(i := random.randrange(flows)) % GROUPS:02d}/flow{i:05d}",
    }
    times: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    gate = threading.Barrier(clients)

    def client(n: int) -> None:
        session, rng = _session(token), random.Random(n)
        names = list(kinds)
        gate.wait()
        while time.monotonic() < stop:
            kind = rng.choices(names, weights=(1, 3, 6))[0]
            t = time.perf_counter()
            try:
                ok = session.get(url + kinds[kind](), timeout=60).ok
            except requests.RequestException:
                ok = False
            took = (time.perf_counter() - t) * 1000
            with lock:
                times[kind].append(took)
                errors[kind] += not ok

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    total = sum(len(v) for v in times.values())
    print(
        f"{clients} clients for {wall:.1f} s against {flows} flows: {total} requests, {total / wall:.0f}/s, "
        f"errors {sum(errors.values())}"
    )
    print(f"{'request':<14}{'count':>8}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for kind in kinds:
        got = sorted(times[kind])
        p50, p95, p99 = (_pct(got, p) for p in (50, 95, 99))
        print(f"{kind:<14}{len(got):>8}{p50:>10.1f}{p95:>10.1f}{p99:>10.1f}{errors[kind]:>8}")
    everything = sorted(t for v in times.values() for t in v)
    print(
        f"{'all':<14}{len(everything):>8}{_pct(everything, 50):>10.1f}{_pct(everything, 95):>10.1f}"
        f"{_pct(everything, 99):>10.1f}{sum(errors.values()):>8}"
    )


def _pct(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(pct) - 1] if len(values) > 1 else values[0]


if __name__ == "__main__":
    main()
