"""``cxreval review``: radiologists check the engine's judgements, and the tool measures its own
accuracy on the user's data (issue 15).

- :mod:`~cxreval.review.sampling`: a seeded sample of pairs, stratified by presence outcome and
  entity group, critical entities over-sampled, with Horvitz-Thompson inclusion weights.
- :mod:`~cxreval.review.db`: the review database (SQLite, WAL; application id and schema
  version so another tool's file is recognised); every answer committed when it is given.
- :mod:`~cxreval.review.server`: the local review page (Starlette + uvicorn, extra ``review``;
  imported only by ``cxreval review serve``).
- :mod:`~cxreval.review.accuracy`: the engine's accuracy per field against reviewers, re-weighted,
  with intervals; agreement between reviewers; the entities most often wrong.
- :mod:`~cxreval.review.export`: the reviewed judgements as a gold judgement table.
"""
