"""The repositories: each a tiny package with one bug, a unittest file whose test fails because
of it, and checks (expressions over the module) that grade the fix.

``fixed`` is the module as it should be; it stays on the host, where the checks' expected values
are computed from it. A check is an expression evaluated in the module's namespace; the visible
test's cases are among the checks, and so are cases it does not show, so a fix that only
special-cases the failing test does not pass.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    id: str
    package: str
    issue: str
    buggy: str
    fixed: str
    test: str
    checks: tuple[str, ...]

    @property
    def module_path(self) -> str:
        return f"{self.package}/core.py"

    @property
    def test_path(self) -> str:
        return f"tests/test_{self.package}.py"

    def files(self) -> dict[str, str]:
        """The repository as the model's sandbox gets it."""
        return {
            f"{self.package}/__init__.py": f"from {self.package}.core import *  # noqa: F403\n",
            self.module_path: self.buggy,
            "tests/__init__.py": "",
            self.test_path: self.test,
            "README.md": f"# {self.package}\n\nRun the tests with `python3 -m unittest -v`.\n",
        }


def _test(package: str, body: str) -> str:
    return f"import unittest\n\nfrom {package}.core import *  # noqa: F403\n\n\nclass Tests(unittest.TestCase):\n{body}"


TASKS = [
    Task(
        "slugify-case",
        "textkit",
        "slugify('Hello World') should give 'hello-world' but the result keeps capital letters.",
        'def slugify(text):\n    """Lower-case words joined by hyphens; other characters dropped."""\n'
        '    words = "".join(c if c.isalnum() or c.isspace() else " " for c in text).split()\n'
        '    return "-".join(words)\n',
        'def slugify(text):\n    """Lower-case words joined by hyphens; other characters dropped."""\n'
        '    words = "".join(c if c.isalnum() or c.isspace() else " " for c in text).split()\n'
        '    return "-".join(w.lower() for w in words)\n',
        _test("textkit", '    def test_slugify(self):\n        self.assertEqual(slugify("Hello World"), "hello-world")\n'),
        ('slugify("Hello World")', 'slugify("  Many   Spaces ")', 'slugify("C++ & Python!")', 'slugify("")', 'slugify("ALL CAPS 2")'),
    ),
    Task(
        "mean-floor",
        "stats",
        "mean([1, 2]) returns 1; it should return 1.5.",
        'def mean(values):\n    """The arithmetic mean of a non-empty list."""\n    return sum(values) // len(values)\n',
        'def mean(values):\n    """The arithmetic mean of a non-empty list."""\n    return sum(values) / len(values)\n',
        _test("stats", '    def test_mean(self):\n        self.assertEqual(mean([1, 2]), 1.5)\n'),
        ("mean([1, 2])", "mean([4])", "mean([1, 2, 3, 4])", "mean([-3, 4])", "mean([0.5, 0.25])"),
    ),
    Task(
        "stack-pop",
        "containers",
        "Stack.pop() returns the oldest item instead of the newest.",
        "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        self.items.append(item)\n\n"
        "    def pop(self):\n        return self.items.pop(0)\n\n    def __len__(self):\n        return len(self.items)\n\n\n"
        "def drain(items):\n    s = Stack()\n    for i in items:\n        s.push(i)\n    return [s.pop() for _ in range(len(s))]\n",
        "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        self.items.append(item)\n\n"
        "    def pop(self):\n        return self.items.pop()\n\n    def __len__(self):\n        return len(self.items)\n\n\n"
        "def drain(items):\n    s = Stack()\n    for i in items:\n        s.push(i)\n    return [s.pop() for _ in range(len(s))]\n",
        _test("containers", "    def test_pop_newest(self):\n        s = Stack()\n        s.push(1)\n        s.push(2)\n        self.assertEqual(s.pop(), 2)\n"),
        ("drain([1, 2])", "drain([])", "drain(['a', 'b', 'c'])", "drain([5])", "len(Stack())"),
    ),
    Task(
        "weekend-saturday",
        "calendar_tools",
        "is_weekend says Saturday is a weekday.",
        'import datetime\n\n\ndef is_weekend(year, month, day):\n    """True on Saturdays and Sundays."""\n'
        "    return datetime.date(year, month, day).weekday() >= 6\n",
        'import datetime\n\n\ndef is_weekend(year, month, day):\n    """True on Saturdays and Sundays."""\n'
        "    return datetime.date(year, month, day).weekday() >= 5\n",
        _test("calendar_tools", "    def test_saturday(self):\n        self.assertTrue(is_weekend(2024, 6, 1))\n"),
        ("is_weekend(2024, 6, 1)", "is_weekend(2024, 6, 2)", "is_weekend(2024, 6, 3)", "is_weekend(2023, 12, 30)", "is_weekend(2023, 12, 29)"),
    ),
    Task(
        "inventory-quantity",
        "shop",
        "total_value ignores how many of each item are in stock.",
        'def total_value(items):\n    """Sum of price * quantity over (name, price, quantity) rows."""\n'
        "    return sum(price for _, price, qty in items)\n",
        'def total_value(items):\n    """Sum of price * quantity over (name, price, quantity) rows."""\n'
        "    return sum(price * qty for _, price, qty in items)\n",
        _test("shop", '    def test_quantities(self):\n        self.assertEqual(total_value([("pen", 2, 3)]), 6)\n'),
        ('total_value([("pen", 2, 3)])', "total_value([])", 'total_value([("a", 1, 0), ("b", 5, 2)])', 'total_value([("x", 10, 1)])', 'total_value([("a", 3, 3), ("b", 1, 1)])'),
    ),
    Task(
        "csv-strip",
        "tabular",
        "split_row('a, b') gives ['a', ' b']: cells keep the spaces after commas.",
        'def split_row(line):\n    """Cells of a comma-separated line, without surrounding spaces."""\n    return line.split(",")\n',
        'def split_row(line):\n    """Cells of a comma-separated line, without surrounding spaces."""\n'
        "    return [cell.strip() for cell in line.split(\",\")]\n",
        _test("tabular", '    def test_spaces(self):\n        self.assertEqual(split_row("a, b"), ["a", "b"])\n'),
        ('split_row("a, b")', 'split_row("x")', 'split_row(" 1 ,2 , 3 ")', 'split_row("a,,b")', 'split_row("")'),
    ),
    Task(
        "fizzbuzz-range",
        "games",
        "fizzbuzz(15) stops at 14: the last number is missing.",
        'def fizzbuzz(n):\n    """The FizzBuzz strings for 1..n."""\n    out = []\n    for i in range(1, n):\n'
        '        out.append("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i))\n    return out\n',
        'def fizzbuzz(n):\n    """The FizzBuzz strings for 1..n."""\n    out = []\n    for i in range(1, n + 1):\n'
        '        out.append("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i))\n    return out\n',
        _test("games", '    def test_last(self):\n        self.assertEqual(fizzbuzz(15)[-1], "FizzBuzz")\n'),
        ("fizzbuzz(15)[-1]", "len(fizzbuzz(15))", "fizzbuzz(1)", "fizzbuzz(5)", "fizzbuzz(0)"),
    ),
    Task(
        "clamp-swapped",
        "numeric",
        "clamp(15, 0, 10) returns 0 instead of 10.",
        'def clamp(x, lo, hi):\n    """x limited to the range [lo, hi]."""\n    return min(lo, max(hi, x))\n',
        'def clamp(x, lo, hi):\n    """x limited to the range [lo, hi]."""\n    return max(lo, min(hi, x))\n',
        _test("numeric", "    def test_high(self):\n        self.assertEqual(clamp(15, 0, 10), 10)\n"),
        ("clamp(15, 0, 10)", "clamp(-5, 0, 10)", "clamp(5, 0, 10)", "clamp(0, 0, 0)", "clamp(2.5, 1, 2)"),
    ),
    Task(
        "word-count-spaces",
        "wordstats",
        "word_count('a  b') says 3: runs of spaces are counted as empty words.",
        'def word_count(text):\n    """How many whitespace-separated words text has."""\n    return len(text.split(" ")) if text else 0\n',
        'def word_count(text):\n    """How many whitespace-separated words text has."""\n    return len(text.split())\n',
        _test("wordstats", '    def test_double_space(self):\n        self.assertEqual(word_count("a  b"), 2)\n'),
        ('word_count("a  b")', 'word_count("")', 'word_count("   ")', 'word_count("one two three")', 'word_count("tab\\tsep\\nline")'),
    ),
    Task(
        "fahrenheit-formula",
        "units",
        "to_fahrenheit(100) should be 212.",
        'def to_fahrenheit(celsius):\n    """Degrees Fahrenheit for degrees Celsius."""\n    return celsius * 5 / 9 + 32\n',
        'def to_fahrenheit(celsius):\n    """Degrees Fahrenheit for degrees Celsius."""\n    return celsius * 9 / 5 + 32\n',
        _test("units", "    def test_boiling(self):\n        self.assertEqual(to_fahrenheit(100), 212)\n"),
        ("to_fahrenheit(100)", "to_fahrenheit(0)", "to_fahrenheit(-40)", "to_fahrenheit(37)", "to_fahrenheit(25)"),
    ),
    Task(
        "search-last-element",
        "search",
        "index_of([1, 3, 5], 5) returns -1 although 5 is in the list.",
        'def index_of(sorted_items, target):\n    """Index of target in an ascending list, or -1."""\n'
        "    lo, hi = 0, len(sorted_items) - 1\n    while lo < hi:\n        mid = (lo + hi) // 2\n"
        "        if sorted_items[mid] == target:\n            return mid\n        if sorted_items[mid] < target:\n"
        "            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1\n",
        'def index_of(sorted_items, target):\n    """Index of target in an ascending list, or -1."""\n'
        "    lo, hi = 0, len(sorted_items) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n"
        "        if sorted_items[mid] == target:\n            return mid\n        if sorted_items[mid] < target:\n"
        "            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1\n",
        _test("search", "    def test_last(self):\n        self.assertEqual(index_of([1, 3, 5], 5), 2)\n"),
        ("index_of([1, 3, 5], 5)", "index_of([1, 3, 5], 1)", "index_of([], 1)", "index_of([2], 2)", "index_of([1, 3, 5], 4)", "index_of([1, 2, 3, 4], 4)"),
    ),
    Task(
        "parse-bool-false",
        "settings",
        "parse_bool('false') returns True.",
        'def parse_bool(text):\n    """True for "1", "true", "yes", "on" (any case), False for "0", "false", "no", "off"."""\n'
        "    return bool(text)\n",
        'def parse_bool(text):\n    """True for "1", "true", "yes", "on" (any case), False for "0", "false", "no", "off"."""\n'
        '    value = text.strip().lower()\n    if value in ("1", "true", "yes", "on"):\n        return True\n'
        '    if value in ("0", "false", "no", "off"):\n        return False\n    raise ValueError(f"not a boolean: {text!r}")\n',
        _test("settings", '    def test_false(self):\n        self.assertIs(parse_bool("false"), False)\n'),
        ('parse_bool("false")', 'parse_bool("TRUE")', 'parse_bool(" off ")', 'parse_bool("1")', 'parse_bool("No")'),
    ),
    Task(
        "merge-mutates",
        "dicttools",
        "merged(a, b) changes a: the caller's dict gets b's keys.",
        'def merged(a, b):\n    """A new dict with a\'s items, then b\'s (b wins); a and b are left unchanged."""\n'
        "    a.update(b)\n    return a\n",
        'def merged(a, b):\n    """A new dict with a\'s items, then b\'s (b wins); a and b are left unchanged."""\n'
        "    return {**a, **b}\n",
        _test("dicttools", '    def test_unchanged(self):\n        a = {"x": 1}\n        merged(a, {"y": 2})\n        self.assertEqual(a, {"x": 1})\n'),
        ('(lambda a: (merged(a, {"y": 2}), a))({"x": 1})', 'merged({}, {})', 'merged({"k": 1}, {"k": 2})', '(lambda b: (merged({"a": 0}, b), b))({"b": 1})'),
    ),
]
