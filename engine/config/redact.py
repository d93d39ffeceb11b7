"""Hide secret-looking values before a config is shown."""

from __future__ import annotations

import re
from typing import Any

SECRET_KEY = re.compile(
    r"(?i)(password|passwd|passphrase|identities|secret|token|credential|api[_-]?key|private[_-]?key|access[_-]?key|jaas)"
)
REDACTED = "***"


def redact(value: Any, *, key: str = "") -> Any:
    """A copy of ``value`` where every value under a secret-looking key is replaced."""
    if isinstance(value, dict):
        return {
            k: REDACTED if SECRET_KEY.search(str(k)) and not isinstance(v, dict) else redact(v, key=k)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v, key=key) for v in value]
    return value
