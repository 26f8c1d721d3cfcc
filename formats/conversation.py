"""Conversations: an input (the dialogue so far) or an output (the model's turns) given as a
list of messages ``[{"role": "system"|"user"|"assistant", "content": "…"}, …]`` instead of
a text. Every kind shows them with the partial ``kinds/_conversation.html`` (roles distinct,
content as the study renders text: sanitised Markdown or plain) and exports them as given.

Pure: :func:`validate` checks one imported value and names every fault with the caller's
``where`` (e.g. ``"line 3 (input 'q1')"``) and the message's number; :func:`to_text` is the
flat text for readers of plain text (search, LLM judges, Hugging Face exports);
:func:`for_display` marks a conversation for the templates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The roles a message may have, in the order the docs list them.
ROLES = ("system", "user", "assistant")
#: The most messages one conversation may hold.
MAX_MESSAGES = 500
#: The longest content of one message, in characters.
MAX_CONTENT_CHARS = 100_000

Message = dict[str, str]


class ConversationError(ValueError):
    """An imported conversation is invalid; ``messages`` lists every fault found."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("; ".join(self.messages))


class Conversation(list[dict[str, Any]]):
    """A validated list of messages, marked for the templates: ``x|is_conversation`` (the
    ``humeval`` filter reads the mark) is true for it and false for a text."""

    is_conversation = True


def is_conversation(value: object) -> bool:
    """Whether an imported ``input``/output value is meant as a conversation (a list) rather
    than a text; :func:`validate` then says what is wrong with it, if anything."""
    return isinstance(value, list)


def validate(value: object, where: str, *, output: bool = False) -> list[Message]:
    """``value`` as a list of ``{"role", "content"}`` messages; :class:`ConversationError`
    naming ``where`` and the message number (1-based) of each fault. An ``output`` (the
    model's turns) must hold at least one ``assistant`` message."""
    what = "output" if output else "input"
    if not isinstance(value, list) or not value:
        raise ConversationError(
            [f"{where}: a conversation {what} is a non-empty list of {{role, content}} messages"]
        )
    if len(value) > MAX_MESSAGES:
        raise ConversationError(
            [f"{where}: the conversation has {len(value)} messages (at most {MAX_MESSAGES})"]
        )
    errors: list[str] = []
    messages: list[Message] = []
    for number, message in enumerate(value, start=1):
        at = f"{where}: message {number}"
        if not isinstance(message, dict):
            errors.append(f"{at} is not an object with 'role' and 'content'")
            continue
        extra = sorted(set(message) - {"role", "content"})
        if extra:
            errors.append(f"{at} has unknown keys: {', '.join(map(str, extra))}")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            errors.append(f"{at} has role {_shown(role)}; a role is one of {', '.join(ROLES)}")
        if not isinstance(content, str) or not content.strip():
            errors.append(f"{at} has no text 'content'")
        elif len(content) > MAX_CONTENT_CHARS:
            errors.append(
                f"{at} has {len(content)} characters of content (at most {MAX_CONTENT_CHARS})"
            )
        if not errors:
            messages.append({"role": str(role), "content": str(content)})
    if output and not errors and not any(m["role"] == "assistant" for m in messages):
        errors.append(f"{where}: a conversation output needs at least one 'assistant' message")
    if errors:
        raise ConversationError(errors)
    return messages


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 40 else text[:37] + "…"


def to_text(messages: Sequence[Message]) -> str:
    """The conversation as plain text: ``role: content`` per message, a blank line apart."""
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def for_display(value: str | Sequence[Message]) -> str | Conversation:
    """A text unchanged, or a list of messages as a :class:`Conversation` for the
    templates (``kinds/_content.html`` shows either)."""
    if isinstance(value, str):
        return value
    return Conversation({"role": m["role"], "content": m["content"]} for m in value)


def same_form(values: Sequence[str | Sequence[Message]]) -> list[str | Conversation]:
    """The outputs one item shows, for display (:func:`for_display`) and all in one form:
    when any of them is a conversation, each text becomes a conversation of one
    ``assistant`` turn. A worker must not tell the systems apart by the form of their
    outputs (a system whose outputs alone come as turns would be recognisable)."""
    shown = [for_display(v) for v in values]
    if not any(isinstance(v, Conversation) for v in shown):
        return shown
    return [
        v if isinstance(v, Conversation) else Conversation([{"role": "assistant", "content": v}])
        for v in shown
    ]
