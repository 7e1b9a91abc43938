from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from dojo.errors import field_problems


class Inner(BaseModel):
    size: int


class Outer(BaseModel):
    name: str
    inner: Inner

    @field_validator("name")
    @classmethod
    def _short(cls, v: str) -> str:
        if len(v) > 3:
            raise ValueError("name is longer than 3 characters")
        return v


def problems_of(data: object, whole: str = "") -> list[str]:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(data)
    return field_problems(caught.value, whole)


def test_each_problem_is_its_field_path_and_pydantics_message_without_its_noise() -> None:
    got = problems_of({"name": "long name", "inner": {"size": "many"}})
    assert got == [
        "name: name is longer than 3 characters",  # (pydantic's "Value error, " prefix left out)
        "inner.size: Input should be a valid integer, unable to parse string as an integer",
    ]
    assert all("input_value" not in p and "https://" not in p for p in got)


def test_a_problem_of_the_whole_input_is_named_as_the_caller_says() -> None:
    assert problems_of([1, 2], "line") == ["line: Input should be a valid dictionary or instance of Outer"]
    assert problems_of([1, 2]) == ["Input should be a valid dictionary or instance of Outer"]
