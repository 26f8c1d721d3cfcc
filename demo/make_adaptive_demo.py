"""Write ``adaptive_demo.jsonl`` from ``llmbar_natural.judgebench.json`` (run from the repo root).

Four systems answer 40 LLMBar instructions: the output LLMBar's experts preferred, the other
output, the first sentence of the preferred output, and a refusal. ``metadata.truth`` holds
the quality each system is simulated with (higher is better); only ``simulate_crowd`` reads
it, workers never see it.
"""

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
N_INPUTS = 40
REFUSAL = "I'm sorry, but I can't help with that request."
TRUTH = {"expert-preferred": 3, "runner-up": 2, "first-sentence": 1, "refuses": 0}
INSTRUCTIONS = """\
Someone gave an AI assistant an **instruction**; you see two of the answers it could get.
Decide which **response follows the instruction better**.

1. Read the instruction first: what exactly does it ask for?
2. Read both responses in full. One that does precisely what was asked beats one that does
   more, less, or something else, however well written.
3. Then weigh helpfulness, accuracy and detail. Ignore length for its own sake, and ignore
   the side: which response is shown first is random for every task.

Click **Left is better**, **Right is better**, or **Tie** when you truly cannot choose (for
example when the two responses are the same). On a phone the responses are stacked: the
first is "left". Keyboard: `1`, `2`, `3` for the buttons, `←` and `→` for left and right.

This study is *adaptive*: work comes in rounds, and after each round the platform decides
which comparisons it has seen enough of. If you see "please wait", the next round is being
prepared.
"""


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s+|\n", text.strip(), maxsplit=1)[0].strip()


def main() -> None:
    doc = json.loads((HERE / "llmbar_natural.judgebench.json").read_text(encoding="utf-8"))
    study = {
        "name": "Demo: adaptive ranking of four systems (pairwise)",
        "kind": "pairwise",
        "collection": "adaptive",
        "question": "Which response follows the instruction better?",
        "instructions": INSTRUCTIONS,
        "systems": list(TRUTH),
        "redundancy": 1,
        "batch_size": 5,
        "budget": 240,
        "gamma": 0.05,
        "allow_tie": True,
        "open_links": True,
        "gold_rate_start": 0.0,
        "gold_rate_end": 0.0,
    }
    lines = [json.dumps({"study": study}, ensure_ascii=False)]
    for inst in doc["instances"]:
        body = inst["instance"]
        better = inst["annotations"]["quality_single_turn"]["majority_human"]
        preferred, other = (body["output_a"], body["output_b"])[:: 1 if better == "model_a" else -1]
        first = first_sentence(preferred)
        if first == preferred.strip() or len(first) < 15:
            continue  # the first sentence must differ from, and be a real part of, the answer
        outputs = {
            "expert-preferred": preferred,
            "runner-up": other,
            "first-sentence": first,
            "refuses": REFUSAL,
        }
        record = {"id": inst["id"], "input": body["input"], "outputs": outputs}
        record["metadata"] = {"truth": TRUTH}
        lines.append(json.dumps(record, ensure_ascii=False))
        if len(lines) > N_INPUTS:
            break
    (HERE / "adaptive_demo.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
