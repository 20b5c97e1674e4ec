"""oomdoctor.records: record types behave as the stdlib dataclasses they replace on the start-up path, each one
checked side by side with a ``@dataclass`` twin where the two must agree."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import ClassVar

import pytest

from oomdoctor import records
from oomdoctor.records import field, record


@record
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", repr=False, compare=False)
    KIND: ClassVar[str] = "point"


@dataclasses.dataclass
class PointDC:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)
    note: str = dataclasses.field(default="", repr=False, compare=False)
    KIND: ClassVar[str] = "point"


@record(frozen=True)
class Pair:
    left: Point
    right: tuple[Point, ...] = ()


@record(slots=True)
class Slotted:
    a: int
    b: list[int] = field(default_factory=list)


@record(frozen=True, slots=True)
class FrozenSlotted:
    a: int
    b: str = "b"


@record
class Checked:
    value: int
    double: int = 0

    def __post_init__(self) -> None:
        self.double = 2 * self.value


@record
class Child(Point):
    z: int = 3


def test_fields_are_the_annotations_in_order_without_class_vars() -> None:
    assert [f.name for f in records.fields(Point)] == [f.name for f in dataclasses.fields(PointDC)]
    assert [f.name for f in records.fields(Point(1))] == ["x", "y", "tags", "note"]
    assert [f.name for f in records.fields(Child)] == ["x", "y", "tags", "note", "z"]
    note = records.fields(Point)[3]
    assert note.default == "" and note.repr is False and note.compare is False
    assert records.fields(Point)[2].default_factory is list
    assert Point.KIND == "point" and Point.y == 0  # a default stays on the class, as with a dataclass
    with pytest.raises(TypeError):
        records.fields(PointDC)


def test_defaults_factories_and_positional_arguments() -> None:
    one, two = Point(1), Point(1)
    assert (one.x, one.y, one.tags, one.note) == (1, 0, [], "")
    assert one.tags is not two.tags  # a factory makes each instance its own
    assert Point(1, 2, ["a"], "n").tags == ["a"] and Point(1, 2, ["a"], "n").note == "n"
    assert Point(y=5, x=4) == Point(4, 5)
    assert Child(1, z=9).z == 9 and Child(1).tags == []


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {}), ((1,), {"xx": 2}), ((1, 2, [], "", 5), {}), ((1,), {"x": 2})],
    ids=["missing", "misspelt keyword", "too many", "twice"],
)
def test_wrong_arguments_raise_the_same_type_error_as_a_dataclass(args: tuple, kwargs: dict) -> None:
    with pytest.raises(TypeError) as ours:
        Point(*args, **kwargs)
    with pytest.raises(TypeError) as theirs:
        PointDC(*args, **kwargs)
    assert str(ours.value).replace("Point.", "PointDC.") == str(theirs.value)


def test_repr_and_eq_are_the_dataclass_ones() -> None:
    assert repr(Point(1, 2, ["a"], "hidden")) == repr(PointDC(1, 2, ["a"], "hidden")).replace(
        "PointDC", "Point"
    )
    assert repr(Pair(Point(1))) == "Pair(left=Point(x=1, y=0, tags=[]), right=())"
    assert Point(1, note="a") == Point(1, note="b")  # note is not compared
    assert Point(1) != Point(2) and Point(1) != PointDC(1)  # another type is never equal
    assert Point(1).__eq__(PointDC(1)) is NotImplemented
    assert Child(1) != Point(1)


def test_mutable_records_are_not_hashable_and_frozen_ones_hash_their_compared_fields() -> None:
    with pytest.raises(TypeError):
        hash(Point(1))
    frozen = FrozenSlotted(1)
    assert hash(frozen) == hash(FrozenSlotted(1)) and len({frozen, FrozenSlotted(1), FrozenSlotted(2)}) == 2


def test_frozen_records_refuse_assignment_and_deletion() -> None:
    pair = Pair(Point(1))
    with pytest.raises(records.FrozenRecordError, match="cannot assign to field 'left'"):
        pair.left = Point(2)  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'left'"):
        del pair.left  # type: ignore[misc]
    with pytest.raises(records.FrozenRecordError):
        FrozenSlotted(1).a = 2  # type: ignore[misc]
    mutable = Point(1)
    mutable.y = 7
    assert mutable.y == 7


def test_post_init_runs_on_init_and_on_replace() -> None:
    assert Checked(3).double == 6
    assert records.replace(Checked(3), value=5).double == 10


def test_slots_records_keep_their_fields_in_slots() -> None:
    slotted = Slotted(1)
    assert not hasattr(slotted, "__dict__") and Slotted.__slots__ == ("a", "b")
    assert slotted == Slotted(1, []) and repr(slotted) == "Slotted(a=1, b=[])"
    slotted.a = 2
    with pytest.raises(AttributeError):
        slotted.c = 3  # type: ignore[attr-defined]


def test_replace_makes_a_new_record_and_checks_its_keywords() -> None:
    pair = Pair(Point(1), (Point(2),))
    other = records.replace(pair, left=Point(3))
    assert other == Pair(Point(3), (Point(2),)) and pair.left == Point(1) and other.right is pair.right
    with pytest.raises(TypeError, match="unexpected keyword argument 'lft'"):
        records.replace(pair, lft=Point(3))
    with pytest.raises(TypeError):
        records.replace(PointDC(1), x=2)


def test_asdict_is_recursive_like_dataclasses_asdict() -> None:
    pair = Pair(Point(1, tags=["a"]), (Point(2),))
    plain = records.asdict(pair)
    assert plain == {
        "left": {"x": 1, "y": 0, "tags": ["a"], "note": ""},
        "right": ({"x": 2, "y": 0, "tags": [], "note": ""},),
    }
    assert plain["left"]["tags"] is not pair.left.tags  # copied, never shared
    assert records.asdict(PointDC(1, tags=["a"])) == dataclasses.asdict(PointDC(1, tags=["a"]))
    holder = {"k": Point(1)}
    assert records.asdict(Slotted(1, [2])) == {"a": 1, "b": [2]}
    with pytest.raises(TypeError):
        records.asdict(holder)
    with pytest.raises(TypeError):
        records.asdict(Point)


def test_is_record_copy_and_pickle() -> None:
    assert records.is_record(Point) and records.is_record(Point(1))
    assert not records.is_record(PointDC(1)) and not records.is_record({"x": 1})
    for value in (Point(1, tags=["a"]), Pair(Point(1)), Slotted(1, [2]), FrozenSlotted(4, "x")):
        for again in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
            assert again == value and type(again) is type(value)


def test_a_misplaced_or_shared_default_is_refused_and_a_class_writes_its_own_methods() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @record
        class Bad:
            a: int = 0
            b: int

    with pytest.raises(ValueError, match="mutable default <class 'list'> for field tags"):

        @record
        class Shared:
            tags: list[str] = []  # the mistake it refuses

    @record(frozen=True)
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "own" and hash(Own(1)) == 7 and Own(1) == Own(1)
