"""Judge-Bench JSON (Bavaresco et al. 2025), read as a stream of parser events (ijson).

A document declares its judged properties in ``annotations`` (``categorical`` with a
``labels_list``; ``graded``/``continuous`` with ``worst`` and ``best``) and holds
``instances``, each with ``individual_human_scores`` per property (the i-th score by
annotator i) and an optional ``majority_human``. :class:`JudgeBenchFile` streams the
document (bounded memory, strict JSON, every fault named by line and column);
:func:`judged_properties`, :func:`human_scores` and :func:`score_fits` read its parts.
The platform's importer, the analysis loaders and the protocol replay all read it here.
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from decimal import Decimal
from typing import Any

import ijson

from formats.bundle import finite_number
from formats.vocab import preference_of

#: Deepest nesting of arrays and objects in a Judge-Bench file (the document is level 1).
MAX_DEPTH = 500
#: An escape of half a surrogate pair: ``\uD800`` to ``\uDFFF``.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_HIGH_ESCAPE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW_ESCAPE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_NON_FINITE = re.compile(rb"-?Infinity|NaN")
#: UTF-8 continuation bytes (a character's bytes after its first).
_CONTINUATION = bytes(range(0x80, 0xC0))


def _json_backend() -> Any:
    """ijson's C backend (yajl2_c), else the fastest one available."""
    try:
        return ijson.get_backend("yajl2_c")
    except ImportError:  # pragma: no cover - wheels carry the C backend
        return ijson


class _Sink(list[tuple[str, Any]]):
    """The events of one chunk, as ijson's push parser sends them."""

    send = list.append


class BadJSON(Exception):
    """The parser refused the chunk with this number (or the end of the file)."""


class TooDeep(Exception):
    pass


def _depth_guard() -> Generator[None, tuple[str, Any], None]:
    """A push target that refuses nesting deeper than ``MAX_DEPTH``."""
    depth = 0
    while True:
        event, _ = yield
        if event == "start_map" or event == "start_array":
            depth += 1
            if depth > MAX_DEPTH:
                raise TooDeep
        elif event == "end_map" or event == "end_array":
            depth -= 1


def _chars(data: bytes) -> int:
    """The number of UTF-8 characters that start in ``data``."""
    return len(data.translate(None, _CONTINUATION))


def _syntax_problem(exc: BaseException) -> str:
    """What the JSON parser refused, in words."""
    chain = [exc]
    while chain[-1].__context__ is not None and len(chain) < 5:
        chain.append(chain[-1].__context__)
    if any(isinstance(e, TooDeep) for e in chain):
        return "nested too deeply"
    if any("integer string conversion" in str(e) for e in chain):
        return "a number has too many digits"
    text = exc.args[0] if exc.args else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    reason = str(text).split("\n", 1)[0].strip().rstrip(".")
    reason = reason.removeprefix("lexical error: ").removeprefix("parse error: ")
    return {
        "premature EOF": "the file ends before the document is complete",
        "trailing garbage": "more text after the end of the document",
        "invalid char in json text": "unexpected character (NaN, Infinity, comments are not JSON)",
        "invalid string in json text": "unexpected word (JSON knows true, false and null)",
    }.get(reason, reason)


class JudgeBenchFile:
    """A Judge-Bench document read as a stream of parser events (ijson), one chunk of the
    file at a time; each reading starts again from the file's start.

    The bytes go to the parser with a BOM dropped and each escaped lone surrogate
    (``"\\ud800"``, which no database stores and yajl would turn into ``?``) replaced by
    ``\\ufffd`` of the same length; the first reading names each one by its line."""

    def __init__(self, chunks: Callable[[], Iterable[bytes]], max_notes: int = 200) -> None:
        self._source = chunks
        self._max_notes = max_notes
        self._backend = _json_backend()
        self.lone: list[str] = []  # the lone surrogates found by the first reading
        self.twice: list[str] = []  # and the keys the document names twice
        self._readings = 0
        self.chunk = 0  # the chunk being parsed

    def _chunks(self, collect: bool) -> Iterator[bytes]:
        """The bytes for the parser (see the class). The last 12 bytes of each piece are
        held back until the next one is read, so an escape is judged with its neighbours;
        ``run`` counts the backslashes just before ``view`` (their parity decides whether
        a backslash starts an escape)."""
        hold, context = 12, 16
        view, ctx, run, lines = b"", 0, 0, 0
        first = True
        for chunk in itertools.chain(self._source(), [b""]):
            final = not chunk
            if first and chunk:
                chunk, first = chunk.removeprefix(codecs.BOM_UTF8), False
            view += chunk
            end = len(view) if final else max(ctx, len(view) - hold)
            if _SURROGATE_ESCAPE.search(view, ctx):
                fixed = bytearray(view)
                for match in _SURROGATE_ESCAPE.finditer(view, ctx):
                    at = match.start()
                    if at >= end:
                        break
                    if not self._lone(view, at, run):
                        continue
                    fixed[at : at + 6] = b"\\ufffd"
                    if collect and len(self.lone) < self._max_notes:
                        line = lines + view.count(b"\n", ctx, at) + 1
                        code = match.group()[2:].decode().lower()
                        self.lone.append(
                            f"line {line}: text contains an unpaired surrogate (\\u{code})"
                        )
                view = bytes(fixed)
            if end > ctx:
                yield view[ctx:end]
                lines += view.count(b"\n", ctx, end)
            cut = max(0, end - context)
            start = cut
            while start > 0 and view[start - 1] == 0x5C:  # backslash
                start -= 1
            run = cut - start + (run if start == 0 else 0)
            view, ctx = view[cut:], end - cut

    @staticmethod
    def _lone(view: bytes, at: int, run: int) -> bool:
        """Whether the surrogate escape at ``at`` is real (an odd run of backslashes)
        and has no other half next to it."""

        def real(i: int) -> bool:
            j = i
            while j > 0 and view[j - 1] == 0x5C:
                j -= 1
            return (i - j + (run if j == 0 else 0)) % 2 == 0

        if not real(at):
            return False
        if _HIGH_ESCAPE.match(view, at):
            return not _LOW_ESCAPE.match(view, at + 6)
        return not (at >= 6 and _HIGH_ESCAPE.match(view, at - 6) and real(at - 6))

    def events(self) -> Iterator[tuple[str, Any]]:
        """The parser's events (numbers as ``int`` or ``Decimal``); :class:`BadJSON`
        when it refuses the file (``self.chunk``: where)."""
        collect = self._readings == 0
        self._readings += 1
        sink = _Sink()
        parser = self._backend.basic_parse_coro(sink, use_float=False)
        self.chunk = 0
        for chunk in self._chunks(collect):
            try:
                parser.send(chunk)
            except Exception:
                raise BadJSON from None
            yield from sink
            sink.clear()
            self.chunk += 1
        try:
            parser.close()
        except Exception:
            raise BadJSON from None
        yield from sink

    def fault(self) -> str:
        """The first fault of the file (a syntax error or nesting beyond ``MAX_DEPTH``),
        found again by feeding the chunk a pass stopped in (``self.chunk``) a byte at a
        time: ``line L: not valid JSON (… at column C)``. ``NaN`` and ``±Infinity`` (which
        Python writes for non-finite floats) are named as numbers that are not finite."""
        failing, line, column, near, at_fault = self.chunk, 1, 1, b"", False
        guard = _depth_guard()
        next(guard)
        parser = self._backend.basic_parse_coro(guard, use_float=False)

        def advance(data: bytes) -> None:
            nonlocal line, column
            if (newline := data.rfind(b"\n")) >= 0:
                line += data.count(b"\n")
                column = 1 + _chars(data[newline + 1 :])
            else:
                column += _chars(data)

        try:
            for number, chunk in enumerate(self._chunks(collect=False)):
                if number < failing:
                    parser.send(chunk)
                    advance(chunk)
                    continue
                for at in range(len(chunk)):
                    near, at_fault = chunk[max(0, at - 1) : at + 9], at > 0
                    parser.send(chunk[at : at + 1])
                    advance(chunk[at : at + 1])
                near = b""
            parser.close()
        except Exception as exc:
            if word := _NON_FINITE.search(near):  # near: from the byte before the fault
                start = column - (1 if at_fault else 0) + word.start()
                where = f"{word.group().decode()} at column {start}"
                return f"line {line}: a number is not finite ({where})"
            return f"line {line}: not valid JSON ({_syntax_problem(exc)} at column {column})"
        return "not valid JSON"  # pragma: no cover - a fault found once is found again

    def members(self) -> Iterator[tuple[str, int | None, Any, str | None]]:
        """The document's members: ``(key, None, value, duplicate)`` for each key but
        ``instances``, and ``("instances", i, instance, duplicate)`` for each instance when
        ``instances`` is a list (``duplicate``: a key named twice in one object of the
        value), after ``("instances", None, [], None)``. A document that is not an object
        yields ``("", None, value, None)``; a key it names twice is skipped (noted in
        ``twice``)."""
        events = self.events()
        event, value = next(events)
        if event != "start_map":
            yield "", None, _build(event, value, events, 0)[0], None
            for _ in events:  # the parser checks that nothing follows
                pass
            return
        seen: set[str] = set()
        for event, key in events:
            if event == "end_map":
                break
            event, value = next(events)
            if key in seen:
                _skip(event, events)
                if self._readings == 1:
                    self.twice.append(f"the key '{key}' appears twice in the document")
                continue
            seen.add(key)
            if key == "instances" and event == "start_array":
                yield key, None, [], None
                index = 0
                for event, value in events:
                    if event == "end_array":
                        break
                    item, duplicate = _build(event, value, events, 2)
                    yield key, index, item, duplicate
                    index += 1
                continue
            value, duplicate = _build(event, value, events, 1)
            yield key, None, value, duplicate
        for _ in events:
            pass

    def instances(self) -> Iterator[tuple[int, Any]]:
        """Each instance with its number."""
        for _key, index, item, _ in self.members():
            if index is not None:
                yield index, item


def _skip(event: str, events: Iterator[tuple[str, Any]]) -> None:
    """Consume the value that starts with ``event``, keeping nothing."""
    depth = 1 if event == "start_map" or event == "start_array" else 0
    while depth:
        event, _ = next(events)
        if event == "start_map" or event == "start_array":
            depth += 1
        elif event == "end_map" or event == "end_array":
            depth -= 1


def _build(
    event: str, value: Any, events: Iterator[tuple[str, Any]], depth: int
) -> tuple[Any, str | None]:
    """The value that starts with ``event`` (inside ``depth`` containers), built from the
    events that follow, and the first key named twice in one of its objects (or ``None``).
    Non-integral numbers become ``float`` (``1e999``: ``inf``, refused later as
    unstorable); nesting beyond ``MAX_DEPTH`` raises :class:`TooDeep`."""
    if event == "number":
        return (float(value) if isinstance(value, Decimal) else value), None
    if event != "start_map" and event != "start_array":
        return value, None
    root: Any = {} if event == "start_map" else []
    stack: list[Any] = []
    current, key, duplicate = root, None, None
    for event, value in events:
        if event == "map_key":
            if value in current and duplicate is None:
                duplicate = value
            key = value
            continue
        if event == "end_map" or event == "end_array":
            if not stack:
                return root, duplicate and f"the key '{duplicate}' appears twice in one object"
            current = stack.pop()
            continue
        if event == "start_map" or event == "start_array":
            if depth + len(stack) + 2 > MAX_DEPTH:
                raise TooDeep
            value = {} if event == "start_map" else []
        elif event == "number" and isinstance(value, Decimal):
            value = float(value)
        if type(current) is dict:
            current[key] = value
        else:
            current.append(value)
        if event == "start_map" or event == "start_array":
            stack.append(current)
            current = value
    raise BadJSON  # pragma: no cover - the parser ends every value it starts


def judged_properties(properties: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The judged properties declared in ``annotations``, by metric, and every fault of
    their declarations; :class:`ValueError` when the file declares none."""
    if not isinstance(properties, list) or not properties:
        raise ValueError("a Judge-Bench file declares its judged properties in 'annotations'")
    specs: dict[str, dict[str, Any]] = {}
    faults: list[str] = []
    for i, prop in enumerate(properties):
        where = f"annotations[{i}]"
        if not isinstance(prop, dict) or not isinstance(prop.get("metric"), str):
            faults.append(f"{where}: each judged property needs a 'metric' name")
            continue
        category = prop.get("category")
        if prop["metric"] in specs:
            faults.append(f"{where}: property '{prop['metric']}' is declared twice")
            continue
        if category == "categorical":
            if not isinstance(prop.get("labels_list"), list) or len(prop["labels_list"]) < 2:
                faults.append(f"{where} ('{prop['metric']}'): categorical needs a 'labels_list'")
                continue
        elif category in ("graded", "continuous"):
            if not all(finite_number(prop.get(k)) is not None for k in ("worst", "best")):
                faults.append(
                    f"{where} ('{prop['metric']}'): graded needs numeric 'worst' and 'best'"
                )
                continue
        else:
            faults.append(f"{where} ('{prop['metric']}'): unknown category {category!r}")
            continue
        specs[prop["metric"]] = prop
    return specs, faults


def human_scores(
    inst: dict[str, Any], where: str, add: Callable[[str], None]
) -> dict[str, tuple[Any, list[Any]]]:
    """An instance's human judgements: property → (majority, individual scores), the
    i-th score by annotator i; each fault goes to ``add`` (the one reader of the scores)."""
    raw = inst.get("annotations")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        add(f"{where}: 'annotations' must be an object mapping each property to scores")
        return {}
    judged = {}
    for metric, value in raw.items():
        if value is None:
            continue
        if not isinstance(value, dict):
            add(f"{where}: '{metric}' must be an object with 'individual_human_scores'")
            continue
        scores = value.get("individual_human_scores")
        if scores is None:
            scores = []
        if not isinstance(scores, list):
            add(f"{where}: '{metric}' 'individual_human_scores' must be a list")
            continue
        judged[metric] = (value.get("majority_human"), scores)
    return judged


def score_fits(score: Any, prop: dict[str, Any]) -> bool:
    """Whether a human score is one of the property's labels or on its scale."""
    if prop["category"] == "categorical":
        return str(score) in map(str, prop["labels_list"])
    if not isinstance(score, int | float) or isinstance(score, bool):
        return False
    low, high = sorted((prop["worst"], prop["best"]))
    return bool(low <= score <= high)


def label_preferences(prop: dict[str, Any]) -> dict[str, str | None]:
    """Each label of a categorical property -> the output it prefers (``A``/``B``/``tie``)."""
    return {str(label): preference_of(label) for label in prop["labels_list"]}


def load(data: bytes) -> Any:
    """The whole document, read through :class:`JudgeBenchFile` (strict JSON); a fault
    raises :class:`ValueError` naming its line and column."""
    document = JudgeBenchFile(lambda: [data])
    top: dict[str, Any] = {}
    try:
        for key, index, value, _ in document.members():
            if index is None:
                top.setdefault(key, value)
            else:
                top["instances"].append(value)
    except (BadJSON, TooDeep):
        raise ValueError(document.fault()) from None
    return top.get("", top)
