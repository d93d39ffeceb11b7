"""The text side of the ``sql`` step: what a statement may be, and the statement Spark runs.

A user writes ``SELECT ... FROM input ...`` over the records' own columns. The engine's columns
(the raw record, its errors, its dataset, the dropped mark: :mod:`engine.converters.frame`) must
survive the statement without the user naming them, and a record the statement filters out must
be counted as dropped, not vanish. :func:`rewrite` does both on the parsed statement (sqlglot,
Spark dialect), scope by scope:

- A **record scope** (one that reads ``input``, or a scope that carries the records, without
  aggregating) keeps one row per record: the engine's columns are added to its projection, its
  ``WHERE`` becomes the dropped mark, and each window is partitioned by the dataset and by whether
  the record is still live (so filtered-out and rejected records never reach a live one's window,
  as if the ``WHERE`` had removed them).
- An **aggregating scope** (``GROUP BY``, an aggregate, ``DISTINCT``) reads only live records and
  is grouped by dataset too: its rows are new records of that dataset. Its windows and joins keep
  to one dataset.

Nothing here needs Spark: the module is also what ``mode=validate`` and the plan check use before
any data is read. What Spark alone can say (a syntax error by its grammar, an unknown column, a
type mismatch) it says when it analyses the statement (:mod:`engine.converters.sql`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, ScopeType, traverse_scope

from engine.columns import DATASET, DROPPED, ERRORS

_SPARK = "spark, normalization_strategy = case_sensitive"
"""Spark SQL, without sqlglot's lower-casing of names: a column keeps the case its record has."""

INPUT = "input"
"""The name the records go by in a statement."""

_GENERATORS = (exp.Explode, exp.Posexplode, exp.Inline, exp.ExplodeOuter, exp.PosexplodeOuter, exp.Unnest)


class Refused(ValueError):
    """A statement the ``sql`` step does not run, with the reason (naming the part of the statement)."""


@dataclass(frozen=True)
class Rewritten:
    sql: str
    """The statement Spark runs over the records with every engine column."""
    aggregating: bool
    """Whether its rows are new records (the outermost scope aggregates): the records it did not
    read (rejected, dropped before it) then join its output unchanged."""


def parsed(statement: str) -> exp.Query:
    """``statement`` as one query reading only ``input`` and its own ``WITH`` names."""
    try:
        trees = [t for t in sqlglot.parse(statement, dialect="spark") if t is not None]
    except ParseError as exc:
        raise Refused(f"does not parse: {_first(exc)}") from exc
    if len(trees) != 1:
        raise Refused(f"holds {len(trees)} statements; a sql step is one SELECT over `input`")
    tree = trees[0]
    if not isinstance(tree, exp.Query):
        raise Refused(f"is a {tree.key.upper()} statement, not a SELECT over `input`")
    named = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise Refused(f"reads the table function {table.this.sql('spark')}: a sql step reads only `input`")
        if table.args.get("db") or table.args.get("catalog") or table.name.lower() not in named | {INPUT}:
            raise Refused(f"reads `{table.sql('spark')}`: a sql step reads only `input` (and its WITH names)")
    for union in tree.find_all(exp.SetOperation):
        raise Refused(f"uses {union.key.upper()}: not supported in a sql step")
    for sample in tree.find_all(exp.TableSample):
        raise Refused(f"uses {sample.sql('spark')}: records it leaves out would be lost uncounted")
    for join in tree.find_all(exp.Join):
        if join.method:
            raise Refused(f"uses a {join.method.upper()} join: name the join's columns (ON or USING)")
    for limit in tree.find_all(exp.Limit, exp.Offset):
        raise Refused(f"uses {limit.key.upper()}: records it leaves out would be lost uncounted")
    for generator in tree.find_all(exp.Lateral, *_GENERATORS):
        raise Refused(f"uses {generator.sql('spark')}: a step that repeats records is not supported in a sql step")
    return tree


def rewrite(statement: str, columns: list[str], engine: list[str]) -> Rewritten:
    """The statement with the engine's columns (``engine``, those the records carry) kept through
    it; ``columns`` are the records' own."""
    tree = parsed(statement)
    _spell(tree, columns)
    try:
        tree = qualify(
            tree,
            schema={INPUT: dict.fromkeys(columns, "STRING")},
            dialect=_SPARK,
            quote_identifiers=True,
            validate_qualify_columns=True,
        )
    except (OptimizeError, ParseError) as exc:
        raise Refused(f"cannot be followed column by column: {_first(exc)}") from exc
    kinds: dict[int, str] = {}
    for scope in traverse_scope(tree):
        kinds[id(scope.expression)] = _Scope(scope, kinds, engine).rewritten()
    kind = kinds[id(tree)]
    if kind == "none":
        raise Refused("does not read `input`")
    return Rewritten(tree.sql(dialect=_SPARK), aggregating=kind == "dataset")


class _Scope:
    """One SELECT of the statement: what it carries (``record``, ``dataset`` or ``none``), and its
    rewrite so that it carries it."""

    def __init__(self, scope: Scope, kinds: dict[int, str], engine: list[str]) -> None:
        if scope.scope_type == ScopeType.SUBQUERY:
            raise Refused("uses a subquery in an expression (IN, EXISTS, scalar); join a WITH name instead")
        if not isinstance(scope.expression, exp.Select):
            raise Refused(f"uses {scope.expression.key.upper()}: not supported in a sql step")
        self.select: exp.Select = scope.expression
        self.engine = engine
        self.dataset = DATASET if DATASET in engine else None
        """Absent when the records are all of one dataset (a group of one reads without it)."""
        self.sources: dict[str, str] = {}
        for alias, source in scope.sources.items():
            if isinstance(source, exp.Table):
                self.sources[alias] = "record"  # `input`: the only table parsed() lets through
            else:
                self.sources[alias] = kinds[id(source.expression)]

    def rewritten(self) -> str:
        records = [a for a, k in self.sources.items() if k == "record"]
        carriers = [a for a, k in self.sources.items() if k != "none"]
        if not carriers:
            return "none"
        first = self._from() if self._from() in carriers else carriers[0]
        self._join_on_dataset(first, carriers)
        if records and not self._aggregates():
            if len(records) > 1:
                raise Refused(f"joins the records with themselves ({', '.join(records)}); aggregate one side first")
            self._keep_records(records[0])
            return "record"
        for alias in records:  # an aggregate reads the records still live
            self.select.where(_live(alias), append=True, copy=False)
        self._keep_dataset(first)
        return "dataset"

    def _from(self) -> str:
        source = self.select.args["from_"].this
        return str(source.alias_or_name)

    def _aggregates(self) -> bool:
        s = self.select
        if s.args.get("group") or s.args.get("having") or s.args.get("distinct"):
            return True
        for projection in s.expressions:
            for agg in projection.find_all(exp.AggFunc):
                if not isinstance(agg.find_ancestor(exp.Window, exp.Select), exp.Window):
                    return True
        return False

    def _join_on_dataset(self, first: str, carriers: list[str]) -> None:
        if self.dataset is None:
            return
        for join in self.select.args.get("joins") or []:
            alias = str(join.this.alias_or_name)
            if alias not in carriers or alias == first:
                continue
            same = exp.EQ(this=_column(first, DATASET), expression=_column(alias, DATASET))
            on = join.args.get("on")
            join.set("on", exp.and_(on, same) if on is not None else same)
            if join.args.get("kind") == "CROSS":
                join.set("kind", None)

    def _keep_records(self, alias: str) -> None:
        s = self.select
        if self._from() != alias:
            raise Refused(f"joins the records (`{alias}`) on the right; put them first, in FROM")
        for join in s.args.get("joins") or []:
            if join.side != "LEFT" or join.kind in ("SEMI", "ANTI"):
                said = " ".join(w for w in (join.side, join.kind) if w) or "INNER"
                raise Refused(
                    f"uses a {said} JOIN of the records: records without a match would be lost uncounted; "
                    "use a LEFT JOIN (or a lookup step)"
                )
        where = s.args.get("where")
        kept = exp.func("coalesce", exp.paren(where.this), exp.false()) if where is not None else None
        s.set("where", None)
        dead = exp.or_(_column(alias, DROPPED), _rejected(alias))
        if kept is not None:
            dead = exp.or_(dead, exp.not_(kept))
        self._partition(*self._dataset(alias), exp.paren(dead))
        projections = [p for p in s.expressions if p.alias_or_name not in self.engine]
        carried = []
        for name in self.engine:
            value: exp.Expr = _column(alias, name)
            if name == DROPPED and kept is not None:
                value = exp.or_(value, exp.and_(exp.not_(_rejected(alias)), exp.not_(kept.copy())))
            carried.append(exp.alias_(value, name, quoted=True))
        s.set("expressions", [*projections, *carried])

    def _keep_dataset(self, alias: str) -> None:
        s = self.select
        if self.dataset is None:
            return
        dataset = _column(alias, DATASET)
        self._partition(dataset.copy())
        projections = [p for p in s.expressions if p.alias_or_name != DATASET]
        s.set("expressions", [*projections, exp.alias_(dataset.copy(), DATASET, quoted=True)])
        group = s.args.get("group")
        if group is not None and group.args.get("all"):
            return  # GROUP BY ALL: the dataset is one of the projections it groups by
        if group is not None or (self._aggregates() and not s.args.get("distinct")):
            s.group_by(dataset.copy(), append=True, copy=False)

    def _dataset(self, alias: str) -> list[exp.Expr]:
        return [_column(alias, DATASET)] if self.dataset is not None else []

    def _partition(self, *first: exp.Expr) -> None:
        for projection in self.select.expressions:
            for window in projection.find_all(exp.Window):
                window.set("partition_by", [*(f.copy() for f in first), *(window.args.get("partition_by") or [])])


def _spell(tree: exp.Expr, columns: list[str]) -> None:
    """Quote every identifier (so sqlglot keeps its case, as Spark does), spelling a record
    column as the records do (Spark matches names without regard to case)."""
    spelled = {c.lower(): c for c in columns}
    for ident in tree.find_all(exp.Identifier):
        if isinstance(ident.parent, exp.Column):
            ident.set("this", spelled.get(ident.name.lower(), ident.name))
        if isinstance(ident.parent, exp.Table) and ident.name.lower() == INPUT and ident.arg_key == "this":
            ident.set("this", INPUT)
        ident.set("quoted", True)


def _column(table: str, name: str) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def _rejected(alias: str) -> exp.Expr:
    return exp.GT(this=exp.func("size", _column(alias, ERRORS)), expression=exp.Literal.number(0))


def _live(alias: str) -> exp.Expr:
    return exp.and_(exp.not_(_column(alias, DROPPED)), exp.not_(_rejected(alias)))


def _first(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
