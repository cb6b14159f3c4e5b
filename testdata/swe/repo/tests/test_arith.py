from toycalc import mul, sub


def test_mul():
    assert mul(3, 4) == 12


def test_sub():
    assert sub(5, 3) == 2
