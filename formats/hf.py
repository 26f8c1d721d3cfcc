"""Hugging Face datasets in and out (pure: no Django; ``datasets`` is imported lazily).

In: :func:`open_rows` opens a dataset saved with ``save_to_disk``, a Parquet or JSON Lines
file, a directory in the Hub's layout (``data/*.parquet``, ``*.jsonl``, a repository
snapshot) or, with ``hub:owner/name``, a dataset on the Hub (network needed); the rows are
streamed. :func:`records` turns rows into the records of the JSONL study bundle, with a
column map such as ``input=prompt,outputs.m1=answer_a,id=qid``.

Out: :func:`save_labels` writes label rows, with the texts they judge, in the Hub's layout
(``data/*.parquet``) with a dataset card (``README.md``: YAML header and the study's
settings); ``datasets.load_dataset(DIR)`` reads it back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "HUB_PREFIX",
    "INSTALL_HINT",
    "MapError",
    "dataset_card",
    "label_features",
    "open_rows",
    "parse_map",
    "push_labels",
    "records",
    "require",
    "save_labels",
]

INSTALL_HINT = "Hugging Face datasets need the optional extra: pip install 'humeval[hf]'"
#: A source starting with this names a dataset on the Hub (``hub:owner/name``).
HUB_PREFIX = "hub:"
#: Bundle fields a column can fill; ``outputs.<system>`` and ``metadata.<key>`` too.
FIELDS = ("id", "input", "reference", "priority", "gold", "outputs", "metadata")


class MapError(ValueError):
    """A column map that does not fit the dataset: the message names the columns."""


def require() -> Any:
    """The ``datasets`` module; :class:`ImportError` with :data:`INSTALL_HINT` without it."""
    return _datasets()


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return datasets


def parse_map(text: str | None) -> dict[str, str]:
    """``field=column,...`` → ``{field: column}``; raises :class:`MapError` on a bad entry."""
    mapping: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        target, sep, column = part.partition("=")
        target, column = target.strip(), column.strip()
        base, dot, key = target.partition(".")
        if not sep or not column or not target:
            raise MapError(f"--map: '{part.strip()}' is not field=column")
        if base not in FIELDS or (dot and base not in ("outputs", "metadata")):
            raise MapError(
                f"--map: unknown field '{target}' (use {', '.join(FIELDS[:5])}, outputs.<system>, "
                "metadata.<key>, or outputs/metadata for a column of objects)"
            )
        if dot and not key:
            raise MapError(f"--map: '{target}' needs a name after the dot")
        if target in mapping:
            raise MapError(f"--map: field '{target}' is mapped twice")
        mapping[target] = column
    return mapping


def _is_saved(path: Path) -> bool:
    return (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()


def open_rows(
    source: str, split: str | None = None
) -> tuple[Iterable[dict[str, Any]], list[str], str]:
    """The rows (streamed), column names and a name of a dataset source (see the module
    docstring). Raises :class:`ImportError` without ``datasets``, :class:`ValueError` for a
    source that cannot be read."""
    ds = _datasets()
    if source.startswith(HUB_PREFIX):  # needs the network; not exercised by the tests
        repo = source.removeprefix(HUB_PREFIX)
        data = ds.load_dataset(repo, split=split or "train", streaming=True)
        return data, list(data.column_names or []), repo
    path = Path(source)
    if not path.exists():
        raise ValueError(f"no such file or directory: {source} (a Hub dataset is hub:owner/name)")
    if path.is_dir() and _is_saved(path):
        data = ds.load_from_disk(str(path))
        if isinstance(data, ds.DatasetDict):
            name = split or ("train" if "train" in data else next(iter(data)))
            if name not in data:
                raise ValueError(f"{source} has no split '{name}' (it has {', '.join(data)})")
            data = data[name]
        return data, list(data.column_names), path.name
    try:
        if path.is_dir():
            data = ds.load_dataset(str(path), split=split or "train", streaming=True)
        else:
            suffix = path.suffix.lower()
            builder = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}.get(suffix)
            if builder is None:
                raise ValueError(f"{source}: a dataset file is .parquet, .jsonl or .json")
            data = ds.load_dataset(
                builder, data_files=str(path), split=split or "train", streaming=True
            )
    except (FileNotFoundError, ds.exceptions.DatasetNotFoundError) as exc:
        raise ValueError(f"{source}: no dataset found ({exc})") from None
    columns = list(data.column_names or [])
    if not columns:  # a JSON Lines file without declared features: look at its first row
        first = next(iter(data), None)
        columns = list(first or {})
    return data, columns, path.stem if path.is_file() else path.name


def _resolve(mapping: Mapping[str, str], columns: list[str]) -> dict[str, str]:
    """The map completed with the columns named like bundle fields; a column it names
    that the dataset lacks raises :class:`MapError` naming the dataset's columns."""
    missing = [c for c in mapping.values() if c not in columns]
    if missing:
        raise MapError(
            f"--map names column(s) {', '.join(map(repr, missing))} the dataset does not have; "
            f"its columns are: {', '.join(columns)}"
        )
    full = dict(mapping)
    taken = set(mapping.values())
    for name in FIELDS:
        if (
            name in columns
            and name not in taken
            and not any(t == name or t.startswith(name + ".") for t in full)
        ):
            full[name] = name
    if not any(t == "outputs" or t.startswith("outputs.") for t in full):
        raise MapError(
            "no outputs: map each system's column with outputs.<system>=<column> "
            f"(the dataset's columns are: {', '.join(columns)})"
        )
    return full


def records(
    rows: Iterable[Mapping[str, Any]], mapping: Mapping[str, str], columns: list[str]
) -> Iterator[dict[str, Any]]:
    """JSONL bundle records, one per row (the map checked first; see :func:`_resolve`).
    A row without an ``id`` column is numbered from 0."""
    full = _resolve(mapping, columns)
    return _records(rows, full)


def _records(rows: Iterable[Mapping[str, Any]], full: dict[str, str]) -> Iterator[dict[str, Any]]:
    for number, row in enumerate(rows):
        record: dict[str, Any] = {}
        for target, column in full.items():
            base, _, key = target.partition(".")
            value = row.get(column)
            if key:
                if value is not None:
                    record.setdefault(base, {})[key] = value
            elif value is not None:
                record[base] = value
        record.setdefault("id", number)
        yield record


def write_bundle(
    out: BinaryIO, recs: Iterable[dict[str, Any]], study: Mapping[str, Any] | None = None
) -> int:
    """Write the records as JSONL bundle lines to the binary file ``out``; the count."""
    n = 0
    if study:
        out.write(json.dumps({"study": dict(study)}, ensure_ascii=False).encode() + b"\n")
    for record in recs:
        out.write(json.dumps(record, ensure_ascii=False, default=str).encode() + b"\n")
        n += 1
    return n


# --- out ----------------------------------------------------------------------------------------
#: Where :func:`save_labels` writes the rows, in the Hub's layout (the card's ``data_files``).
DATA_FILE = "data/train-00000-of-00001.parquet"
#: A message of a conversation, as imported.
MESSAGES = [{"role": "string", "content": "string"}]
#: The columns of the label export (``formats.labels.LABEL_FIELDS``) by type; ``scores`` (an
#: object whose values are numbers or labels) is JSON text, so any criterion keeps its values.
LABEL_TYPES: dict[str, Any] = {
    "annotation_id": "int64",
    "study_id": "int64",
    "study_config_version": "int64",
    "guideline_revision": "int64",
    "item_id": "int64",
    "input_id": "string",
    "round": "int64",
    "is_gold": "bool",
    "system_a": "string",
    "system_b": "string",
    "left_system": "string",
    "raw_answer": "string",
    "label": "string",
    "preferred_system": "string",
    "scores": "string",
    "annotator": "string",
    "source": "string",
    "time_spent_ms": "int64",
    "submitted_at": "string",
    "flagged": "bool",
}
#: The texts each row carries, so a published dataset stands on its own: the input (a
#: conversation's messages too) and the item's outputs in system order.
TEXT_TYPES: dict[str, Any] = {
    "input": "string",
    "input_messages": MESSAGES,
    "outputs": [{"system": "string", "text": "string", "messages": MESSAGES}],
}


def _feature(ds: Any, spec: Any) -> Any:
    """A type as kinds declare it (``Kind.export_types``) as a ``datasets`` feature."""
    if isinstance(spec, str):
        return ds.Value(spec)
    if isinstance(spec, list):
        return [_feature(ds, spec[0])]
    return {key: _feature(ds, value) for key, value in spec.items()}


def label_features(ds: Any, kind_types: Mapping[str, Any]) -> Any:
    """The features of the label rows: the export's columns, the kind's own, the texts."""
    types = {**LABEL_TYPES, **kind_types, **TEXT_TYPES}
    return ds.Features({name: _feature(ds, spec) for name, spec in types.items()})


def _hf_rows(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for row in rows:
        scores = row.get("scores")
        yield {**row, "scores": None if scores is None else json.dumps(scores, ensure_ascii=False)}


def dataset_card(settings: Mapping[str, Any], n_rows: int) -> str:
    """README.md of an exported study: a YAML header (for the Hub and ``load_dataset``: the
    rows are ``data/*.parquet``, one ``train`` split) and the settings."""
    import yaml  # PyYAML comes with datasets

    header = {
        "pretty_name": str(settings.get("name") or "humeval labels"),
        "tags": ["human-evaluation", "humeval", str(settings.get("kind") or "")],
        "size_categories": ["n<1K"]
        if n_rows < 1000
        else ["1K<n<10K"]
        if n_rows < 10_000
        else ["10K<n<100K"]
        if n_rows < 100_000
        else ["100K<n<1M"]
        if n_rows < 1_000_000
        else ["n>1M"],
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": "train", "path": "data/*.parquet"}],
            }
        ],
        "humeval": dict(settings),
    }
    lines = [
        "---",
        yaml.safe_dump(header, allow_unicode=True, sort_keys=False).rstrip(),
        "---",
        "",
        f"# {header['pretty_name']}",
        "",
        f"{n_rows} human labels exported from humeval, one row per label with its provenance "
        "(the columns of `export_labels --format jsonl`, with the kind's own columns; `scores` "
        "is a JSON object per Likert label) and the texts judged: `input` (and "
        "`input_messages` when the input is a conversation) and `outputs`, the item's "
        "outputs in system order, each with its `system`, `text` and, for a conversation, "
        "`messages`.",
        "",
        "## Study settings",
        "",
    ]
    for key, value in settings.items():
        shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
        lines.append(f"- **{key}**: {shown}")
    return "\n".join(lines) + "\n"


def save_labels(
    rows: Iterable[dict[str, Any]],
    directory: str | Path,
    settings: Mapping[str, Any],
    kind_types: Mapping[str, Any] | None = None,
) -> Any:
    """Write the label rows (label export rows with the texts, :data:`TEXT_TYPES`) as
    ``directory/data/*.parquet`` and the card ``directory/README.md``, the layout of a
    dataset on the Hub, which ``datasets.load_dataset(directory)`` reads back; returns the
    dataset. ``kind_types``: the kind's own columns (``Kind.export_types``)."""
    ds = _datasets()
    features = label_features(ds, kind_types or {})
    listed = list(_hf_rows(rows))
    columns = {name: [row.get(name) for row in listed] for name in features}
    data = ds.Dataset.from_dict(columns, features=features)
    directory = Path(directory)
    target = directory / DATA_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    data.to_parquet(str(target))
    (directory / "README.md").write_text(dataset_card(settings, len(data)), encoding="utf-8")
    return data


def push_labels(data: Any, repo: str, card: str) -> None:
    """Push the dataset and its card to the Hub repository ``repo`` (needs the network and
    a token; not exercised by the tests)."""
    from huggingface_hub import DatasetCard

    data.push_to_hub(repo)
    DatasetCard(card).push_to_hub(repo)
