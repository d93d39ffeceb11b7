"""The launcher's and the set-up's defects (issue 58, items 7, 10 and 20). None of them is a command
line run through ``main()``: each happens around it (a JVM killed under its driver, a signal to
``spark-submit.sh`` or the flow service's cancel before the driver can take it, the resolution of
the JVM packages before anything runs), so each is proved by dedicated tests of real processes:

- item 7, ``tests/e2e/test_stopping.py`` (a JVM killed with SIGKILL): a run of 400,000 records
  through ``./spark-submit.sh``, its JVM killed mid-run; the driver is gone within seconds, the
  rerun exits 0 and the Delta table (read with delta-rs) holds every valid record once.
  ``tests/cli/test_jvm_watch.py``: the driver ends with a JVM killed, with one it was started from
  through a script, and at once when its JVM is gone before it looks. ``tests/commit/test_lease.py``
  (a holder that died but is not yet reaped): a zombie holds no lease;
- item 10, ``tests/e2e/test_stopping.py`` (a stop at any moment): SIGTERM to ``./spark-submit.sh``
  before the JVM, before the driver takes signals and during planning: exit 143, nothing in the
  sink nor the error table, and the rerun publishes once; a stop no driver takes kills the JVM
  after the grace, and a run that ends by itself meanwhile keeps its exit code.
  ``tests/service/test_executions.py`` (a cancel in the first seconds): the service's cancel at
  once and before the driver: CANCELLED, exit 143, no lake rows, no replica files.
  ``tests/cli/test_launch.py``: the ``engine`` command holds a stop the same way;
- item 20, ``tests/e2e/test_setup.py``: the set-up (``scripts/bootstrap.sh``) resolving a real
  artifact from Maven Central with a fake home whose ``~/.m2`` holds its POM without its jar (a
  first set-up; a cache poisoned by the old set-up, with Central's POM and with a local build's; a
  cache whose records mislead), the jar checked against Central's SHA-1 and the home left
  untouched, also by the class archive's training. ``tests/cli/test_jvm_packages.py``: what is
  forgotten of a cache, and what is kept.
"""

from __future__ import annotations

from tests.catalogue.case import Case

CASES: list[Case] = []
