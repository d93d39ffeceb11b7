"""Every README section a message or a docstring of the engine points to exists (issue 58,
item 19: a message sent users to a "Troubleshooting" section the README did not have), and the
Troubleshooting section answers what the damaged-table message sends users there for: what
undoing the newest write costs, for every metadata table. No JVM."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The README's sections moved into the documentation site (issue 59, item 7): a section a message
# names is looked up in the README and every page under docs/.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
README = "\n\n".join(page.read_text() for page in PAGES)
POINTERS = (
    re.compile(r"see the README, ([A-Z][^,)\"]+)"),  # "see the README, Troubleshooting, for ..."
    re.compile(r'README "([A-Z][^"{]+)"'),  # (README "Encrypted secrets")
    re.compile(r'^README = "([^"]+)"', re.MULTILINE),  # a module's constant the message formats in
)


def headings() -> list[str]:
    """The headings of the README and the docs pages, and the bold words that open a paragraph (``**Lost state.**``)."""
    found = [m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", README, re.MULTILINE)]
    return found + [m.group(1).strip() for m in re.finditer(r"^\*\*([^*]+?)\.?\*\*", README, re.MULTILINE)]


def pointed_to() -> dict[str, list[str]]:
    """Each section named in the engine's source, and the files naming it."""
    found: dict[str, list[str]] = {}
    for file in sorted((REPO / "engine").rglob("*.py")):
        text = file.read_text()
        for pattern in POINTERS:
            for match in pattern.finditer(text):
                found.setdefault(match.group(1).strip(), []).append(str(file.relative_to(REPO)))
    return found


def section(name: str) -> str:
    start = re.search(rf"^(#+) {re.escape(name)}\b.*$", README, re.MULTILINE)
    assert start is not None, name
    level = len(start.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.MULTILINE).search(README, start.end())
    return README[start.end() : end.start() if end else len(README)]


def test_every_section_a_message_points_to_is_in_the_readme() -> None:
    names = pointed_to()
    assert "Troubleshooting" in names and "Quoting override values" in names  # the finder finds them
    missing = {n: files for n, files in names.items() if not any(h.startswith(n) for h in headings())}
    assert missing == {}


def test_troubleshooting_says_what_undoing_a_damaged_tables_newest_write_costs_for_each_table() -> None:
    store = (REPO / "engine" / "state" / "delta_store.py").read_text()
    tables = {*re.findall(r'f"\{root\}/(\w+)"', store), "runs"}
    assert {"state", "commit_log", "files_read", "schemas"} <= tables  # the tables are found
    answer = section("Troubleshooting")
    costs = answer[answer.index("what undoing its newest write costs") :]
    rows = [line for line in costs.splitlines() if line.startswith("| `")]
    named = {t for row in rows for t in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert tables - named == set()
    assert "is damaged" in answer and "_delta_log" in answer
