"""The recipes of xstream_cli.recipes that need Spark (xs archive), run
as written (see tests/cli/test_recipes.py)."""
import pytest

from tests.cli.test_recipes import NEEDS_SPARK, run_recipe

pytest.importorskip("pyspark")


@pytest.mark.parametrize("recipe", NEEDS_SPARK, ids=lambda r: r[0])
def test_the_spark_recipe_runs_as_written(tmp_path, recipe):
    run_recipe(tmp_path, recipe)
    assert list((tmp_path / "work" / "archive").glob("stream=*/date=*/*.parquet"))
