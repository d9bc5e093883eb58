"""epbuf — exact, offline sizes of expert-parallel MoE communication buffers.

Standard library only. The main entry points:

>>> import epbuf
>>> plan = epbuf.Plan(hidden=7168, num_topk=6, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096)
>>> epbuf.report(plan, "ascend").buffer("EP buffer").num_bytes
354418688

See ``epbuf.plan`` (Plan, report, compare), ``epbuf.report`` (the result records),
``epbuf.backends`` (one module per upstream library) and ``epbuf.errors``.
"""

from .errors import ConfigFileError, EpbufError, InvalidArgumentError, UnknownNameError
from .plan import Plan, backend_names, compare, report

__version__ = "0.1.0"

__all__ = [
    "Plan",
    "report",
    "compare",
    "backend_names",
    "EpbufError",
    "InvalidArgumentError",
    "UnknownNameError",
    "ConfigFileError",
    "__version__",
]
