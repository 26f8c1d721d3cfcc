"""formats.stream and formats.specs on their own: no Django, the limit passed in, faults as
``formats.stream.Rejected`` (the importer turns them into its service errors)."""

import io

import pytest

from formats import specs, stream


def test_a_stream_checks_the_limit_it_is_given_and_reads_again_on_each_pass():
    data = b'{"id": 1}\n{"id": 2}\n'
    opened = stream.Stream(io.BytesIO(data), len(data))
    assert list(opened.lines()) == list(opened.lines()) == ['{"id": 1}\n', '{"id": 2}\n']
    assert stream.sniff(opened) == ('{"id": 1}\n', True)
    with pytest.raises(stream.TooLarge) as info:
        stream.Stream(data, len(data) - 1)
    assert info.value.errors == [
        "the file is too large: the import limit is 19 bytes (19 bytes) and the file is "
        "20 bytes (20 bytes); split it into smaller files or raise HUMEVAL_IMPORT_MAX_BYTES"
    ]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ("x".encode("utf-16"), "line 1: the file is UTF-16 text"),
        (b"ok\n\xff\n", "line 2: the file is not UTF-8 text (byte 3 cannot be decoded)"),
        (b"hello world\nab\x00", "line 2: the file contains a NUL byte (byte 14)"),
    ],
)
def test_a_file_that_is_not_utf8_text_is_refused_with_its_line(data, error):
    for read in (lambda: stream.Stream(data, 100), lambda: stream.decode(data)):
        with pytest.raises(stream.Rejected) as info:
            read()
        assert info.value.errors[0].startswith(error)


def test_errors_keep_the_first_max_errors_and_count_them_all():
    errors = specs.Errors()
    for n in range(specs.MAX_ERRORS + 5):
        errors.add(f"line {n}: bad")
    assert len(errors) == specs.MAX_ERRORS and errors.total == specs.MAX_ERRORS + 5
    with pytest.raises(stream.Rejected) as info:
        errors.raise_if_any()
    assert info.value.errors[0] == "line 0: bad"
