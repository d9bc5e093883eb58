"""One module per upstream library family; each turns a Plan into a Report.

* :mod:`epbuf.backends.ascend` — DeepEP-Ascend ``EPBuffer``

The registry that maps backend names to these modules is ``epbuf.plan.BACKENDS``.
"""
