"""xs archive's plan and trim against the engine, no Spark
(storage/spark/archive/plan.py: plan_streams, trim_archived): a stream is
archived only below the oldest entry a consumer group still needs, and
the trim transaction checks again, so archived entries a group needs
again (a group made, or moved back, while Spark ran) stay in the
stream for a later run."""
from storage.options import AddOptions, GroupOptions, IdsOptions, ReadOptions
from storage.spark.archive import apply_pending, empty_manifest, id_text, plan_streams, trim_archived


def fill(store, n=10, name=b"jobs"):
    def w(tx):
        for i in range(1, n + 1):
            tx.add(name, [b"n", b"%d" % i], AddOptions(id=(i, 0)))
    store.run(w, write=True)


def group(store, start=(0, 0), delivered=0, name=b"jobs", g=b"mailer"):
    def w(tx):
        tx.create_group(name, g, GroupOptions(start=start))
        if delivered:
            tx.read_group(ReadOptions(keys=[name], ids=[b">"], count=delivered, group=g, consumer=b"w1"))
    store.run(w, write=True)


def plan(store, cut, manifest=None, drop=False):
    manifest = manifest or empty_manifest()
    return store.run(lambda tx: plan_streams(tx, [b"jobs"], cut, manifest, drop))[0]


def committed(p):
    """A manifest whose last run archived what plan ``p`` planned."""
    m = empty_manifest()
    m["pending"] = {"run": "r", "moves": [], "streams": {p.name: {
        "first": id_text(p.first), "last": id_text(p.last), "rows": p.rows, "digest": p.digest}}}
    apply_pending(m)
    return m


def test_a_stream_without_groups_is_planned_up_to_the_cut(store):
    fill(store)
    p = plan(store, (8, 0))
    assert (p.rows, p.first, p.last, p.hold) == (7, (1, 0), (7, 0), None)


def test_the_cut_stops_at_a_groups_first_undelivered_entry(store):
    fill(store)
    group(store, start=(4, 0))
    p = plan(store, (11, 0))
    assert (p.rows, p.last) == (4, (4, 0))
    assert (p.hold.floor, p.hold.held, p.hold.unacked, p.hold.kept) == ((4, 1), 6, 6, True)
    assert [(bytes(w.group), w.undelivered, w.pending) for w in p.hold.groups] == [(b"mailer", 6, 0)]


def test_the_cut_stops_at_a_groups_oldest_pending_entry_and_acked_entries_after_it_stay_too(store):
    fill(store)
    group(store, delivered=6)
    store.run(lambda tx: tx.ack(b"jobs", b"mailer", IdsOptions(ids=[(1, 0), (2, 0), (4, 0)])), write=True)
    p = plan(store, (11, 0))
    assert (p.rows, p.last) == (2, (2, 0))
    # 3-0..10-0 stay: 3, 5, 6 pending, 4 acknowledged, 7..10 never delivered
    assert (p.hold.held, p.hold.unacked) == (8, 7)
    assert [(w.undelivered, w.pending) for w in p.hold.groups] == [(4, 3)]


def test_the_most_behind_of_several_groups_sets_the_cut(store):
    fill(store)
    group(store, start=(8, 0), g=b"fast")
    group(store, start=(3, 0), g=b"slow")
    p = plan(store, (11, 0))
    assert p.last == (3, 0)
    assert [bytes(w.group) for w in p.hold.groups] == [b"fast", b"slow"]


def test_drop_unacked_plans_up_to_the_cut_and_says_what_it_takes(store):
    fill(store)
    group(store, delivered=2)
    p = plan(store, (11, 0), drop=True)
    assert (p.rows, p.last, p.hold.kept, p.hold.unacked) == (10, (10, 0), False, 10)


def test_entries_above_the_cut_are_no_groups_business_here(store):
    fill(store)
    group(store, start=(6, 0))
    p = plan(store, (5, 0))
    assert (p.rows, p.last, p.hold) == (4, (4, 0), None)


def test_the_trim_leaves_archived_entries_a_group_needs_again_and_trims_them_once_it_is_done(store):
    fill(store)
    p = plan(store, (6, 0))
    assert p.rows == 5
    m = committed(p)
    # while Spark ran, a group was made at the start of the stream
    group(store, start=(0, 0))
    removed, held = trim_archived(store, m, ["jobs"])
    assert removed == {} and held["jobs"].held == 5 and held["jobs"].groups[0].undelivered == 5
    assert store.run(lambda tx: tx.length(b"jobs")) == 10
    # the next run's plan archives nothing more while the leftovers wait
    assert plan(store, (11, 0), m).rows == 0
    # the group reads and acknowledges them: the next trim takes exactly them
    got = store.run(lambda tx: tx.read_group(ReadOptions(keys=[b"jobs"], ids=[b">"], count=5, group=b"mailer",
                                                         consumer=b"c")), write=True)
    assert got is not None
    store.run(lambda tx: tx.ack(b"jobs", b"mailer", IdsOptions(ids=[(i, 0) for i in range(1, 6)])), write=True)
    removed, held = trim_archived(store, m, ["jobs"])
    assert removed == {"jobs": 5} and held == {}
    assert store.run(lambda tx: tx.length(b"jobs")) == 5


def test_drop_unacked_trims_archived_entries_whatever_the_groups(store):
    fill(store)
    p = plan(store, (6, 0))
    m = committed(p)
    group(store, start=(0, 0))
    removed, held = trim_archived(store, m, ["jobs"], drop_unacked=True)
    assert removed == {"jobs": 5} and held == {}
