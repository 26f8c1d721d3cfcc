"""A Judge-Bench file read as a study: pairwise when every instance has
``output_a``/``output_b``, else a Likert study with one criterion per judged property; the
human scores become pre-existing annotations. The JSON itself is streamed by
:mod:`formats.judgebench`; this module turns its members into a :class:`StudySpec` and an
:class:`Index`, naming every fault. Pure (no Django).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from formats import judgebench
from formats.bundle import unstorable
from formats.specs import (
    MAX_ERRORS,
    AnnotationSpec,
    Config,
    CriterionSpec,
    Errors,
    Index,
    Inputs,
    InputSpec,
    StudySpec,
    assemble,
)
from formats.stream import Rejected, Stream
from formats.vocab import preference_of

#: The pairwise answer for a tie (``annotator.choices.Preference.TIE``).
TIE = "tie"
_PAIR = frozenset(("output_a", "output_b"))


def scan_judgebench(stream: Stream, config: Config, errors: Errors) -> tuple[StudySpec, Index]:
    """A Judge-Bench file in three readings of the stream: the document's members other
    than ``instances`` and the shape of every instance (is it pairwise?); then each
    instance is checked; ``spec.inputs`` reads them again when iterated. Only the
    members other than ``instances``, the labels and a compact index are kept."""
    document = judgebench.JudgeBenchFile(stream.chunks, MAX_ERRORS)
    top: dict[str, Any] = {}
    count, paired = 0, True
    try:
        for key, number, value, duplicate in document.members():
            where = f"'{key}'" if number is None else f"instances[{number}]"
            if duplicate:
                errors.add(f"{where}: {duplicate}")
            if bad := unstorable(value):
                errors.add(f"{where}: {bad}")
            if number is None:
                top.setdefault(key, value)
                continue
            count += 1
            body = value.get("instance") if isinstance(value, dict) else None
            paired = paired and isinstance(body, dict) and {"output_a", "output_b"} <= body.keys()
    except (judgebench.BadJSON, judgebench.TooDeep):
        raise Rejected([document.fault()]) from None
    for message in document.twice + document.lone:
        errors.add(message)
    if "" in top or not isinstance(top.get("instances"), list):
        raise Rejected(["a Judge-Bench file is an object with an 'instances' list"])
    if config.criteria is not None or config.systems is not None:
        raise Rejected(["config: a Judge-Bench file sets its own criteria and systems"])
    specs = _judged_properties(top.get("annotations"), errors)
    paired = paired and count > 0
    name = str(top.get("dataset") or "Judge-Bench import")
    options: dict[str, Any] = {"name": name, "description": str(top.get("dataset_url") or "")}
    criteria: list[CriterionSpec] = []
    read: InstanceReader | None
    if paired:
        read, allow_tie = _pairwise_reader(specs, errors)
        prompt = next(iter(specs.values())).get("prompt", "")
        options |= {"kind": "pairwise", "allow_tie": allow_tie}
        if prompt and isinstance(prompt, str):
            options["instructions"] = _prompt_as_instructions(prompt)
        declared = ["output_a", "output_b"]
    else:
        read, criteria = _likert_reader(specs, errors)
        options |= {"kind": "likert"}
        declared = ["response"]
    index = Index("instances[{}]", "instances[{}] (id '{}')")
    annotations: list[AnnotationSpec] = []
    if read is not None:
        seen: dict[str, int] = {}
        try:
            for place, inst in document.instances():
                record = read(place, inst, errors, annotations, seen)
                if record is not None and seen[record.external_id] == place:
                    index.add(record.external_id, place, record.outputs, record.is_gold)
        except (judgebench.BadJSON, judgebench.TooDeep):  # pragma: no cover - changed under us
            raise Rejected([document.fault()]) from None

    def inputs() -> Iterator[InputSpec]:
        assert read is not None  # spec.inputs is read only once the file is valid
        scratch = Errors()
        for place, inst in document.instances():
            if (record := read(place, inst, scratch, None, None)) is not None:
                yield record

    spec = assemble(
        {**options, **config.options}, criteria, declared, Inputs(inputs, index.valid), annotations
    )
    return spec, index


def _judged_properties(properties: Any, errors: Errors) -> dict[str, dict[str, Any]]:
    """The judged properties declared in ``annotations``, by metric; a file whose
    properties have a fault is refused here (its instances are checked against them)."""
    try:
        specs, faults = judgebench.judged_properties(properties)
    except ValueError as exc:
        raise Rejected([str(exc)]) from None
    for fault in faults:
        errors.add(fault)
    if faults:
        raise Rejected(list(errors))
    return specs


def _prompt_as_instructions(prompt: str) -> str:
    """The judge prompt without its template slots, as worker instructions."""
    return re.sub(r"\{\{.*?\}\}", "…", prompt).strip()


def _instance_id(
    inst: dict[str, Any], index: int, seen: dict[str, int] | None, errors: Errors
) -> str:
    raw = inst.get("id", index)
    if not isinstance(raw, str | int) or isinstance(raw, bool) or str(raw) == "":
        errors.add(f"instances[{index}]: 'id' must be text or a whole number")
    ident = str(raw)
    if seen is None:
        return ident
    if ident in seen:
        errors.add(
            f"instances[{index}]: duplicate id '{ident}' (first at instances[{seen[ident]}])"
        )
    seen.setdefault(ident, index)
    return ident


#: Reads one instance: (its number, the instance, errors, labels to add to or ``None``,
#: ids seen by number or ``None``) → its input, or ``None`` when it has a fault.
InstanceReader = Callable[
    [int, Any, Errors, list[AnnotationSpec] | None, dict[str, int] | None], InputSpec | None
]


def _pairwise_reader(
    specs: dict[str, dict[str, Any]], errors: Errors
) -> tuple[InstanceReader | None, bool]:
    """Reads the instances of a pairwise file (``output_a``/``output_b``), whose one
    categorical property's labels each prefer A, B or neither."""
    if len(specs) != 1 or next(iter(specs.values()))["category"] != "categorical":
        errors.add("a pairwise Judge-Bench file must judge exactly one categorical property")
        return None, False
    metric, prop = next(iter(specs.items()))
    labels = [str(x) for x in prop["labels_list"]]
    mapping = {label: preference_of(label) for label in labels}
    unmapped = [label for label, pref in mapping.items() if pref is None]
    if unmapped:
        errors.add(f"'{metric}': cannot tell which output label(s) {unmapped} prefer")
        return None, False

    def read(
        index: int,
        inst: Any,
        errors: Errors,
        annotations: list[AnnotationSpec] | None,
        seen: dict[str, int] | None,
    ) -> InputSpec | None:
        ident = _instance_id(inst, index, seen, errors)
        body = inst["instance"]
        where = f"instances[{index}] (id '{ident}')"
        outs = {"output_a": body["output_a"], "output_b": body["output_b"]}
        if not all(isinstance(v, str) and v.strip() for v in outs.values()):
            errors.add(f"{where}: output_a and output_b must be non-empty text")
            return None
        if not isinstance(body.get("input", ""), str):
            errors.add(f"{where}: 'input' must be text")
            return None
        majority, scores = judgebench.human_scores(inst, where, errors.add).get(metric, (None, []))
        for position, score in enumerate(scores):
            if score is None:
                continue
            if str(score) not in mapping:
                errors.add(f"{where}: human score {score!r} is not in labels_list {labels}")
                continue
            if annotations is not None:
                annotations.append(
                    AnnotationSpec(ident, str(position), value=str(mapping[str(score)]))
                )
        extra = {k: v for k, v in body.items() if k not in ("input", "output_a", "output_b")}
        return InputSpec(
            ident,
            body.get("input", ""),
            outs,
            where,
            metadata=extra,
            expected={"value": mapping[str(majority)]}
            if majority is not None and mapping.get(str(majority))
            else {},
        )

    return read, any(pref == TIE for pref in mapping.values())


_OUTPUT_KEYS = ("output", "response", "hypothesis", "summary", "candidate", "text")
_INPUT_KEYS = ("input", "source", "context", "instruction", "question", "prompt")


def _likert_reader(
    specs: dict[str, dict[str, Any]], errors: Errors
) -> tuple[InstanceReader, list[CriterionSpec]]:
    """Reads the instances of a file that judges one output each: a criterion per
    property (labels, or a scale of 2 to 21 whole points)."""
    criteria = []
    for metric, prop in specs.items():
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", metric)[:60] or "property"
        if prop["category"] == "categorical":
            criteria.append(
                CriterionSpec(name, metric, labels=[str(x) for x in prop["labels_list"]])
            )
        else:
            low, high = sorted((prop["worst"], prop["best"]))
            if int(low) != low or int(high) != high or not 0 < high - low <= 20:
                errors.add(f"'{metric}': graded scale {low}–{high} must be 2 to 21 whole points")
                continue
            criteria.append(
                CriterionSpec(
                    name,
                    metric,
                    int(low),
                    int(high),
                    {str(int(prop["worst"])): "worst", str(int(prop["best"])): "best"},
                )
            )
    by_metric = {c.label: c.name for c in criteria}

    def read(
        index: int,
        inst: Any,
        errors: Errors,
        annotations: list[AnnotationSpec] | None,
        seen: dict[str, int] | None,
    ) -> InputSpec | None:
        if not isinstance(inst, dict):
            errors.add(f"instances[{index}]: each instance must be an object")
            return None
        ident = _instance_id(inst, index, seen, errors)
        where = f"instances[{index}] (id '{ident}')"
        body = inst.get("instance")
        if isinstance(body, str):
            text, output, extra = "", body, {}
        elif isinstance(body, dict):
            out_key = next((k for k in _OUTPUT_KEYS if isinstance(body.get(k), str)), None)
            in_key = next((k for k in _INPUT_KEYS if isinstance(body.get(k), str)), None)
            if out_key is None:
                errors.add(f"{where}: no output text (one of {', '.join(_OUTPUT_KEYS)})")
                return None
            text, output = (body[in_key] if in_key else ""), body[out_key]
            extra = {k: v for k, v in body.items() if k not in (in_key, out_key)}
        else:
            errors.add(f"{where}: 'instance' must be text or an object")
            return None
        if not output.strip():
            errors.add(f"{where}: the judged text is empty")
            return None
        per_position: dict[int, dict[str, Any]] = {}
        for metric, (_, scores) in judgebench.human_scores(inst, where, errors.add).items():
            if metric not in by_metric:
                errors.add(f"{where}: property '{metric}' is not declared in 'annotations'")
                continue
            for position, score in enumerate(scores):
                if score is None:
                    continue
                if not judgebench.score_fits(score, specs[metric]):
                    errors.add(
                        f"{where}: '{metric}' score {score!r} is outside its scale or labels"
                    )
                    continue
                per_position.setdefault(position, {})[by_metric[metric]] = score
        if annotations is not None:
            annotations += [
                AnnotationSpec(ident, str(position), scores=scores)
                for position, scores in sorted(per_position.items())
            ]
        return InputSpec(ident, text, {"response": output}, where, metadata=extra)

    return read, criteria
