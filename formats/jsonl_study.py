"""A study bundle in JSON Lines read as a study: an optional ``{"study": {…}}`` first line,
then one input per line (docs/import-formats.md). Pure: the study line's options are read
by the caller's ``study_options`` (they need the kinds and the languages)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from formats import conversation
from formats.bundle import finite_number, study_jsonl
from formats.specs import (
    Config,
    Errors,
    Index,
    Inputs,
    InputSpec,
    StudySpec,
    assemble,
    line_of,
)
from formats.stream import Stream

#: Reads a study line's ``"study"`` object (``raw``, ``where`` it is) into its options
#: (its criteria among the kind's options) and declared systems, naming each fault in
#: ``errors``.
StudyOptions = Callable[[Any, str, Errors], tuple[dict[str, Any], list[str]]]


def _jsonl_objects(stream: Stream, errors: Errors) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Each line with text, with where it is: the storable JSON object it holds, or
    ``None`` when it holds none (named in ``errors``; see :func:`formats.bundle.study_jsonl`)."""
    for where, record in study_jsonl(stream.lines()):
        if isinstance(record, str):
            errors.add(f"{where}: {record}")
            yield where, None
            continue
        yield where, record


def scan_jsonl(
    stream: Stream, config: Config, errors: Errors, study_options: StudyOptions
) -> tuple[StudySpec, Index]:
    """Validate every line of a JSON Lines bundle; its inputs are read again when iterated."""
    options: dict[str, Any] = {}
    declared: list[str] = []
    index = Index()
    seen_study = False
    for where, record in _jsonl_objects(stream, errors):
        if record is None:
            # a broken first line may have been the study line: its options are unknown
            index.options_known = index.options_known and (seen_study or bool(index.ids))
            continue
        if "study" in record:
            if index.valid or seen_study:
                errors.add(f"{where}: the 'study' line must come first, once")
            seen_study = True
            options, declared = study_options(record["study"], where, errors)
            continue
        before = errors.total
        parsed = _input_record(record, where, errors)
        if parsed is not None:
            # a record with a fault named already gets no second message about its outputs
            outputs = parsed.outputs if errors.total == before else None
            index.add(parsed.external_id, line_of(where), outputs, parsed.is_gold)
            if parsed.gold is not None and outputs is not None:
                index.golds.append((parsed.where, parsed))
            if parsed.messages:
                index.conversations.append((parsed.where, sorted(parsed.messages)))
        elif _valid_id(ident := record.get("id")):
            index.add(str(ident), line_of(where), None)
    kind_options = {**options.get("options", {}), **config.options.get("options", {})}
    study = {**options, **config.options} | ({"options": kind_options} if kind_options else {})
    inputs = Inputs(lambda: _jsonl_inputs(stream), index.valid)
    return assemble(
        study,
        [],
        declared if config.systems is None else config.systems,
        inputs,
        index=index,
    ), index


def _jsonl_inputs(stream: Stream) -> Iterator[InputSpec]:
    """The inputs of a JSONL file already validated (``study``: its study options)."""
    errors = Errors()
    for where, record in _jsonl_objects(stream, errors):
        if record and "study" not in record:
            if parsed := _input_record(record, where, errors):
                yield parsed


def _valid_id(ident: Any) -> bool:
    return isinstance(ident, str | int) and not isinstance(ident, bool) and str(ident) != ""


def _input_record(record: dict[str, Any], where: str, errors: Errors) -> InputSpec | None:
    """One input line (its ``"gold"`` is read by the study's kind later, see
    :func:`expected_of`). An ``input`` or output may be a conversation
    (:mod:`formats.conversation`)."""
    ident = record.get("id")
    if not _valid_id(ident):
        errors.add(f"{where}: missing 'id' (a string or number naming the input)")
        return None
    where = f"{where} (input '{ident}')"
    outputs = record.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        errors.add(
            f"{where}: missing 'outputs' (an object mapping system name to output text "
            "or conversation)"
        )
        return None
    texts: dict[str, str] = {}
    messages: dict[str, list[dict[str, str]]] = {}
    bad = False
    for name, out in outputs.items():
        if conversation.is_conversation(out):
            try:
                messages[str(name)] = conversation.validate(
                    out, f"{where}: output of system '{name}'", output=True
                )
            except conversation.ConversationError as exc:
                for message in exc.messages:
                    errors.add(message)
                bad = True
                continue
            texts[str(name)] = conversation.to_text(messages[str(name)])
        elif not isinstance(out, str) or not out.strip():
            errors.add(f"{where}: output of system '{name}' is empty or not text")
            bad = True
        else:
            texts[str(name)] = out
    text = record.get("input", "")
    turns = None
    if conversation.is_conversation(text):
        try:
            turns = conversation.validate(text, f"{where}: 'input'")
        except conversation.ConversationError as exc:
            for message in exc.messages:
                errors.add(message)
        text = conversation.to_text(turns or [])
    elif not isinstance(text, str):
        errors.add(f"{where}: 'input' must be text or a conversation (a list of messages)")
        text = ""
    priority = record.get("priority")
    if priority is not None and (priority := finite_number(priority)) is None:
        errors.add(f"{where}: 'priority' must be a finite number")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        errors.add(f"{where}: 'metadata' must be an object")
        metadata = {}
    if turns:
        metadata = {**metadata, "conversation": turns}
    reference = record.get("reference", "") or ""
    if not isinstance(reference, str):
        errors.add(f"{where}: 'reference' must be text")
        reference = ""
    gold = record.get("gold")
    if bad:
        return None
    return InputSpec(
        external_id=str(ident),
        text=text,
        outputs=texts,
        where=where,
        reference=reference,
        priority=priority,
        metadata=metadata,
        is_gold=gold is not None,
        gold=gold,
        messages=messages,
    )


# --- assembly and cross-record checks ----------------------------------------------------------
