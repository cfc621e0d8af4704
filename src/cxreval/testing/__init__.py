"""Test doubles and reference implementations for tests, benchmarks and dry runs.

- :mod:`cxreval.testing.loopback`: a chat-completions server on 127.0.0.1 (OpenAI and Anthropic
  APIs) that answers with the rule engine or fails on demand
  (``python -m cxreval.testing.loopback --port 8011``).
- :mod:`cxreval.testing.reference`: slow, obviously-correct implementations that the fast ones
  are checked against (the LCS dynamic programme, ROUGE-L as pycocoevalcap computes it).
- :mod:`cxreval.testing.metric_tester`: the checks every report metric must pass
  (``MetricCase``, ``MetricTester``), run by cxreval on its own metrics and by plug-in authors
  on theirs (docs/scoring.md, "Writing a metric plug-in").
- :mod:`cxreval.testing.results`: whether two results folders hold the same content
  (``judgements.jsonl.gz`` by its rows, however the run cut it into gzip members).

Never imported by the runtime code: nothing under ``cxreval`` outside this package imports it
(``tests/test_metric_tester.py`` checks), so it can change with the tests that use it.
"""
