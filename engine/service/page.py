"""The status page: server-rendered HTML that refreshes itself.

``/`` lists the flows by group, each with its last executions coloured by status; ``/flows/{group}/{name}``
shows a flow's schedule, its executions (duration, records, errors, a link to the output) and the
hops of the newest one that ran any (status, records, errors, watermarks, duration). ``/login`` takes a token
and keeps it in an HTTP-only, same-site cookie, which the service accepts for reading (GET) only:
a page can never change anything on a user's behalf.
"""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import Request

from engine.flow.model import NAME

if TYPE_CHECKING:
    from engine.service.service import Service
    from engine.service.users import User

COOKIE = "engine_token"
REFRESH_SECONDS = 10
SHOWN_EXECUTIONS = 8
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .3em .8em; text-align: left; }
.status { display: inline-block; padding: .1em .5em; border-radius: .3em; color: #fff; font-size: .85em; }
.SUCCEEDED { background: #2e7d32; } .RUNNING { background: #1565c0; } .PARTIAL { background: #ef6c00; }
.FAILED { background: #c62828; } .CANCELLED { background: #6a1b9a; } .SKIPPED { background: #757575; }
.none { color: #999; }
"""


def named(text: str, most: int) -> bool:
    """A flow's group or name as the API takes it (never a file name too long to look up)."""
    return len(text) <= most and NAME.fullmatch(text) is not None


def signed_in(request: Request, service: Service) -> User | None:
    token = request.cookies.get(COOKIE)
    return service.users.authenticate(token) if token else None


def overview(service: Service, user: User) -> str:
    parts = [f'<p>Signed in as <b id="user">{escape(user.name)}</b> · <a href="/logout">sign out</a></p>']
    flows = service.flows.listed()
    groups = sorted({f.group for f in flows})
    for group in groups:
        rows = []
        for f in (f for f in flows if f.group == group):
            runs = service.executions.of_flow(f.group, f.name, limit=SHOWN_EXECUTIONS)
            badges = (
                " ".join(_badge(r["status"], r["execution_id"]) for r in runs) or '<span class="none">never run</span>'
            )
            link = f"/flows/{quote(f.group)}/{quote(f.name)}"
            schedule = escape(str(f.config.get("schedule") or "on demand"))
            rows.append(f'<tr><td><a href="{link}">{escape(f.name)}</a></td><td>{schedule}</td><td>{badges}</td></tr>')
        table = "<table><tr><th>Flow</th><th>Schedule</th><th>Last executions (newest first)</th></tr>"
        parts.append(f"<h2>{escape(group)}</h2>{table}{''.join(rows)}</table>")
    if not groups:
        parts.append("<p>No flows yet.</p>")
    return "".join(parts)


def flow_html(service: Service, flow: dict[str, Any]) -> str:
    group, name = flow["flowGroup"], flow["flowName"]
    facts = [
        ("Source", flow.get("source") or "-"),
        ("Destinations", ", ".join(flow.get("destinations") or []) or "-"),
        ("Templates", ", ".join(flow.get("templateUris") or []) or "-"),
        ("Schedule", flow.get("schedule") or "on demand"),
        ("Owner", flow.get("owner") or "-"),
        ("Version", f"{flow['version']} ({flow['origin']})"),
    ]
    head = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in facts)
    runs = [service.executions.describe(r) for r in service.executions.of_flow(group, name, limit=20)]
    rows = "".join(
        f"<tr><td>{_badge(r['executionStatus'], r['flowExecutionId'])}</td><td>{escape(r['flowExecutionId'])}</td>"
        f"<td>{escape(str(r['trigger']))}</td><td>{escape(str(r['requestedBy']))}</td><td>{_time(r['executionStartTime'])}</td>"
        f"<td>{_duration(r)}</td><td>{r['processedCount']}</td><td>{r['errorCount']}</td>"
        f"<td>{escape(str(r['message'] or ''))[:200]}</td>"
        f'<td><a href="/flowexecutions/{quote(r["flowExecutionId"])}/output">output</a></td></tr>'
        for r in runs
    )
    executions = (
        "<h2>Executions</h2><table id='executions'><tr><th>Status</th><th>Execution</th><th>Trigger</th><th>By</th>"
        f"<th>Started</th><th>Took</th><th>Records</th><th>Errors</th><th>Message</th><th></th></tr>{rows}</table>"
    )
    ran = [r for r in runs if r["jobStatuses"]]  # (a skipped or refused execution ran no hop)
    hops = _hops(ran[0]) if ran else ""
    return f'<p><a href="/">all flows</a></p><table>{head}</table>{executions}{hops}'


def _hops(run: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{escape(str(j['jobName']))}</td><td>{_badge(str(j['executionStatus']), '')}</td>"
        f"<td>{escape(str(j.get('template') or ''))}</td><td>{j.get('processedCount') or 0}</td>"
        f"<td>{j.get('errorCount') or 0}</td><td>{escape(str(j.get('lowWatermark') or '-'))}</td>"
        f"<td>{escape(str(j.get('highWatermark') or '-'))}</td><td>{_duration(j)}</td></tr>"
        for j in run["jobStatuses"]
    )
    return (
        f"<h2>Hops of {escape(run['flowExecutionId'])}</h2><table id='hops'><tr><th>Hop</th><th>Status</th>"
        f"<th>Template</th><th>Records</th><th>Errors</th><th>Low watermark</th><th>High watermark</th>"
        f"<th>Took</th></tr>{rows}</table>"
    )


def _badge(status: str, title: str) -> str:
    return f'<span class="status {escape(status)}" title="{escape(title)}">{escape(status)}</span>'


def _time(millis: int | None) -> str:
    return f"{datetime.fromtimestamp(millis / 1000, timezone.utc):%Y-%m-%d %H:%M:%S} UTC" if millis else "-"


def _duration(status: dict[str, Any]) -> str:
    start, end = status.get("executionStartTime"), status.get("executionEndTime")
    return f"{(end - start) / 1000:.1f} s" if start and end else "-"


def page(title: str, body: str, *, refresh: bool = True) -> str:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' if refresh else ""
    return (
        f'<!doctype html><html><head><meta charset="utf-8">{meta}<title>{escape(title)} · engine flows</title>'
        f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>"
    )
