"""alight_sandbox.quoting: which statements quote a hidden test's assertion, found by parsing real test sources."""

from __future__ import annotations

from alight_sandbox.quoting import hidden_assertions, mask, quoted_assertions

SOURCE = """import unittest

import pytest

from shop import price, total

TABLE = [("apple", 120), ("pear", 95)]


@pytest.mark.parametrize(("fruit", "cents"), TABLE)
def test_price(fruit, cents):
    assert price(fruit) == cents


def test_total_of_a_basket():
    basket = ["apple", "apple", "melon"]
    expected = 640
    assert total(basket) == expected


def test_each_discount():
    def check(code, percent):
        assert discount(code) == percent

    check("SPRING24", 15)


class PricesMixin:
    def test_free_item(self):
        self.assertEqual(price("sample"), 100)


class TestPrices(unittest.TestCase, PricesMixin):
    pass
"""
FILE = "tests/test_shop.py"


def quoted(statement: str, test: str) -> list[str]:
    return quoted_assertions(statement, hidden_assertions([f"{FILE}::{test}"], {FILE: SOURCE}))


def test_a_case_id_naming_input_and_expected_value_quotes_a_row_of_a_parametrize_table() -> None:
    assert quoted("Failing: tests/test_shop.py::test_price[apple-120]", "test_price[apple-120]")


def test_the_expected_value_quoted_next_to_the_wrong_one_is_a_quote() -> None:
    assert quoted("AssertionError: assert 119 == 120", "test_price[apple-120]")


def test_literals_assigned_to_the_asserted_names_count_as_its_operands() -> None:
    assert quoted("total(['apple', 'apple', 'melon']) gave 630", "test_total_of_a_basket")
    assert quoted("AssertionError: assert 630 == 640", "test_total_of_a_basket")


def test_a_helper_defined_in_the_test_binds_its_parameters_from_its_calls() -> None:
    assert quoted("discount('SPRING24') returned 10, not 15", "test_each_discount")
    assert not quoted("discount('SPRING24') is wrong", "test_each_discount")  # an input alone is not a quote


def test_a_method_inherited_from_a_mixin_in_the_same_file_is_found() -> None:
    assert quoted("price('sample') returned 0, not 100", "TestPrices::test_free_item")


def test_a_description_without_the_tests_literals_quotes_nothing() -> None:
    statement = "test_price fails for 2 cases: price() returns one cent less than the table says. Fix that."
    assert not quoted(statement, "test_price[apple-120]")


def test_a_literal_inside_a_longer_word_or_number_is_not_a_quote() -> None:
    assert not quoted("pineapples cost 1200 or 95.5 cents", "test_price[pear-95]")


def test_an_expected_word_alone_must_be_quoted_to_count() -> None:
    source = "def test_label():\n    assert label(3) == 'that'\n"
    assertions = hidden_assertions(["t.py::test_label"], {"t.py": source})
    assert not quoted_assertions("Fix the code that computes labels.", assertions)
    assert quoted_assertions("assert 'thus' == 'that'", assertions)


def test_masking_removes_everything_the_check_finds() -> None:
    assertions = hidden_assertions([f"{FILE}::test_price[apple-120]"], {FILE: SOURCE})
    literals = [lit for a in assertions for lit in a.case]
    statement = "tests/test_shop.py::test_price[apple-120]: AssertionError: assert 119 == 120 for 'apple'"
    masked = mask(statement, literals)
    assert masked == "tests/test_shop.py::test_price[...-...]: AssertionError: assert 119 == ... for ..."
    assert not quoted_assertions(masked, assertions)


def test_a_test_that_is_not_in_the_sources_has_no_assertions() -> None:
    assert hidden_assertions(["tests/other.py::test_x", f"{FILE}::test_missing"], {FILE: SOURCE}) == []
