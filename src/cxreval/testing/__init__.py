"""Test doubles and reference implementations for tests, benchmarks and dry runs.

- :mod:`cxreval.testing.loopback`: a chat-completions server on 127.0.0.1 (OpenAI and Anthropic
  APIs) that answers with the rule engine or fails on demand
  (``python -m cxreval.testing.loopback --port 8011``).
- :mod:`cxreval.testing.reference`: slow, obviously-correct implementations that the fast ones
  are checked against (the LCS dynamic programme, ROUGE-L as pycocoevalcap computes it).

Never imported by the runtime code: nothing under ``cxreval`` outside this package imports it
(``tests/test_metric_tester.py`` checks), so it can change with the tests that use it.
"""
