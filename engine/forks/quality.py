"""Quality gates: what a dataset's batch must satisfy to be published.

Three kinds of test, all judged on the counts the fork takes in its one counting pass:

- a rule (a converter step) with ``action = fail`` that flagged a record, or with a
  ``max_rejected`` it exceeded;
- the DAG's ``max_rejected``, its error budget, against the records the batch rejected;
- the DAG's ``gates``: boolean aggregate Spark SQL expressions over the batch's valid records
  (``count(*) > 0``). A comparison's two sides are aggregated as well, so that a failed gate says
  what it saw (``count(*) = 0``), not only that it was false.

A batch that fails any of them is *refused*: :meth:`Quality.judge` says why, naming the rule, the
observed value and the threshold, and the DAG publishes nothing of that dataset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from engine.converters.base import Rule, first_line
from engine.errors import ConfigError
from engine.plugins.threshold import Threshold

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from engine.converters.frame import ColumnOf

COMPARISONS = (">=", "<=", "<>", "!=", "==", "<=>", "=", ">", "<")


@dataclass(frozen=True)
class Gate:
    """One of a DAG's ``gates``: the expression, and its two sides when it is a comparison."""

    sql: str
    key: str

    @property
    def sides(self) -> tuple[str, str, str] | None:
        return split_comparison(self.sql)

    def columns(self, index: int, frame: DataFrame) -> list[Column]:
        """The aggregates the counting pass takes for this gate over ``frame``: the gate, and its
        two sides when they are aggregates of their own (a split that is not is left out)."""
        out = [F.expr(self.sql).alias(f"__gate{index}")]
        sides = self.sides
        if sides is None:
            return out
        try:
            both = [F.expr(sides[0]).alias(f"__gate{index}_left"), F.expr(sides[2]).alias(f"__gate{index}_right")]
            _ = frame.agg(*both).schema  # analysed (no job): each side must aggregate on its own
        except Exception:  # e.g. a split of a CASE the splitter did not see through
            return out
        return out + both

    def check(self, frame: DataFrame) -> None:
        """A :class:`ConfigError` unless the gate is a boolean aggregate over ``frame``'s columns."""
        try:
            found = frame.agg(F.expr(self.sql)).schema.fields[0].dataType
        except AnalysisException as exc:
            raise ConfigError(
                f"gate `{self.sql}`: {first_line(exc)} (a gate is an aggregate over the batch, such as "
                "`count(*) > 0` or `max(amount) < 1e6`)",
                key=self.key,
            ) from exc
        if not isinstance(found, BooleanType):
            raise ConfigError(
                f"gate `{self.sql}` is of type {found.simpleString()}, not boolean; write a condition "
                "such as `count(*) > 0`",
                key=self.key,
            )

    def failure(self, values: dict[str, Any], index: int) -> str:
        """Why the gate failed over ``values`` (the pass's aggregates), or ``""`` if it held."""
        if values.get(f"__gate{index}") is True:
            return ""
        sides = self.sides
        if sides is None or f"__gate{index}_left" not in values:
            seen = _shown(values.get(f"__gate{index}"))
        else:
            shown = [
                f"{side} = {_shown(values.get(f'__gate{index}_{which}'))}"
                for side, which in ((sides[0], "left"), (sides[2], "right"))
                if not _is_literal(side)
            ]
            seen = ", ".join(shown) or _shown(values.get(f"__gate{index}"))
        return f"gate `{self.sql}` failed: observed {seen}"


@dataclass(frozen=True)
class Verdict:
    """One test of a batch and its outcome."""

    test: str
    """The rule's step, ``max_rejected = <threshold>``, or the gate's SQL."""
    kind: str
    """``rule``, ``budget`` or ``gate``."""
    why: str = ""
    """Why it failed; ``""``: it held."""

    @property
    def passed(self) -> bool:
        return not self.why


@dataclass(frozen=True)
class Quality:
    """What judges a DAG's batches: its counted rules, its error budget and its gates."""

    rules: tuple[Rule, ...] = ()
    max_rejected: Threshold | None = None
    gates: tuple[Gate, ...] = ()

    @classmethod
    def of(cls, rules: list[Rule | None], *, max_rejected: Threshold | None, gates: list[str], key: str) -> Quality:
        kept = tuple(r for r in rules if r is not None)
        return cls(kept, max_rejected, tuple(Gate(g, f"{key}.gates[{i}]") for i, g in enumerate(gates)))

    def rule_columns(self, col: ColumnOf = F.col) -> list[Column]:
        """What the counting pass sums per rule: the records each rule flagged (the engine's
        columns read with ``col``)."""
        return [F.sum(r.flagged(col).cast("long")).alias(f"__rule{i}") for i, r in enumerate(self.rules)]

    def gate_columns(self, frame: DataFrame) -> list[Column]:
        return [c for i, g in enumerate(self.gates) for c in g.columns(i, frame)]

    def flagged(self, values: dict[str, Any]) -> dict[str, int]:
        """Each counted rule's flagged records, by step, from the pass's aggregates."""
        return {r.step: int(values.get(f"__rule{i}") or 0) for i, r in enumerate(self.rules)}

    def judge(self, *, read: int, rejected: int, flagged: dict[str, int], gates: dict[str, Any]) -> list[str]:
        """Why a dataset's batch may not be published (nothing: it may)."""
        return [v.why for v in self.verdicts(read=read, rejected=rejected, flagged=flagged, gates=gates) if v.why]

    def verdicts(self, *, read: int, rejected: int, flagged: dict[str, int], gates: dict[str, Any]) -> list[Verdict]:
        """Every test's outcome over a dataset's batch, in config order: each rule that can refuse
        (``action = fail``, or a ``max_rejected``), the error budget, each gate."""
        out = []
        for rule in self.rules:
            n = flagged.get(rule.step, 0)
            if rule.action == "fail":
                why = f"rule `{rule.step}` (action = fail) flagged {n} of {read} records" if n else ""
                out.append(Verdict(rule.step, "rule", why))
            elif rule.max_rejected is not None:
                over = rule.max_rejected.exceeded(n, read)
                why = _over(f"rule `{rule.step}`", n, read, rule.max_rejected, rule.action) if over else ""
                out.append(Verdict(rule.step, "rule", why))
        if self.max_rejected is not None:
            over = self.max_rejected.exceeded(rejected, read)
            why = _over("the DAG's error budget", rejected, read, self.max_rejected, "reject") if over else ""
            out.append(Verdict(f"max_rejected = {self.max_rejected}", "budget", why))
        return out + [Verdict(gate.sql, "gate", gate.failure(gates, i)) for i, gate in enumerate(self.gates)]

    def warned(self, flagged: dict[str, int], read: int) -> str:
        """What the ``warn`` rules counted, for a published dataset's status (``""``: nothing)."""
        warned = [f"`{r.step}` {flagged[r.step]}" for r in self.rules if r.action == "warn" and flagged.get(r.step)]
        return f"warnings of {read} records: {', '.join(warned)}" if warned else ""


def _over(what: str, n: int, read: int, threshold: Threshold, action: str) -> str:
    verb = "rejected" if action == "reject" else "flagged"
    share = f" ({100 * n / read:.2f}%)" if read else ""
    allowed = threshold.allowed(read)
    return f"{what} {verb} {n} of {read} records{share}, over max_rejected = {threshold} ({allowed} allowed)"


def split_comparison(sql: str) -> tuple[str, str, str] | None:
    """``"count(*) > 0"`` -> ``("count(*)", ">", "0")``: the first comparison outside brackets
    and quotes, if the expression is one (``None`` for ``a > 1 AND b < 2`` and the like)."""
    depth, quote, i = 0, "", 0
    found: tuple[int, str] | None = None
    while i < len(sql):
        ch = sql[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and found is None:
            op = next((o for o in sorted(COMPARISONS, key=len, reverse=True) if sql.startswith(o, i)), None)
            if op is not None:
                found = (i, op)
                i += len(op)
                continue
        i += 1
    if found is None:
        return None
    left, right = sql[: found[0]].strip(), sql[found[0] + len(found[1]) :].strip()
    if not left or not right or _has_logic(left) or _has_logic(right):
        return None
    return left, found[1], right


def _has_logic(text: str) -> bool:
    """Whether ``text`` combines conditions at its top level (then it is not one comparison's side)."""
    words = text.upper().replace("(", " ( ").replace(")", " ) ").split()
    depth = 0
    for w in words:
        depth += w == "("
        depth -= w == ")"
        if depth == 0 and w in _LOGIC:
            return True
    return split_comparison(text) is not None  # a second comparison: `a < b < c` is not one


_LOGIC = ("AND", "OR", "NOT", "BETWEEN", "IS", "IN", "LIKE", "RLIKE", "CASE", "WHEN", "THEN", "ELSE", "END")
"""Words that make a side of a comparison more than one expression."""


def _is_literal(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text.upper() in ("TRUE", "FALSE", "NULL") or (text[:1] in "'\"" and text[-1:] == text[:1])
    return True


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)
