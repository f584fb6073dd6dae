"""Kubernetes CEL library functions give Kubernetes' documented results on both backends."""

from __future__ import annotations

import pytest

from gitopsq.policy import get_backend

from .helpers import BACKENDS

TRUE_EXPRESSIONS = {
    # quantities (k8s.io/apiserver/pkg/cel/library/quantity.go)
    "isQuantity accepts a binary suffix": "isQuantity('20Mi')",
    "isQuantity accepts an exponent": "isQuantity('1e3')",
    "isQuantity rejects an unknown suffix": "!isQuantity('20Mo')",
    "isQuantity rejects upper-case K": "!isQuantity('200K')",
    "1Gi is greater than 500Mi": "quantity('1Gi').isGreaterThan(quantity('500Mi'))",
    "50k is less than 50M": "quantity('50k').isLessThan(quantity('50M'))",
    "compareTo orders decimal and binary": "quantity('50M').compareTo(quantity('50Mi')) == -1",
    "compareTo of equal amounts is zero": "quantity('1').compareTo(quantity('1000m')) == 0",
    "equal amounts are equal whatever the suffix": "quantity('1Gi') == quantity('1073741824')",
    "add a quantity": "quantity('50k').add(quantity('20')) == quantity('50020')",
    "add an int": "quantity('50k').add(20) == quantity('50020')",
    "sub an int": "quantity('50k').sub(20) == quantity('49980')",
    "sub below zero": "quantity('1').sub(quantity('2')).sign() == -1",
    "asInteger of a whole amount": "quantity('50.703k').asInteger() == 50703",
    "asApproximateFloat": "quantity('50.703k').asApproximateFloat() == 50703.0",
    "isInteger of a fraction": "!quantity('0.5').isInteger() && quantity('2k').isInteger()",
    "sign of zero": "quantity('0').sign() == 0",
    "sign of a negative milli amount": "quantity('-1.01m').sign() == -1",
    # lists (k8s lists library)
    "sum of ints": "[1, 2, 3].sum() == 6",
    "sum of doubles": "[1.0, 2.5].sum() == 3.5",
    "sum of an empty list": "[].sum() == 0",
    "sum of quantities (gitopsq extension)": "[quantity('1'), quantity('500m')].sum() == quantity('1.5')",
    "sum of quantities with an empty inner sum": "[quantity('1'), [].sum()].sum() == quantity('1')",
    "min": "[3, 1, 2].min() == 1",
    "max of strings": "['b', 'a'].max() == 'b'",
    "indexOf a missing value": "[1, 2].indexOf(3) == -1",
    "indexOf a string": "['a', 'b', 'a'].indexOf('a') == 0",
    "lastIndexOf": "[1, 2, 3, 2].lastIndexOf(2) == 3",
    "isSorted": "[1, 2, 2, 3].isSorted() && !['b', 'a'].isSorted()",
    # strings (cel-go strings extension)
    "lowerAscii": "'TacoCat'.lowerAscii() == 'tacocat'",
    "upperAscii leaves non-ASCII alone": "'TacoCÆt'.upperAscii() == 'TACOCÆT'",
    "trim": "' \\ttrim\\n '.trim() == 'trim'",
    "replace all": "'hello hello'.replace('he', 'we') == 'wello wello'",
    "replace once": "'hello hello'.replace('he', 'we', 1) == 'wello hello'",
    "split with a limit": "'a,b,c'.split(',', 2) == ['a', 'b,c']",
    "split": "'a,b,c'.split(',') == ['a', 'b', 'c']",
    "join without separator": "['a', 'b'].join() == 'ab'",
    "join with separator": "['a', 'b'].join('-') == 'a-b'",
    "indexOf with offset": "'hello mellow'.indexOf('ello', 2) == 7",
    "lastIndexOf with offset": "'hello mellow'.lastIndexOf('ello', 6) == 1",
    "substring from": "'tacocat'.substring(4) == 'cat'",
    "substring range": "'tacocat'.substring(0, 4) == 'taco'",
    "charAt the end is empty": "'hello'.charAt(5) == ''",
    "charAt": "'hello'.charAt(1) == 'e'",
    # regex (k8s regex library, RE2)
    "find": "'/path/to/file'.find('[a-z]+') == 'path'",
    "find without a match": "'abc'.find('[0-9]+') == ''",
    "findAll": "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
    "findAll with a limit": "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
    "matches is standard CEL": "'team-a'.matches('^team-[a-z]$')",
    # heterogeneous equality, as cel-cpp has it
    "values of different types are unequal": "dyn(1) != dyn('1')",
}

ERRORS = {
    "an invalid quantity": "quantity('lots')",
    "asInteger of a fraction": "quantity('1.5').asInteger()",
    "min of an empty list": "[].min()",
    "substring out of range": "'hello'.substring(3, 1)",
    "charAt past the end": "'hello'.charAt(6)",
    "an invalid regex": "'abc'.find('(')",
    "sum of mixed values": "[1, 'a'].sum()",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("expression", TRUE_EXPRESSIONS.values(), ids=list(TRUE_EXPRESSIONS))
def test_function_result(expression: str, backend: str) -> None:
    """The expression evaluates to true: the function behaves as Kubernetes documents it."""
    b = get_backend(backend)
    outcome = b.compile(expression).run(b.activation({}))
    assert outcome.error is None and outcome.value is True


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("expression", ERRORS.values(), ids=list(ERRORS))
def test_function_error(expression: str, backend: str) -> None:
    """Bad arguments are an evaluation error (a value), never a Python exception."""
    b = get_backend(backend)
    outcome = b.compile(expression).run(b.activation({}))
    assert outcome.error is not None and not outcome.over_budget
