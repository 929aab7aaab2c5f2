"""Hostile files, through the command line: these tests run ``xs`` (or
script mode), so they left tests/engine/test_hostile_files.py, whose
tier uses the library API only."""
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.ops import exchange
from tests.engine.test_hostile_files import _refused_changes_nothing

SETTINGS = settings(max_examples=int(os.environ.get("XS_HOSTILE_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(lines=st.lists(st.binary(max_size=40) | st.text(max_size=30).map(lambda t: t.encode("utf-8")),
                      min_size=1, max_size=6))
def test_arbitrary_bytes_as_kv_or_jsonl_lines_are_imported_or_refused_changing_nothing(store, lines):  # noqa: F811
    from xstream_cli.splitargs import split_line
    data = [l.replace(b"\n", b" ") + b"\n" for l in lines]
    for fmt in ("kv", "jsonl"):
        _refused_changes_nothing(store, lambda: exchange.import_lines(store, data, fmt=fmt, stream=b"in",
                                                                      split=split_line, batch=10 ** 6),
                                 exchange.ExchangeError)
