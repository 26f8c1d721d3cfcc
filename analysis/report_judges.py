"""The report's figures about labellers (:mod:`analysis.report`): human vs judge, judge
baselines, worker-weighted labels and perception charts."""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis import agreement, judges, perception
from analysis.aggregation import (
    CROWD_KIT_MISSING,
    crowd_kit_available,
    dawid_skene,
    mace,
    majority_vote,
)
from analysis.counts import LabelCounts
from analysis.properties import Property
from analysis.report_base import ReportOptions, estimate_dict, frame_records, json_safe

# --------------------------------------------------------------------------------------------
# Human vs judge
# --------------------------------------------------------------------------------------------


def judge_figures(
    lc: LabelCounts, name: str, prop: Property, opts: ReportOptions
) -> dict[str, Any]:
    """Human vs one judge: outer leave-one-out agreement (HREF Algorithm 1), Cohen's kappa vs
    the human majority (nominal) or rank/linear correlations with the human median (ordinal)
    (Judge-Bench Section 4), binned JSD (Beyond Correlation Eq. 1-2) and the stratified
    HH/HM table (Beyond Correlation Section 3.1)."""
    kw = opts.kw
    jc = lc.judges[name]
    both = (lc.human.sum(axis=1) > 0) & (jc.sum(axis=1) > 0)
    out: dict[str, Any] = {
        "judge": name,
        "n_items": int(both.sum()),
        "n_labels": int(jc.sum()),
        "loo_outer": estimate_dict(
            agreement.loo_agreement_outer(lc, judge=name, **kw),
            metric="loo_outer",
            source="HREF Appendix D.4, Algorithm 1 (outer)",
        ),
    }
    if prop.scale == "ordinal":
        corr = pd.concat(
            [
                judges.judge_correlations(lc, judge=name, aggregate=how, **kw)
                for how in ("median", "mean")
            ],
            ignore_index=True,
        )
        out["correlations"] = frame_records(corr)
        out["correlations_source"] = (
            "human median and mean vs judge label per item, two-sided p-values "
            "(Judge-Bench Section 4; scipy.stats)"
        )
    else:
        vs = judges.judge_vs_majority(lc, judge=name, **kw)
        out["vs_majority"] = frame_records(vs)
        out["vs_majority_source"] = "judge vs human majority; Cohen 1960 (Judge-Bench Section 4)"
    binning = "median" if prop.scale == "ordinal" else "mode"
    jsd = perception.binned_jsd(lc, judge=name, binning=binning, **kw)
    bins = frame_records(jsd.bins)
    out["binned_jsd"] = {
        **estimate_dict(jsd.estimate, metric="binned_jsd", binning=binning),
        "source": "Beyond Correlation Section 3.2, Eq. 1-2 (JS distance, Appendix A.7)",
        "bins": bins,
    }
    level = "ordinal" if prop.scale == "ordinal" else "nominal"
    strat = judges.stratified_agreement(lc, judge=name, level=level, **kw)
    out["stratified"] = {
        "level": level,
        "by": "percentage_agreement",
        "source": "Beyond Correlation Section 3.1 (HH vs HM per stratum of human agreement)",
        "rows": frame_records(strat),
    }
    return out


def judges_extra_figures(
    lc: LabelCounts, jud: pd.DataFrame | None, prop: Property, opts: ReportOptions
) -> dict[str, Any]:
    """Baselines for the judges: a random labeller's expected agreement (Beyond Correlation
    Fig. 1-2) and the agreement among each judge's samples (machine vs machine)."""
    kw = opts.kw
    random_rows = pd.concat(
        [judges.random_labeller(lc, distribution=d, **kw) for d in ("human", "uniform")],
        ignore_index=True,
    )
    out: dict[str, Any] = {
        "random_labeller": frame_records(random_rows),
        "random_source": "Beyond Correlation Section 3.1, Fig. 1-2 (closed-form expectation)",
    }
    if jud is None or not len(jud):
        out["samples_reason"] = "no judge labels for this property"
        return out
    level = "ordinal" if prop.scale == "ordinal" else "nominal"
    samples = judges.judge_sample_agreement(jud, labels=list(prop.labels), level=level, **kw)
    out["samples"] = frame_records(samples)
    out["samples_source"] = (
        f"several samples of one judge per item as raters: percentage agreement (A.4 Eq. 3), "
        f"Krippendorff's alpha ({level}) (Beyond Correlation Section 2)"
    )
    return out


WORKER_MODELS_OFF = (
    "not computed: ask for worker-weighted labels (the report page's option, the API's "
    "worker_models=true, the CLI's --worker-models); a few seconds on a few hundred labels"
)


def workers_figures(ann: pd.DataFrame, lc: LabelCounts, opts: ReportOptions) -> dict[str, Any]:
    """Dawid-Skene and MACE labels beside the majority, with each worker's reliability."""
    if not opts.worker_models:
        return {"reason": WORKER_MODELS_OFF}
    if not (lc.human.sum(axis=1) >= 2).any():
        return {"reason": "no item has two or more labels: a worker's reliability cannot be told"}
    if not crowd_kit_available():
        return {"reason": CROWD_KIT_MISSING}
    maj = majority_vote(lc)
    unique = maj.loc[~maj["tied"]].set_index("item")["label"].astype(object)
    models = {
        "dawid_skene": ("Dawid-Skene", "Dawid & Skene 1979", dawid_skene(ann)),
        "mace": ("MACE", "Hovy et al. 2013 (crowd-kit)", mace(ann, seed=opts.seed)),
    }
    methods, reliab = [], {}
    for key, (title, source, model) in models.items():
        got = model.labels.set_index("item")["label"]
        both = unique.index.intersection(got.index)
        same = (
            float((got.loc[both].astype(object) == unique.loc[both]).mean()) if len(both) else None
        )
        counts = got.value_counts()
        methods.append(
            {
                "method": key,
                "title": title,
                "source": source,
                "n_items": int(len(got)),
                "agreement_with_majority": same,
                "items_with_majority": int(len(both)),
                "distribution": [
                    {"label": lab, "count": int(counts.get(lab, 0))} for lab in lc.labels
                ],
            }
        )
        reliab[key] = model.workers.set_index("worker")
    n = reliab["dawid_skene"]["n_labels"]
    workers = [
        {
            "worker": w,
            "n_labels": int(n[w]),
            "dawid_skene": float(reliab["dawid_skene"].at[w, "reliability"]),
            "mace": float(reliab["mace"].at[w, "reliability"]),
        }
        for w in n.index
    ]
    workers.sort(key=lambda r: (r["dawid_skene"], r["worker"]))
    return {
        "methods": methods,
        "workers": workers,
        "reliability": "Dawid-Skene: prior-weighted diagonal of the worker's confusion matrix; "
        "MACE: posterior probability that the worker is not spamming",
    }


# --------------------------------------------------------------------------------------------
# Perception charts
# --------------------------------------------------------------------------------------------


def _chart_dict(frame: pd.DataFrame, labels: list) -> dict[str, Any]:
    """Tidy chart frame (bin, bin_items, bin_share, source, label, count, proportion) -> bins
    with per-source count and proportion vectors over ``labels``."""
    bins = []
    k = len(labels)
    sources = list(pd.unique(frame["source"]))
    n_bins = len(frame) // (k * len(sources)) if len(frame) else 0
    for b in range(n_bins):  # frames are ordered by source, then bin, then label
        entry: dict[str, Any] = {"sources": []}
        for s_idx, source in enumerate(sources):
            start = (s_idx * n_bins + b) * k
            block = frame.iloc[start : start + k]
            if s_idx == 0:
                entry["bin"] = json_safe(block["bin"].iloc[0])
                entry["items"] = float(block["bin_items"].iloc[0])
                entry["share"] = float(block["bin_share"].iloc[0])
                entry["reason"] = "" if entry["items"] > 0 else "no items in this bin"
            entry["sources"].append(
                {
                    "source": str(source),
                    "counts": [float(x) for x in block["count"]],
                    "proportions": [float(x) for x in block["proportion"]],
                }
            )
        bins.append(entry)
    return {"labels": json_safe(labels), "bins": bins}


def perception_figures(
    lc: LabelCounts, lc_pw: LabelCounts | None, prop: Property
) -> dict[str, Any]:
    if prop.bins:
        names = prop.bin_names
        frame = perception.binned_perception_chart(lc, prop.bin_matrix(), names)
        out = _chart_dict(frame, names)
        out["binning"] = "the bin of the human median score (split ties 1/2-1/2)"
        out["source"] = "Beyond Correlation Section 3.3.1, Fig. 3"
    elif prop.scale == "ordinal":
        frame = perception.ordinal_perception_chart(lc)
        out = _chart_dict(frame, list(lc.labels))
        out["binning"] = "human median (split ties 1/2-1/2)"
        out["source"] = "Beyond Correlation Section 3.3.1, Fig. 3"
    elif prop.scale == "pairwise":
        frame = perception.pairwise_perception_chart(lc_pw)
        out = _chart_dict(frame, ["A", "B", "tie"])
        out["binning"] = "human majority A / B / tie (equal votes: tie)"
        out["source"] = "Beyond Correlation Section 3.3.2, Fig. 4"
    else:
        if not lc.judges:
            return {"reason": "no judge labels: the perception chart compares humans and judges"}
        keys, w = perception.bin_weights(lc.human, lc.labels, "mode", "split")
        size = w.sum(axis=0)
        bins = []
        for b, key in enumerate(keys):  # pooled distributions per human-majority bin
            sources = []
            for source, counts in {"human": lc.human, **lc.judges}.items():
                pooled = w[:, b] @ counts
                tot = pooled.sum()
                sources.append(
                    {
                        "source": str(source),
                        "counts": [float(x) for x in pooled],
                        "proportions": [float(x / tot) if tot else 0.0 for x in pooled],
                    }
                )
            bins.append(
                {
                    "bin": json_safe(key),
                    "items": float(size[b]),
                    "share": float(size[b] / size.sum()) if size.sum() else 0.0,
                    "reason": "" if size[b] > 0 else "no items in this bin",
                    "sources": sources,
                }
            )
        out = {"labels": json_safe(list(lc.labels)), "bins": bins}
        out["binning"] = "human majority (tied modes split)"
        out["source"] = "Beyond Correlation Section 3.3 (nominal)"
    if not lc.judges:
        out["note"] = "no judge labels: humans only"
    return out
