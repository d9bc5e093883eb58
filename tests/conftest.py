"""Test-wide settings.

Hypothesis' per-example deadline measures wall time, which on a shared two-core machine
says more about the neighbours than about epbuf (no timing assertions in tests: speed is
measured in benchmarks/). The examples themselves stay as many as each test asks for.
"""

from hypothesis import settings

settings.register_profile("epbuf", deadline=None)
settings.load_profile("epbuf")
