"""SQL ``LIKE`` patterns as regular expressions, shared by both executors.

``%`` matches any run of characters, ``_`` exactly one, and the escape character (if any) makes
the character after it literal. The body is the same for RE2 (Arrow) and Java (Spark); only the
anchors differ, because Java's ``$`` also matches before a final line break.
"""

from __future__ import annotations

_REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}")


def like_regex_body(pattern: str, escape: str | None = None) -> str:
    """The unanchored regex for a LIKE pattern.

    >>> like_regex_body("a%b_"), like_regex_body("100!%", "!")
    ('a.*b.', '100%')
    """
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape and i + 1 < len(pattern):
            ch = pattern[i + 1]
            parts.append("\\" + ch if ch in _REGEX_SPECIAL else ch)
            i += 2
            continue
        if ch == "%":
            parts.append(".*")
        elif ch == "_":
            parts.append(".")
        else:
            parts.append("\\" + ch if ch in _REGEX_SPECIAL else ch)
        i += 1
    return "".join(parts)


def like_to_re2(pattern: str, escape: str | None = None) -> str:
    """A LIKE pattern as an anchored RE2 regex (Arrow's ``match_substring_regex``).

    >>> like_to_re2("a%b_")
    '(?s)^a.*b.$'
    """
    return "(?s)^" + like_regex_body(pattern, escape) + "$"


def like_to_java(pattern: str, escape: str | None = None) -> str:
    """A LIKE pattern as an anchored Java regex (Spark's ``rlike``).

    >>> like_to_java("a%b_")
    '(?s)\\\\Aa.*b.\\\\z'
    """
    return "(?s)\\A" + like_regex_body(pattern, escape) + "\\z"


def like_shape(pattern: str, escape: str | None = None) -> tuple[str, str] | None:
    """A LIKE pattern that is a plain test of its text, as ``(kind, text)``: ``"equals"``,
    ``"prefix"`` (``'forest%'``), ``"suffix"`` (``'%BRASS'``) or ``"contains"`` (``'%green%'``);
    None for any other pattern (``_``, an inner ``%``, an escape). Such a test is what Spark's
    optimizer makes of its own SQL's LIKE, and a reader can push a prefix into parquet.

    >>> like_shape("forest%"), like_shape("%green%"), like_shape("a_b"), like_shape("%a%b%")
    (('prefix', 'forest'), ('contains', 'green'), None, None)
    """
    if "_" in pattern or (escape and escape in pattern):
        return None
    starts, ends = pattern.startswith("%"), pattern.endswith("%") and len(pattern) > 1
    text = pattern[1 if starts else 0 : len(pattern) - 1 if ends else len(pattern)]
    if "%" in text:
        return None
    if starts and ends:
        return "contains", text
    if starts:
        return "suffix", text
    return ("prefix", text) if ends else ("equals", text)
