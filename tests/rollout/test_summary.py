from __future__ import annotations

import pytest

from dojo.rollout import pass_at_k


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    with pytest.raises(ValueError, match="at least 3 samples"):
        pass_at_k(2, 1, 3)
