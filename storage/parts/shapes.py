"""The field sets a stream interns (format 4, storage.codec ``Shape``):
which entries are stored as values only, and how.

A stream has at most ``codec.MAX_SHAPES`` field sets, in the ``shapes``
database under ``sid + T``; one is made the first time an entry with
those names (and no unsafe byte in them) is added while there is room,
and they go with the stream (DEL, FLUSHDB).  Each transaction reads a
stream's sets once and keeps them in the transaction's cache (the
``tails`` dict of storage.parts.log), which a rolled-back verb clears: a set
made by a failed command is forgotten with it.
"""
from itertools import chain
from operator import itemgetter

from storage import codec
from storage.ids import fmt
from storage.parts import nodes as _nodes

_ABSENT = object()
_LIST = {list}
_first, _second = itemgetter(0), itemgetter(1)


class Shapes:
    """The interned field sets of every stream, in one transaction."""

    __slots__ = ("_kv", "_db", "_cache")

    def __init__(self, kv, cache):
        self._kv = kv
        self._db = kv.db(b"shapes")
        self._cache = cache

    def _of(self, sid):
        """(tag -> Shape, names -> Shape or None) of stream ``sid``."""
        t = self._cache.get(("shapes", sid))
        if t is None:
            by_tag = {}
            for k, v in self._kv.iter_prefix(self._db, codec.sid_prefix(sid)):
                s = codec.decode_shape(k, v)
                by_tag[s.tag] = s
            t = self._cache[("shapes", sid)] = (by_tag, {s.names: s for s in by_tag.values()})
        return t

    def by_tag(self, sid):
        return self._of(sid)[0]

    def shape_for(self, sid, names):
        """The Shape of field set ``names`` (a tuple) in stream ``sid``,
        made if it is new, eligible and the stream has room; else None."""
        by_tag, by_names = self._of(sid)
        s = by_names.get(names, _ABSENT)
        if s is not _ABSENT:
            return s
        s = None
        if len(by_tag) < codec.MAX_SHAPES and codec.Shape.eligible(names):
            tag = min(set(range(1, codec.MAX_SHAPES + 1)) - set(by_tag))
            s = by_tag[tag] = codec.Shape(tag, names)
            self._kv.put(self._db, codec.shape_key(sid, tag), s.record())
        by_names[names] = s
        return s

    def encode(self, sid, i, fields):
        """The stored value of entry ``i`` of stream ``sid``."""
        s = self.shape_for(sid, tuple(fields[0::2]))
        if s is not None:
            v = s.encode(fields[1::2])
            if v is not None:
                return v
        return codec.encode_entry(fmt(i), fields)

    def encode_many(self, sid, items, block=None):
        """``(ID, fields)`` items (``fields`` may be joined by newlines,
        none containing one) -> ((entry key, stored value) pairs, node
        runs: ``(ids, names, columns)`` as storage.parts.nodes.Extender
        takes them).  The bulk-ingest path: items that are all joined
        text, safe, and of one field set are encoded a column at a time
        (``_one_set``); others one by one, with one look-up per run of
        one field set and, when every item is joined text, one scan of
        the whole batch for unsafe bytes rather than one per entry.
        With ``block`` (a codec.AddBlock), ``items`` are the IDs of its
        entries (``encode_block``)."""
        if block is not None:
            return self.encode_block(sid, items, block)
        if items and type(items[0][1]) is list:
            done = self._list_set(sid, items)     # xs serve's adds: argument lists
            if done is not None:
                return done
        try:
            fs = list(map(_second, items))
            blob = b"\n\0\n".join(fs)              # a NUL word between entries (NUL is unsafe)
            safe = len(blob.translate(None, codec.UNSAFE_BUT_NEWLINE)) == len(blob) - len(fs) + 1
        except TypeError:                          # some fields are a list
            safe = False
        if safe and items:
            done = self._one_set(sid, items, fs, blob)
            if done is not None:
                return done
        key, short, wide = codec.entry_key, codec.pack_entry_key, codec.SEQ_WIDE
        shape_for, by_names = self.shape_for, self._of(sid)[1]
        pairs, rows = [], []
        last = last_names = None
        for i, f in items:
            if type(f) is bytes:
                f = f.split(b"\n")
            names = f[0::2]
            if names == last_names:
                s = last
            else:
                names = tuple(names)
                s = by_names.get(names, _ABSENT)
                if s is _ABSENT:
                    s = shape_for(sid, names)
            v = None
            if s is not None:
                v = s.encode_safe(f[1::2]) if safe else s.encode(f[1::2])
                if v is not None and s is not last:
                    last, last_names = s, list(s.names)
            if v is None:
                v = codec.encode_entry(fmt(i), f)
            pairs.append((short(sid, i[0], i[1]) if i[1] < wide else key(sid, i), v))
            rows.append((i, f))
        return pairs, _nodes.runs(rows)

    def _one_set(self, sid, items, fs, blob):
        """``encode_many`` of items whose fields ``fs`` are all joined
        text with no unsafe byte (``blob``: them joined by a NUL word),
        if they all have one field set and it is (or can be made) one of
        the stream's: split once, sliced into columns, encoded in one
        formatting pass (``Shape.encode_columns``).  None otherwise."""
        n = len(fs)
        c = fs[0].count(b"\n") + 1                # words per entry
        w = c + 1                                  # ... and the NUL word after it
        words = blob.split(b"\n")
        if c & 1 or len(words) != w * n - 1 or words[c::w].count(b"\0") != n - 1:
            return None                            # entries of other lengths: a NUL word out of place
        return self._columns(sid, list(map(_first, items)), words, c, n)

    def encode_block(self, sid, ids, block):
        """``encode_many`` of entries ``ids`` whose fields are those of
        ``block`` (a codec.AddBlock, split already): a column at a time
        when they hold no unsafe byte and have one field set that is (or
        can be made) one of the stream's."""
        text, n = block.text, block.n
        if len(text.translate(None, codec.UNSAFE_BUT_NEWLINE)) == len(text) - n + 1:
            done = self._columns(sid, ids, block.words, block.c, n)
            if done is not None:
                return done
        return self.encode_many(sid, list(zip(ids, map(_second, block.pairs()))))

    def _columns(self, sid, ids, words, c, n):
        """The end of ``_one_set``: entries ``ids`` whose fields are the
        ``words``, ``c`` an entry and a NUL word after each."""
        w = c + 1
        for j in range(0, c, 2):
            col = words[j::w]
            if col.count(col[0]) != n:
                return None                        # another field set among them
        return self._encoded(sid, ids, tuple(words[0:c:2]), [words[j::w] for j in range(1, c, 2)], n)

    def _list_set(self, sid, items):
        """``encode_many`` of items whose fields are lists (a command's
        arguments), if they all have one field set and no unsafe byte:
        sliced into columns and encoded as ``_one_set`` does.  None
        otherwise."""
        fs = list(map(_second, items))
        n = len(fs)
        c = len(fs[0])
        if not c or c & 1 or set(map(type, fs)) != _LIST or set(map(len, fs)) != {c}:
            return None
        cols = [list(map(itemgetter(j), fs)) for j in range(c)]
        for col in cols[0::2]:
            if col.count(col[0]) != n:
                return None                        # another field set among them
        vals = cols[1::2]
        try:
            blob = b"".join(chain.from_iterable(vals))
        except TypeError:
            return None
        if len(blob.translate(None, codec.UNSAFE)) != len(blob):
            return None                            # a value with an unsafe byte: one by one
        return self._encoded(sid, list(map(_first, items)), tuple(fs[0][0::2]), vals, n)

    def _encoded(self, sid, ids, names, cols, n):
        """The (key, value) pairs and node runs of entries ``ids`` with
        field set ``names`` and value columns ``cols``, encoded in one
        formatting pass; None when the set is not (and cannot be made)
        one of the stream's."""
        s = self._of(sid)[1].get(names, _ABSENT)
        if s is _ABSENT:
            s = self.shape_for(sid, names)
        if s is None:
            return None
        first, last = ids[0], ids[-1]
        if first[0] == last[0] and last[1] - first[1] == n - 1:     # ascending: one millisecond's run
            keys = codec.run_keys(sid, first[0], first[1], n)
        else:
            keys = codec.entry_keys(sid, ids)
        return list(zip(keys, s.encode_columns(cols))), [(ids, names, cols)]

    def drop(self, sid):
        """Forget every field set of stream ``sid`` (the stream goes)."""
        self._kv.delete_prefix(self._db, codec.sid_prefix(sid))
        self._cache.pop(("shapes", sid), None)
