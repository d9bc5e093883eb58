"""``Record``: frozen, keyword-only value classes without importing ``dataclasses``.

Why not ``@dataclass(frozen=True, kw_only=True, slots=True)``? Cold start. ``epbuf hint``
must answer about as fast as the interpreter starts (benchmarks/cold_start.py), and on
the project's machines ``import dataclasses`` (it pulls in ``inspect``, ``ast``, ``dis``
...) plus generating code for a dozen classes cost more than the rest of the command
put together (benchmarks/README.md has the figures). ``Record`` gives the same
behaviour the code relies on — keyword-only construction with defaults, immutability,
``__repr__``, ``__eq__``, ``__hash__``, ``replace`` and ``__post_init__`` — from plain
class annotations, with no code generation at import.

>>> class Point(Record):
...     x: int
...     y: int = 0
>>> p = Point(x=1)
>>> p
Point(x=1, y=0)
>>> p.replace(y=2) == Point(x=1, y=2)
True
>>> p.x = 3
Traceback (most recent call last):
...
AttributeError: Point is frozen; use .replace(x=...)
"""

from __future__ import annotations

__all__ = ["Record", "factory"]

#: Instances of a class built through the generic ``__init__`` before its own is compiled:
#: compiling one costs about as much as 40 generic constructions, and most classes of a
#: one-shot command (``epbuf hint``) are built only a few times (benchmarks/README.md).
COMPILE_AFTER = 16
_num_instances: dict = {}


class factory:
    """A default built fresh for every instance: ``data: dict = factory(dict)``."""

    __slots__ = ("make",)

    def __init__(self, make) -> None:
        self.make = make


class Record:
    """Base of epbuf's value records. Fields are the class's annotations, in order."""

    _record_fields: tuple[str, ...] = ()
    _record_defaults: dict = {}

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        fields = list(cls._record_fields)
        defaults = dict(cls._record_defaults)
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if name.startswith("_") or str(annotation).startswith("ClassVar"):
                continue
            if name not in fields:
                fields.append(name)
            if name in cls.__dict__:
                defaults[name] = cls.__dict__[name]
        cls._record_fields = tuple(fields)
        cls._record_defaults = defaults
        if "__init__" not in cls.__dict__:
            cls.__init__ = Record.__init__  # compiled into a fast, class-specific one once used often

    def __init__(self, **values) -> None:
        cls = type(self)
        if cls.__dict__.get("__init__") is Record.__init__:
            count = _num_instances.get(cls, 0) + 1
            _num_instances[cls] = count
            if count >= COMPILE_AFTER:
                cls.__init__ = _compile_init(cls)
                cls.__init__(self, **values)
                return
        self._generic_init(**values)

    def _generic_init(self, **values) -> None:
        setter = object.__setattr__
        defaults = self._record_defaults
        for name in self._record_fields:
            if name in values:
                value = values.pop(name)
            elif name in defaults:
                value = defaults[name]
                if type(value) is factory:
                    value = value.make()
            else:
                raise TypeError(f"{type(self).__name__}() missing keyword argument {name!r}")
            setter(self, name, value)
        if values:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments {sorted(values)}")
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen; use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self._record_fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._record_fields)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__,) + self._values())

    def replace(self, **changes: object):
        """A copy with ``changes`` applied (``__post_init__`` runs again)."""
        values = {name: getattr(self, name) for name in self._record_fields}
        values.update(changes)
        return type(self)(**values)

    @classmethod
    def _trusted(cls, values: dict):
        """An instance from a complete, already validated ``values`` dict, skipping
        ``__post_init__`` (sweeps build many plans whose every value was checked once)."""
        obj = cls.__new__(cls)
        obj.__dict__.update(values)
        return obj

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return cls._record_fields

    def as_dict(self) -> dict:
        """Field name -> value (shallow)."""
        return {name: getattr(self, name) for name in self._record_fields}


def _compile_init(cls: type) -> object:
    """A keyword-only ``__init__`` for ``cls`` with its defaults, like the one ``dataclasses``
    generates, compiled once the class has been instantiated ``COMPILE_AFTER`` times (not at
    import), so only the classes a command builds often pay for it."""
    params, body = [], []
    namespace: dict = {"_defaults": cls._record_defaults, "_factory": factory}
    for name in cls._record_fields:
        if name in cls._record_defaults:
            default = cls._record_defaults[name]
            params.append(f"{name}=_defaults[{name!r}]")
            if type(default) is factory:
                body.append(f"    if type({name}) is _factory: {name} = {name}.make()")
        else:
            params.append(name)
        body.append(f"    d[{name!r}] = {name}")
    head = "def __init__(self, *, " + ", ".join(params) + "):" if params else "def __init__(self):"
    lines = [head, "    d = self.__dict__"] + body
    if getattr(cls, "__post_init__", None) is not None:
        lines.append("    self.__post_init__()")
    exec("\n".join(lines), namespace)  # noqa: S102 - code built from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init
