"""Record types that cost almost nothing to define: the ``@dataclass`` of the start-up path, without ``exec``.

CPython's ``@dataclass`` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and frozen
``__setattr__`` as source text and compiles it with ``exec`` (about 0.4 ms a class; ``import dataclasses``
also imports ``inspect``): the 70 record types a ``diagnose`` start defines cost it about 30 ms, more than all
of oomdoctor's own work. ``@record`` gives a class the same behaviour from methods written once here and
shared by every record type, reading the class's fields from its annotations (names only: with ``from
__future__ import annotations`` they are strings, and a ``ClassVar`` is not a field) and its class-level
defaults or ``field(...)`` specifiers. Defining one costs a few microseconds; building an instance costs
about what the generated ``__init__`` costs (``benchmarks/bench_records.py`` prints both as ratios).

What a record does, as the stdlib dataclass does with the same options:
- ``__init__`` takes every field positionally or by keyword, in declaration order (a base record's fields
  first); a default is shared, a ``default_factory`` is called for each instance; ``__post_init__`` is called
  when the class has one; a missing, repeated or unknown argument is a ``TypeError`` with the same words;
- ``__repr__`` is ``Name(a=1, b='x')`` over the fields with ``repr=True``;
- ``__eq__`` (``eq=True``, the default) compares the fields with ``compare=True`` of two instances of the
  same class; ``__hash__`` hashes them when ``frozen=True`` and is ``None`` otherwise (a mutable record is
  not hashable); a method the class writes itself is kept;
- ``frozen=True``: assigning or deleting an attribute raises ``FrozenRecordError`` (an ``AttributeError``,
  like ``dataclasses.FrozenInstanceError``); ``__post_init__`` may still use ``object.__setattr__``;
- ``slots=True`` makes a new class with ``__slots__`` (and no class-level defaults), as ``dataclass`` does.

``fields``, ``replace``, ``asdict`` and ``is_record`` are the functions of the same names in ``dataclasses``;
``asdict`` also walks a stdlib dataclass met inside a record (and one given to it), so mixed trees convert.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

if TYPE_CHECKING:  # typing has it from Python 3.11; mypy reads it from typing_extensions' stubs either way
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_kwargs: Any) -> Any:
        return lambda decorated: decorated


_T = TypeVar("_T")
_ATOMS = frozenset({str, int, float, bool, type(None), bytes, complex})


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenRecordError(AttributeError):
    """An assignment to, or deletion of, a field of a frozen record."""


class Field:
    """One field of a record: its name, its annotation (a string), its default or default factory."""

    __slots__ = ("name", "type", "default", "default_factory", "repr", "compare", "metadata")

    def __init__(
        self,
        default: Any = MISSING,
        default_factory: Any = MISSING,
        repr: bool = True,  # noqa: A002 - the dataclasses spelling
        compare: bool = True,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.metadata: Mapping[str, Any] = metadata if metadata is not None else {}

    def __repr__(self) -> str:
        return (
            f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"
        )


@overload
def field(
    *, default: _T, repr: bool = ..., compare: bool = ..., metadata: Mapping[str, Any] | None = ...
) -> _T: ...
@overload
def field(
    *,
    default_factory: Callable[[], _T],
    repr: bool = ...,
    compare: bool = ...,
    metadata: Mapping[str, Any] | None = ...,
) -> _T: ...
@overload
def field(*, repr: bool = ..., compare: bool = ..., metadata: Mapping[str, Any] | None = ...) -> Any: ...
def field(
    *,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    repr: bool = True,  # noqa: A002 - the dataclasses spelling
    compare: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> Any:
    """A field's default or default factory, and whether repr and ``==`` read it (as ``dataclasses.field``)."""
    return Field(default, default_factory, repr, compare, metadata)


# --- reading a class's fields ------------------------------------------------------------------------------


def _is_class_var(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


def _own_fields(cls: type) -> list[Field]:
    """The fields ``cls`` itself annotates; a ``field(...)`` left on the class is replaced by its default."""
    found = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_class_var(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        spec = value if isinstance(value, Field) else Field(default=value)
        if isinstance(value, Field):
            if value.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, value.default)
        if type(spec.default).__hash__ is None:  # a list, dict or set every instance would share
            raise ValueError(
                f"mutable default {type(spec.default)} for field {name} is not allowed: use default_factory"
            )
        spec.name, spec.type = name, annotation
        found.append(spec)
    return found


def _collect(cls: type) -> tuple[Field, ...]:
    merged: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            merged[f.name] = f
    for f in _own_fields(cls):
        merged[f.name] = f
    ordered = tuple(merged.values())
    seen_default = ""
    for f in ordered:
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = f.name
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    return ordered


# --- the shared methods ------------------------------------------------------------------------------------


class _Plan:
    """What the shared methods need of one record class, worked out once when the class is made."""

    __slots__ = ("names", "steps", "template", "unfilled", "post_init", "repr_names", "compared", "slots")

    def __init__(self, cls: type, fields: tuple[Field, ...], slots: bool) -> None:
        self.names = tuple(f.name for f in fields)
        self.steps = tuple((f.name, f.default, f.default_factory) for f in fields)
        # Every field in order with its default (MISSING where there is none): updating a copy with the
        # arguments keeps the fields' order, as the generated __init__ assigns them.
        self.template = {f.name: f.default for f in fields}
        # The fields the template leaves MISSING: required (no factory) or made by their factory.
        self.unfilled = tuple(
            (f.name, None if f.default_factory is MISSING else f.default_factory)
            for f in fields
            if f.default is MISSING
        )
        self.post_init = getattr(cls, "__post_init__", None)
        self.repr_names = tuple(f.name for f in fields if f.repr)
        self.compared = _tuple_getter([f.name for f in fields if f.compare])
        self.slots = slots


def _tuple_getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names)


def _arguments_error(cls: type, plan: _Plan, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TypeError:
    """The ``TypeError`` CPython raises for these arguments to a generated ``__init__``."""
    where = f"{cls.__qualname__}.__init__()"
    if len(args) > len(plan.names):
        required = sum(default is MISSING and factory is MISSING for _, default, factory in plan.steps)
        most = len(plan.names) + 1
        takes = f"{most}" if required + 1 == most else f"from {required + 1} to {most}"
        return TypeError(f"{where} takes {takes} positional arguments but {len(args) + 1} were given")
    for name in kwargs:
        if name not in plan.template:
            return TypeError(f"{where} got an unexpected keyword argument {name!r}")
        if name in plan.names[: len(args)]:
            return TypeError(f"{where} got multiple values for argument {name!r}")
    given = set(plan.names[: len(args)]) | kwargs.keys()
    missing = [
        n
        for n, default, factory in plan.steps
        if n not in given and default is MISSING and factory is MISSING
    ]
    quoted = [repr(n) for n in missing]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" and {quoted[-1]}"
    s = "" if len(missing) == 1 else "s"
    return TypeError(f"{where} missing {len(missing)} required positional argument{s}: {listed}")


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    plan: _Plan = type(self).__record_plan__
    values = plan.template.copy()
    if args:
        if len(args) > len(plan.names) or (kwargs and not kwargs.keys().isdisjoint(plan.names[: len(args)])):
            raise _arguments_error(type(self), plan, args, kwargs)
        values.update(zip(plan.names, args, strict=False))
    values.update(kwargs)
    if len(values) != len(plan.names):  # a keyword that names no field
        raise _arguments_error(type(self), plan, args, kwargs)
    for name, factory in plan.unfilled:
        if values[name] is MISSING:
            if factory is None:
                raise _arguments_error(type(self), plan, args, kwargs)
            values[name] = factory()
    if plan.slots:
        for name, value in values.items():
            object.__setattr__(self, name, value)
    else:
        self.__dict__.update(values)
    if plan.post_init is not None:
        plan.post_init(self)


def _repr(self: Any) -> str:
    plan: _Plan = type(self).__record_plan__
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in plan.repr_names)
    return f"{type(self).__qualname__}({inner})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared = type(self).__record_plan__.compared
    return compared(self) == compared(other)


def _hash(self: Any) -> int:
    return hash(type(self).__record_plan__.compared(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenRecordError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenRecordError(f"cannot delete field {name!r}")


def _frozen_getstate(self: Any) -> list[Any]:
    return [getattr(self, name) for name in type(self).__record_plan__.names]


def _frozen_setstate(self: Any, state: list[Any]) -> None:
    for name, value in zip(type(self).__record_plan__.names, state, strict=True):
        object.__setattr__(self, name, value)


# --- the decorator -----------------------------------------------------------------------------------------


def _with_slots(cls: type, fields: tuple[Field, ...]) -> type:
    """A copy of ``cls`` whose instances keep the fields in ``__slots__`` (as ``dataclass(slots=True)``)."""
    names = tuple(f.name for f in fields)
    body = {k: v for k, v in cls.__dict__.items() if k not in names and k not in ("__dict__", "__weakref__")}
    body["__slots__"] = tuple(
        n for n in names if not any(n in getattr(b, "__slots__", ()) for b in cls.__mro__[1:])
    )
    made = type(cls)(cls.__name__, cls.__bases__, body)
    made.__qualname__ = cls.__qualname__
    return made


def _set_if_absent(cls: type, name: str, value: Any) -> None:
    if name not in cls.__dict__:
        setattr(cls, name, value)


def _hash_of_class(cls: type) -> Any:
    """The class's own ``__hash__`` (MISSING when it writes none; Python sets None beside an own ``__eq__``)."""
    own = cls.__dict__.get("__hash__", MISSING)
    return MISSING if own is None and "__eq__" in cls.__dict__ else own


def _make(cls: type, frozen: bool, eq: bool, slots: bool) -> type:
    fields = _collect(cls)
    own_hash = _hash_of_class(cls)
    if slots:
        cls = _with_slots(cls, fields)
    cls.__record_fields__ = fields  # type: ignore[attr-defined]
    cls.__record_plan__ = _Plan(cls, fields, slots)  # type: ignore[attr-defined]
    _set_if_absent(cls, "__init__", _init)
    _set_if_absent(cls, "__repr__", _repr)
    _set_if_absent(cls, "__match_args__", tuple(f.name for f in fields))
    if eq:
        _set_if_absent(cls, "__eq__", _eq)
        if own_hash is MISSING:
            cls.__hash__ = _hash if frozen else None  # type: ignore[assignment,method-assign]
    if frozen:
        cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign,assignment]
        cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign,assignment]
        if slots:
            cls.__getstate__ = _frozen_getstate  # type: ignore[attr-defined]
            cls.__setstate__ = _frozen_setstate  # type: ignore[attr-defined]
    return cls


@overload
@dataclass_transform(field_specifiers=(field, Field))
def record(cls: type[_T], /) -> type[_T]: ...
@overload
def record(
    *, frozen: bool = False, eq: bool = True, slots: bool = False
) -> Callable[[type[_T]], type[_T]]: ...
def record(
    cls: type[_T] | None = None, /, *, frozen: bool = False, eq: bool = True, slots: bool = False
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """Make ``cls`` a record type: ``@record`` or ``@record(frozen=True, eq=..., slots=...)``."""

    def wrap(c: type[_T]) -> type[_T]:
        return _make(c, frozen, eq, slots)

    return wrap if cls is None else wrap(cls)


# --- the functions of dataclasses ----------------------------------------------------------------------------


def is_record(obj: Any) -> bool:
    """Whether ``obj`` is a record type or an instance of one."""
    return hasattr(obj, "__record_plan__")


def fields(obj: Any) -> tuple[Field, ...]:
    """The fields of a record type or instance, in order."""
    found = getattr(obj, "__record_fields__", None)
    if found is None:
        raise TypeError("must be called with a record type or instance")
    return found  # type: ignore[no-any-return]


def replace(obj: _T, /, **changes: Any) -> _T:
    """A new record like ``obj`` with ``changes`` (made by ``__init__``, so ``__post_init__`` runs again)."""
    plan: _Plan | None = getattr(type(obj), "__record_plan__", None)
    if plan is None:
        raise TypeError("replace() should be called on record instances")
    values = {name: getattr(obj, name) for name in plan.names}
    values.update(changes)
    return type(obj)(**values)


def asdict(obj: Any) -> dict[str, Any]:
    """The record ``obj`` as a dict, recursively (records, stdlib dataclasses, lists, tuples, dicts; other
    values copied with ``copy.deepcopy``), as ``dataclasses.asdict``."""
    if not (is_record(obj) or _is_stdlib_dataclass(obj)) or isinstance(obj, type):
        raise TypeError("asdict() should be called on record instances")
    return _asdict(obj)  # type: ignore[no-any-return]


def _is_stdlib_dataclass(obj: Any) -> bool:
    return hasattr(type(obj), "__dataclass_fields__")


def _field_names(obj: Any) -> tuple[str, ...] | None:
    plan = getattr(type(obj), "__record_plan__", None)
    if plan is not None:
        return plan.names  # type: ignore[no-any-return]
    if _is_stdlib_dataclass(obj):  # imported already: the class was made by it
        return tuple(f.name for f in sys.modules["dataclasses"].fields(obj))
    return None


def _asdict(obj: Any) -> Any:
    if type(obj) in _ATOMS:
        return obj
    names = _field_names(obj)
    if names is not None:
        return {name: _asdict(getattr(obj, name)) for name in names}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_asdict(v) for v in obj])
    if isinstance(obj, list | tuple):
        return type(obj)(_asdict(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((_asdict(k), _asdict(v)) for k, v in obj.items())
    import copy

    return copy.deepcopy(obj)
