"""Checking a file takes time linear in its comments, parameter lists and long expressions
(issue 12, finding 5: 2,000 commented functions took 17 s, 40,000 parameters 69 s, because
each comment, and each parameter, was compared against all the others).

Speed itself is measured by benchmarks/parse_print.py (its scaling rows print 1x and 10x
figures against the goal of at most 12x). This test only tells linear from quadratic, with a
margin wide enough for a noisy shared machine: ten times the input must take less than forty
times as long (a quadratic step takes about a hundred times as long)."""

from __future__ import annotations

import pathlib
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))

import parse_print  # noqa: E402  (benchmarks/parse_print.py: the generators of the scaling rows)

from tvmscript.checking import file_errors  # noqa: E402


def best_time(text: str, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        errors = file_errors(text, "<scaling>", 10)
        best = min(best, time.perf_counter() - start)
        assert errors == []
    return best


@pytest.mark.parametrize("make,n", [(parse_print._comments, 100), (parse_print._params, 400),
                                    (parse_print._flat_sum, 60)],
                         ids=["comments", "parameters", "flat-sum"])
def test_ten_times_the_input_takes_about_ten_times_as_long(make, n):
    small, large = best_time(make(n)), best_time(make(10 * n), rounds=2)
    assert large / small < 40, f"{n} -> {10 * n}: {small:.4f} s -> {large:.4f} s ({large / small:.0f}x)"
