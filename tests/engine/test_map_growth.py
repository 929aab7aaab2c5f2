"""Big stores and a growing map: a process opens a store with headroom
(twice the data file), and another process growing the map never makes
a reader or a writer fail (MDB_MAP_RESIZED is retried, never shown).

The map starts at 1 MiB here (storage.opening.INITIAL_MAP patched in the
child processes) so that a few MiB of data make it grow many times."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = (
    "import sys\n"
    "import storage.opening\n"
    "import storage.store as st\n"
    "storage.opening.INITIAL_MAP = 1 << 20\n"
    "from storage.options import AddOptions, RangeOptions\n"
    "db = sys.argv[1]\n"
)

WRITER = PRELUDE + (
    "s = st.Store(db, durable=False)\n"
    "fields = [b'payload', b'x' * 200]\n"
    "for _ in range(60):\n"
    "    s.run(lambda tx: tx.add_auto_many([(b'events', fields)] * 400), write=True)\n"
    "print(s.env.info()['map_size'])\n"
)

READER = PRELUDE + (
    "import time\n"
    "errors = reads = 0\n"
    "end = time.monotonic() + float(sys.argv[2])\n"
    "while time.monotonic() < end:\n"
    "    s = None\n"
    "    try:\n"
    "        s = st.Store(db, durable=False)\n"
    "        n = s.run(lambda tx: tx.length(b'events'))\n"
    "        with s.read() as tx:\n"
    "            tx.range(b'events', RangeOptions((0, 0), (2**64 - 1, 2**64 - 1), 10))\n"
    "        with s.write() as tx:\n"
    "            tx.add(b'side', [b'n', b'%d' % n], AddOptions())\n"
    "        reads += 1\n"
    "    except Exception as e:\n"
    "        errors += 1\n"
    "        print('ERROR', type(e).__name__, e, file=sys.stderr)\n"
    "    finally:\n"
    "        if s is not None:\n"
    "            s.close()\n"
    "print(reads, errors)\n"
)


def run(code, *args, **kw):
    return subprocess.Popen([sys.executable, "-c", code] + [str(a) for a in args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_concurrent_map_growth_refuses_no_reader_and_no_writer(tmp_path):
    db = tmp_path / "db"
    subprocess.run([sys.executable, "-c", PRELUDE + "st.Store(db).close()\n", db], cwd=ROOT, check=True)
    readers = [run(READER, db, 6) for _ in range(2)]
    writer = run(WRITER, db)
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err.decode()[-2000:]
    # the map grew several times over its 1 MiB, and holds the data: by
    # doubling in the writer, or by adopting the size a reader opened with
    # (twice the data file at that moment), whichever came last
    assert int(out) >= max(4 << 20, os.path.getsize(db / "data.mdb"))
    for r in readers:
        out, err = r.communicate(timeout=120)
        reads, errors = map(int, out.split())
        assert errors == 0 and reads > 0, err.decode()[-2000:]


def test_a_big_store_opens_with_headroom(tmp_path):
    db = tmp_path / "db"
    w = run(WRITER, db)
    out, err = w.communicate(timeout=120)
    assert w.returncode == 0, err.decode()[-2000:]
    size = os.path.getsize(db / "data.mdb")
    probe = run(PRELUDE + "s = st.Store(db)\nprint(s.env.info()['map_size'])\n", db)
    out, err = probe.communicate(timeout=60)
    assert probe.returncode == 0, err.decode()
    assert int(out) >= 2 * size                      # room to write without a "map full" redo


def test_a_store_whose_map_another_process_grows_while_it_opens_adopts_the_new_size(tmp_path, monkeypatch):
    """The race the concurrent test above hits now and then, made certain:
    another process grows the map between this process's LMDB open and
    its first transaction.  The open adopts the new size instead of
    failing with MDB_MAP_RESIZED."""
    import storage.opening
    import storage.store as st
    db = tmp_path / "db"
    subprocess.run([sys.executable, "-c", PRELUDE + "st.Store(db).close()\n", db], cwd=ROOT, check=True)
    real_open = st.lmdb.open
    grew = []

    def open_then_grow(*a, **kw):
        env = real_open(*a, **kw)
        if not grew:
            p = run(WRITER, db)
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-2000:]
            grew.append(int(out))
            assert grew[0] > env.info()["map_size"]         # now larger than what this process mapped
        return env
    monkeypatch.setattr(storage.opening, "INITIAL_MAP", 1 << 20)             # as the writer: a small map to outgrow
    monkeypatch.setattr(st.lmdb, "open", open_then_grow)
    s = st.Store(str(db), durable=False)
    try:
        assert s.run(lambda tx: tx.length(b"events")) == 60 * 400
        assert s.env.info()["map_size"] >= grew[0]
    finally:
        s.close()


def test_a_write_block_begins_with_half_the_map_free_and_a_full_one_leaves_it_grown(tmp_path, monkeypatch):
    """The other race of the concurrent test, made certain: a ``with
    store.write()`` block (which cannot be run again, as ``run`` runs its
    function again) begins when other writes have left the map nearly
    full.  It begins with half the map free, so a small block succeeds;
    a block bigger than that fails with "map full" and leaves the map
    grown, so that running it again succeeds."""
    import storage.opening
    import storage.store as st
    from storage.options import AddOptions
    from storage.txn import Retry
    monkeypatch.setattr(storage.opening, "INITIAL_MAP", 1 << 20)
    s = st.Store(str(tmp_path / "db"), durable=False)
    try:
        fields = [b"payload", b"x" * 200]
        info = s.env.info

        def used():
            return (info()["last_pgno"] + 1) * s.env.stat()["psize"]
        while used() * 10 < info()["map_size"] * 8:       # run's adds: the map 80% full, not grown
            size = info()["map_size"]
            s.run(lambda tx: tx.add_auto_many([(b"events", fields)] * 50), write=True)
            assert info()["map_size"] == size
        size = info()["map_size"]
        with s.write() as tx:                             # 30% of the map: more than was free
            for _ in range(size * 3 // 10 // 250):
                tx.add(b"side", fields, AddOptions())
        assert info()["map_size"] > size
        size = info()["map_size"]

        n = 2 * size // 250

        def block():
            with s.write() as tx:                         # more than the whole map holds now
                for _ in range(n):
                    tx.add(b"big", fields, AddOptions())
        failures = 0
        while True:
            try:
                block()
                break
            except Retry as e:
                assert e.grow and str(e) == "map full"
                assert s.run(lambda tx: tx.length(b"big")) == 0       # nothing of it was written
                assert info()["map_size"] > size                        # the map grew for the next run
                size = info()["map_size"]
                failures += 1
                assert failures <= 3
        assert failures >= 1 and s.run(lambda tx: tx.length(b"big")) == n
    finally:
        s.close()
