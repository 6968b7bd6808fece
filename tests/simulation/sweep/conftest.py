"""One SparkSession (local[2], no UI) for every sweep and trace-analysis test, started once per test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from conveyor.simulation.sweep import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The session, stopped when the test run ends (Spark's start-up costs 5-10 s, so only once)."""
    session = spark_session("local[2]", app_name="conveyor-tests", testing=True)
    yield session
    session.stop()
