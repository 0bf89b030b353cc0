"""The Porter stemmer as Lucene's PorterStemFilter applies it (Porter's 1980 algorithm in the form of
his own reference implementation: `bli` -> `ble` and `logi` -> `log` in step 2, words of one or two
letters left alone). Standard library only; written from the algorithm's description.

    stem("running") == "run";  stem("size:large") == "size:larg";  stem("cats") == "cat"

A letter is a consonant unless it is a, e, i, o or u, or a `y` after a consonant; m is the number of
vowel-consonant sequences in the stem (`[C](VC)^m[V]`). Any character that is not one of those
vowels counts as a consonant (digits too), as in the reference implementation.
"""

from __future__ import annotations

_VOWELS = "aeiou"

# (suffix, replacement), grouped as the reference implementation tries them (steps 2 and 4 by the
# word's last-but-one letter, step 3 by its last letter): the first suffix of the group that the
# word ends with decides, whether or not its condition then holds.
_STEP2 = {
    "a": (("ational", "ate"), ("tional", "tion")),
    "c": (("enci", "ence"), ("anci", "ance")),
    "e": (("izer", "ize"),),
    "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
    "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
    "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
    "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
    "g": (("logi", "log"),),
}
_STEP3 = {
    "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
    "i": (("iciti", "ic"),),
    "l": (("ical", "ic"), ("ful", "")),
    "s": (("ness", ""),),
}
_STEP4 = {
    "a": ("al",), "c": ("ance", "ence"), "e": ("er",), "i": ("ic",), "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"), "o": ("ion", "ou"), "s": ("ism",), "t": ("ate", "iti"),
    "u": ("ous",), "v": ("ive",), "z": ("ize",),
}


def _cons(w: str, i: int) -> bool:
    c = w[i]
    if c in _VOWELS:
        return False
    if c == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _measure(stem: str) -> int:
    """m of `[C](VC)^m[V]`."""
    m, i, n = 0, 0, len(stem)
    while i < n and _cons(stem, i):
        i += 1
    while i < n:
        while i < n and not _cons(stem, i):
            i += 1
        if i >= n:
            break
        while i < n and _cons(stem, i):
            i += 1
        m += 1
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y."""
    n = len(w)
    return (n >= 3 and _cons(w, n - 1) and not _cons(w, n - 2) and _cons(w, n - 3)
            and w[-1] not in "wxy")


def _step1(w: str) -> str:
    if w.endswith("s"):
        if w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("ies"):
            w = w[:-2]
        elif not w.endswith("ss"):
            w = w[:-1]
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[:-len(suffix)]):
                w = w[:-len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _double_cons(w):
                    if w[-1] not in "lsz":
                        w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    return w


def _replace(w: str, table: dict, key: int) -> str:
    if len(w) < 2:
        return w
    for suffix, replacement in table.get(w[key], ()):
        if w.endswith(suffix):
            stem = w[:-len(suffix)]
            return stem + replacement if _measure(stem) > 0 else w
    return w


def _step4(w: str) -> str:
    if len(w) < 2:
        return w
    for suffix in _STEP4.get(w[-2], ()):
        if w.endswith(suffix):
            stem = w[:-len(suffix)]
            if suffix == "ion" and not stem.endswith(("s", "t")):
                return w
            return stem if _measure(stem) > 1 else w
    return w


def _step5(w: str) -> str:
    if w.endswith("e"):
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


def stem(word: str) -> str:
    """The Porter stem of a lower-cased token."""
    if len(word) <= 2:
        return word
    w = _step1(word)
    w = _replace(w, _STEP2, -2)
    w = _replace(w, _STEP3, -1)
    w = _step4(w)
    return _step5(w)
