"""The differential fuzzer (tests/fuzz_diff.py) in CI: seeded random
command sequences against a private redis-server and `xs`, replies
compared; no divergence may be left unexplained (INTENDED_DIFFERENCES and
OPEN_DIVERGENCES in fuzz_diff.py explain the known ones).

Bounded by default (200 sequences, seed 20240601, 10 of them also compared
in --raw / --no-raw against redis-cli): well under a minute on two cores.
The long run is the same test with more sequences:

    XS_FUZZ_SEQUENCES=10000 python -m pytest -q tests/compat/test_fuzz_differential.py
    XS_FUZZ_SEED=7 XS_FUZZ_RAW_SAMPLE=200 ...      another seed, more text checks

or the script itself (summary by class, --minimize for reproductions):

    python3 tests/fuzz_diff.py --sequences 10000 --seed 7 --raw-sample 200 --minimize

The other tests here pin the fuzzer's own machinery, so that a comparison
that can no longer see a difference fails loudly instead of passing.
"""
import os
import shutil

import fuzz_diff as F
import pytest

SEQUENCES = int(os.environ.get("XS_FUZZ_SEQUENCES", "200"))
SEED = os.environ.get("XS_FUZZ_SEED", "20240601")
RAW_SAMPLE = int(os.environ.get("XS_FUZZ_RAW_SAMPLE", "10"))


@pytest.fixture
def rc(redis):
    """A connection to the session's redis-server that keeps repeated map
    keys and non-UTF-8 error texts (what the fuzzer compares with)."""
    c = F.Resp3Pairs(redis.port)
    yield c
    c.sock.close()


def seq_of(*lines):
    return [F.split_args(l.encode()) for l in lines]


# ------------------------------------------------------------- the fuzz run


def test_random_sequences_show_no_unexplained_divergence_from_redis(rc):
    if RAW_SAMPLE and not shutil.which("redis-cli"):
        pytest.skip("redis-cli is not installed")
    report, bad = F.fuzz(rc, SEED, SEQUENCES, jobs=2, raw_sample=RAW_SAMPLE)
    assert report.compared > SEQUENCES * 5, "too few commands compared:\n" + report.summary()
    assert report.text_checked >= min(RAW_SAMPLE, SEQUENCES) // 2, report.summary()
    if bad:
        label, res, texts = bad[0]
        detail = F.describe_new(rc, label, res, texts, do_minimize=True, budget_s=60)
        pytest.fail("%d sequence(s) with an unexplained divergence or a crash (seed %s)\n%s\n\nfirst one:\n%s\n\n"
                    "A Redis 8 behaviour xs implements on purpose belongs in INTENDED_DIFFERENCES, a known "
                    "bug in OPEN_DIVERGENCES (tests/fuzz_diff.py)."
                    % (len(bad), SEED, report.summary(), detail))


# ------------------------------------------------------ the machinery itself


def redis_as_xs(rc, corrupt):
    """A stand-in for xs: the sequence on redis db 9, each reply passed
    through ``corrupt(argv, reply)``."""
    def run(seq):
        rc.call("SELECT", "9")
        rc.call("FLUSHDB")
        replies = [corrupt(a, rc.call(*a)) for a in seq]
        rc.call("FLUSHDB")
        rc.call("SELECT", "0")
        return replies, "", 0
    return run


def test_a_wrong_reply_is_a_new_divergence_at_its_command(rc):
    seq = seq_of("XADD s 1-0 f v", "XADD s 2-0 f v", "XLEN s", "XRANGE s - +")
    xs = redis_as_xs(rc, lambda a, r: r + 1 if a[0] == b"XLEN" else r)
    res = F.compare_sequence(rc, seq, xs(seq))
    assert [(d.index, d.cls) for d in res.divergences] == [(2, "NEW:XLEN:reply")]
    assert res.stopped                   # a new difference that is not error vs error ends the comparison


def test_the_same_replies_are_no_divergence(rc):
    seq = seq_of("XADD s 1-0 f v", "XGROUP CREATE s g 0", "XREADGROUP GROUP g c STREAMS s >", "XPENDING s g",
                 "XPENDING s g - + 10", "XINFO CONSUMERS s g", "XINFO STREAM s FULL", "KEYS *", "SCAN 0")
    res = F.compare_sequence(rc, seq, redis_as_xs(rc, lambda a, r: r)(seq))
    assert res.divergences == [] and res.compared == len(seq) and res.clean_prefix == len(seq)


def test_an_internal_error_is_a_crash(rc):
    seq = seq_of("XADD s 1-0 f v", "XLEN s")
    xs = redis_as_xs(rc, lambda a, r: {"error": "ERR internal error: boom"} if a[0] == b"XLEN" else r)
    res = F.compare_sequence(rc, seq, xs(seq))
    assert res.crashes and "internal error" in res.crashes[0]


def test_a_missing_reply_is_a_crash(rc):
    seq = seq_of("XADD s 1-0 f v", "XLEN s")
    res = F.compare_sequence(rc, seq, (["1-0"], "Traceback (most recent call last): ...", 1))
    assert any("1 replies for 2 commands" in c for c in res.crashes)
    assert any("traceback" in c for c in res.crashes)


def test_idle_times_are_compared_with_a_tolerance_not_ignored(rc):
    seq = seq_of("XADD s 1-0 f v", "XGROUP CREATE s g 0", "XREADGROUP GROUP g c STREAMS s >",
                 "XPENDING s g - + 10")
    near = redis_as_xs(rc, lambda a, r: [[e[0], e[1], e[2] + 3000, e[3]] for e in r] if a[0] == b"XPENDING" else r)
    far = redis_as_xs(rc, lambda a, r: [[e[0], e[1], e[2] + 600000, e[3]] for e in r] if a[0] == b"XPENDING" else r)
    assert F.compare_sequence(rc, seq, near(seq)).divergences == []
    assert [d.cls for d in F.compare_sequence(rc, seq, far(seq)).divergences] == ["NEW:XPENDING:reply"]


def test_auto_ids_compare_by_position_per_stream(rc):
    seq = seq_of("XADD s * f v", "XADD t * f v", "XRANGE s - +", "XRANGE t - +")
    res = F.compare_sequence(rc, seq, F.xs_json(F.lines_of(seq)))
    assert res.divergences == [] and not res.crashes


def test_two_auto_ids_of_one_millisecond_on_one_side_only_are_no_divergence(rc):
    """A stream deleted and made again within one ms gets the same '*' ID
    again on one side: its label repeats there and not on the other."""
    seq = seq_of("XADD s * f v", "DEL s", "XADD s * f v")
    later = [0]

    def shift(a, r):           # the second auto ID one ms later on the xs side
        if a[0] == b"XADD":
            later[0] += 1
            if later[0] == 2:
                ms, seq_ = r.split("-")
                return "%d-%s" % (int(ms) + 1, seq_)
        return r
    res = F.compare_sequence(rc, seq, redis_as_xs(rc, shift)(seq))
    assert [d.cls for d in res.divergences] in ([], ["auto_ids_in_one_millisecond"])
    wrong = redis_as_xs(rc, lambda a, r: "1-1" if a[0] == b"XADD" else r)   # not an auto ID: still found
    assert [d.cls for d in F.compare_sequence(rc, seq, wrong(seq)).divergences][:1] == ["NEW:XADD:reply"]


def test_plus_in_xreadgroup_is_redis_74s_error_not_70s(rc):
    seq = seq_of("XADD s 1-0 f v", "XGROUP CREATE s g 0", "XREADGROUP GROUP g c STREAMS s s + >")
    res = F.compare_sequence(rc, seq, F.xs_json(F.lines_of(seq)))
    assert [d.cls for d in res.divergences] == ["plus_in_xreadgroup_redis74"] and not res.crashes


def test_redis8_commands_are_not_sent_to_redis_and_end_the_comparison_once_they_write(rc):
    seq = seq_of("XADD s 1-0 f v", "XDELEX s IDS 1 1-0", "XLEN s")
    res = F.compare_sequence(rc, seq, (["1-0", [1], 0], "", 0))
    assert res.skipped8 == 1 and res.compared == 1 and res.stopped.startswith("Redis 8 command changed state")
    seq = seq_of("XADD s 1-0 f v", "XDELEX s IDS 0 1-0", "XLEN s")
    res = F.compare_sequence(rc, seq, (["1-0", {"error": "ERR numids must be positive"}, 1], "", 1))
    assert res.skipped8 == 1 and res.compared == 2 and res.stopped is None


def test_consumer_created_by_an_unserved_xreadgroup_is_emulated_on_redis_70(rc):
    seq = seq_of("XGROUP CREATE s g $ MKSTREAM", "XREADGROUP GROUP g alice STREAMS s >", "XINFO CONSUMERS s g",
                 "XGROUP CREATECONSUMER s g alice")
    res = F.compare_sequence(rc, seq, F.xs_json(F.lines_of(seq)))
    assert res.emulated == 1
    assert res.divergences == [] and not res.crashes


def test_entriesread_is_clamped_on_redis_70_as_redis_8_does(rc):
    seq = seq_of("XADD s 1-0 a 1", "XADD s 2-0 a 2", "XGROUP CREATE s g 0 ENTRIESREAD 10", "XINFO GROUPS s")
    res = F.compare_sequence(rc, seq, F.xs_json(F.lines_of(seq)))
    assert res.emulated == 1 and not res.crashes
    # entries-read agrees (2, clamped); the lag does not: 7.0 says entries-added - entries-read = 0,
    # Redis 8 the stream's length (the group is behind the first entry, no tombstone)
    assert [d.cls for d in res.divergences] == ["lag_and_entries_read_redis8_rules"]
    assert res.divergences[0].check.leaves == [((0, "lag"), 0, 2)]


def test_ms_star_overflow_text_is_an_intended_difference(rc):
    seq = seq_of("XADD s 5-18446744073709551615 a 1", "XADD s 5-* a 2", "XRANGE s - +")
    res = F.compare_sequence(rc, seq, F.xs_json(F.lines_of(seq)))
    assert [d.cls for d in res.divergences] == ["xadd_ms_star_with_exhausted_seq"]
    assert res.stopped is None           # error against error: still compared afterwards


def test_xsetid_refused_below_max_deleted_id_is_intended_and_redis_is_restored(rc):
    seq = seq_of("XADD s 5-0 a 1", "XDEL s 5-0", "XSETID s 3-0", "XINFO STREAM s", "XADD s 6-0 a 1")
    res = F.compare_sequence(rc, seq, F.xs_json(F.lines_of(seq)))
    assert [d.cls for d in res.divergences] == ["xsetid_below_max_deleted_id_refused"]
    assert res.compared == len(seq) and not res.crashes


def test_minimizer_shrinks_a_planted_divergence_to_one_command(rc):
    seq = F.generate("minimize", 0, redis8=False, n=25) + seq_of("XLEN t") + F.generate("minimize", 1, n=5)
    xs = redis_as_xs(rc, lambda a, r: {"error": "ERR planted"} if a[0].upper() == b"XLEN" else r)
    res = F.compare_sequence(rc, seq, xs(seq))
    first = [d for d in res.divergences if d.known is None][0]
    small = F.minimize(rc, seq, F.signature(first.check), budget_s=60, xs=xs)
    assert small == [[b"XLEN", b"s"]]
    assert F.script(small) == "XLEN s"


def test_text_pass_finds_a_byte_that_differs(rc, monkeypatch):
    if not shutil.which("redis-cli"):
        pytest.skip("redis-cli is not installed")
    seq = seq_of("XADD s 1-0 f hello", "XRANGE s - +", "XLEN s")
    res = F.compare_sequence(rc, seq, F.xs_json(F.lines_of(seq)))
    assert F.text_pass(rc, res) == []
    real = F.run_xs
    monkeypatch.setattr(F, "run_xs", lambda lines, mode="json", **kw: (
        real(lines, mode, **kw)[0].replace(b"hello", b"hellO"),) + real(lines, mode, **kw)[1:])
    divs = F.text_pass(rc, res)
    assert [(d.index, d.cls) for d in divs] == [(1, "NEW:XRANGE:text")] * 2     # --raw and --no-raw


def test_every_known_difference_has_a_unique_name_and_a_reason():
    names = [k.name for k in F.ALL_KNOWN]
    assert len(names) == len(set(names))
    assert all(len(k.why) > 40 for k in F.ALL_KNOWN)
    assert all(k.emulate or k.match(F.Check([b"PING"], 1, 2, 1, 2, {}, [])) is False for k in F.ALL_KNOWN)


def test_generated_lines_split_back_to_the_same_arguments():
    for i in range(50):
        seq = F.generate("split", i)
        for argv, line in zip(seq, F.lines_of(seq, i)):
            assert F.split_args(line) == argv


def test_block_never_waits_long():
    assert F.block_guard([b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"])[2] == b"2"
    assert F.block_guard([b"XREAD", b"block", b"-0", b"STREAMS", b"s", b"$"])[2] == b"2"
    assert F.block_guard([b"XREAD", b"BLOCK", b"5", b"STREAMS", b"s", b"$"])[2] == b"5"
    for i in range(300):
        for argv in F.generate("block", i):
            u = [a.upper() for a in argv]
            if b"BLOCK" in u and u.index(b"BLOCK") + 1 < len(u):
                v = argv[u.index(b"BLOCK") + 1]
                assert not F._NUMLIKE.fullmatch(v) or 1 <= int(v) <= 20
