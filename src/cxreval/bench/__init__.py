"""Benchmarks over models, datasets and sites: config, runner, analyses and tables."""

from cxreval.bench.models import (
    BenchmarkResult,
    Correlation,
    EntityResult,
    ExamplePair,
    GroupResult,
    Interval,
    Leaderboard,
    LeaderboardRow,
    MetricInfo,
    SiteCell,
)

__all__ = [
    "BenchmarkResult",
    "Correlation",
    "EntityResult",
    "ExamplePair",
    "GroupResult",
    "Interval",
    "Leaderboard",
    "LeaderboardRow",
    "MetricInfo",
    "SiteCell",
]
