"""The bad-input catalogue: every bad input and fault found so far, as a table of cases
(:mod:`tests.catalogue.case`), run by ``test_catalogue.py``. A defect found becomes a row here."""
