"""Hub5 text normalisation before scoring: GLM rules, case, noise, optional words, fragments.

The conventions are sclite's (``csrfilt.sh`` + ``rfilter1`` for the GLM, ``-D`` and
``-F`` for the alignment):

* **GLM** (global mapping file): string-rewriting rules ``A => B [/ C __ D]`` applied
  left to right over the text padded with a space at each end; at each character the
  first rule (in file order) whose ``A`` matches there, preceded by ``C`` and followed by
  ``D``, writes ``B`` and skips ``A``; otherwise the character is copied. Strings may be
  bounded by ``[...]`` or quotes to keep spaces. Rules after
  ``;; INPUT_DEPENDENT_APPLICATION = "<regex>"`` apply only when the regex matches the
  input's type or purpose, as csrfilt's ``-i``/``-t``: ``stm`` and ``ref`` for an STM
  reference, ``ctm`` and ``hyp`` for a CTM hypothesis; a Kaldi text is ``trn`` and also
  counts as the ``stm``/``ctm`` it replaces, so text/text scoring gets the same rule
  sets as STM/CTM. As ``csrfilt -i ctm``,
  rules rewrite CTM words one at a time (a multi-word left side never spans two CTM
  lines); text and STM lines are rewritten whole. Hesitations become ``%HESITATION``,
  contractions alternations ``{ I'M / I AM }``.
* **Case** is folded to upper (sclite's default is case-insensitive).
* **Noise tokens** (``[noise]``, ``<unk>``: ``--filter-regex``) are removed from both
  sides and counted.
* **Optionally deletable** reference words ``(UH)``: deleting one is scored correct
  (sclite ``-D``); when off, the parenthesised token is an ordinary word.
* **Fragments** (``AB-``, ``-AB``; also ``(AB-)``): with ``fragments="correct"`` a
  fragment matches any word sharing that prefix (suffix) (sclite ``-F``). As in sclite,
  deleting a fragment is still a deletion unless it is also in parentheses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines
from asrtrain.score.align import NULL_WORD, Net, Word

DEFAULT_FILTER = r"^(\[[^\]]*\]|<[^>]*>)$"
_SPREAD = re.compile(r"(\(\s+[^()\s]+\s+)([^()\s]+)")


@dataclass(frozen=True)
class Rule:
    """One GLM rule ``lhs => rhs / left __ right`` (contexts empty when absent)."""

    lhs: str
    rhs: str
    left: str = ""
    right: str = ""
    applies_to: str | None = None      # regex over the input type, or None for all


@dataclass
class Glm:
    """A parsed GLM file, applied as ``rfilter1`` does."""

    rules: list[Rule]
    case_sensitive: bool = False
    _index: dict[str, list[Rule]] = field(default_factory=dict, repr=False)

    def rules_for(self, kinds: tuple[str, ...]) -> dict[str, list[Rule]]:
        """Rules active for an input (its type and purpose, as ``("ctm", "hyp")``): as
        csrfilt does, a rule set applies when its regex matches either, lower-cased."""
        key = ",".join(kinds)
        if key not in self._index:
            table: dict[str, list[Rule]] = {}
            for r in self.rules:
                if r.applies_to is None or any(re.search(r.applies_to.lower(), k.lower())
                                               for k in kinds):
                    table.setdefault(r.lhs[0], []).append(r)
            self._index[key] = table  # type: ignore[assignment]
        return self._index[key]  # type: ignore[return-value]

    def apply(self, text: str, kinds: tuple[str, ...]) -> str:
        """Rewrite one transcript (a line of words)."""
        table = self.rules_for(kinds)
        src = f" {text} " if self.case_sensitive else f" {text.upper()} "
        out: list[str] = []
        i, n = 0, len(src)
        while i < n:
            for r in table.get(src[i], ()):
                j = i + len(r.lhs)
                if (src.startswith(r.lhs, i) and src.startswith(r.right, j)
                        and src.endswith(r.left, 0, i)):
                    out.append(r.rhs)
                    i = j
                    break
            else:
                out.append(src[i])
                i += 1
        return " ".join("".join(out).split())


_COMMENT = ";;"
_IDA = re.compile(r'INPUT_DEPENDENT_APPLICATION\s*=\s*"([^"]*)"')


def _strings(spec: str) -> list[str]:
    """Split a rule body into its bracketed / quoted / bare strings and separators.

    ``[...]`` or a quote opens a bounded string only at the start of a token and only
    when its closing mark ends a token; otherwise (``I'M``, ``'CAUSE``) it is literal.
    """
    toks: list[str] = []
    i, n = 0, len(spec)
    while i < n:
        c = spec[i]
        if c.isspace():
            i += 1
            continue
        if c in "['\"":
            close = {"[": "]", "'": "'", '"': '"'}[c]
            j = spec.find(close, i + 1)
            while j >= 0 and j + 1 < n and not spec[j + 1].isspace():
                j = spec.find(close, j + 1)
            if j >= 0:
                toks.append("\0" + spec[i + 1:j])
                i = j + 1
                continue
        j = i
        while j < n and not spec[j].isspace():
            j += 1
        toks.append(spec[i:j])
        i = j
    return toks


def _join(parts: list[str]) -> str:
    return " ".join(p[1:] if p.startswith("\0") else p for p in parts) if len(parts) != 1 \
        else (parts[0][1:] if parts[0].startswith("\0") else parts[0])


def parse_rule(body: str, applies_to: str | None) -> Rule:
    """Parse ``A => B`` or ``A => B / C __ D`` (strings may be ``[...]`` or quoted)."""
    toks = _strings(body)
    if "=>" not in toks:
        raise ValueError("no '=>'")
    k = toks.index("=>")
    lhs, rest = toks[:k], toks[k + 1:]
    left: list[str] = []
    right: list[str] = []
    if "__" in rest:
        u = rest.index("__")
        slashes = [i for i, t in enumerate(rest[:u]) if t == "/"]
        if not slashes:
            raise ValueError("context '__' without '/'")
        s = slashes[-1]          # a '/' inside an alternation on the right is not it
        rhs, left, right = rest[:s], rest[s + 1:u], rest[u + 1:]
    else:
        rhs = rest
    if not lhs:
        raise ValueError("empty left-hand side")
    return Rule(_join(lhs), _join(rhs) if rhs else "", _join(left) if left else "",
                _join(right) if right else "", applies_to)


def load_glm(path: str | Path) -> Glm:
    """Read a GLM file in sclite's format; a malformed rule is an error naming its line."""
    rules: list[Rule] = []
    case_sensitive = False
    applies_to: str | None = None
    try:
        lines = read_lines(path)
    except OSError as exc:
        raise InputError(f"cannot read GLM: {exc.strerror}", path) from None
    for no, raw in enumerate(lines, 1):
        line = raw.strip()
        m = _IDA.search(line)
        if m and line.startswith(_COMMENT):
            applies_to = m.group(1)
            continue
        if not line or line.startswith(_COMMENT):
            continue
        if line.startswith("*"):
            if "case_sensitive" in line.lower():
                case_sensitive = bool(re.search(r"['\"](T|TRUE|YES)['\"]", line, re.I))
            continue
        body = _strip_comment(line)
        if not body:
            continue
        try:
            rules.append(parse_rule(body, applies_to))
        except ValueError as exc:
            raise InputError(f"line {no}: malformed GLM rule ({exc}): {raw.strip()!r}",
                             path) from None
    return Glm(rules, case_sensitive)


def _strip_comment(line: str) -> str:
    """Drop a trailing ``;; comment`` that is outside ``[...]`` strings."""
    depth = 0
    for i, c in enumerate(line):
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        elif depth == 0 and line.startswith(_COMMENT, i):
            return line[:i].strip()
    return line.strip()


@dataclass
class Normalizer:
    """Turns a transcript into a word network the way sclite sees it."""

    glm: Glm | None = None
    fragments: str = "error"            # "correct" = sclite -F
    optional_deletable: bool = True     # sclite -D
    filter_regex: str | None = DEFAULT_FILTER
    split_hyphens: bool = False         # csrfilt -dh: "A-B" -> "A B", fragments kept
    filtered: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._filter = re.compile(self.filter_regex) if self.filter_regex else None

    def tokens(self, words: Sequence[str], kinds: tuple[str, ...], tally: bool = True,
               pre_mapped: bool = False) -> list[str]:
        """Case-folded, filtered, GLM-mapped tokens (alternation marks as tokens)."""
        kept: list[str] = []
        for w in words:
            if self._filter is not None and self._filter.match(w):
                if tally:
                    key = w.upper()
                    self.filtered[key] = self.filtered.get(key, 0) + 1
            else:
                kept.append(w)
        if self.glm is not None and kinds[0] == "ctm" and not pre_mapped:
            # csrfilt -i ctm rewrites each CTM word on its own
            text = " ".join(self.rewrite(w, kinds) for w in kept)
        elif self.glm is not None and not pre_mapped:
            text = self.rewrite(" ".join(kept), kinds)
        else:
            text = self.rewrite(" ".join(kept), kinds, rules=False)
        text = re.sub(r"([{}])", r" \1 ", text)
        return text.split()

    def rewrite(self, text: str, kinds: tuple[str, ...], rules: bool = True) -> str:
        """csrfilt's pipeline: upcase, open parentheses, GLM rules, split hyphens, spread
        a parenthesised group over its words (``(A B)`` -> ``(A) (B)``), close them."""
        text = text.upper()
        if rules and self.glm is not None:
            text = text.replace("(", "( ").replace(")", " )")
            text = self.glm.apply(text, kinds)
        if self.split_hyphens:
            text = re.sub(r"([^( ])-(?=[^) ])", r"\1 ", text)
        if rules and self.glm is not None:
            text = f" {text} "
            while True:
                new = _SPREAD.sub(r"\1) ( \2", text, count=1)
                if new == text:
                    break
                text = new
            text = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", text))
        return " ".join(text.split())

    def word(self, token: str) -> Word:
        opt = self.optional_deletable and len(token) > 2 and token[0] == "(" \
            and token[-1] == ")"
        inner = token[1:-1] if opt else token
        frag = self.fragments == "correct" and len(token) > 1 and (
            token.endswith("-") or token.startswith("-") or (opt and token[-2] == "-"))
        return Word(inner, opt_del=opt, frag=frag)

    def network(self, words: Sequence[str], kinds: tuple[str, ...], where: str = "",
                pre_mapped: bool = False) -> Net:
        """The word network of a transcript; ``{ a / b c / @ }`` become parallel paths."""
        toks = self.tokens(words, kinds, pre_mapped=pre_mapped)
        net = Net()
        frontier = [0]
        i = 0
        while i < len(toks):
            t = toks[i]
            if t == "{":
                j = _closing(toks, i, where)
                ends: list[int] = []
                for alt in _split_alts(toks[i + 1:j]):
                    last = frontier
                    for w in alt or [NULL_WORD]:
                        last = [net.add(self.word(w), last)]
                    ends.extend(last)
                frontier = ends
                i = j + 1
            elif t == "}":
                raise InputError(f"unbalanced '}}' in {' '.join(words)!r}", where or None)
            else:   # a word (a slash outside braces is a word too)
                frontier = [net.add(self.word(t), frontier)]
                i += 1
        net.finals = frontier
        return net

    def flat(self, words: Sequence[str], kinds: tuple[str, ...], pre_mapped: bool = False
             ) -> list[str]:
        """Tokens for Kaldi-style scoring: first alternative, nulls and parens dropped."""
        out: list[str] = []
        toks = self.tokens(words, kinds, tally=False, pre_mapped=pre_mapped)
        i = 0
        while i < len(toks):
            if toks[i] == "{":
                j = _closing(toks, i, "")
                alts = _split_alts(toks[i + 1:j])
                out.extend(t for t in (alts[0] if alts else []) if t != NULL_WORD)
                i = j + 1
                continue
            t = toks[i]
            if self.optional_deletable and len(t) > 2 and t[0] == "(" and t[-1] == ")":
                t = t[1:-1]
            out.append(t)
            i += 1
        return out


def _closing(toks: list[str], i: int, where: str) -> int:
    depth = 0
    for j in range(i, len(toks)):
        depth += toks[j] == "{"
        depth -= toks[j] == "}"
        if depth == 0:
            return j
    raise InputError(f"unclosed '{{' in {' '.join(toks)!r}", where or None)


def _split_alts(inner: list[str]) -> list[list[str]]:
    """Split the inside of ``{ ... }`` at top-level slashes (nested braces flattened)."""
    alts: list[list[str]] = [[]]
    for t in inner:
        if t == "/":
            alts.append([])
        elif t not in ("{", "}"):
            alts[-1].append(t)
    return [[w for w in a if w != NULL_WORD] or [NULL_WORD] for a in alts]
