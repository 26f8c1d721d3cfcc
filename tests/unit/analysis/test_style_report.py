"""The report's style-controlled ranking: humans and judges, coefficients, the length-bias
line, text and HTML; no block without the answers' style counts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from scipy import special

from analysis.render import render_html, render_text
from analysis.report import Property, build_report
from analysis.style_report import style_columns

PREF = Property("preference", "pairwise", ("A", "B", "tie"))
HOSTILE = "<b>x</b>"
SYSTEMS = ["good", "mid", HOSTILE]


def frames(n_items=900, seed=9):
    rng = np.random.default_rng(seed)
    theta = {"good": 0.8, "mid": 0.0, HOSTILE: -0.8}
    mean_len = {"good": 200, "mid": 400, HOSTILE: 800}
    items, texts, ann, jud = [], [], [], []
    for i in range(n_items):
        a, b = SYSTEMS[i % 3], SYSTEMS[(i + 1 + i // 3 % 2) % 3]
        la = int(rng.lognormal(np.log(mean_len[a]), 0.5)) + 1
        lb = int(rng.lognormal(np.log(mean_len[b]), 0.5)) + 1
        ta = "**x** " + "y" * la if rng.random() < 0.3 else "y" * la
        tb = "- item\n" + "y" * lb if rng.random() < 0.3 else "y" * lb
        items.append({"item": i, "input_id": f"in{i}", "system_a": a, "system_b": b})
        texts.append((i, ta, tb))
        d = (la - lb) / (la + lb)
        for w in range(2):
            left = rng.random() < 0.5
            p = special.expit(theta[a] - theta[b] + 2.0 * d)
            lab = "A" if rng.random() < p else "B"
            raw = ("left" if left else "right") if lab == "A" else ("right" if left else "left")
            ann.append(
                {"item": i, "annotator": f"w{w}", "label": lab, "raw": raw, "source": "platform"}
            )
        jud.append({"item": i, "judge": "llm", "label": "A" if d + rng.normal(0, 0.3) > 0 else "B"})
        jud.append({"item": i, "judge": "longest", "label": "A" if d > 0 else "B"})
    items = pd.DataFrame(items).merge(style_columns(texts), on="item", how="left")
    return pd.DataFrame(ann), items, pd.DataFrame(jud)


def test_style_block_for_humans_and_judges():
    ann, items, jud = frames()
    report = build_report(ann, [PREF], judges=jud, items=items, n_boot=0)
    json.dumps(report, allow_nan=False)
    s = report["properties"][0]["style"]
    humans = s["humans"]
    assert [r["system"] for r in humans["ranking"]] == SYSTEMS
    assert {"score", "low", "high", "rank", "plain_rank", "plain_score"} <= set(
        humans["ranking"][0]
    )
    coefs = {c["covariate"]: c for c in humans["coefficients"]}
    assert set(coefs) == {"length", "headers", "lists", "bold", "position"}
    assert s["length_bias"]["low"] > 0  # humans reward length
    assert coefs["position"]["low"] < 0 < coefs["position"]["high"]
    judge, longest = s["judges"]  # by name: llm, longest
    assert judge["judge"] == "llm" and judge["n"] == 900
    judge_length = next(c for c in judge["coefficients"] if c["covariate"] == "length")
    assert judge_length["coef"] > s["length_bias"]["coef"]  # the judge leans on length more
    assert "perfect separation" in longest["reason"]  # always the longer answer
    text = render_text(report)
    assert "Style-controlled ranking" in text and "Length bias of the human raters" in text
    html = render_html(report)
    assert "Style-controlled ranking" in html and HOSTILE not in html


def test_no_style_block_without_style_columns():
    ann, items, jud = frames(n_items=60)
    items = items[["item", "input_id", "system_a", "system_b"]]
    report = build_report(ann, [PREF], judges=jud, items=items, n_boot=0)
    assert "style" not in report["properties"][0]
