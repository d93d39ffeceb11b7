"""How many records a rule or a DAG may flag before its batch fails: a count or a share.

``max_rejected = 25`` allows 25 records of a dataset's batch; ``max_rejected = "2%"`` allows 2% of
the records it read. One more fails the batch: nothing of that dataset is published and its
watermark stays (the DAG's ``publish.policy`` decides whether the others publish).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

_SHARE = re.compile(r"^\s*(\d*\.?\d+)\s*%\s*$")


@dataclass(frozen=True)
class Threshold:
    """At most ``count`` records, or at most ``percent`` % of the records read (exact: a decimal)."""

    count: int | None = None
    percent: Decimal | None = None

    @classmethod
    def parse(cls, value: Any) -> Threshold:
        """``25``, ``"25"``, ``"2%"`` or ``"0.5%"``; anything else is a :class:`ValueError` saying what is."""
        if isinstance(value, Threshold):
            return value
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError(f'a count (25) or a share of the records ("2%"), not {value!r}')
        text = str(value).strip()
        if re.fullmatch(r"\d+", text):
            return cls(count=int(text))
        share = _SHARE.match(text)
        if share is None or Decimal(share.group(1)) > 100:
            raise ValueError(f'a count (25) or a share of the records between 0% and 100% ("2%"), not {value!r}')
        return cls(percent=Decimal(share.group(1)))

    def allowed(self, records: int) -> int:
        """The most records that may be flagged in a batch of ``records``."""
        if self.count is not None:
            return self.count
        assert self.percent is not None
        return math.floor(self.percent * records / 100)

    def exceeded(self, flagged: int, records: int) -> bool:
        return flagged > self.allowed(records)

    def __str__(self) -> str:
        """As written (``25``, ``2%``), and parsed back to the same threshold."""
        if self.count is not None:
            return str(self.count)
        return f"{self.percent:f}%" if self.percent is not None else ""


ThresholdValue = Annotated[Threshold, BeforeValidator(Threshold.parse), PlainSerializer(str, return_type=str)]
"""A config field holding a :class:`Threshold` (written as ``25`` or ``"2%"``)."""
