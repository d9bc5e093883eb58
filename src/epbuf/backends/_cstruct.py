"""C struct layout, for workspaces upstream sizes with ``sizeof(SomeStruct)``.

Members are laid out in order, each at the next multiple of its alignment; the
struct's size is rounded up to its own alignment (the largest member alignment or
an explicit ``alignas``). This is what a C++ compiler does for standard-layout
structs of scalars and arrays, which is all upstream's signal structs contain.

>>> struct_size([("a", 4, 4), ("b", 8, 8)], 8)
16
"""

from __future__ import annotations

from ..units import align


def struct_offsets(members: list[tuple[str, int, int]], struct_alignment: int = 1) -> tuple[dict[str, int], int]:
    """``(offsets, sizeof)`` for ``members`` given as ``(name, num_bytes, alignment)``."""
    offsets: dict[str, int] = {}
    cursor = 0
    largest = struct_alignment
    for name, num_bytes, alignment in members:
        cursor = align(cursor, alignment)
        offsets[name] = cursor
        cursor += num_bytes
        largest = max(largest, alignment)
    return offsets, align(cursor, largest)


def struct_size(members: list[tuple[str, int, int]], struct_alignment: int = 1) -> int:
    return struct_offsets(members, struct_alignment)[1]
