"""Conversation inputs and outputs (formats/conversation.py): validation names the line and the
message of every fault; text and conversations are told apart; the flat text form."""

import pytest

from formats.conversation import (
    MAX_CONTENT_CHARS,
    MAX_MESSAGES,
    Conversation,
    ConversationError,
    for_display,
    is_conversation,
    same_form,
    to_text,
    validate,
)

WHERE = "line 3 (input 'q1')"
DIALOGUE = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Tell a joke"},
]


def test_a_valid_conversation_comes_back_as_given():
    assert validate(DIALOGUE, WHERE) == DIALOGUE
    turns = [{"role": "assistant", "content": "Why did…"}, {"role": "user", "content": "?"}]
    assert validate(turns, WHERE, output=True) == turns


def test_text_and_conversations_are_told_apart():
    assert is_conversation(DIALOGUE) and is_conversation([])
    assert not is_conversation("a text") and not is_conversation({"role": "user"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "line 3 (input 'q1'): a conversation input is a non-empty list"),
        ("text", "a conversation input is a non-empty list"),
        (["hi"], "line 3 (input 'q1'): message 1 is not an object with 'role' and 'content'"),
        ([{"role": "bot", "content": "x"}], "message 1 has role 'bot'; a role is one of system"),
        ([{"content": "x"}], "message 1 has role None"),
        ([{"role": ["user"], "content": "x"}], "message 1 has role ['user']"),
        ([{"role": "user"}], "message 1 has no text 'content'"),
        ([{"role": "user", "content": "   "}], "message 1 has no text 'content'"),
        ([{"role": "user", "content": 42}], "message 1 has no text 'content'"),
        ([{"role": "user", "content": "x", "name": "bob"}], "message 1 has unknown keys: name"),
        (
            [{"role": "user", "content": "x" * (MAX_CONTENT_CHARS + 1)}],
            f"message 1 has {MAX_CONTENT_CHARS + 1} characters of content",
        ),
        (
            [{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1),
            f"has {MAX_MESSAGES + 1} messages (at most {MAX_MESSAGES})",
        ),
    ],
)
def test_bad_conversations_name_the_line_and_the_message(value, message):
    with pytest.raises(ConversationError) as caught:
        validate(value, WHERE)
    assert any(message in m for m in caught.value.messages), caught.value.messages
    assert all(m.startswith(WHERE) for m in caught.value.messages)


def test_every_fault_is_listed_with_its_message_number():
    bad = [DIALOGUE[0], {"role": "robot", "content": "x"}, DIALOGUE[1], {"role": "user"}]
    with pytest.raises(ConversationError) as caught:
        validate(bad, WHERE)
    assert [m.split(":")[1].strip().split(" has")[0] for m in caught.value.messages] == [
        "message 2",
        "message 4",
    ]


def test_an_output_needs_a_model_turn():
    with pytest.raises(ConversationError, match="at least one 'assistant' message"):
        validate([{"role": "user", "content": "hi"}], WHERE, output=True)
    with pytest.raises(ConversationError, match="a conversation output is a non-empty list"):
        validate([], WHERE, output=True)


def test_flat_text_and_display_forms():
    assert to_text(DIALOGUE[:2]) == "system: Be brief.\n\nuser: Hi"
    shown = for_display(DIALOGUE)
    assert isinstance(shown, Conversation) and shown.is_conversation and shown == DIALOGUE
    assert for_display("plain") == "plain"
    assert not hasattr(for_display("plain"), "is_conversation")


def test_the_outputs_of_one_item_share_one_form():
    chat = [{"role": "assistant", "content": "From the chat."}]
    shown = same_form([chat, "From the text.", "Also text."])
    assert all(isinstance(s, Conversation) for s in shown)
    assert [list(s) for s in shown] == [
        chat,
        [{"role": "assistant", "content": "From the text."}],
        [{"role": "assistant", "content": "Also text."}],
    ]
    assert same_form(["a", "b"]) == ["a", "b"]  # texts stay texts
