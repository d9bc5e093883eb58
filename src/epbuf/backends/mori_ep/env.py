"""The environment variables that change what MORI-EP allocates, parsed as upstream parses them.

* ``MORI_EP_COMM`` — ``cco`` carves the handle's symmetric buffers from one CCO window (the
  arena) instead of the MORI-shmem heap; unset, it is ``cco`` on gfx125x and ``shmem``
  elsewhere, so ``shmem`` on MI300X, MI325X and MI355X (``PY:346-364``).
* ``MORI_SHMEM_MODE`` — ``static_heap`` (default), ``isolation`` or ``vmm_heap``, exact
  spellings only; anything else falls back to the static heap (``SHMEM_INIT:615-638``).
* ``MORI_SHMEM_HEAP_SIZE`` — the static heap, default 4 GiB (``SHMEM_H:61``), parsed by
  ``ParseSizeString``: suffixes ``GiB/MiB/KiB``, ``GB/MB/KB`` and ``G/M/K`` are all powers of
  1024, and ``std::stoull`` keeps only the leading integer (``SHMEM_INIT:96-150``).
* ``MORI_FP8_COMBINE_SCALE_DIM`` — blockwise combine scales per token, default 56; a value
  that is not a whole positive int is ignored (``CPP:127-136``, ``ENV:81-90,118-123``).
"""

from __future__ import annotations

from functools import lru_cache

from ..._record import Record
from ...errors import InvalidArgumentError, Problem
from ...units import GiB, INT32_MAX
from .config import DEFAULT_BLOCKWISE_SCALE_DIM
from .versions import CPP, ENV, SHMEM_INIT, src

__all__ = ["DEFAULT_STATIC_HEAP_NUM_BYTES", "ShmemSettings", "parse_size_string", "shmem_settings"]

DEFAULT_STATIC_HEAP_NUM_BYTES = 4 * GiB  # DEFAULT_STATIC_SYMMETRIC_HEAP_SIZE (SHMEM_H:61)
UINT64_MAX = (1 << 64) - 1
_WHITESPACE = " \t\n\v\f\r"


class ShmemSettings(Record):
    """Where the handle's symmetric buffers live, after the environment.

    Attributes:
        comm: ``"shmem"`` or ``"cco"`` (``MORI_EP_COMM``).
        shmem_mode: ``"static_heap"`` or ``"isolation"`` (``MORI_SHMEM_MODE``).
        heap_num_bytes: the static heap (``MORI_SHMEM_HEAP_SIZE``).
        blockwise_scale_dim: ``fp8BlockwiseCombineScaleDim`` (``MORI_FP8_COMBINE_SCALE_DIM``).
        notes: ``(severity, code, message)`` for values upstream ignores or reads differently
            than they look.
        read: the variables that were set, ``{name: value}``.
    """

    comm: str = "shmem"
    shmem_mode: str = "static_heap"
    heap_num_bytes: int = DEFAULT_STATIC_HEAP_NUM_BYTES
    blockwise_scale_dim: int = DEFAULT_BLOCKWISE_SCALE_DIM
    notes: tuple = ()
    read: tuple = ()


def parse_size_string(text: str) -> tuple[int, str]:
    """``ParseSizeString`` (``SHMEM_INIT:96-150``): ``(bytes, ignored tail)``.

    Suffixes are tried longest first and are all binary (``8GB`` is 8 GiB); the number is
    read by ``std::stoull``, which skips leading white space and stops at the first
    non-digit, so ``4.5G`` is 4 GiB; the ignored text is returned.

    >>> parse_size_string("8GB"), parse_size_string("512m"), parse_size_string("4.5G")
    ((8589934592, ''), (536870912, ''), (4294967296, '.5'))

    Raises:
        InvalidArgumentError: no leading digits (``std::stoull`` throws), a minus sign
            (``stoull`` wraps it), or a size beyond ``size_t``.
    """
    num = text
    multiplier = 1
    for suffixes, factor in ((("GiB", "gib"), 1 << 30), (("MiB", "mib"), 1 << 20), (("KiB", "kib"), 1 << 10)):
        if len(num) >= 3 and num[-3:] in suffixes:
            multiplier, num = factor, num[:-3]
            break
    if multiplier == 1:
        for suffixes, factor in ((("GB", "gb", "Gb"), 1 << 30), (("MB", "mb", "Mb"), 1 << 20), (("KB", "kb", "Kb"), 1 << 10)):
            if len(num) >= 2 and num[-2:] in suffixes:
                multiplier, num = factor, num[:-2]
                break
    if multiplier == 1 and num:
        factor = {"G": 1 << 30, "g": 1 << 30, "M": 1 << 20, "m": 1 << 20, "K": 1 << 10, "k": 1 << 10}.get(num[-1])
        if factor:
            multiplier, num = factor, num[:-1]
    body = num.lstrip(_WHITESPACE)
    if body.startswith("+"):
        body = body[1:]
    digits = len(body) - len(body.lstrip("0123456789"))
    why = f"MORI_SHMEM_HEAP_SIZE parsed by ParseSizeString ({src(SHMEM_INIT, '96-150')})"
    if body.startswith("-"):
        raise InvalidArgumentError([Problem("env", f"MORI_SHMEM_HEAP_SIZE={text}",
                                            f"a negative size wraps around in std::stoull; {why}")])
    if digits == 0:
        raise InvalidArgumentError([Problem("env", f"MORI_SHMEM_HEAP_SIZE={text}",
                                            f"not a size (std::stoull throws); use e.g. 8G, 8GiB, 8589934592; {why}")])
    value = int(body[:digits]) * multiplier
    if value > UINT64_MAX:
        raise InvalidArgumentError([Problem("env", f"MORI_SHMEM_HEAP_SIZE={text}", f"beyond size_t; {why}")])
    return value, body[digits:]


def _positive_int(text: str) -> int | None:
    """``detail::ParsePositiveInt`` (``ENV:81-90``): ``strtol`` over the whole string, 1..INT_MAX."""
    body = text.lstrip(_WHITESPACE)
    sign = body[:1] if body[:1] in "+-" else ""
    digits = body[len(sign):]
    if not digits or not digits.isdigit() or not digits.isascii():
        return None
    value = -int(digits) if sign == "-" else int(digits)
    return value if 0 < value <= INT32_MAX else None


def shmem_settings(plan) -> ShmemSettings:
    """The :class:`ShmemSettings` for ``plan.env`` (cached per distinct environment: sweeps ask
    once per configuration).

    Raises:
        InvalidArgumentError: an unreadable ``MORI_SHMEM_HEAP_SIZE`` or a zero-byte heap, or
            ``MORI_SHMEM_MODE=vmm_heap`` (not modeled: the VMM heap maps physical chunks of a
            device-dependent granularity on demand and falls back to the static heap on
            ROCm < 7, ``SHMEM_INIT:273-330``).
    """
    result = _settings(plan.env)
    if isinstance(result, InvalidArgumentError):
        raise result
    return result


@lru_cache(maxsize=256)
def _settings(env: tuple) -> ShmemSettings | InvalidArgumentError:
    try:
        return _parse(env)
    except InvalidArgumentError as error:
        return error


def _parse(env: tuple) -> ShmemSettings:
    def value_of(name: str) -> str | None:
        found = None
        for key, val in env:
            if key == name:
                found = val
        return found

    notes = []
    read = []
    comm_text = value_of("MORI_EP_COMM")
    comm = "shmem"
    if comm_text is not None:
        read.append(("MORI_EP_COMM", comm_text))
        # _ep_comm(): an explicit value wins; only "cco" selects the CCO window (PY:88-99, 361-363)
        comm = "cco" if comm_text.strip().lower() == "cco" else "shmem"
    mode_text = value_of("MORI_SHMEM_MODE")
    mode = "static_heap"
    if mode_text is not None:
        read.append(("MORI_SHMEM_MODE", mode_text))
        if mode_text in ("isolation", "ISOLATION"):
            mode = "isolation"
        elif mode_text in ("vmm_heap", "VMM_HEAP"):
            raise InvalidArgumentError([Problem(
                "env", f"MORI_SHMEM_MODE={mode_text}",
                f"the VMM heap is not modeled: it maps physical chunks of a device-dependent granularity on demand "
                f"and falls back to the static heap on ROCm < 7 ({src(SHMEM_INIT, '273-330')}); size it with "
                f"static_heap (the fallback) or isolation")])
        elif mode_text not in ("static_heap", "STATIC_HEAP"):
            notes.append(("info", "mori-ep.env-ignored",
                          f"MORI_SHMEM_MODE={mode_text!r} is not one of isolation, static_heap, vmm_heap (exact "
                          f"spellings): MORI-shmem warns and uses the static heap ({src(SHMEM_INIT, '615-638')})"))
    heap = DEFAULT_STATIC_HEAP_NUM_BYTES
    heap_text = value_of("MORI_SHMEM_HEAP_SIZE")
    if heap_text is not None:
        read.append(("MORI_SHMEM_HEAP_SIZE", heap_text))
        heap, tail = parse_size_string(heap_text)
        if heap == 0:
            raise InvalidArgumentError([Problem("env", f"MORI_SHMEM_HEAP_SIZE={heap_text}",
                                                f"a 0-byte static heap cannot hold anything ({src(SHMEM_INIT, '219-240')})")])
        if tail:
            notes.append(("warning", "mori-ep.env-truncated",
                          f"MORI_SHMEM_HEAP_SIZE={heap_text!r} is read as {heap:,} B: std::stoull stops at {tail!r} "
                          f"({src(SHMEM_INIT, '96-150')})"))
    scale_dim = DEFAULT_BLOCKWISE_SCALE_DIM
    scale_text = value_of("MORI_FP8_COMBINE_SCALE_DIM")
    if scale_text is not None:
        read.append(("MORI_FP8_COMBINE_SCALE_DIM", scale_text))
        parsed = _positive_int(scale_text)
        if parsed is None:
            notes.append(("warning", "mori-ep.env-ignored",
                          f"MORI_FP8_COMBINE_SCALE_DIM={scale_text!r} is not a whole int in 1..{INT32_MAX}: "
                          f"GetPositiveIntOr keeps the default {DEFAULT_BLOCKWISE_SCALE_DIM} "
                          f"({src(ENV, '81-90,118-123')}, {src(CPP, '127-130')})"))
        else:
            scale_dim = parsed
    return ShmemSettings(comm=comm, shmem_mode=mode, heap_num_bytes=heap, blockwise_scale_dim=scale_dim,
                         notes=tuple(notes), read=tuple(read))

