"""Apache Spark: the ``xstream`` data source (``source``: batch and
streaming reads and writes of a store, its rows built as Arrow batches)
and ``xs archive`` (``archive``: old entries to Parquet, then trimmed).
The only part of ``storage`` that imports pyspark; nothing else in
``storage`` imports this package.  Who may import it: the porcelain
(``xs archive``) and users' Spark jobs.

    from storage.spark import register
    register(spark)           # spark.read.format("xstream") ...

Importing this package imports nothing heavy: ``register`` and the data
source's names load ``storage.spark.source`` (and pyspark) on first use,
so ``xs archive --dry-run`` works without pyspark.
"""


def register(spark):
    """Register the ``xstream`` data source with a SparkSession."""
    from storage.spark.source import register as _register
    return _register(spark)


def __getattr__(name):
    # the data source's classes and helpers, as before the package existed
    # (``from storage.spark import XStreamDataSource``)
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib
    if name in ("archive", "source"):          # the submodules: import them, not pyspark
        return importlib.import_module("storage.spark." + name)
    source = importlib.import_module("storage.spark.source")
    try:
        return getattr(source, name)
    except AttributeError:
        raise AttributeError("module 'storage.spark' has no attribute %r" % name) from None
