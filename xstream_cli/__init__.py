"""xs: the command line of the xs event log (Redis Streams in LMDB)."""
__version__ = "0.1.0"
