"""RocketMQ's SQL92 message selector: lexer, parser and evaluator (the ``filter`` module).

The grammar and the typing rules are RocketMQ's (``SelectorParser.jj``, ``ComparisonExpression``):

- keywords (any case): NOT AND OR BETWEEN IN IS NULL TRUE FALSE, and CONTAINS STARTSWITH ENDSWITH;
- literals: strings in single quotes (``''`` is a quote), longs (``0`` or no leading zero, optional
  ``L``), doubles (``1.5``, ``.5``, ``5.``, ``5E10``); operators ``= <> > >= < <=``, unary ``+ -``;
- ``IN`` takes string literals only and only a property on its left;
- ``> >= < <=`` refuse a string or boolean constant operand when compiling; two string operands
  (two properties) are compared as doubles;
- property values are strings: compared with a number they are parsed as that number
  (``Long.valueOf``/``Double.valueOf``), with a boolean as ``Boolean.valueOf``; a value that
  does not parse makes the whole expression fail, which a filter treats as "no match";
- a missing property is null: a comparison with null is unknown (null), AND/OR/NOT use SQL's
  three-valued logic, and only a TRUE result matches.

One deliberate difference: Java's parser stops at the end of the first complete expression and
ignores what follows (``a = 1 b`` compiles as ``a = 1``); here trailing text is an error, so a
typo is refused at subscribe time instead of silently filtering by half an expression.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Value = bool | int | float | str | None  # Java's null, Boolean, Integer/Long, Double, String
Properties = Mapping[str, str]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DOUBLE_MIN_VALUE = 5e-324  # Java's Double.MIN_VALUE: the smallest positive double


class FilterError(ValueError):
    """An expression that does not compile; the message is what the broker's remark says."""


class _EvalError(Exception):
    """A value that cannot be converted at evaluation time (Java throws; the filter says no)."""


# -- lexer --------------------------------------------------------------------------------------

_KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
                       "CONTAINS", "STARTSWITH", "ENDSWITH"})
_SKIP = re.compile(r"(?:[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r)|/\*[^*]*\*+(?:[^*/][^*]*\*+)*/)+")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)[lL]?")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_STRING = re.compile(r"'(?:''|[^'])*'")
_ID = re.compile(r"[a-zA-Z_$][a-zA-Z0-9_$]*")
_OPERATORS = ("<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # a keyword, an operator, "DECIMAL", "FLOAT", "STRING", "ID" or "EOF"
    text: str
    column: int  # 1-based, as Java's ParseException reports it


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, end = 0, len(text)
    while True:
        skipped = _SKIP.match(text, pos)
        if skipped:
            pos = skipped.end()
        if pos >= end:
            tokens.append(_Token("EOF", "", pos + 1))
            return tokens
        ch = text[pos]
        if ch == "'":
            m = _STRING.match(text, pos)
            if m is None:
                raise FilterError(f"Invalid MessageSelector. Unterminated string literal at column {pos + 1}")
            tokens.append(_Token("STRING", m.group(), pos + 1))
            pos = m.end()
            continue
        if ch.isdigit() or ch == ".":
            # JavaCC takes the longest match: "5.5" is a double, "5" a long.
            fm, dm = _FLOAT.match(text, pos), _DECIMAL.match(text, pos)
            flen, dlen = (fm.end() - pos if fm else 0), (dm.end() - pos if dm else 0)
            if flen or dlen:
                kind, m2 = ("FLOAT", fm) if flen > dlen else ("DECIMAL", dm)
                assert m2 is not None
                tokens.append(_Token(kind, m2.group(), pos + 1))
                pos = m2.end()
                continue
        m = _ID.match(text, pos)
        if m:
            word = m.group()
            upper = word.upper()
            tokens.append(_Token(upper if upper in _KEYWORDS else "ID", word, pos + 1))
            pos = m.end()
            continue
        for op in _OPERATORS:
            if text.startswith(op, pos):
                tokens.append(_Token(op, op, pos + 1))
                pos += len(op)
                break
        else:
            raise FilterError(f"Invalid MessageSelector. Lexical error at column {pos + 1}: unexpected {ch!r}")


# -- expression tree ----------------------------------------------------------------------------

class _Expr:
    """A node; ``boolean`` marks Java's BooleanExpression (a valid operand of AND/OR/NOT)."""

    boolean = False

    def evaluate(self, props: Properties) -> Value:
        raise NotImplementedError


class _Constant(_Expr):
    def __init__(self, value: Value) -> None:
        self.value = value
        # TRUE, FALSE and NULL are BooleanConstantExpressions in Java.
        self.boolean = value is None or isinstance(value, bool)

    def evaluate(self, props: Properties) -> Value:
        return self.value

    def __str__(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        return repr(v)


class _Property(_Expr):
    def __init__(self, name: str) -> None:
        self.name = name

    def evaluate(self, props: Properties) -> Value:
        return props.get(self.name)

    def __str__(self) -> str:
        return self.name


class _Node(_Expr):
    """Any other node: its evaluation is a closure, its text is for error messages."""

    def __init__(self, fn: Callable[[Properties], Value], text: str, boolean: bool) -> None:
        self.fn = fn
        self.text = text
        self.boolean = boolean

    def evaluate(self, props: Properties) -> Value:
        return self.fn(props)

    def __str__(self) -> str:
        return self.text


def _jtype(v: Value) -> str:
    if isinstance(v, bool):
        return "B"
    if isinstance(v, int):
        return "L"
    if isinstance(v, float):
        return "D"
    return "S"


_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z")


def _parse_long(s: str, like: int) -> int:
    """Integer.valueOf or Long.valueOf, whichever Java's type of ``like`` would pick."""
    if not _JAVA_INTEGER.match(s):
        raise _EvalError(f"not a number: {s!r}")
    n = int(s)
    lo, hi = (_INT_MIN, _INT_MAX) if _INT_MIN <= like <= _INT_MAX else (_LONG_MIN, _LONG_MAX)
    if not lo <= n <= hi:
        raise _EvalError(f"out of range: {s!r}")
    return n


def _parse_double(s: str) -> float:
    t = s.strip("".join(chr(c) for c in range(33)))  # Java trims every char <= ' '
    if not _JAVA_DOUBLE.match(t):
        raise _EvalError(f"not a number: {s!r}")
    return float(t.rstrip("fFdD").replace("Infinity", "inf"))


def _cmp(a: object, b: object) -> int:
    if isinstance(a, float) and isinstance(b, float):
        # Double.compareTo: NaN is above everything and equal to itself.
        if math.isnan(a) or math.isnan(b):
            return (math.isnan(a)) - (math.isnan(b))
    # _compare widened both to one Java type; mypy cannot see that and compares the unions
    greater: bool = a > b  # type: ignore[operator]
    less: bool = a < b  # type: ignore[operator]
    return greater - less


def _compare(lv: Value, rv: Value) -> int:
    """ComparisonExpression.__compare with string conversion on: widen numbers, parse strings."""
    lt, rt = _jtype(lv), _jtype(rv)
    if lt != rt:
        if lt == "B":
            # Java casts the Boolean itself to String here and throws: never a match.
            if rt == "S":
                raise _EvalError("boolean compared with string")
            return -1
        if lt == "L":
            if rt == "D":
                lv = float(lv)  # type: ignore[arg-type]
            elif rt == "S":
                rv = _parse_long(rv, lv)  # type: ignore[arg-type]
            else:
                return -1
        elif lt == "D":
            if rt == "L":
                rv = float(rv)  # type: ignore[arg-type]
            elif rt == "S":
                rv = _parse_double(rv)  # type: ignore[arg-type]
            else:
                return -1
        else:  # a string on the left
            if rt == "B":
                lv = lv.lower() == "true"  # type: ignore[union-attr]
            elif rt == "L":
                lv = _parse_long(lv, rv)  # type: ignore[arg-type]
            else:
                lv = _parse_double(lv)  # type: ignore[arg-type]
    return _cmp(lv, rv)


def _equal(left: _Expr, right: _Expr) -> Callable[[Properties], Value]:
    def evaluate(props: Properties) -> Value:
        lv, rv = left.evaluate(props), right.evaluate(props)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or (_jtype(lv) == _jtype(rv) and lv == rv):
            return True
        return _compare(lv, rv) == 0
    return evaluate


def _ordering(left: _Expr, right: _Expr, accept: Callable[[int], bool]) -> Callable[[Properties], Value]:
    def evaluate(props: Properties) -> Value:
        lv = left.evaluate(props)
        if lv is None:
            return None
        rv = right.evaluate(props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            # Strings cannot be ordered; two strings are ordered as doubles, if they are numbers.
            return accept(_cmp(_parse_double(lv), _parse_double(rv)))
        return accept(_compare(lv, rv))
    return evaluate


def _not(operand: _Expr) -> _Expr:
    def evaluate(props: Properties) -> Value:
        v = operand.evaluate(props)
        return None if v is None else not v
    return _Node(evaluate, f"NOT {operand}", True)


def _junction(word: str, decisive: bool, left: _Expr, right: _Expr) -> _Expr:
    """AND (``decisive`` False) or OR (True) in SQL's three-valued logic: a decisive side decides
    (the right is not evaluated when the left does); otherwise unknown if either side is unknown,
    else the other truth value."""
    def evaluate(props: Properties) -> Value:
        lv = left.evaluate(props)
        if lv is decisive:
            return decisive
        rv = right.evaluate(props)
        if rv is decisive:
            return decisive
        return None if lv is None or rv is None else not decisive
    return _Node(evaluate, f"({left} {word} {right})", True)


def _and(left: _Expr, right: _Expr) -> _Expr:
    return _junction("AND", False, left, right)


def _or(left: _Expr, right: _Expr) -> _Expr:
    return _junction("OR", True, left, right)


def _boolean_cast(operand: _Expr) -> _Expr:
    def evaluate(props: Properties) -> Value:
        v = operand.evaluate(props)
        if v is None:
            return None
        return v if isinstance(v, bool) else False
    return _Node(evaluate, str(operand), True)


def _as_boolean(e: _Expr) -> _Expr:
    if e.boolean:
        return e
    if isinstance(e, _Property):
        return _boolean_cast(e)
    raise FilterError(f"Invalid MessageSelector. Expression will not result in a boolean value: {e}")


def _check_orderable(e: _Expr) -> None:
    """checkLessThanOperand: only numbers, properties and arithmetic can be ordered."""
    if isinstance(e, _Constant):
        if _jtype(e.value) in ("L", "D") and e.value is not None:
            return
        raise FilterError(f"Invalid MessageSelector. Value '{e}' cannot be compared.")
    if e.boolean:
        raise FilterError(f"Invalid MessageSelector. Value '{e}' cannot be compared.")


def _check_equal_operand(e: _Expr) -> None:
    if isinstance(e, _Constant) and e.value is None:
        raise FilterError(f"Invalid MessageSelector. '{e}' cannot be compared.")


_ORDER_OPS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
}


def _ordered(op: str, left: _Expr, right: _Expr) -> _Expr:
    _check_orderable(left)
    _check_orderable(right)
    return _Node(_ordering(left, right, _ORDER_OPS[op]), f"{left} {op} {right}", True)


def _equality(left: _Expr, right: _Expr) -> _Expr:
    _check_equal_operand(left)
    _check_equal_operand(right)
    if isinstance(left, _Constant) and isinstance(right, _Constant) and left.boolean and not right.boolean:
        raise FilterError(f"Invalid MessageSelector. '{left}' cannot be compared with '{right}'")
    return _Node(_equal(left, right), f"{left} = {right}", True)


def _between(value: _Expr, low: _Expr, high: _Expr) -> _Expr:
    if isinstance(low, _Constant) and isinstance(high, _Constant):
        if low.value is None or high.value is None:
            raise FilterError("Invalid MessageSelector. Illegal values of between, values can not be null!")
        try:
            order = _compare(high.value, low.value)
        except _EvalError as exc:
            raise FilterError(f"Invalid MessageSelector. {exc}") from None
        if order < 0:
            raise FilterError(f"Invalid MessageSelector. Illegal values of between, left value({low}) must less "
                              f"than or equal to right value({high})")
    return _and(_ordered(">=", value, low), _ordered("<=", value, high))


def _string_test(operand: _Expr, search: str, test: Callable[[str, str], bool], negate: bool,
                 symbol: str) -> _Expr:
    def evaluate(props: Properties) -> Value:
        if not search:
            return False
        v = operand.evaluate(props)
        if not isinstance(v, str):
            return False  # null or not a string: false, not unknown, even negated
        return test(v, search) != negate
    return _Node(evaluate, f"{operand} {'NOT ' if negate else ''}{symbol} '{search}'", True)


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda v, s: s in v, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith,
}


def _in(operand: _Expr, values: list[str], negate: bool) -> _Expr:
    if not isinstance(operand, _Property):
        raise FilterError(f"Invalid MessageSelector. Expected a property for In expression, got: {operand}")
    members = frozenset(values)

    def evaluate(props: Properties) -> Value:
        v = operand.evaluate(props)
        if not isinstance(v, str):
            return None
        return (v in members) != negate
    return _Node(evaluate, f"{operand} {'NOT IN' if negate else 'IN'} ({', '.join(values)})", True)


def _negate(operand: _Expr) -> _Expr:
    def evaluate(props: Properties) -> Value:
        v = operand.evaluate(props)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return -v
    return _Node(evaluate, f"-{operand}", False)


# -- parser -------------------------------------------------------------------------------------

class _Parser:
    """Recursive descent over SelectorParser.jj's productions, same precedence and lookaheads."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def take(self) -> _Token:
        tok = self.tokens[self.pos]
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return tok

    def expect(self, kind: str, what: str) -> _Token:
        tok = self.peek()
        if tok.kind != kind:
            self.fail(tok, what)
        return self.take()

    @staticmethod
    def fail(tok: _Token, expected: str) -> None:
        found = "end of expression" if tok.kind == "EOF" else repr(tok.text)
        raise FilterError(f"Invalid MessageSelector. Encountered {found} at column {tok.column}, "
                          f"was expecting {expected}")

    def selector(self) -> _Expr:
        expr = self.or_expression()
        tok = self.peek()
        if tok.kind != "EOF":
            self.fail(tok, "AND, OR or the end of the expression")
        return _as_boolean(expr)

    def or_expression(self) -> _Expr:
        left = self.and_expression()
        while self.peek().kind == "OR":
            self.take()
            left = _or(_as_boolean(left), _as_boolean(self.and_expression()))
        return left

    def and_expression(self) -> _Expr:
        left = self.equality_expression()
        while self.peek().kind == "AND":
            self.take()
            left = _and(_as_boolean(left), _as_boolean(self.equality_expression()))
        return left

    def equality_expression(self) -> _Expr:
        left = self.comparison_expression()
        while True:
            kind = self.peek().kind
            if kind == "=":
                self.take()
                left = _equality(left, self.comparison_expression())
            elif kind == "<>":
                self.take()
                left = _not(_equality(left, self.comparison_expression()))
            elif kind == "IS":
                self.take()
                negate = self.peek().kind == "NOT"
                if negate:
                    self.take()
                self.expect("NULL", "NULL")
                is_null = _Node(_equal(left, _Constant(None)), f"{left} IS NULL", True)
                left = _not(is_null) if negate else is_null
            else:
                return left

    def comparison_expression(self) -> _Expr:
        left = self.unary_expression()
        while True:
            tok = self.peek()
            kind = tok.kind
            negate = kind == "NOT" and self.peek(1).kind in ("BETWEEN", "IN", *_STRING_TESTS)
            if negate:
                self.take()
                kind = self.peek().kind
            if kind in _ORDER_OPS and not negate:
                self.take()
                left = _ordered(kind, left, self.unary_expression())
            elif kind in _STRING_TESTS:
                self.take()
                search = self.string_literal()
                left = _string_test(left, search, _STRING_TESTS[kind], negate, kind)
            elif kind == "BETWEEN":
                self.take()
                low = self.unary_expression()
                self.expect("AND", "AND")
                high = self.unary_expression()
                if negate:
                    left = _or(_ordered("<", left, low), _ordered(">", left, high))
                else:
                    left = _between(left, low, high)
            elif kind == "IN":
                self.take()
                self.expect("(", "'('")
                values = [self.string_literal()]
                while self.peek().kind == ",":
                    self.take()
                    values.append(self.string_literal())
                self.expect(")", "',' or ')'")
                left = _in(left, values, negate)
            else:
                return left

    def unary_expression(self) -> _Expr:
        kind = self.peek().kind
        if kind == "+":
            self.take()
            return self.unary_expression()
        if kind == "-":
            self.take()
            return _negate(self.unary_expression())
        if kind == "NOT":
            self.take()
            return _not(_as_boolean(self.unary_expression()))
        return self.primary_expression()

    def primary_expression(self) -> _Expr:
        tok = self.peek()
        kind = tok.kind
        if kind == "STRING":
            return _Constant(self.string_literal())
        if kind == "DECIMAL":
            self.take()
            return _Constant(_decimal(tok.text))
        if kind == "FLOAT":
            self.take()
            return _Constant(_double(tok.text))
        if kind in ("TRUE", "FALSE", "NULL"):
            self.take()
            return _Constant({"TRUE": True, "FALSE": False, "NULL": None}[kind])
        if kind == "ID":
            self.take()
            return _Property(tok.text)
        if kind == "(":
            self.take()
            inner = self.or_expression()
            self.expect(")", "')'")
            return inner
        self.fail(tok, "a literal, a property name or '('")
        raise AssertionError  # unreachable: fail() raises

    def string_literal(self) -> str:
        tok = self.expect("STRING", "a string literal in single quotes")
        return tok.text[1:-1].replace("''", "'")


def _decimal(text: str) -> int:
    n = int(text.rstrip("lL"))
    if n > _LONG_MAX:
        raise FilterError(f"Invalid MessageSelector. {text} is out of the range of a long")
    return n


def _double(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise FilterError(f"Invalid MessageSelector. {text} is greater than 1.7976931348623157E308")
    if value < _DOUBLE_MIN_VALUE:
        # Java's check compares with the smallest *positive* double, so 0.0 itself is refused.
        raise FilterError(f"Invalid MessageSelector. {text} is less than 4.9E-324")
    return value


class Sql92Expression:
    """A compiled selector. ``matches`` is what the broker asks of each message's properties."""

    __slots__ = ("_root", "text")

    def __init__(self, text: str, root: _Expr) -> None:
        self.text = text
        self._root = root

    def evaluate(self, props: Properties) -> Value:
        """TRUE, FALSE or None (unknown); raises nothing: a conversion error is None."""
        try:
            return self._root.evaluate(props)
        except _EvalError:
            return None

    def matches(self, props: Properties) -> bool:
        return self.evaluate(props) is True

    def __repr__(self) -> str:
        return f"Sql92Expression({self.text!r})"


def compile_sql92(text: str | None) -> Sql92Expression:
    """Compile a selector or raise FilterError with the reason (the CHECK_CLIENT_CONFIG remark)."""
    if text is None or not text.strip():
        raise FilterError("Invalid MessageSelector. The expression is empty")
    return Sql92Expression(text, _Parser(text).selector())
