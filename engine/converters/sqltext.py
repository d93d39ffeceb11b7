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

_GENERATORS = {
    "explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer", "stack",
    "variant_explode", "variant_explode_outer", "unnest",
}  # fmt: skip
"""Spark's generators: each makes several rows of one record."""


@dataclass(frozen=True)
class _Made:
    """What a scope's rows are: ``record`` (one per record), ``dataset`` (made of records, one
    dataset each) or ``none`` (nothing of ``input``); and the output columns no two of its rows
    share within a dataset (empty: one row per dataset), ``None`` when that is not known."""

    kind: str
    unique: frozenset[str] | None = None


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
    tree = _one_query(statement)
    _check_reads(tree)
    _check_shapes(tree)
    _check_names(tree)
    _check_losses(tree)
    return tree


def _one_query(statement: str) -> exp.Query:
    """``statement`` parsed, refused unless it is one query."""
    try:
        trees = [t for t in sqlglot.parse(trimmed(statement), dialect="spark") if t is not None]
    except ParseError as exc:
        raise Refused(f"does not parse: {_first(exc)}") from exc
    if len(trees) != 1:
        raise Refused(f"holds {len(trees)} statements; a sql step is one SELECT over `input`")
    tree = trees[0]
    if not isinstance(tree, exp.Query):
        raise Refused(f"is a {tree.key.upper()} statement, not a SELECT over `input`")
    return tree


def _check_reads(tree: exp.Query) -> None:
    """Refuse a table other than ``input`` and the query's ``WITH`` names, and a table function."""
    named = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise Refused(f"reads the table function {table.this.sql('spark')}: a sql step reads only `input`")
        if table.args.get("db") or table.args.get("catalog") or table.name.lower() not in named | {INPUT}:
            raise Refused(f"reads `{table.sql('spark')}`: a sql step reads only `input` (and its WITH names)")


def _check_shapes(tree: exp.Query) -> None:
    """Refuse what the rewrite cannot follow column by column (set operations, pivots, natural
    joins, named windows), and a sample (records it leaves out would be lost uncounted)."""
    for union in tree.find_all(exp.SetOperation):
        raise Refused(f"uses {union.key.upper()}: not supported in a sql step")
    for sample in tree.find_all(exp.TableSample):
        raise Refused(f"uses {sample.sql('spark')}: records it leaves out would be lost uncounted")
    for join in tree.find_all(exp.Join):
        if join.method:
            raise Refused(f"uses a {join.method.upper()} join: name the join's columns (ON or USING)")
    for pivot in tree.find_all(exp.Pivot):
        raise Refused(f"uses {'UNPIVOT' if pivot.args.get('unpivot') else 'PIVOT'}: not supported in a sql step")
    for select in tree.find_all(exp.Select):
        if select.args.get("windows"):
            raise Refused("names a window (WINDOW w AS ...): write it in OVER (...)")


def _check_losses(tree: exp.Query) -> None:
    """Refuse what would lose records uncounted (limits) or repeat them (generators, laterals)."""
    for limit in tree.find_all(exp.Limit, exp.Offset):
        raise Refused(f"uses {limit.key.upper()}: records it leaves out would be lost uncounted")
    for node in tree.find_all(exp.Lateral, exp.Func):
        name = node.name if isinstance(node, exp.Anonymous) else node.sql_name() if isinstance(node, exp.Func) else ""
        if isinstance(node, exp.Lateral) or name.lower() in _GENERATORS:
            raise Refused(f"uses {node.sql('spark')}: a step that repeats records is not supported in a sql step")


def _check_names(tree: exp.Query) -> None:
    """Refuse a column named like the engine's own (``__engine_...``)."""
    for alias in tree.find_all(exp.Alias, exp.TableAlias):
        names = [alias.alias] + [c.name for c in alias.args.get("columns") or []]
        for name in names:
            if name.lower().startswith("__engine_"):
                raise Refused(f"names a column `{name}`: names starting with __engine_ are the engine's")


def trimmed(statement: str) -> str:
    """``statement`` without the blanks and semicolons that may end it."""
    return statement.strip().rstrip(";").rstrip()


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
    made: dict[int, _Made] = {}
    for scope in traverse_scope(tree):
        made[id(scope.expression)] = _Scope(scope, made, engine).rewritten()
    kind = made[id(tree)].kind
    if kind == "none":
        raise Refused("does not read `input`")
    return Rewritten(tree.sql(dialect=_SPARK), aggregating=kind == "dataset")


def round_trip(statement: str, columns: list[str]) -> str:
    """``statement`` parsed and written back as :func:`rewrite` writes it, rewriting nothing: what
    Spark must read as it reads ``statement`` for the rewrite to mean what the user wrote."""
    tree = parsed(statement)
    _spell(tree, columns)
    return tree.sql(dialect=_SPARK)


class _Scope:
    """One SELECT of the statement: what its rows are (:class:`_Made`), and its rewrite so that
    they carry what they must."""

    def __init__(self, scope: Scope, made: dict[int, _Made], engine: list[str]) -> None:
        if scope.scope_type == ScopeType.SUBQUERY:
            raise Refused("uses a subquery in an expression (IN, EXISTS, scalar); join a WITH name instead")
        if not isinstance(scope.expression, exp.Select):
            raise Refused(f"uses {scope.expression.key.upper()}: not supported in a sql step")
        self.select: exp.Select = scope.expression
        self.engine = engine
        self.dataset = DATASET if DATASET in engine else None
        """Absent when the records are all of one dataset (a group of one reads without it)."""
        self.sources: dict[str, _Made] = {}
        for alias, (_, source) in scope.selected_sources.items():
            if isinstance(source, exp.Table):
                self.sources[alias] = _Made("record")  # `input`: the only table parsed() lets through
            else:
                self.sources[alias] = made[id(source.expression)]

    def rewritten(self) -> _Made:
        records = [a for a, m in self.sources.items() if m.kind == "record"]
        carriers = [a for a, m in self.sources.items() if m.kind != "none"]
        if not carriers:
            one_row = not self.sources and not self._aggregates() and self.select.args.get("from_") is None
            return _Made("none", frozenset() if one_row else None)
        first = self._from()
        if first not in carriers:
            raise Refused(f"reads the records through a join ({', '.join(carriers)}); put them first, in FROM")
        self._join_on_dataset(first, carriers)
        if records and not self._aggregates():
            if len(records) > 1:
                raise Refused(f"joins the records with themselves ({', '.join(records)}); aggregate one side first")
            self._keep_records(records[0])
            return _Made("record")
        for alias in records:  # an aggregate reads the records still live
            self._read_live(alias)
        self._keep_dataset(first)
        return _Made("dataset", self._unique())

    def _from(self) -> str:
        return str(self.select.args["from_"].this.alias_or_name)

    def _aggregates(self) -> bool:
        s = self.select
        return bool(s.args.get("group") or s.args.get("having") or s.args.get("distinct") or self._aggregate_calls())

    def _aggregate_calls(self) -> bool:
        """Whether a projection calls an aggregate other than as a window function."""
        return any(
            not isinstance(agg.parent, exp.Window) for p in self.select.expressions for agg in p.find_all(exp.AggFunc)
        )

    def _unique(self) -> frozenset[str] | None:
        """The output columns that tell this dataset scope's rows apart within a dataset."""
        s = self.select
        names = {p.alias_or_name for p in s.expressions}
        group = s.args.get("group")
        if group is not None:
            if group.args.get("all"):
                return frozenset(p.alias_or_name for p in s.expressions if not list(p.find_all(exp.AggFunc)))
            if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
                return None  # subtotal rows share their keys with nulls
            by_value = {p.unalias().sql(): p.alias_or_name for p in s.expressions}
            keys = [by_value.get(e.sql()) for e in group.expressions if e.sql() != _column_sql(self._from())]
            return None if None in keys else frozenset(k for k in keys if k is not None)
        if s.args.get("distinct"):
            return frozenset(names)
        if self._aggregate_calls():
            return frozenset()  # one row (a dataset's)
        if len(self.sources) == 1 and not s.args.get("joins"):
            (source,) = self.sources.values()
            if source.unique is not None:
                renamed = {
                    p.unalias().name: p.alias_or_name for p in s.expressions if isinstance(p.unalias(), exp.Column)
                }
                if all(k in renamed for k in source.unique):
                    return frozenset(renamed[k] for k in source.unique)
        return None

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

    def _read_live(self, alias: str) -> None:
        """Only the live records of ``alias`` reach the aggregate: tested before the user's
        condition (which then never sees a rejected or dropped record), in the join's ``ON`` for
        a joined source (a ``WHERE`` would undo a LEFT JOIN)."""
        s = self.select
        if alias == self._from():
            where = s.args.get("where")
            s.set("where", exp.Where(this=exp.and_(_live(alias), exp.paren(where.this)) if where else _live(alias)))
            return
        for join in s.args.get("joins") or []:
            if str(join.this.alias_or_name) == alias:
                on = join.args.get("on")
                join.set("on", exp.and_(_live(alias), exp.paren(on)) if on is not None else _live(alias))

    def _keep_records(self, alias: str) -> None:
        s = self.select
        for join in s.args.get("joins") or []:
            if join.side != "LEFT" or join.kind in ("SEMI", "ANTI"):
                said = " ".join(w for w in (join.side, join.kind) if w) or "INNER"
                raise Refused(
                    f"uses a {said} JOIN of the records: records without a match would be lost uncounted; "
                    "use a LEFT JOIN (or a lookup step)"
                )
            self._matches_once(join)
        where = s.args.get("where")
        kept = exp.func("coalesce", exp.paren(where.this), exp.false()) if where is not None else None
        s.set("where", None)
        dead = exp.or_(_column(alias, DROPPED), _rejected(alias))
        if kept is not None:
            dead = exp.or_(dead, exp.not_(kept))
            self._only_kept(kept)
        self._partition(*self._dataset(alias), exp.paren(dead))
        projections = [p for p in s.expressions if p.alias_or_name not in self.engine]
        carried = []
        for name in self.engine:
            value: exp.Expr = _column(alias, name)
            if name == DROPPED and kept is not None:
                value = exp.or_(value, exp.and_(exp.not_(_rejected(alias)), exp.not_(kept.copy())))
            carried.append(exp.alias_(value, name, quoted=True))
        s.set("expressions", [*projections, *carried])

    def _matches_once(self, join: exp.Join) -> None:
        """Refuse a join that may match a record with several rows (it would repeat the record):
        its ``ON`` must equate every column that tells the joined rows apart."""
        alias = str(join.this.alias_or_name)
        unique = self.sources[alias].unique
        on = join.args.get("on")
        equated = set()
        for eq in on.find_all(exp.EQ) if on is not None else []:
            for side in (eq.this, eq.expression):
                if isinstance(side, exp.Column) and side.table == alias:
                    equated.add(side.name)
        if unique is None or not unique <= equated:
            keys = "its keys" if unique is None else ", ".join(sorted(unique - equated))
            raise Refused(
                f"joins `{alias}`, whose rows the join may match several times (not equated: {keys}); "
                "join a WITH name grouped by the join's columns, or use a lookup step"
            )

    def _only_kept(self, kept: exp.Expr) -> None:
        """Evaluate the projections (and window functions' arguments) of the records the ``WHERE``
        keeps only: an expression it guards (a cast, a division) must not fail on the others."""
        s = self.select
        for window in [w for p in s.expressions for w in p.find_all(exp.Window)]:
            func = window.this
            arg = func.this if isinstance(func, exp.Func) else None
            if isinstance(arg, exp.Expr) and not isinstance(arg, (exp.Star, exp.Literal)):
                func.set("this", exp.Case(ifs=[exp.If(this=kept.copy(), true=arg.copy())]))
        guarded = []
        for p in s.expressions:
            value = p.unalias()
            if isinstance(value, (exp.Column, exp.Literal)) or p.alias_or_name in self.engine:
                guarded.append(p)
                continue
            case = exp.Case(ifs=[exp.If(this=kept.copy(), true=value.copy())])
            guarded.append(exp.alias_(case, p.alias_or_name, quoted=True))
        s.set("expressions", guarded)

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
        if group is not None:  # first: grouping_id() keeps its value (the dataset's bit is 0)
            group.set("expressions", [dataset.copy(), *group.expressions])
        elif self._aggregate_calls():
            s.set("group", exp.Group(expressions=[dataset.copy()]))

    def _dataset(self, alias: str) -> list[exp.Expr]:
        return [_column(alias, DATASET)] if self.dataset is not None else []

    def _partition(self, *first: exp.Expr) -> None:
        order = self.select.args.get("order")
        for part in [*self.select.expressions, *([order] if order is not None else [])]:
            for window in part.find_all(exp.Window):
                window.set("partition_by", [*(f.copy() for f in first), *(window.args.get("partition_by") or [])])


REFERENCE = "ref"
"""The name a lookup's reference goes by in its ``on`` condition (the records are ``input``)."""


@dataclass(frozen=True)
class JoinCondition:
    """A lookup's ``on`` condition, each column named by the side it is of."""

    records: tuple[str, ...]
    """The records' columns it reads (``input.x``), in the order first named."""
    reference: tuple[str, ...]
    """The reference's columns it reads (``ref.x``), in the order first named."""
    tree: exp.Expr

    def sql(self, reference: str) -> str:
        """The condition Spark evaluates over the joined rows: ``input.x`` is the record's column
        ``x``, ``ref.x`` the reference's column renamed ``reference.format(x)``."""
        tree = self.tree.copy()
        for column in list(tree.find_all(exp.Column)):
            name = column.name if column.table.lower() == INPUT else reference.format(column.name)
            column.replace(exp.column(name, quoted=True))
        return tree.sql(dialect=_SPARK)


def join_condition(text: str) -> JoinCondition:
    """``text`` as a join condition over ``input`` and ``ref``: one boolean expression whose every
    column is qualified by its side, comparing the records with the reference."""
    try:
        trees = [t for t in sqlglot.parse(trimmed(text), dialect="spark") if t is not None]
    except ParseError as exc:
        raise Refused(f"does not parse: {_first(exc)}") from exc
    if len(trees) != 1 or isinstance(trees[0], exp.Query) or not isinstance(trees[0], exp.Expr):
        raise Refused("is not one condition (write it as a WHERE clause's body)")
    tree = trees[0]
    for node in tree.find_all(exp.Query, exp.AggFunc, exp.Window):
        raise Refused(f"uses {node.sql('spark')}: a join condition compares one record with one reference row")
    sides: dict[str, list[str]] = {INPUT: [], REFERENCE: []}
    for column in tree.find_all(exp.Column, bfs=False):  # in the order written
        side = column.table.lower()
        if isinstance(column.this, exp.Star):
            raise Refused(f"names `{column.sql('spark')}`: compare columns, not every column")
        if column.args.get("db"):
            raise Refused(f"names `{column.sql('spark')}`: a struct's field; derive it as a column first")
        if side not in sides:
            raise Refused(
                f"names `{column.sql('spark')}`: qualify each column as input.<column> (the records) "
                f"or ref.<column> (the reference)"
            )
        if column.name not in sides[side]:
            sides[side].append(column.name)
    if not sides[INPUT] or not sides[REFERENCE]:
        raise Refused("does not compare the records (input.<column>) with the reference (ref.<column>)")
    return JoinCondition(tuple(sides[INPUT]), tuple(sides[REFERENCE]), tree)


def _column_sql(alias: str) -> str:
    return _column(alias, DATASET).sql()


def _spell(tree: exp.Expr, columns: list[str]) -> None:
    """Quote every identifier (so sqlglot keeps its case, as Spark does), spelling a record
    column as the records do (Spark matches names without regard to case)."""
    named = [a.alias for a in tree.find_all(exp.Alias)]
    named += [c.name for t in tree.find_all(exp.TableAlias) for c in t.args.get("columns") or []]
    spelled = {n.lower(): n for n in named} | {c.lower(): c for c in columns}  # the records' spelling first
    for ident in tree.find_all(exp.Identifier):
        if isinstance(ident.parent, exp.Column) and ident.arg_key == "this":
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
