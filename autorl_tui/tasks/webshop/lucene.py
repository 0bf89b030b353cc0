"""WebShop's search, ranked as its pyserini index ranks it: Lucene 8.11's BM25 over Anserini's English
analyzer (pyserini 0.17.0, WebShop's pin, bundles Anserini 0.14.3 on Lucene 8.11.0). Standard
library only; written from Lucene's documented behaviour and checked against the real index
(tests/unit/test_webshop_lucene_agreement.py, scripts/webshop_lucene_reference.py).

Analysis (`analyze`), as Anserini's DefaultEnglishAnalyzer:
- Lucene's StandardTokenizer, the Unicode word-break rules (UAX #29): letters and digits form
  words; `.` and `'` join letters to letters and digits to digits (`u.s.a`, `don't`, `3.5`), `:`
  letters only (`size:large`), `,` and `;` digits only (`1,000`), `_` anything; each ideograph,
  hiragana and emoji is a token of its own (`™`, `®`, `★` are tokens); everything else separates;
- English possessives dropped (`women's` -> `women`), lower case, Lucene's 33 English stop words
  removed, then the Porter stemmer (porter.py).

Ranking (`LuceneIndex.search`), as Lucene's BM25Similarity with k1 = 0.9, b = 0.4 scores a bag of
words query (Anserini's: one clause per distinct query term, boosted by its count), in float32
as Lucene computes it:
  idf = ln(1 + (N - df + 0.5) / (df + 0.5));  w = boost * idf
  score(term, doc) = w - w / (1 + tf * inv_norm[doc]),
  inv_norm = 1 / (k1 * ((1 - b) + b * dl / avgdl))
where dl is the document's length (tokens after stop words) as Lucene stores it: in one byte
(SmallFloat.intToByte4), exact up to 39, then rounded down to 4 significant bits (40..55 in steps of
2, 56..87 in steps of 4, 88..151 in steps of 8, ...). Hits are ordered by their float scores, equal
scores by document id string (Anserini's sort); Anserini then reports scores rounded to 4 decimals
without changing that order. A query with no analysed term finds nothing.
"""

from __future__ import annotations

import functools
import math
import re
import struct
import unicodedata
from collections import Counter

from .porter import stem

K1 = 0.9
B = 0.4
# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, Anserini's default.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split())
MAX_TOKEN = 255        # StandardTokenizer's longest token; longer runs are cut into pieces of this size

# Characters below U+10000, other than the ideographs and hiragana named below, that Lucene 8.11's
# StandardTokenizer makes one-character tokens of (emoji, symbols, a few CJK and Thai marks);
# measured on the real tokenizer (each character between letters, digits and spaces).
_SINGLE_BMP = (
    (0x00A9, 0x00A9), (0x00AE, 0x00AE), (0x0E46, 0x0E46), (0x0EC6, 0x0EC6), (0x109E, 0x109F),
    (0x17D7, 0x17D7), (0x19DA, 0x19DA), (0x19DE, 0x19DF), (0x1AA0, 0x1AAD), (0x203C, 0x203C),
    (0x2049, 0x2049), (0x2122, 0x2122), (0x2194, 0x2199), (0x21A9, 0x21AA), (0x231A, 0x231B),
    (0x2328, 0x2328), (0x2388, 0x2388), (0x23CF, 0x23CF), (0x23E9, 0x23F3), (0x23F8, 0x23FA),
    (0x25AA, 0x25AB), (0x25B6, 0x25B6), (0x25C0, 0x25C0), (0x25FB, 0x25FE), (0x2600, 0x2605),
    (0x2607, 0x2612), (0x2614, 0x2685), (0x2690, 0x2705), (0x2708, 0x2712), (0x2714, 0x2714),
    (0x2716, 0x2716), (0x271D, 0x271D), (0x2721, 0x2721), (0x2728, 0x2728), (0x2733, 0x2734),
    (0x2744, 0x2744), (0x2747, 0x2747), (0x274C, 0x274C), (0x274E, 0x274E), (0x2753, 0x2755),
    (0x2757, 0x2757), (0x2763, 0x2767), (0x2795, 0x2797), (0x27A1, 0x27A1), (0x27B0, 0x27B0),
    (0x27BF, 0x27BF), (0x2934, 0x2935), (0x2B05, 0x2B07), (0x2B1B, 0x2B1C), (0x2B50, 0x2B50),
    (0x2B55, 0x2B55), (0x2E80, 0x2E99), (0x2E9B, 0x2EF3), (0x2F00, 0x2FD5), (0x3007, 0x3007),
    (0x3021, 0x3029), (0x3030, 0x3035), (0x3038, 0x303A), (0x303D, 0x303D), (0x309B, 0x309E),
    (0x30A0, 0x30A0), (0x30FC, 0x30FE), (0x3297, 0x3297), (0x3299, 0x3299), (0x32D0, 0x32FE),
    (0x3300, 0x3357), (0xA9E6, 0xA9E6), (0xAA70, 0xAA70), (0xAA77, 0xAA79), (0xAADD, 0xAADF),
    (0xFF70, 0xFF70),
)
_MID_LETTER = frozenset("\u003a\u00b7\u0387\u05f4\u2027\ufe13\ufe55\uff1a\u02d7")
_MID_NUM = frozenset("\u002c\u003b\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b")
_MID_NUM_LET = frozenset("\u002e\u2018\u2019\u2024\ufe52\uff07\uff0e\u0027")
_SINGLE_SCRIPTS = ("CJK UNIFIED", "CJK COMPATIBILITY IDEOGRAPH", "HIRAGANA")
_RUN_SCRIPTS = ("KATAKANA", "HALFWIDTH KATAKANA", "THAI", "LAO", "MYANMAR", "KHMER", "TAI ", "NEW TAI")
_POSSESSIVE = ("'s", "\u2019s", "\uff07s", "'S", "\u2019S", "\uff07S")

# word-break classes
LETTER, NUMBER, MID_LETTER, MID_NUM, MID_NUM_LET, EXTEND_NUM_LET, EXTEND, SINGLE, RUN, OTHER = range(10)


@functools.lru_cache(maxsize=None)
def char_class(ch: str) -> int:
    cp = ord(ch)
    if ch in _MID_NUM_LET:
        return MID_NUM_LET
    if ch in _MID_LETTER:
        return MID_LETTER
    if ch in _MID_NUM:
        return MID_NUM
    if 0x24B6 <= cp <= 0x24E9:       # circled letters are alphabetic
        return LETTER
    cat = unicodedata.category(ch)
    if cp == 0x200B:                 # zero-width space separates
        return OTHER
    if cat == "Pc" or cp == 0x202F:
        return EXTEND_NUM_LET
    if cat in ("Mn", "Mc", "Me", "Cf") or 0x1F3FB <= cp <= 0x1F3FF:
        return EXTEND
    if any(lo <= cp <= hi for lo, hi in _SINGLE_BMP) or (0x1F000 <= cp <= 0x1FAFF and cat == "So"):
        return SINGLE
    if cat[0] == "L" or cat == "Nl":
        name = unicodedata.name(ch, "")
        if name.startswith(_SINGLE_SCRIPTS):
            return SINGLE
        if name.startswith(_RUN_SCRIPTS):
            return RUN
        return LETTER
    if cat == "Nd":
        return NUMBER
    return OTHER


def _units(text: str) -> list[tuple[int, str]]:
    """(class, characters) per character, combining marks and format characters (and a zero-width
    joiner's emoji) kept with the character before them."""
    units: list[tuple[int, str]] = []
    for ch in text:
        cls = char_class(ch)
        if units and (cls == EXTEND or (cls == SINGLE and units[-1][1].endswith("\u200d")
                                        and units[-1][0] == SINGLE)):
            units[-1] = (units[-1][0], units[-1][1] + ch)
        else:
            units.append((cls, ch))
    return units


_WORD = (LETTER, NUMBER, EXTEND_NUM_LET)


def _joins(units: list[tuple[int, str]], i: int) -> bool:
    """No word break between units i and i+1 (of a word)."""
    a, b = units[i][0], units[i + 1][0]
    if a in _WORD and b in _WORD:
        return True
    after = units[i + 2][0] if i + 2 < len(units) else OTHER
    before = units[i - 1][0] if i >= 1 else OTHER
    if a == LETTER and b in (MID_LETTER, MID_NUM_LET) and after == LETTER:
        return True
    if before == LETTER and a in (MID_LETTER, MID_NUM_LET) and b == LETTER:
        return True
    if a == NUMBER and b in (MID_NUM, MID_NUM_LET) and after == NUMBER:
        return True
    return before == NUMBER and a in (MID_NUM, MID_NUM_LET) and b == NUMBER


# The same rules for ASCII text, as one expression: runs of letters, digits and `_`, joined across
# `:`, `.` or `'` between two letters and across `,`, `;`, `.` or `'` between two digits.
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+(?:(?:(?<=[A-Za-z])[:.'](?=[A-Za-z])|(?<=[0-9])[,;.'](?=[0-9]))[A-Za-z0-9_]+)*")


_ASCII_SPACE = re.compile(r"[ \t\n\r\f\v]+")      # no rule joins across them


def tokenize(text: str) -> list[str]:
    """StandardTokenizer's tokens, in order, as written."""
    if not text.isascii():       # the non-ASCII stretches between spaces through the character rules
        return [t for chunk in _ASCII_SPACE.split(text) for t in tokenize(chunk)] if _ASCII_SPACE.search(text) \
            else tokenize_unicode(text)
    return [w[k:k + MAX_TOKEN] for w in _ASCII_WORD.findall(text) if w.strip("_")
            for k in range(0, len(w), MAX_TOKEN)]


def tokenize_unicode(text: str) -> list[str]:
    """tokenize() for any text, character class by character class (the ASCII path's reference)."""
    units = _units(text)
    tokens: list[str] = []
    i, n = 0, len(units)
    while i < n:
        cls, chars = units[i]
        if cls == SINGLE:
            tokens.append(chars)
            i += 1
        elif cls == RUN:
            j = i
            while j + 1 < n and units[j + 1][0] == RUN:
                j += 1
            tokens.append("".join(u[1] for u in units[i:j + 1]))
            i = j + 1
        elif cls in _WORD:
            j = i
            while j + 1 < n and _joins(units, j):
                j += 1
            word = "".join(u[1] for u in units[i:j + 1])
            if any(u[0] in (LETTER, NUMBER) for u in units[i:j + 1]):
                tokens.extend(word[k:k + MAX_TOKEN] for k in range(0, len(word), MAX_TOKEN))
            i = j + 1
        else:
            i += 1
    return tokens


def _lower(token: str) -> str:
    """Java's Character.toLowerCase, one character for one (Python's `İ` -> `i̇` is `i` there)."""
    return "".join((c.lower() or c)[0] for c in token)


@functools.lru_cache(maxsize=200_000)
def _term(token: str) -> str | None:
    """A token's indexed term (possessive dropped, lower case, stemmed), None for a stop word."""
    if token.endswith(_POSSESSIVE):
        token = token[:-2]
    token = _lower(token)
    return stem(token) if token and token not in STOP_WORDS else None


def analyze(text: str) -> list[str]:
    """The terms Anserini's DefaultEnglishAnalyzer indexes for `text`, in order."""
    return [t for t in map(_term, tokenize(text)) if t is not None]


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def _long_to_int4(i: int) -> int:
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_FREE = 255 - _long_to_int4(2**31 - 1)      # 24 lengths stored exactly


def length_byte(length: int) -> int:
    """SmallFloat.intToByte4: the byte Lucene stores a document length in."""
    return length if length < _FREE else _FREE + _long_to_int4(length - _FREE)


def byte_length(byte: int) -> int:
    """SmallFloat.byte4ToInt: the length Lucene reads back."""
    return byte if byte < _FREE else _FREE + _int4_to_long(byte - _FREE)


LENGTH_TABLE = tuple(float(byte_length(i)) for i in range(256))


class LuceneIndex:
    """BM25 over (docid, text) documents, as a pyserini index of their `contents` ranks them."""

    def __init__(self, docs: list[tuple[str, str]], k1: float = K1, b: float = B):
        self.ids = [d for d, _ in docs]
        self.postings: dict[str, dict[int, int]] = {}
        self.norms: list[int] = []
        total = counted = 0
        for n, (_, text) in enumerate(docs):
            terms = analyze(text)
            self.norms.append(length_byte(len(terms)))
            total += len(terms)
            counted += bool(terms)
            for term, tf in Counter(terms).items():
                self.postings.setdefault(term, {})[n] = tf
        self.doc_count = counted
        k1, b = _f32(k1), _f32(b)
        avgdl = _f32(total / counted) if counted else 1.0
        one_minus_b = _f32(1 - b)
        self.inv_norm = [_f32(1 / _f32(k1 * _f32(one_minus_b + _f32(_f32(b * length) / avgdl))))
                         for length in LENGTH_TABLE]

    def idf(self, df: int) -> float:
        return _f32(math.log(1 + (self.doc_count - df + 0.5) / (df + 0.5)))

    def scores(self, query: str) -> dict[int, float]:
        acc: dict[int, float] = {}
        for term, count in Counter(analyze(query)).items():
            posting = self.postings.get(term)
            if not posting:
                continue
            weight = _f32(float(count) * self.idf(len(posting)))
            for doc, tf in posting.items():
                part = _f32(weight - _f32(weight / _f32(1.0 + _f32(tf * self.inv_norm[self.norms[doc]]))))
                acc[doc] = acc.get(doc, 0.0) + part
        return {doc: _f32(s) for doc, s in acc.items()}

    def search(self, query: str, k: int = 50) -> list[tuple[str, float]]:
        """The best k (docid, score), best first; equal scores by docid."""
        ranked = sorted(((-s, self.ids[d]) for d, s in self.scores(query).items()))
        return [(docid, -neg) for neg, docid in ranked[:k]]
