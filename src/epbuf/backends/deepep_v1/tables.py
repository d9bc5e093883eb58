"""The default configs (``Buffer.get_dispatch_config`` / ``get_combine_config``) and the
recipe's ``hidden_bytes``: what upstream's sizing recipe feeds :class:`.config.Config`'s hints.

Upstream: ``deep_ep/buffers/legacy.py:233-290 @ dd758ca`` (``PY``; ``deep_ep/buffer.py``
before 2.0.0) and ``docs/legacy.md:130-153`` (``DOC``; the README before 2.0.0). The recipe:
for the dispatch and the combine config of the rank count, the max of each hint, with
``hidden_bytes = hidden * max(element size, 2)``.
"""

from __future__ import annotations

from ...errors import Checker, check_bool, check_int
from ...units import INT32_MAX
from .config import Config
from .constants import BF16_BYTES, DEFAULT_NUM_SMS, NUM_MAX_NVL_PEERS
from .versions import get_version

__all__ = ["get_dispatch_config", "get_combine_config", "supported_num_ranks", "get_hidden_bytes"]

# (nvl_send, nvl_recv, rdma_send, rdma_recv) per rank count, as upstream lists them (the RDMA
# receive count before rounding). Each era is the previous one plus the rows that commit
# changed, as upstream's history reads; "ebfe47e" answers every rank count <= 8 with one
# config (its `if num_ranks <= 8: return Config(num_sms, 6, 256, 6, 128)`). Version.tables
# names the era; tests/test_deepep_v1.py checks every era against its commit.
_Row = tuple[int, int, int, int]
_Tables = tuple[dict[int, _Row], dict[int, _Row]]
_INTRANODE_FALLBACK: _Row = (6, 256, 6, 128)  # ebfe47e:deep_ep/buffer.py:162-163, 190-191
_T_EBFE47E: _Tables = (
    {16: (16, 288, 20, 128), 24: (8, 288, 32, 128), 32: (8, 288, 32, 128), 64: (20, 288, 28, 128),
     128: (20, 560, 32, 128), 144: (32, 720, 12, 128), 160: (28, 720, 12, 128)},
    {16: (2, 288, 28, 128), 24: (1, 288, 20, 128), 32: (1, 288, 20, 128), 64: (1, 288, 20, 128),
     128: (1, 560, 12, 128), 144: (2, 720, 8, 128), 160: (2, 720, 8, 128)},
)


def _era(base: _Tables, dispatch: dict[int, _Row], combine: dict[int, _Row]) -> _Tables:
    return {**base[0], **dispatch}, {**base[1], **combine}


_T_1553FC4 = _era(_T_EBFE47E,  # "Improve EP2/4 performance" (2025-03-04): explicit EP2/4/8 rows
                  {2: (16, 256, 6, 128), 4: (16, 256, 6, 128), 8: (6, 256, 6, 128)},
                  {2: (6, 256, 6, 128), 4: (6, 256, 6, 128), 8: (6, 256, 6, 128)})
_T_C8DCEBA = _era(_T_1553FC4,  # TMA intranode kernels (#191, 2025-06-06); the table at 1.1.0
                  {2: (24, 256, 6, 128), 4: (6, 256, 6, 128)},
                  {2: (10, 256, 6, 128), 4: (9, 256, 6, 128), 8: (4, 256, 6, 128)})
_T_E6D61FC = _era(_T_C8DCEBA, {16: (36, 288, 20, 128), 32: (32, 288, 32, 128)}, {})  # 2025-07-04
_T_06F417D = _era(_T_E6D61FC, {}, {16: (4, 288, 16, 128), 24: (1, 288, 8, 128), 32: (1, 288, 8, 128)})  # 07-10
_T_BDD119F = _era(_T_06F417D, {}, {16: (4, 288, 12, 128)})  # "Update combine config" (07-22): tag v1.2.1
_T_C939644 = _era(  # EP48/96 (#421, 2025-09-22)
    _T_BDD119F,
    {32: (32, 288, 8, 128), 48: (32, 288, 8, 128), 64: (32, 288, 8, 128), 96: (20, 480, 12, 128),
     128: (20, 560, 12, 128)},
    {48: (1, 288, 8, 128), 64: (1, 288, 8, 128), 96: (1, 480, 8, 128), 128: (1, 560, 8, 128)})
_T_E02E4D2 = _era(_T_C939644, {24: (32, 288, 8, 128)}, {})  # EP24 (#432, 2025-09-26); main
TABLES: dict[str, _Tables] = {
    "ebfe47e": _T_EBFE47E, "1553fc4": _T_1553FC4, "c8dceba": _T_C8DCEBA, "e6d61fc": _T_E6D61FC,
    "06f417d": _T_06F417D, "bdd119f": _T_BDD119F, "c939644": _T_C939644, "e02e4d2": _T_E02E4D2,
}


def supported_num_ranks(version: str | None = None) -> tuple[int, ...]:
    """Rank counts the default config tables of ``version`` answer (``1..8`` at ebfe47e).

    >>> supported_num_ranks()
    (2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 144, 160)
    """
    v = get_version(version)
    low = tuple(range(1, NUM_MAX_NVL_PEERS + 1)) if v.tables == "ebfe47e" else ()
    return low + tuple(sorted(TABLES[v.tables][0]))


def _table_config(kind: int, num_ranks: int, num_sms: int, version: str | None) -> Config:
    check_int("num_ranks", num_ranks, 1, INT32_MAX)
    check_int("num_sms", num_sms, 0, INT32_MAX, "Buffer.num_sms")
    v = get_version(version)
    name = ("get_dispatch_config", "get_combine_config")[kind]
    row = TABLES[v.tables][kind].get(num_ranks)
    if row is None and v.tables == "ebfe47e" and num_ranks <= NUM_MAX_NVL_PEERS:
        row = _INTRANODE_FALLBACK
    if row is None:
        c = Checker()
        c.add("num_ranks", num_ranks,
              f"Buffer.{name} at {v.id} knows {', '.join(map(str, supported_num_ranks(v.id)))} "
              f"(\"Unsupported number of EP ranks\", {v.cite('PY', '259' if kind == 0 else '289', name)}); "
              "pass a Config instead")
        c.raise_if_any()
    return Config(num_sms, *row)  # type: ignore[misc]


def get_dispatch_config(num_ranks: int, num_sms: int = DEFAULT_NUM_SMS, *, version: str | None = None) -> Config:
    """``Buffer.get_dispatch_config(num_ranks)`` (``PY:233-260``): the recommended dispatch config.

    Upstream reads ``num_sms`` from the class attribute ``Buffer.num_sms`` (``Buffer.set_num_sms``);
    here it is the second argument.

    Args:
        num_ranks: expert-parallel ranks (a key of the table; :func:`supported_num_ranks`).
        num_sms: ``Buffer.num_sms`` (20 unless ``Buffer.set_num_sms`` changed it).
        version: a version id or commit; the tables changed over time.

    >>> get_dispatch_config(16).as_tuple()
    (20, 36, 288, 20, 140)

    Raises:
        InvalidArgumentError: a rank count the table does not list (upstream asserts).
    """
    return _table_config(0, num_ranks, num_sms, version)


def get_combine_config(num_ranks: int, num_sms: int = DEFAULT_NUM_SMS, *, version: str | None = None) -> Config:
    """``Buffer.get_combine_config(num_ranks)`` (``PY:263-290``): the recommended combine config
    (arguments as :func:`get_dispatch_config`).

    >>> get_combine_config(16).as_tuple()
    (20, 4, 288, 12, 132)
    """
    return _table_config(1, num_ranks, num_sms, version)


def get_hidden_bytes(hidden: int, use_fp8_dispatch: bool) -> int:
    """``get_hidden_bytes`` of the recipe (``DOC:151-153``): ``hidden * max(element_size, 2)``.

    Upstream's helper takes the activation tensor ``x`` and reads ``x.size(1)`` and
    ``x.element_size()``; here the hidden size and the dtype choice stand for it. FP8
    inputs count as 2 bytes per element, so FP8 and BF16 size the same buffers.

    >>> get_hidden_bytes(7168, True), get_hidden_bytes(7168, False)
    (14336, 14336)
    """
    check_int("hidden", hidden, 1, INT32_MAX)
    element_size = 1 if check_bool("use_fp8_dispatch", use_fp8_dispatch) else BF16_BYTES
    return hidden * max(element_size, BF16_BYTES)
