"""The tokenizer: expression text -> tokens with offsets.

>>> [t.text for t in tokenize("a.b[0] >= 1.5")][:-1]
['a', '.', 'b', '[', '0', ']', '>=', '1.5']
"""

from __future__ import annotations

import bisect
import enum
import functools
from dataclasses import dataclass

from engine.errors import ExpressionSyntaxError
from engine.expr.functions import binary_operators, unary_operators
from engine.expr.nodes import KEYWORDS, Position


class TokenKind(enum.StrEnum):
    NUMBER = "number"
    STRING = "string"
    NAME = "name"  # an identifier
    QUOTED_NAME = "quoted name"  # a backquoted identifier
    KEYWORD = "keyword"
    SYMBOL = "symbol"  # operators and punctuation
    END = "end of expression"


@dataclass(frozen=True)
class Token:
    """``value`` is the decoded content: the number, the unescaped string or name, the lower-case keyword."""

    kind: TokenKind
    text: str
    value: str | int | float
    offset: int

    def is_symbol(self, *symbols: str) -> bool:
        return self.kind == TokenKind.SYMBOL and self.text in symbols

    def is_keyword(self, *words: str) -> bool:
        return self.kind == TokenKind.KEYWORD and self.value in words

    def describe(self) -> str:
        """The token as a message names it: ``')'``, ``keyword 'then'``, ``end of expression``."""
        if self.kind == TokenKind.END:
            return "end of expression"
        if self.kind == TokenKind.KEYWORD:
            return f"keyword '{self.text}'"
        return f"'{self.text}'"


_PUNCTUATION = ("(", ")", "[", "]", ",", ".")
_SYMBOLS = sorted(
    {s for s in (*binary_operators(), *unary_operators()) if not s.isalpha()} | set(_PUNCTUATION),
    key=len,
    reverse=True,
)
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$")
_NAME_PART = _NAME_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "0": "\0",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
}
_HINTS = {"&": "'&&'", "|": "'||'"}


def position_at(text: str, offset: int) -> Position:
    """The 1-based line and column of ``offset``, lines split as ``str.splitlines`` does.

    >>> pos = position_at("a +\\n  b", 6)
    >>> pos.line, pos.column
    (2, 3)
    """
    ends = _line_ends(text)
    line = bisect.bisect_right(ends, offset)
    start = ends[line - 1] if line else 0
    return Position(offset, line + 1, offset - start + 1)


@functools.lru_cache(maxsize=32)
def _line_ends(text: str) -> tuple[int, ...]:
    # Offsets just past each line break; cached, as the parser asks once per node (a long
    # expression would otherwise cost quadratic time).
    ends, end = [], 0
    for piece in text.splitlines(keepends=True):
        end += len(piece)
        if len(piece.splitlines()[0]) != len(piece):
            ends.append(end)
    return tuple(ends)


def syntax_error(text: str, offset: int, message: str) -> ExpressionSyntaxError:
    pos = position_at(text, offset)
    return ExpressionSyntaxError(message, expression=text, line=pos.line, column=pos.column)


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an END token; raises ExpressionSyntaxError."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            tokens.append(Token(TokenKind.END, "", "", n))
            return tokens
        ch = text[i]
        if ch in _DIGITS:
            token = _number(text, i)
        elif ch in "'\"":
            token = _quoted(text, i, TokenKind.STRING)
        elif ch == "`":
            token = _quoted(text, i, TokenKind.QUOTED_NAME)
        elif ch in _NAME_START:
            j = i + 1
            while j < n and text[j] in _NAME_PART:
                j += 1
            word = text[i:j]
            if word.lower() in KEYWORDS:
                token = Token(TokenKind.KEYWORD, word, word.lower(), i)
            else:
                token = Token(TokenKind.NAME, word, word, i)
        else:
            symbol = next((s for s in _SYMBOLS if text.startswith(s, i)), None)
            if symbol is None:
                hint = f" (did you mean {_HINTS[ch]}?)" if ch in _HINTS else ""
                raise syntax_error(text, i, f"unexpected character {ch!r}{hint}")
            token = Token(TokenKind.SYMBOL, symbol, symbol, i)
        tokens.append(token)
        i = token.offset + len(token.text)


def _number(text: str, start: int) -> Token:
    """Digits, an optional fraction and exponent: without ``.`` or ``e`` it is a BIGINT."""
    n = len(text)
    j = start
    while j < n and text[j] in _DIGITS:
        j += 1
    floating = False
    if j + 1 < n and text[j] == "." and text[j + 1] in _DIGITS:
        floating = True
        j += 1
        while j < n and text[j] in _DIGITS:
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k] in _DIGITS:
            floating = True
            j = k
            while j < n and text[j] in _DIGITS:
                j += 1
        else:
            raise syntax_error(text, k, "expected the digits of an exponent")
    if j < n and text[j] in _NAME_PART:
        raise syntax_error(text, j, f"unexpected {text[j]!r} in a number")
    literal = text[start:j]
    return Token(TokenKind.NUMBER, literal, float(literal) if floating else int(literal), start)


def _quoted(text: str, start: int, kind: TokenKind) -> Token:
    quote = text[start]
    out: list[str] = []
    j, n = start + 1, len(text)
    while j < n:
        ch = text[j]
        if ch == quote:
            return Token(kind, text[start : j + 1], "".join(out), start)
        if ch == "\\" and j + 1 < n:
            nxt = text[j + 1]
            if nxt == "u":
                digits = text[j + 2 : j + 6]
                if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                    raise syntax_error(text, j, "expected four hex digits after \\u")
                out.append(chr(int(digits, 16)))
                j += 6
                continue
            # An unknown escape keeps its backslash, so regexes like '\d+' read as written.
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            j += 2
            continue
        out.append(ch)
        j += 1
    what = "string" if kind == TokenKind.STRING else "backquoted name"
    raise syntax_error(text, start, f"unterminated {what}: no closing {quote}")
