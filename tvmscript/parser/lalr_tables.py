"""The grammar, ``grammar/tvmscript.lark``, compiled for the parse loop (`lalr_parser.py`).

Lark computes the LALR(1) tables (`grammar_spec`, plain data); they are kept in the on-disk
cache (`tvmscript.cache`), keyed by the grammar's hash and rebuilt when an entry is damaged, so
a start-up does not even import Lark. `Tables` turns them into what the loop runs, with one
reduce callback per grammar rule: `syntax_tree.TreeBuilder`'s method for it, given the rule's
children as Lark shapes them (`_rule_shape`).
"""

from __future__ import annotations

import operator
import os
import re

from ..grammar import GRAMMAR_FILE
from .syntax_tree import TreeBuilder


_OPERATORS = (
    r"\*\*=|//=|>>=|<<=|\.\.\.|->|\*\*|//|<<|>>|<=|>=|==|!=|\+=|-=|\*=|/=|%=|@=|&=|\|=|\^="
    r"|[-+*/%@&|^~<>()\[\]{}:;,.=]"
)


class Tables:
    """The grammar compiled for the parse loop: master regex, candidate terminals per spelling,
    integer action tables and per-rule (length, result symbol, callback).

    Built from `grammar_spec` (plain data: what Lark computed from the grammar), which is cached
    on disk keyed by the grammar's hash, so a start-up does not even import Lark."""

    def __init__(self, spec: dict) -> None:
        terms = spec["terminals"]  # name -> (regexp, literal string or None)
        self.terminal_patterns = {
            name: re.compile(regexp, re.S if "STRING" in name else 0) for name, (regexp, _) in terms.items()
        }
        self.keywords: dict[str, list[str]] = {}
        for name, (_, literal) in terms.items():
            if literal is not None and literal.isidentifier():
                self.keywords.setdefault(literal, []).append(name)
        for word in ("in", "is"):
            self.keywords.setdefault(word, []).append("COMP_OP")
        for names in self.keywords.values():
            names.append("NAME")
        # Leading blanks are part of every match, so they cost no loop iteration of their own.
        self.master = re.compile(
            r"[ \t\f]*(?:(?P<WS>\\[ \t\f]*\r?\n)"
            rf"|(?P<NL>{terms['_NEWLINE'][0]})"
            rf"|(?P<STRING>{terms['STRING'][0]})"
            rf"|(?P<NUMBER>{terms['NUMBER'][0]})"
            rf"|(?P<NAME>{terms['NAME'][0]})"
            rf"|(?P<OP>{_OPERATORS}))",
            # No re.S: a '...' or "..." string ends on its line (the triple-quoted alternative
            # carries its own (?s:...) flag), so an unclosed quote is reported where it is.
        )
        self.filtered = frozenset(spec["filtered"])
        self._op_candidates: dict[str, list[str]] = {}
        builder = TreeBuilder()
        self.actions = spec["actions"]
        self.rules = [(r[0], r[1], _rule_callback(r, builder)) for r in spec["rules"]]
        self.start_state = spec["start"]
        self.end_state = spec["end"]

    def op_candidates(self, text: str) -> list[str]:
        found = self._op_candidates.get(text)
        if found is None:
            found = [
                name for name, pat in self.terminal_patterns.items()
                if name not in ("NAME", "_NEWLINE") and not name.startswith("__IGNORE") and pat.fullmatch(text)
            ]
            self._op_candidates[text] = found
        return found


def grammar_spec(grammar: str) -> dict:
    """Compile the grammar with Lark and keep what the driver needs, as plain data."""
    from lark import Lark  # imported only when the table cache is cold

    lark = Lark(grammar, parser="lalr", lexer="basic", maybe_placeholders=True)
    terms = {}
    for t in lark.terminals:
        literal = t.pattern.value if type(t.pattern).__name__ == "PatternStr" else None
        terms[str(t.name)] = (str(t.pattern.to_regexp()), None if literal is None else str(literal))
    table = lark.parser.parser.parser.parse_table
    rules: list = []
    rule_index: dict = {}
    actions: dict = {}
    for state, row in table.states.items():
        out = {}
        for symbol, (action, arg) in row.items():
            if action.name == "Shift":
                out[str(symbol)] = int(arg)
            else:
                if arg not in rule_index:
                    rule_index[arg] = len(rules)
                    rules.append(_rule_shape(arg))
                out[str(symbol)] = -1 - rule_index[arg]
        actions[int(state)] = out
    # Terminals every rule drops from its children (punctuation, keywords, newlines).
    kept, dropped = set(), set()
    for rule in lark.rules:
        for sym in rule.expansion:
            if sym.is_term:
                (dropped if sym.filter_out else kept).add(str(sym.name))
    return {
        "terminals": terms, "actions": actions, "rules": rules, "filtered": sorted(dropped - kept),
        "start": table.start_states["start"], "end": table.end_states["start"],
    }


def _rule_shape(rule) -> tuple:
    """How one grammar rule shapes its children, following Lark's conventions: anonymous tokens
    (punctuation, keywords) are dropped, rules named ``_x`` are spliced into their parent,
    ``[optional]`` parts absent from the text become None, and a ``?rule`` with one child is
    that child (unless the alternative has an alias)."""
    expansion = rule.expansion
    empty = rule.options.empty_indices
    if empty:
        counts = [len(ones) for ones in "".join(str(int(b)) for b in empty).split("0")]
    else:
        counts = [0] * (len(expansion) + 1)
    plan = []  # (index, splice, nones before)
    nones = 0
    for i, sym in enumerate(expansion):
        nones += counts[i]
        if not (sym.is_term and sym.filter_out):
            plan.append((i, not sym.is_term and sym.name.startswith("_"), nones))
            nones = 0
    trailing = nones + counts[len(expansion)]
    name = rule.alias or rule.origin.name
    expand1 = bool(rule.options.expand1 and not rule.alias)
    return (len(expansion), str(rule.origin.name), str(name), expand1, tuple(plan), trailing)


_FIRST = operator.itemgetter(0)


class _Splice(list):
    """The children of an inlined rule (``_stmt``, ``__suite_plus_4``), spliced into its parent."""

    __slots__ = ()


def _place_children(children: list, args: list, plan, trailing: int) -> list:
    """``children`` extended with a rule's reduced values as `_rule_shape`'s plan says: spliced
    lists inlined, absent optionals as None."""
    for i, splice, nb in plan:
        if nb:
            children.extend([None] * nb)
        if splice:
            children.extend(args[i])
        else:
            children.append(args[i])
    if trailing:
        children.extend([None] * trailing)
    return children


def _rule_callback(shape: tuple, builder: "TreeBuilder"):
    """The reduce action of one grammar rule (see `_rule_shape`): shape the children, then call
    the `TreeBuilder` method named after the rule."""
    size, _, name, expand1, plan, trailing = shape
    splice_result = name.startswith("_")
    method = None if splice_result else getattr(builder, name, None)
    simple = all(not sp and not nb for _, sp, nb in plan) and not trailing and len(plan) == size

    # The common shapes get a callback with no Python frame of its own.
    if simple and splice_result:
        return _Splice
    if simple and expand1 and size == 1:
        return _FIRST
    if simple and not expand1 and method is not None:
        return method
    no_splice = not any(sp for _, sp, _ in plan)
    if no_splice and not expand1 and method is not None:
        # Only dropped tokens and absent optionals: pick the kept children in C.
        slots: list = []
        for i, _, nb in plan:
            slots.extend([None] * nb)
            slots.append(i)
        slots.extend([None] * trailing)
        if None not in slots and len(slots) > 1:
            pick = operator.itemgetter(*slots)
            return lambda args: method(list(pick(args)))
        if None not in slots and len(slots) == 1:
            (only,) = slots
            return lambda args: method([args[only]])

    if splice_result and plan and plan[0][0] == 0 and plan[0][1] and not plan[0][2]:
        # A left-recursive list rule (``STRING+``, a suite's statements): its first child is the
        # list so far, no longer referenced elsewhere, so it grows in place. Copying it at every
        # reduction made a long list quadratic (a 10 MB weight in the metadata section is 100,000
        # string pieces: minutes).
        rest = plan[1:]
        return lambda args: _place_children(args[0], args, rest, trailing)

    def callback(args):
        children = args if simple else _place_children([], args, plan, trailing)
        if splice_result:
            return _Splice(children)
        if expand1 and len(children) == 1:
            return children[0]
        if method is None:
            raise AssertionError(f"no builder for grammar rule {name}")
        return method(children)

    return callback


_TABLES: Tables | None = None


def tables() -> Tables:
    """The compiled grammar, made once per process."""
    global _TABLES
    if _TABLES is None:
        with open(GRAMMAR_FILE, encoding="utf-8") as f:
            grammar = f.read()
        try:
            _TABLES = Tables(_cached_spec(grammar))
        except Exception:  # noqa: BLE001 - a cache entry of the wrong shape: build afresh
            _TABLES = Tables(_cached_spec(grammar, rebuild=True))
    return _TABLES


def _cached_spec(grammar: str, rebuild: bool = False) -> dict:
    """`grammar_spec`, from the cache (`tvmscript.cache`) when an entry matches this grammar
    and Lark version and is intact: a damaged or foreign entry is rebuilt rather than trusted
    (a bad cache must never break every command)."""
    import hashlib
    import marshal

    from tvmscript import cache as disk_cache

    folder = disk_cache.folder("parser")
    key = hashlib.sha256(grammar.encode() + _SPEC_FORMAT.encode()).hexdigest()[:20]
    path = None if folder is None else os.path.join(folder, f"tables-{key}.marshal")
    if path is not None and not rebuild:
        payload = disk_cache.read(path, _SPEC_MAGIC)
        if payload is not None:
            try:
                spec = marshal.loads(payload)
            except (EOFError, ValueError, TypeError):
                spec = None
            if isinstance(spec, dict):
                return spec
    spec = grammar_spec(grammar)
    if path is not None:
        disk_cache.write(path, _SPEC_MAGIC, marshal.dumps(spec))
    return spec


# Bump when the shape of `grammar_spec`'s result, or of the cache file, changes.
_SPEC_FORMAT = "tvms-spec-3"
_SPEC_MAGIC = b"TVMSTABLES1"
