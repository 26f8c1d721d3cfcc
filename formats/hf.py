"""Hugging Face datasets in and out (pure: no Django; ``datasets`` is imported lazily).

In: :func:`open_rows` opens a dataset saved with ``save_to_disk``, a Parquet or JSON Lines
file, a directory in the Hub's layout (``data/*.parquet``, ``*.jsonl``, a repository
snapshot) or, with ``hub:owner/name``, a dataset on the Hub (network needed); the rows are
streamed. :func:`records` turns rows into the records of the JSONL study bundle, with a
column map such as ``input=prompt,outputs.m1=answer_a,id=qid``.

Out: :func:`save_labels` writes label rows as a ``datasets.Dataset`` with ``save_to_disk``
and a dataset card (``README.md``: YAML header and the study's settings).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "HUB_PREFIX",
    "INSTALL_HINT",
    "MapError",
    "dataset_card",
    "open_rows",
    "parse_map",
    "push_labels",
    "records",
    "save_labels",
]

INSTALL_HINT = "Hugging Face datasets need the optional extra: pip install 'humeval[hf]'"
#: A source starting with this names a dataset on the Hub (``hub:owner/name``).
HUB_PREFIX = "hub:"
#: Bundle fields a column can fill; ``outputs.<system>`` and ``metadata.<key>`` too.
FIELDS = ("id", "input", "reference", "priority", "gold", "outputs", "metadata")


class MapError(ValueError):
    """A column map that does not fit the dataset: the message names the columns."""


def _datasets():
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


def open_rows(source: str, split: str | None = None) -> tuple[Iterable[dict], list[str], str]:
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


def records(rows: Iterable[Mapping[str, Any]], mapping: Mapping[str, str], columns: list[str]):
    """JSONL bundle records, one per row (the map checked first; see :func:`_resolve`).
    A row without an ``id`` column is numbered from 0."""
    full = _resolve(mapping, columns)
    return _records(rows, full)


def _records(rows: Iterable[Mapping[str, Any]], full: dict[str, str]) -> Iterator[dict]:
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


def write_bundle(out, recs: Iterable[dict], study: Mapping[str, Any] | None = None) -> int:
    """Write the records as JSONL bundle lines to the binary file ``out``; the count."""
    n = 0
    if study:
        out.write(json.dumps({"study": dict(study)}, ensure_ascii=False).encode() + b"\n")
    for record in recs:
        out.write(json.dumps(record, ensure_ascii=False, default=str).encode() + b"\n")
        n += 1
    return n


# --- out ----------------------------------------------------------------------------------------
def _label_features(ds):
    """Column types of the label rows; ``scores`` (an object whose values are numbers or
    labels) is stored as JSON text, so any criterion keeps its values."""
    v = ds.Value
    return ds.Features(
        {
            "annotation_id": v("int64"),
            "study_id": v("int64"),
            "study_config_version": v("int64"),
            "item_id": v("int64"),
            "input_id": v("string"),
            "round": v("int64"),
            "is_gold": v("bool"),
            "system_a": v("string"),
            "system_b": v("string"),
            "left_system": v("string"),
            "raw_answer": v("string"),
            "label": v("string"),
            "preferred_system": v("string"),
            "scores": v("string"),
            "annotator": v("string"),
            "source": v("string"),
            "time_spent_ms": v("int64"),
            "submitted_at": v("string"),
            "flagged": v("bool"),
        }
    )


def _hf_rows(rows: Iterable[dict]) -> Iterator[dict]:
    for row in rows:
        scores = row.get("scores")
        yield {**row, "scores": None if scores is None else json.dumps(scores, ensure_ascii=False)}


def dataset_card(settings: Mapping[str, Any], n_rows: int) -> str:
    """README.md of an exported study: a YAML header (for the Hub) and the settings."""
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
        "configs": [{"config_name": "default", "data_files": "data/*"}],
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
        "(the columns of `export_labels --format jsonl`; `scores` is a JSON object per Likert "
        "label).",
        "",
        "## Study settings",
        "",
    ]
    for key, value in settings.items():
        shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
        lines.append(f"- **{key}**: {shown}")
    return "\n".join(lines) + "\n"


def save_labels(rows: Iterable[dict], directory: str | Path, settings: Mapping[str, Any]):
    """Write the label rows with ``Dataset.save_to_disk(directory)`` and the card
    ``directory/README.md``; returns the dataset."""
    ds = _datasets()
    data = ds.Dataset.from_list(list(_hf_rows(rows)), features=_label_features(ds))
    directory = Path(directory)
    data.save_to_disk(str(directory))
    (directory / "README.md").write_text(dataset_card(settings, len(data)), encoding="utf-8")
    return data


def push_labels(data, repo: str, card: str) -> None:
    """Push the dataset and its card to the Hub repository ``repo`` (needs the network and
    a token; not exercised by the tests)."""
    from huggingface_hub import DatasetCard

    data.push_to_hub(repo)
    DatasetCard(card).push_to_hub(repo)
