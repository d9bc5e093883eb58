"""Recorded routings: validation, ``.npy`` / ``.pt`` loading, saving."""

from __future__ import annotations

import os

from ._base import Routing, RoutingFileError, numpy


# ------------------------------------------------------------------------ validation
def validate(topk_idx, *, num_experts: int, num_ranks: int, num_max_tokens_per_rank: int | None = None,
             what: str = "routing"):
    """``topk_idx`` as a ``[num_ranks, tokens, top-k]`` integer array, or a one-line
    :class:`RoutingFileError` naming ``what``, the offending value and what is allowed.

    A 2-D ``[num_ranks * tokens, top-k]`` array is split evenly over the ranks. Entries
    must be ``-1`` or ``0..num_experts-1`` and distinct within a token (except ``-1``).
    """
    np = numpy()
    if not isinstance(topk_idx, np.ndarray):
        raise RoutingFileError(f"{what}: holds {type(topk_idx).__name__}, expected an integer array [ranks, tokens, top-k]")
    check_shape(topk_idx.shape, topk_idx.dtype, num_ranks=num_ranks, num_max_tokens_per_rank=num_max_tokens_per_rank,
                what=what)
    if topk_idx.ndim == 2:
        topk_idx = topk_idx.reshape(num_ranks, topk_idx.shape[0] // num_ranks, topk_idx.shape[1])
    if topk_idx.size:
        lo, hi = int(topk_idx.min()), int(topk_idx.max())
        if lo < -1 or hi >= num_experts:
            bad = lo if lo < -1 else hi
            where = tuple(int(i) for i in np.argwhere(topk_idx == bad)[0])
            raise RoutingFileError(f"{what}: expert index {bad} at [rank, token, slot] = {list(where)}; "
                                   f"allowed -1 (none) or 0..{num_experts - 1}")
    if topk_idx.shape[2] > 1 and topk_idx.size:
        ordered = np.sort(topk_idx, axis=2)
        repeated = (ordered[:, :, 1:] == ordered[:, :, :-1]) & (ordered[:, :, 1:] >= 0)
        if repeated.any():
            rank, token = (int(i) for i in np.argwhere(repeated.any(axis=2))[0])
            count = int(repeated.any(axis=2).sum())
            raise RoutingFileError(f"{what}: {count:,} token(s) name an expert twice, first at rank {rank} token "
                                   f"{token} ({topk_idx[rank, token].tolist()}); a token's experts must be distinct")
    return topk_idx.astype(np.int32, copy=False) if num_experts <= 2**31 - 1 else topk_idx


def _npy_header(name: str) -> tuple[tuple, object]:
    """``(shape, dtype)`` from the header of the ``.npy`` file ``name``, reading nothing else; a
    malformed header (a negative dimension, no header at all) is one :class:`RoutingFileError`."""
    np = numpy()
    from numpy.lib import format as npy

    try:
        with open(name, "rb") as f:
            version = npy.read_magic(f)
            read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, _, dtype = read(f)
    except (ValueError, OSError, EOFError, TypeError, SyntaxError) as error:
        raise RoutingFileError(f"--routing-file: {name}: not a .npy array ({_first_line(error)})") from None
    if not isinstance(shape, tuple) or any(not isinstance(n, int) or n < 0 for n in shape):
        raise RoutingFileError(f"--routing-file: {name}: header shape "
                               f"{list(shape) if isinstance(shape, tuple) else shape!r}: dimensions must be >= 0")
    return shape, np.dtype(dtype)


def check_shape(shape: tuple, dtype, *, num_ranks: int, num_max_tokens_per_rank: int | None, what: str) -> None:
    """The checks of :func:`validate` that need only the shape and dtype (run on a file's header
    before its data is read)."""
    np = numpy()
    if dtype == np.bool_ or not np.issubdtype(dtype, np.integer):
        raise RoutingFileError(f"{what}: dtype {dtype}, expected an integer dtype (int64, int32 ...)")
    if len(shape) == 2 and shape[0] % num_ranks == 0:
        shape = (num_ranks, shape[0] // num_ranks, shape[1])
    if len(shape) != 3:
        raise RoutingFileError(f"{what}: shape {list(shape)}, expected [ranks, tokens, top-k] "
                               f"(or [ranks x tokens, top-k] with a multiple of {num_ranks} rows)")
    ranks, tokens, k = shape
    if ranks != num_ranks:
        raise RoutingFileError(f"{what}: shape {list(shape)} routes {ranks} ranks, but --ranks is {num_ranks}")
    if k < 1:
        raise RoutingFileError(f"{what}: shape {list(shape)} has top-k 0; expected >= 1")
    if num_max_tokens_per_rank is not None and tokens > num_max_tokens_per_rank:
        raise RoutingFileError(f"{what}: {tokens} tokens per rank > --tokens {num_max_tokens_per_rank}; "
                               "raise --tokens")


def _first_line(error: BaseException) -> str:
    """The first line of ``error``'s message, or its type when the message is empty (torch's
    error for an empty file has none)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def load(path: str | os.PathLike, *, num_ranks: int, num_experts: int, num_max_tokens_per_rank: int | None = None):
    """A recorded routing from ``.npy`` (numpy) or ``.pt`` / ``.pth`` (torch, a tensor or a
    dict with ``topk_idx``), validated by :func:`validate`."""
    np = numpy()
    name = os.fspath(path)
    suffix = os.path.splitext(name)[1].lower()
    if not os.path.isfile(name):
        what = "no such file" if not os.path.exists(name) else "not a regular file (a folder, device or pipe)"
        raise RoutingFileError(f"--routing-file: {name}: {what}")
    if suffix == ".npy":
        what = f"--routing-file {name}"
        shape, dtype = _npy_header(name)
        # The declared shape and dtype are checked before any data is read: a header declaring
        # (4, 10^8, 1) in a sparse file is refused at once, not after reading 3.2 GB.
        check_shape(shape, dtype, num_ranks=num_ranks, num_max_tokens_per_rank=num_max_tokens_per_rank, what=what)
        try:
            # Mapped, then copied: a header that promises more than the file holds fails here at
            # once (mmap length > file size) instead of allocating what the header says.
            data = np.array(np.load(name, mmap_mode="r", allow_pickle=False))
        except (ValueError, OSError, EOFError, OverflowError) as error:
            reason = _first_line(error)
            if reason.startswith("mmap length is greater than file size"):
                reason = "the file is shorter than the array its header describes"
            raise RoutingFileError(f"--routing-file: {name}: not a .npy array ({reason})") from None
    elif suffix in (".pt", ".pth"):
        from .._lazy import optional

        torch = optional("torch", "--routing-file .pt needs torch: pip install 'epbuf[torch]' "
                                  "(or save the routing with numpy.save as .npy)")
        try:
            data = torch.load(name, map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises many types for a bad file
            reason = _first_line(error)
            if reason.startswith("Weights only load failed"):  # torch's advice to unpickle it: not ours to give
                raise RoutingFileError(f"--routing-file: {name}: holds objects, not only tensors; save "
                                       "topk_idx as a tensor or .npy") from None
            raise RoutingFileError(f"--routing-file: {name}: not a torch file ({reason}); save topk_idx as a "
                                   "tensor, or as .npy") from None
        if isinstance(data, dict):
            data = data.get("topk_idx")
        if not isinstance(data, torch.Tensor):
            raise RoutingFileError(f"--routing-file: {name}: holds no tensor; save topk_idx or {{'topk_idx': tensor}}")
        data = data.detach().cpu().numpy()
    else:
        raise RoutingFileError(f"--routing-file: {name}: unknown file type {suffix or '(none)'!r}; use .npy or .pt")
    topk_idx = validate(data, num_experts=num_experts, num_ranks=num_ranks,
                        num_max_tokens_per_rank=num_max_tokens_per_rank, what=f"--routing-file {name}")
    return Routing(topk_idx, num_experts, name=os.path.basename(name), seed=None,
                   description=f"recorded routing {os.path.basename(name)}")


def save(path: str | os.PathLike, routing: Routing, *, option: str = "--save-routing") -> None:
    """Write ``routing.topk_idx`` as ``.npy`` (whole or not at all)."""
    np = numpy()
    from ..io import write_atomic

    write_atomic(path, lambda f: np.save(f, routing.topk_idx, allow_pickle=False), binary=True, option=option)
