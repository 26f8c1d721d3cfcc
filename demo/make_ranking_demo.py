"""Write ``ranking_demo.jsonl`` from ``llmbar_natural.judgebench.json`` (run from the repo root).

A ranking study of conversations: each input is a short chat whose last user turn is an
LLMBar instruction; four systems answer it with one assistant turn (the output LLMBar's
experts preferred, the other output, the first sentence of the preferred output, a refusal).
A worker ranks three of the four answers, drawn per input (``per_item``). ``metadata.truth``
holds the quality each system is simulated with (higher is better); only ``simulate_crowd``
reads it, workers never see it.
"""

import json
from pathlib import Path

from make_adaptive_demo import first_sentence

HERE = Path(__file__).resolve().parent
N_INPUTS = 12
SYSTEM_PROMPT = "You are a helpful assistant. Do exactly what the user asks."
OPENING = [
    {"role": "user", "content": "Hi! Could you help me with something?"},
    {"role": "assistant", "content": "Of course. What would you like me to do?"},
]
REFUSAL = "I'm sorry, but I can't help with that request."
TRUTH = {"expert-preferred": 3, "runner-up": 2, "first-sentence": 1, "refuses": 0}
INSTRUCTIONS = """\
You see a **conversation** between a person and an AI assistant, then several possible
**next replies** of the assistant. Put them in order: the reply that best does what the
person asked at the top, the worst at the bottom.

1. Read the conversation first, especially the person's last message: what exactly do they
   ask for?
2. Read every reply in full. One that does precisely what was asked beats one that does
   more, less, or something else, however well written.
3. Move a reply with its ⠿ handle (drag it), with its ↑ and ↓ buttons, or with the keyboard
   (click a reply's title bar, then press ↑ or ↓). Tick **Tie with the one above** only when
   two replies are truly equally good.

The order in which the replies are first shown is random.
"""


def main() -> None:
    doc = json.loads((HERE / "llmbar_natural.judgebench.json").read_text(encoding="utf-8"))
    study = {
        "name": "Demo: rank replies in a conversation (ranking)",
        "kind": "ranking",
        "question": "Order the replies from best (top) to worst (bottom).",
        "instructions": INSTRUCTIONS,
        "systems": list(TRUTH),
        "per_item": 3,
        "allow_tie": True,
        "redundancy": 3,
        "open_links": True,
    }
    lines = [json.dumps({"study": study}, ensure_ascii=False)]
    for inst in doc["instances"]:
        body = inst["instance"]
        better = inst["annotations"]["quality_single_turn"]["majority_human"]
        preferred, other = (body["output_a"], body["output_b"])[:: 1 if better == "model_a" else -1]
        first = first_sentence(preferred)
        if first == preferred.strip() or len(first) < 15:
            continue  # the first sentence must differ from, and be a real part of, the answer
        conversation = [
            {"role": "system", "content": SYSTEM_PROMPT},
            *OPENING,
            {"role": "user", "content": body["input"]},
        ]
        answers = {
            "expert-preferred": preferred,
            "runner-up": other,
            "first-sentence": first,
            "refuses": REFUSAL,
        }
        outputs = {name: [{"role": "assistant", "content": text}] for name, text in answers.items()}
        record = {"id": inst["id"], "input": conversation, "outputs": outputs}
        record["metadata"] = {"truth": TRUTH}
        lines.append(json.dumps(record, ensure_ascii=False))
        if len(lines) > N_INPUTS:
            break
    (HERE / "ranking_demo.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
