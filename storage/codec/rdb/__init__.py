"""Redis's own serialization: DUMP / RESTORE payloads and RDB files
(pure functions and one reader class; no store).

What is here, in Redis's terms (rdb.c, listpack.c, lzf_d.c, crc64.c,
t_stream.c):

* lengths (``rdbSaveLen`` / ``rdbLoadLen``: 6-, 14-, 32- and 64-bit
  forms) and strings (raw, integer-encoded INT8/16/32, LZF-compressed);
  strings are written as ``rdbSaveRawString`` does with
  ``rdbcompression no`` (integer encoding, never LZF), read in every form;
* LZF decompression (lzf_d.c), written here;
* CRC-64 with the Jones polynomial, reflected, as crc64.c (the check
  value of "123456789" is 0xe9c6d914c4b8d9ca);
* listpacks (listpack.c): every element encoding, back-lengths checked
  on reading; strings that are canonical 64-bit integers are written as
  integers, as ``lpAppend`` does;
* the stream value (RDB_TYPE_STREAM_LISTPACKS 15, _2 19, _3 21): the
  listpack nodes keyed by master ID (16 bytes, ms and seq big-endian),
  each node's master entry and entries (flags, ID deltas, SAMEFIELDS),
  then length, last ID, [first ID, max-deleted ID, entries-added], the
  groups (name, last ID, [entries-read], the PEL with delivery times and
  counts) and their consumers (name, seen-time, [active-time in 21],
  their PEL IDs).  Written as type 19, which Redis 7.0 reads;
* a DUMP payload: type byte, value, RDB version (2 bytes LE), CRC-64
  (8 bytes LE) of everything before it;
* an RDB file: "REDIS" + 4-digit version, aux fields, SELECTDB,
  RESIZEDB, expiry / LRU / LFU opcodes, FUNCTION2, key-value pairs, EOF,
  CRC-64; values of the types xs does not hold are read through (checked
  as far as their framing goes) so they can be skipped and counted.

Anything malformed raises ``RdbError`` with a message for a person; no
reader ever trusts a length before checking it against what is there.
Public names begin with ``rdb_`` / ``RDB_`` / ``Rdb`` (storage.codec
re-exports them on first use).

The package: ``base`` (constants, errors, CRC-64, LZF, primitive
encodings), ``listpack``, ``reader`` (RdbReader, skipping other types),
``stream`` (the stream value) and ``files`` (DUMP payloads, RDB files).
"""
from storage.codec.rdb.base import (  # noqa: F401
    RDB_LISTPACK_MAX,
    RDB_LZF_MAX_RATIO,
    RDB_MAGIC,
    RDB_OPCODE_AUX,
    RDB_OPCODE_EOF,
    RDB_OPCODE_EXPIRETIME,
    RDB_OPCODE_EXPIRETIME_MS,
    RDB_OPCODE_FREQ,
    RDB_OPCODE_FUNCTION2,
    RDB_OPCODE_FUNCTION_PRE_GA,
    RDB_OPCODE_IDLE,
    RDB_OPCODE_MODULE_AUX,
    RDB_OPCODE_RESIZEDB,
    RDB_OPCODE_SELECTDB,
    RDB_OPCODE_SLOT_INFO,
    RDB_STREAM_TYPES,
    RDB_TYPE_HASH,
    RDB_TYPE_HASH_LISTPACK,
    RDB_TYPE_HASH_LISTPACK_EX,
    RDB_TYPE_HASH_LISTPACK_EX_PRE_GA,
    RDB_TYPE_HASH_METADATA,
    RDB_TYPE_HASH_METADATA_PRE_GA,
    RDB_TYPE_HASH_ZIPLIST,
    RDB_TYPE_HASH_ZIPMAP,
    RDB_TYPE_LIST,
    RDB_TYPE_LIST_QUICKLIST,
    RDB_TYPE_LIST_QUICKLIST_2,
    RDB_TYPE_LIST_ZIPLIST,
    RDB_TYPE_MODULE_2,
    RDB_TYPE_MODULE_PRE_GA,
    RDB_TYPE_SET,
    RDB_TYPE_SET_INTSET,
    RDB_TYPE_SET_LISTPACK,
    RDB_TYPE_STREAM_LISTPACKS,
    RDB_TYPE_STREAM_LISTPACKS_2,
    RDB_TYPE_STREAM_LISTPACKS_3,
    RDB_TYPE_STRING,
    RDB_TYPE_ZSET,
    RDB_TYPE_ZSET_2,
    RDB_TYPE_ZSET_LISTPACK,
    RDB_TYPE_ZSET_ZIPLIST,
    RDB_VERSION,
    RDB_VERSION_7_2,
    RDB_VERSION_MAX,
    STREAM_ITEM_FLAG_DELETED,
    STREAM_ITEM_FLAG_SAMEFIELDS,
    RdbError,
    rdb_crc64,
    rdb_is_object_type,
    rdb_len,
    rdb_lzf_decompress,
    rdb_ms_time,
    rdb_raw_id,
    rdb_string,
    rdb_type_name,
)
from storage.codec.rdb.files import (  # noqa: F401
    rdb_dump_payload,
    rdb_file_crc,
    rdb_file_db,
    rdb_file_end,
    rdb_file_expire,
    rdb_file_header,
    rdb_file_key,
    rdb_next,
    rdb_payload_reader,
    rdb_payload_valid,
    rdb_read_header,
)
from storage.codec.rdb.listpack import (  # noqa: F401
    rdb_listpack,
    rdb_listpack_items,
)
from storage.codec.rdb.reader import (  # noqa: F401
    RdbReader,
    rdb_skip_value,
)
from storage.codec.rdb.stream import (  # noqa: F401
    RdbNodeEntries,
    rdb_stream_events,
    rdb_stream_node,
    rdb_stream_value,
)
