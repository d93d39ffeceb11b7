"""Users of the flow service and their bearer tokens.

``serve.sh users add <name> --group <g> [--admin]`` makes a user a new token and prints it once;
the store keeps only its SHA-256 (a token is 256 random bits, so a fast hash is as safe as a slow
one and checks a request in microseconds). Adding a user again replaces its token, groups and
role; ``users remove`` disables it. The newest row per user wins.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field

from engine.errors import ConfigError
from engine.flow.model import NAME
from engine.service.tables import ServiceTable, newest, utcnow

TOKEN_PREFIX = "eng_"
"""Marks a token as this engine's (secret scanners can look for it)."""
USERS_COLUMNS = (
    ("name", "string"),
    ("groups", "string"),
    ("admin", "boolean"),
    ("token_sha256", "string"),
    ("disabled", "boolean"),
    ("changed_at", "timestamp"),
)


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    admin: bool = False

    @property
    def principals(self) -> set[str]:
        """The names a rule may give this user by: its own and ``group:<g>`` for each group."""
        return {self.name, *(f"group:{g}" for g in self.groups)}


@dataclass
class Users:
    """The users table (``_engine/service/users``)."""

    table: ServiceTable
    _by_hash: dict[str, User] = field(default_factory=dict)
    _seen: int = -1

    @classmethod
    def under(cls, root: str) -> Users:
        return cls(ServiceTable(root, "users", USERS_COLUMNS))

    def add(self, name: str, groups: list[str], *, admin: bool = False) -> str:
        """Make ``name`` a new token (returned, never stored) with ``groups``."""
        for what, value in [("user", name), *(("group", g) for g in groups)]:
            if not NAME.fullmatch(value):
                raise ConfigError(f"{what} name `{value}`: use letters, digits, `_` and `-` (not first)", key=what)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = {
            "name": name,
            "groups": json.dumps(sorted(set(groups))),
            "admin": admin,
            "token_sha256": _digest(token),
            "disabled": False,
            "changed_at": utcnow(),
        }
        self.table.append([row])
        return token

    def remove(self, name: str) -> bool:
        """Disable ``name``: its token stops working. False: no such user."""
        current = self.listed().get(name)
        if current is None:
            return False
        self.table.append([{**current, "disabled": True, "changed_at": utcnow()}])
        return True

    def listed(self) -> dict[str, dict[str, object]]:
        """Each user's newest row, disabled ones too, by name."""
        return {k[0]: row for k, row in newest(self.table.rows(), "name", order="changed_at").items()}

    def authenticate(self, token: str) -> User | None:
        """The user whose token this is, or None (unknown, replaced or disabled). A token not
        known is looked up again in the table's newest version (a user added a moment ago)."""
        found = self._lookup(token, fresh=False)
        return found if found is not None else self._lookup(token, fresh=True)

    def _lookup(self, token: str, *, fresh: bool) -> User | None:
        rows = self.table.rows(fresh=fresh)
        if len(rows) != self._seen:  # rows only grow: a new count is a new table version
            self._by_hash = {
                str(r["token_sha256"]): User(str(r["name"]), tuple(json.loads(str(r["groups"]))), bool(r["admin"]))
                for r in self.listed().values()
                if not r["disabled"]
            }
            self._seen = len(rows)
        return self._by_hash.get(_digest(token))


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
