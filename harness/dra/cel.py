"""The CEL that device selectors are written in, the part people write: `device.driver`,
`device.allowMultipleAllocations`,
`device.attributes["domain"].name` and `device.capacity["domain"].name`, literals, `==`, `!=`,
`<`, `<=`, `>`, `>=`, `in [...]`, a presence test (`"name" in device.attributes["domain"]`),
`&&`, `||`, `!`, parentheses, and a quantity's `compareTo(quantity("40Gi"))`,
`isGreaterThan(...)` and `isLessThan(...)`.

An expression is parsed once (`compile_selector`), refusing any other construct by name, and
evaluated per device as CEL does: a missing attribute or a comparison of mismatched types is an
evaluation error, which `&&` and `||` absorb where the other side decides (false && error is
false, true || error is true) and which otherwise fails the allocation, as upstream's allocator
fails a claim whose selector errs on a device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.dra.resources import Device, quantity
from harness.errors import ConfigError

_TOKEN = re.compile(r"""\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
                    r"""|(?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,-])|(?P<id>[A-Za-z_][A-Za-z_0-9]*))""")


class SelectorError(Exception):
    """A selector's evaluation error on a device (a missing attribute, mismatched types)."""


class _Error:
    """CEL's error value, absorbed by && and || where the other side decides."""

    def __init__(self, why: str):
        self.why = why


@dataclass(frozen=True)
class _Quantity:
    milli: int


def _tokens(text: str, where: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ConfigError(where, f"CEL: cannot read {text[pos:pos + 20]!r} (not in the modelled subset)")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, where: str):
        self.toks, self.i, self.where = _tokens(text, where), 0, where

    def refuse(self, what: str):
        raise ConfigError(self.where, f"CEL: {what} is not in the modelled subset (device.driver, "
                                      "device.attributes/capacity, comparisons, in, &&, ||, !, compareTo)")

    def peek(self, k: int = 0) -> tuple[str, str]:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if value is not None and tok[1] != value:
            self.refuse(f"{tok[1] or 'the end'!r} where {value!r} was expected")
        self.i += 1
        return tok

    def parse(self):
        node = self.or_()
        if self.peek()[0] != "end":
            self.refuse(f"{self.peek()[1]!r} after a complete expression")
        return node

    def or_(self):
        node = self.and_()
        while self.peek()[1] == "||":
            self.take()
            node = ("or", node, self.and_())
        return node

    def and_(self):
        node = self.not_()
        while self.peek()[1] == "&&":
            self.take()
            node = ("and", node, self.not_())
        return node

    def not_(self):
        if self.peek()[1] == "!":
            self.take()
            return ("not", self.not_())
        return self.compare()

    def compare(self):
        left = self.operand()
        op = self.peek()[1]
        if op in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return ("cmp", op, left, self.operand())
        if op == "in":
            self.take()
            right = self.operand()
            if right[0] in ("attributes", "capacity"):
                return ("has", right[0], right[1], left)
            return ("in", left, right)
        return left

    def operand(self):
        kind, value = self.take()
        if kind == "end":
            raise ConfigError(self.where, "CEL: the expression ends where an operand was expected")
        if value == "-" and self.peek()[0] == "num" and "." not in self.peek()[1]:
            return ("lit", -int(self.take()[1]))
        if kind == "num":
            if "." in value:
                self.refuse(f"the double {value}")
            return ("lit", int(value))
        if kind == "str":
            return ("lit", bytes(value[1:-1], "utf-8").decode("unicode_escape"))
        if value in ("true", "false"):
            return ("lit", value == "true")
        if value == "(":
            node = self.or_()
            self.take(")")
            return node
        if value == "[":
            items = []
            while self.peek()[1] != "]":
                items.append(self.operand())
                if self.peek()[1] == ",":
                    self.take()
            self.take("]")
            return ("list", items)
        if value == "quantity":
            self.take("(")
            kind, text = self.take()
            if kind != "str":
                self.refuse("quantity() of anything but a string literal")
            self.take(")")
            return ("lit", _Quantity(quantity(text[1:-1], self.where)))
        if value == "device":
            return self.device()
        self.refuse(f"{value!r}")

    def device(self):
        self.take(".")
        _, what = self.take()
        if what == "driver":
            return ("driver",)
        if what == "allowMultipleAllocations":
            return ("multi",)
        if what not in ("attributes", "capacity"):
            self.refuse(f"device.{what}")
        self.take("[")
        kind, domain = self.take()
        if kind != "str":
            self.refuse(f"device.{what}[...] with a non-string key")
        self.take("]")
        if self.peek()[1] != ".":
            return (what, domain[1:-1])  # a map, for a presence test
        self.take(".")
        _, name = self.take()
        node: tuple = ("field", what, f"{domain[1:-1]}/{name}")
        if self.peek()[1] == ".":
            self.take()
            _, method = self.take()
            if method not in ("compareTo", "isGreaterThan", "isLessThan"):
                self.refuse(f"the method {method}()")
            self.take("(")
            arg = self.operand()
            self.take(")")
            node = ("method", method, node, arg)
        return node


@dataclass(frozen=True)
class Selector:
    """A compiled selector: `matches(device, driver)` is True, False, or raises SelectorError."""

    text: str
    tree: tuple

    def matches(self, device: Device, driver: str) -> bool:
        value = _eval(self.tree, device, driver)
        if isinstance(value, _Error):
            raise SelectorError(f"{self.text!r} on device {device.name!r}: {value.why}")
        if not isinstance(value, bool):
            raise SelectorError(f"{self.text!r} is not a condition (it gives {value!r})")
        return value


def compile_selector(text: str, where: str) -> Selector:
    """Parse `text` once; an unsupported construct is refused at `where`, naming it."""
    return Selector(text, _Parser(text, where).parse())


def _eval(node, device: Device, driver: str):
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "driver":
        return driver
    if kind == "multi":
        return device.multi
    if kind == "field":
        if node[1] == "capacity":
            return _Quantity(device.capacity[node[2]]) if node[2] in device.capacity else _Error(
                f"no such key: {node[2]}")
        return device.attributes[node[2]] if node[2] in device.attributes else _Error(f"no such key: {node[2]}")
    if kind == "has":
        key = _eval(node[3], device, driver)
        if not isinstance(key, str):
            return _Error("in of a non-string key")
        return f"{node[2]}/{key}" in (device.attributes if node[1] == "attributes" else device.capacity)
    if kind == "list":
        return [_eval(n, device, driver) for n in node[1]]
    if kind == "not":
        v = _eval(node[1], device, driver)
        return v if isinstance(v, _Error) else (not v if isinstance(v, bool) else _Error("! of a non-bool"))
    if kind in ("and", "or"):
        a, b = _eval(node[1], device, driver), _eval(node[2], device, driver)
        decisive = kind == "or"  # the value that decides: true for ||, false for &&
        if a is decisive or b is decisive:
            return decisive
        for v in (a, b):
            if isinstance(v, _Error):
                return v
            if not isinstance(v, bool):
                return _Error(f"{kind} of a non-bool")
        return not decisive
    if kind == "method":
        q, arg = _eval(node[2], device, driver), _eval(node[3], device, driver)
        if isinstance(q, _Error):
            return q
        if not (isinstance(q, _Quantity) and isinstance(arg, _Quantity)):
            return _Error(f"{node[1]}() is a quantity's method")
        c = (q.milli > arg.milli) - (q.milli < arg.milli)
        return {"compareTo": c, "isGreaterThan": c > 0, "isLessThan": c < 0}[node[1]]
    if kind == "in":
        v, items = _eval(node[1], device, driver), _eval(node[2], device, driver)
        if isinstance(v, _Error):
            return v
        if not isinstance(items, list):
            return _Error("in of a non-list")
        return any(type(v) is type(i) and v == i for i in items)
    if kind == "cmp":
        op, a, b = node[1], _eval(node[2], device, driver), _eval(node[3], device, driver)
        for v in (a, b):
            if isinstance(v, _Error):
                return v
        if type(a) is not type(b) or isinstance(a, _Quantity):
            return _Error(f"no such overload: {type(a).__name__} {op} {type(b).__name__}")
        if isinstance(a, bool) and op not in ("==", "!="):
            return _Error(f"no such overload: bool {op} bool")
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    raise AssertionError(kind)
