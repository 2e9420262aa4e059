"""The problem set: each problem is a reference solution whose signature and docstring are the
spec the model sees, with input generators for its tests.

This module runs only on the host: expected outputs are computed here, from these references,
and never enter a sandbox. The module is long because it is data (one short function per
problem); the machinery is in ``grader.py`` and ``__init__.py``.
"""

import itertools
import math
import random
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Gen = Callable[[random.Random], tuple]


@dataclass(frozen=True)
class Problem:
    name: str
    solution: Callable[..., Any]
    edge_cases: tuple[tuple, ...]  # always tested; the first two are shown as examples
    gen: Gen  # random inputs for the rest of the tests


PROBLEMS: list[Problem] = []


def problem(gen: Gen, *edge_cases: tuple) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        PROBLEMS.append(Problem(fn.__name__, fn, edge_cases, gen))
        return fn

    return register


# --- input generators ---------------------------------------------------------------------------
def ints(lo: int, hi: int, n_lo: int = 0, n_hi: int = 10) -> Gen:
    return lambda r: ([r.randint(lo, hi) for _ in range(r.randint(n_lo, n_hi))],)


def one_int(lo: int, hi: int) -> Gen:
    return lambda r: (r.randint(lo, hi),)


def two_ints(lo: int, hi: int) -> Gen:
    return lambda r: (r.randint(lo, hi), r.randint(lo, hi))


def word(r: random.Random, lo: int = 1, hi: int = 8, letters: str = string.ascii_lowercase) -> str:
    return "".join(r.choice(letters) for _ in range(r.randint(lo, hi)))


def words(lo: int = 0, hi: int = 6) -> Gen:
    return lambda r: (" ".join(word(r) for _ in range(r.randint(lo, hi))),)


def one_word(lo: int = 0, hi: int = 10, letters: str = string.ascii_lowercase) -> Gen:
    return lambda r: (word(r, lo, hi, letters),)


def word_list(lo: int = 0, hi: int = 8) -> Gen:
    return lambda r: ([word(r, 1, 6) for _ in range(r.randint(lo, hi))],)


def either(yes: Gen, no: Gen) -> Gen:
    """Inputs from ``yes`` and ``no`` in turn, so a constant answer fails about half the tests."""
    turns = itertools.cycle([yes, no])
    return lambda r: next(turns)(r)


def palindrome(r: random.Random, letters: str = "ab") -> str:
    half = word(r, 1, 5, letters)
    return half + half[::-1][r.randint(0, 1) :]


def mixed_text(r: random.Random) -> tuple:
    return ("".join(r.choice(string.ascii_letters + string.digits + " .,!?") for _ in range(r.randint(0, 24))),)


# --- numbers ------------------------------------------------------------------------------------
@problem(one_int(-10_000, 10_000), (0,), (-472,), (9,))
def digit_sum(n: int) -> int:
    """Return the sum of the decimal digits of n (the sign is ignored)."""
    return sum(int(d) for d in str(abs(n)))


@problem(one_int(0, 400), (1,), (2,), (0,), (97,))
def is_prime(n: int) -> bool:
    """Return True if n is a prime number, False otherwise (0 and 1 are not prime)."""
    return n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))


@problem(one_int(0, 30), (0,), (1,), (10,))
def fibonacci(n: int) -> int:
    """Return the n-th Fibonacci number, with fibonacci(0) == 0 and fibonacci(1) == 1."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@problem(one_int(0, 15), (0,), (5,))
def factorial(n: int) -> int:
    """Return n! (the product 1 * 2 * ... * n; 0! is 1)."""
    return math.factorial(n)


@problem(lambda r: (lambda m: (m * r.randint(-20, 20), m * r.randint(-20, 20)))(r.randint(1, 12)), (12, 18), (0, 5), (0, 0), (-4, 6))
def gcd(a: int, b: int) -> int:
    """Return the greatest common divisor of a and b, always non-negative; gcd(0, 0) is 0."""
    return math.gcd(a, b)


@problem(two_ints(1, 60), (4, 6), (7, 7))
def lcm(a: int, b: int) -> int:
    """Return the least common multiple of two positive integers."""
    return a * b // math.gcd(a, b)


@problem(one_int(-5000, 5000), (123,), (-90,), (0,))
def reverse_integer(n: int) -> int:
    """Return n with its decimal digits reversed, keeping its sign (-90 -> -9)."""
    sign = -1 if n < 0 else 1
    return sign * int(str(abs(n))[::-1])


@problem(either(lambda r: (int(palindrome(r, "123456789")),), one_int(-2000, 2000)), (121,), (-121,), (10,))
def is_palindrome_number(n: int) -> bool:
    """Return True if n reads the same backwards as forwards (negative numbers never do)."""
    return n >= 0 and str(n) == str(n)[::-1]


@problem(one_int(0, 10_000), (10,), (0,), (255,))
def to_binary(n: int) -> str:
    """Return the binary representation of a non-negative integer, without a prefix ("0" for 0)."""
    return bin(n)[2:]


@problem(one_int(0, 100_000), (7,), (0,), (1024,))
def count_set_bits(n: int) -> int:
    """Return how many 1 bits the binary representation of the non-negative integer n has."""
    return bin(n).count("1")


@problem(one_int(1, 3999), (1994,), (4,), (3999,))
def to_roman(n: int) -> str:
    """Return n (1..3999) as a Roman numeral using subtractive notation (4 -> "IV")."""
    values = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
              (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
    out = []
    for value, numeral in values:
        count, n = divmod(n, value)
        out.append(numeral * count)
    return "".join(out)


@problem(lambda r: (to_roman(r.randint(1, 3999)),), ("MCMXCIV",), ("IX",), ("III",))
def from_roman(s: str) -> int:
    """Return the integer value of a valid Roman numeral (subtractive notation allowed)."""
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, ch in enumerate(s):
        v = values[ch]
        total += -v if i + 1 < len(s) and values[s[i + 1]] > v else v
    return total


@problem(one_int(2, 5000), (12,), (13,), (360,))
def prime_factors(n: int) -> list[int]:
    """Return the prime factors of n >= 2 in ascending order, with repetition (12 -> [2, 2, 3])."""
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out


@problem(one_int(1, 500), (12,), (1,), (28,))
def divisors(n: int) -> list[int]:
    """Return all positive divisors of n >= 1 in ascending order."""
    return [d for d in range(1, n + 1) if n % d == 0]


@problem(either(lambda r: (r.choice([6, 28, 496, 8128]),), one_int(0, 10_000)), (6,), (12,), (28,), (1,))
def is_perfect(n: int) -> bool:
    """Return True if n > 0 equals the sum of its divisors other than itself (6 = 1 + 2 + 3)."""
    return n > 0 and sum(d for d in range(1, n) if n % d == 0) == n


@problem(one_int(0, 2000), (10,), (2,), (0,))
def count_primes_below(n: int) -> int:
    """Return how many prime numbers are strictly less than n."""
    return sum(1 for k in range(2, n) if all(k % d for d in range(2, math.isqrt(k) + 1)))


@problem(one_int(1, 10_000), (6,), (27,), (1,))
def collatz_steps(n: int) -> int:
    """Return how many Collatz steps (n -> n/2 if even, else 3n+1) it takes n >= 1 to reach 1."""
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@problem(either(lambda r: (r.choice([0, 1, 5, 9, 153, 370, 371, 407, 1634, 8208, 9474, 54748, 92727, 93084]),), one_int(10, 100_000)), (153,), (10,), (0,), (9474,))
def is_armstrong(n: int) -> bool:
    """Return True if n equals the sum of its digits each raised to the number of digits."""
    digits = str(n)
    return n == sum(int(d) ** len(digits) for d in digits)


@problem(one_int(-5, 100), (0,), (5,), (-3,))
def triangular(n: int) -> int:
    """Return the sum 1 + 2 + ... + n for n >= 1, and 0 for n <= 0."""
    return n * (n + 1) // 2 if n > 0 else 0


@problem(two_ints(0, 20), (2, 10), (0, 0), (5, 3))
def int_power(base: int, exp: int) -> int:
    """Return base raised to the non-negative integer exp (0 ** 0 is 1)."""
    return base**exp


@problem(lambda r: (r.randint(1, 10_000), r.randint(2, 16)), (255, 16), (5, 2), (0, 7))
def to_base(n: int, base: int) -> str:
    """Return the non-negative integer n in the given base (2..16), digits 0-9 then lowercase a-f."""
    digits = "0123456789abcdef"
    if n == 0:
        return "0"
    out = []
    while n:
        n, rem = divmod(n, base)
        out.append(digits[rem])
    return "".join(reversed(out))


@problem(one_int(0, 100_000), (1234,), (0,), (1000,))
def digital_root(n: int) -> int:
    """Return the repeated digit sum of a non-negative integer until one digit remains."""
    while n >= 10:
        n = sum(int(d) for d in str(n))
    return n


@problem(either(lambda r: (4 * r.randint(1, 750),), one_int(1, 3000)), (2024,), (1900,), (2000,), (2023,))
def is_leap_year(year: int) -> bool:
    """Return True if the Gregorian year is a leap year."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


@problem(lambda r: (r.randint(-50, 120),), (100,), (-40,), (0,))
def celsius_to_fahrenheit(c: int) -> float:
    """Return the Fahrenheit temperature for c degrees Celsius (F = C * 9 / 5 + 32)."""
    return c * 9 / 5 + 32


# --- lists --------------------------------------------------------------------------------------
@problem(ints(-50, 50), ([1, 2, 3],), ([],), ([-5],))
def sum_of_squares(nums: list[int]) -> int:
    """Return the sum of the squares of the numbers."""
    return sum(x * x for x in nums)


@problem(ints(-50, 50, 1), ([3, 1, 4],), ([-7],))
def max_minus_min(nums: list[int]) -> int:
    """Return the largest number minus the smallest in a non-empty list."""
    return max(nums) - min(nums)


@problem(ints(-20, 20), ([1, 2, 3, 4],), ([],), ([1, 3],))
def sum_of_evens(nums: list[int]) -> int:
    """Return the sum of the even numbers in the list."""
    return sum(x for x in nums if x % 2 == 0)


@problem(ints(0, 6), ([1, 2, 1, 3, 2],), ([],))
def dedupe_keep_order(nums: list[int]) -> list[int]:
    """Return the numbers without repeats, each kept at its first position."""
    seen, out = set(), []
    for x in nums:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


@problem(ints(-30, 30), ([1, -2, 3, 10, -4, 7, 2, -5],), ([],), ([-3, -1],))
def max_subarray_sum(nums: list[int]) -> int:
    """Return the largest sum of a contiguous, possibly empty, run of the list (0 if all negative)."""
    best = cur = 0
    for x in nums:
        cur = max(0, cur + x)
        best = max(best, cur)
    return best


@problem(lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 10))], r.randint(-12, 12)), ([1, 2, 3, 4, 5], 2), ([], 3), ([1, 2], -1))
def rotate_right(nums: list[int], k: int) -> list[int]:
    """Return the list rotated right by k places (negative k rotates left); [] stays []."""
    if not nums:
        return []
    k %= len(nums)
    return nums[-k:] + nums[:-k] if k else list(nums)


@problem(lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 12))], r.randint(1, 5)), ([1, 2, 3, 4, 5], 2), ([], 3))
def chunk(nums: list[int], size: int) -> list[list[int]]:
    """Split the list into consecutive chunks of length size (>= 1); the last may be shorter."""
    return [nums[i : i + size] for i in range(0, len(nums), size)]


@problem(lambda r: ([[r.randint(0, 9) for _ in range(r.randint(0, 3))] for _ in range(r.randint(0, 4))],), ([[1, 2], [3], []],), ([],))
def flatten_once(lists: list[list[int]]) -> list[int]:
    """Concatenate the inner lists, in order."""
    return [x for inner in lists for x in inner]


@problem(ints(-20, 20), ([1, 2, 3],), ([],))
def running_sum(nums: list[int]) -> list[int]:
    """Return the running totals: element i is the sum of nums[0..i]."""
    out, total = [], 0
    for x in nums:
        total += x
        out.append(total)
    return out


@problem(ints(-10, 10, 0, 8), ([2, 7, 1, 8, 2],), ([],), ([5, 5, 5],))
def second_largest(nums: list[int]) -> int | None:
    """Return the second largest distinct value, or None if there are fewer than two distinct values."""
    distinct = sorted(set(nums))
    return distinct[-2] if len(distinct) >= 2 else None


@problem(lambda r: (lambda nums: (nums, r.choice(nums) if nums and r.random() < 0.6 else r.randint(0, 30)))(sorted(r.randint(0, 30) for _ in range(r.randint(0, 10)))), ([1, 3, 5, 7], 5), ([], 1), ([2, 4], 3))
def binary_search(nums: list[int], target: int) -> int:
    """Return an index of target in the ascending list nums, or -1 if absent; if it appears
    several times, return its first index."""
    lo, hi = 0, len(nums)
    while lo < hi:
        mid = (lo + hi) // 2
        if nums[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < len(nums) and nums[lo] == target else -1


@problem(lambda r: (sorted(r.randint(0, 20) for _ in range(r.randint(0, 6))), sorted(r.randint(0, 20) for _ in range(r.randint(0, 6)))), ([1, 4, 6], [2, 3, 7]), ([], [1]))
def merge_sorted(a: list[int], b: list[int]) -> list[int]:
    """Merge two ascending lists into one ascending list."""
    return sorted(a + b)


@problem(either(lambda r: (sorted(ints(-9, 9)(r)[0]),), ints(-9, 9, 2)), ([1, 2, 3],), ([3, 3, 1],), ([],))
def is_sorted(nums: list[int]) -> bool:
    """Return True if the list is in non-decreasing order."""
    return all(a <= b for a, b in itertools.pairwise(nums))


@problem(ints(0, 5), ([1, 3, 1, 2, 3, 1],), ([],))
def most_common(nums: list[int]) -> int | None:
    """Return the most frequent value; ties go to the smallest value; None for an empty list."""
    if not nums:
        return None
    counts = Counter(nums)
    return min(counts, key=lambda x: (-counts[x], x))


@problem(lambda r: (lambda nums: (nums, sum(r.sample(nums, 2)) if len(nums) > 1 and r.random() < 0.7 else r.randint(0, 30)))([r.randint(0, 15) for _ in range(r.randint(0, 8))]), ([2, 7, 11, 15], 9), ([], 4), ([3, 3], 6))
def two_sum(nums: list[int], target: int) -> list[int]:
    """Return [i, j] with i < j and nums[i] + nums[j] == target, the pair with the smallest j and
    then the smallest i; return [] if there is none."""
    for j in range(len(nums)):
        for i in range(j):
            if nums[i] + nums[j] == target:
                return [i, j]
    return []


def _range_missing_one(r: random.Random) -> tuple:
    n = r.randint(0, 10)
    gap = r.randint(0, n)
    return (r.sample([k for k in range(n + 1) if k != gap], n),)


@problem(_range_missing_one, ([0, 1, 3, 4],), ([],), ([2],))
def missing_number(nums: list[int]) -> int:
    """Return the smallest non-negative integer not in the list."""
    present, k = set(nums), 0
    while k in present:
        k += 1
    return k


@problem(ints(-5, 5), ([1, 2, 3, 4],), ([],))
def product_except_self(nums: list[int]) -> list[int]:
    """Return a list whose element i is the product of all the other elements."""
    return [math.prod(nums[:i] + nums[i + 1 :]) for i in range(len(nums))]


@problem(ints(0, 9, 0, 12), ([1, 1, 2, 2, 2, 3],), ([],))
def run_lengths(nums: list[int]) -> list[list[int]]:
    """Return [value, count] for each run of equal adjacent values, in order."""
    out: list[list[int]] = []
    for x in nums:
        if out and out[-1][0] == x:
            out[-1][1] += 1
        else:
            out.append([x, 1])
    return out


@problem(ints(0, 9, 0, 12), ([1, 3, 2, 4, 5, 1],), ([],), ([3, 2, 1],))
def longest_increasing_run(nums: list[int]) -> int:
    """Return the length of the longest run of strictly increasing adjacent values (0 if empty)."""
    best = cur = 0
    for i, x in enumerate(nums):
        cur = cur + 1 if i and x > nums[i - 1] else 1
        best = max(best, cur)
    return best


@problem(lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 8))], [r.randint(0, 9) for _ in range(r.randint(0, 8))]), ([1, 2, 2, 3], [2, 3, 4]), ([], [1]))
def intersection_sorted(a: list[int], b: list[int]) -> list[int]:
    """Return the distinct values present in both lists, ascending."""
    return sorted(set(a) & set(b))


@problem(ints(-9, 9), ([3, -1, 0, -2, 5],), ([],))
def move_negatives_first(nums: list[int]) -> list[int]:
    """Return the negative numbers first, then the rest, each group keeping its order."""
    return [x for x in nums if x < 0] + [x for x in nums if x >= 0]


@problem(lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 10))], r.randint(1, 4)), ([1, 2, 3, 4, 5], 2), ([1], 3))
def window_sums(nums: list[int], k: int) -> list[int]:
    """Return the sums of every window of k (>= 1) consecutive elements, left to right."""
    return [sum(nums[i : i + k]) for i in range(len(nums) - k + 1)]


@problem(ints(-20, 20, 1, 9), ([1, 2, 3, 4],), ([5],), ([1, 2, 3],))
def median(nums: list[int]) -> float:
    """Return the median of a non-empty list (the mean of the two middle values for even length)."""
    s = sorted(nums)
    mid = len(s) // 2
    return float(s[mid]) if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


@problem(either(lambda r: ([int(d) for d in palindrome(r, "0123")],), ints(-5, 5, 2, 8)), ([1, 2, 1],), ([1, 2],), ([],))
def is_list_palindrome(nums: list[int]) -> bool:
    """Return True if the list reads the same forwards and backwards."""
    return nums == nums[::-1]


@problem(lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 10))], r.randint(0, 9)), ([1, 2, 1, 3], 1), ([], 1))
def remove_value(nums: list[int], value: int) -> list[int]:
    """Return the list without any occurrence of value."""
    return [x for x in nums if x != value]


@problem(ints(-9, 9, 0, 8), ([1, 2, 3, 4, 5],), ([],))
def alternate_sum(nums: list[int]) -> int:
    """Return nums[0] - nums[1] + nums[2] - nums[3] + ... (0 for an empty list)."""
    return sum(x if i % 2 == 0 else -x for i, x in enumerate(nums))


@problem(lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 10))],), ([0, 1, 0, 3, 12],), ([],))
def zeros_to_end(nums: list[int]) -> list[int]:
    """Return the list with every 0 moved to the end, the other values keeping their order."""
    return [x for x in nums if x != 0] + [0] * nums.count(0)


@problem(lambda r: ([[r.randint(0, 9) for _ in range(3)] for _ in range(r.randint(1, 4))],), ([[1, 2, 3], [4, 5, 6]],), ([[7, 8, 9]],))
def transpose(matrix: list[list[int]]) -> list[list[int]]:
    """Return the transpose of a non-empty rectangular matrix given as a list of rows."""
    return [list(col) for col in zip(*matrix, strict=True)]


@problem(lambda r: ([[r.randint(0, 9) for _ in range(n)] for n in [r.randint(1, 4)] for _ in range(n)],), ([[1, 2], [3, 4]],), ([[5]],))
def diagonal_sum(matrix: list[list[int]]) -> int:
    """Return the sum of both diagonals of a square matrix, counting a shared centre once."""
    n = len(matrix)
    total = sum(matrix[i][i] + matrix[i][n - 1 - i] for i in range(n))
    return total - (matrix[n // 2][n // 2] if n % 2 else 0)


@problem(lambda r: ([r.randint(1, 9) for _ in range(r.randint(0, 6))],), ([1, 2, 3],), ([],))
def all_subset_sums(nums: list[int]) -> list[int]:
    """Return the distinct sums of all subsets (including the empty one), ascending."""
    sums = {0}
    for x in nums:
        sums |= {s + x for s in sums}
    return sorted(sums)


@problem(ints(1, 20, 0, 10), ([1, 1, 2, 3, 3, 3],), ([],))
def count_distinct(nums: list[int]) -> int:
    """Return how many distinct values the list has."""
    return len(set(nums))


@problem(lambda r: ([r.randint(-9, 9) for _ in range(r.randint(0, 8))], r.randint(-9, 9)), ([1, 5, 2, 8], 3), ([], 0))
def count_greater(nums: list[int], threshold: int) -> int:
    """Return how many numbers are strictly greater than threshold."""
    return sum(1 for x in nums if x > threshold)


@problem(lambda r: ([r.randint(1, 30) for _ in range(r.randint(2, 10))],), ([7, 1, 5, 3, 6, 4],), ([],), ([5, 4, 3],))
def max_profit(prices: list[int]) -> int:
    """Return the largest price rise from a buy day to a later sell day (0 if none)."""
    best, low = 0, math.inf
    for p in prices:
        low = min(low, p)
        best = max(best, p - low)
    return int(best)


@problem(one_int(0, 20), (0,), (4,))
def pascal_row(n: int) -> list[int]:
    """Return row n of Pascal's triangle (row 0 is [1])."""
    return [math.comb(n, k) for k in range(n + 1)]


@problem(lambda r: ([r.randint(1, 9) for _ in range(r.randint(0, 6))], r.randint(0, 20)), ([1, 2, 5], 11), ([2], 3), ([], 0))
def min_coins(coins: list[int], amount: int) -> int:
    """Return the fewest coins (unlimited supply of each value) that make amount, or -1 if
    impossible; 0 coins make 0."""
    best = [0] + [math.inf] * amount
    for a in range(1, amount + 1):
        for c in coins:
            if c <= a:
                best[a] = min(best[a], best[a - c] + 1)
    return -1 if best[amount] == math.inf else int(best[amount])


@problem(lambda r: (r.randint(0, 25),), (4,), (0,), (1,))
def climb_stairs(n: int) -> int:
    """Return how many ways there are to climb n steps taking 1 or 2 steps at a time (1 way for 0)."""
    a, b = 1, 1
    for _ in range(n):
        a, b = b, a + b
    return a


# --- strings ------------------------------------------------------------------------------------
@problem(mixed_text, ("Hello World",), ("",))
def count_vowels(s: str) -> int:
    """Return how many vowels (a, e, i, o, u, either case) the string has."""
    return sum(1 for ch in s.lower() if ch in "aeiou")


@problem(either(lambda r: (" ".join(palindrome(r, "abAB")) + r.choice(["", "!", "?"]),), mixed_text), ("A man, a plan, a canal: Panama",), ("race a car",), ("",))
def is_clean_palindrome(s: str) -> bool:
    """Return True if the string's letters and digits, lowercased, read the same backwards."""
    kept = [ch.lower() for ch in s if ch.isalnum()]
    return kept == kept[::-1]


@problem(words(), ("the quick brown fox",), ("",))
def reverse_words(s: str) -> str:
    """Return the words of s (separated by single spaces) in reverse order, joined by single spaces."""
    return " ".join(reversed(s.split()))


@problem(words(), ("hello world",), ("",), ("a",))
def capitalize_words(s: str) -> str:
    """Return s with the first letter of every space-separated word in upper case."""
    return " ".join(w[:1].upper() + w[1:] for w in s.split(" "))


@problem(lambda r: (word(r, 0, 12, "aabbc"),), ("aaabccdddd",), ("",), ("abc",))
def compress(s: str) -> str:
    """Run-length encode: each run of a repeated character becomes the character then the run's
    length ("aaab" -> "a3b1")."""
    out, i = [], 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{s[i]}{j - i}")
        i = j
    return "".join(out)


@problem(either(lambda r: (lambda w: (w, "".join(r.sample(w, len(w)))))(word(r, 0, 8, "abcd")), lambda r: (word(r, 0, 8, "abcd"), word(r, 0, 8, "abcd"))), ("listen", "silent"), ("ab", "a"))
def is_anagram(a: str, b: str) -> bool:
    """Return True if b is a rearrangement of the characters of a."""
    return sorted(a) == sorted(b)


@problem(lambda r: (word(r, 0, 12, "abcab"),), ("leetcode",), ("aabb",), ("",))
def first_unique_char(s: str) -> int:
    """Return the index of the first character that occurs once, or -1."""
    counts = Counter(s)
    return next((i for i, ch in enumerate(s) if counts[ch] == 1), -1)


@problem(lambda r: (word(r, 0, 12, "abcde"),), ("abcabcbb",), ("",), ("bbbb",))
def longest_unique_substring(s: str) -> int:
    """Return the length of the longest substring with no repeated character."""
    best, start, last = 0, 0, {}
    for i, ch in enumerate(s):
        if last.get(ch, -1) >= start:
            start = last[ch] + 1
        last[ch] = i
        best = max(best, i - start + 1)
    return best


@problem(lambda r: (word(r, 0, 10, "ab"),), ("babad",), ("",), ("cbbd",))
def longest_palindromic_substring(s: str) -> str:
    """Return the longest palindromic substring; among equally long ones, the leftmost."""
    best = ""
    for i in range(len(s)):
        for j in range(i, len(s)):
            sub = s[i : j + 1]
            if sub == sub[::-1] and len(sub) > len(best):
                best = sub
    return best


@problem(either(lambda r: ("".join(r.choice(["()", "[]", "{}", "(x)", "[()]", "{[]}"]) for _ in range(r.randint(1, 4))),), lambda r: ("".join(r.choice("()[]{}") for _ in range(r.randint(1, 7))),)), ("()[]{}",), ("(]",), ("",))
def balanced_brackets(s: str) -> bool:
    """Return True if every (, [ and { in s is closed by its partner in the right order; other
    characters are ignored."""
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack


@problem(lambda r: (word(r, 0, 10, string.ascii_letters), r.randint(-30, 30)), ("abc", 1), ("xyz", 3), ("Hello", -1))
def caesar_shift(s: str, k: int) -> str:
    """Shift each letter k places through the alphabet, wrapping and keeping case; other
    characters stay."""
    out = []
    for ch in s:
        if ch.isalpha():
            base = ord("a") if ch.islower() else ord("A")
            out.append(chr(base + (ord(ch) - base + k) % 26))
        else:
            out.append(ch)
    return "".join(out)


@problem(lambda r: (word(r, 0, 14, string.ascii_letters),), ("helloWorld",), ("",), ("ABC",))
def camel_to_snake(s: str) -> str:
    """Convert camelCase to snake_case: an underscore before each upper-case letter (except at
    the start), then lower-case everything."""
    out = []
    for i, ch in enumerate(s):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


@problem(lambda r: ("_".join(word(r, 1, 5) for _ in range(r.randint(1, 4))),), ("hello_world",), ("a",))
def snake_to_camel(s: str) -> str:
    """Convert snake_case to camelCase (the first word stays lower case)."""
    first, *rest = s.split("_")
    return first + "".join(w[:1].upper() + w[1:] for w in rest)


@problem(mixed_text, ("Hello World",), ("",))
def swap_case(s: str) -> str:
    """Return s with upper-case letters made lower case and lower-case letters made upper case."""
    return s.swapcase()


@problem(words(), ("the cat the dog",), ("",))
def word_frequencies(s: str) -> dict[str, int]:
    """Return a dict mapping each space-separated word to how often it occurs."""
    return dict(Counter(s.split()))


@problem(words(), ("a bb ccc",), ("",), ("aa bb",))
def longest_word(s: str) -> str:
    """Return the longest space-separated word; the first of equally long ones; "" if none."""
    return max(s.split(), key=len, default="")


@problem(lambda r: (word(r, 0, 10, "ab"), word(r, 1, 3, "ab")), ("abababa", "aba"), ("aaaa", "aa"), ("", "a"))
def count_overlapping(s: str, sub: str) -> int:
    """Return how many times sub (non-empty) occurs in s, overlaps included."""
    return sum(1 for i in range(len(s) - len(sub) + 1) if s[i : i + len(sub)] == sub)


def _shared_prefix(r: random.Random) -> tuple:
    prefix = word(r, 0, 4)
    return ([prefix + word(r, 0, 3, "ab") for _ in range(r.randint(1, 5))],)


@problem(_shared_prefix, (["flower", "flow", "flight"],), ([],), (["dog", "car"],))
def common_prefix(strs: list[str]) -> str:
    """Return the longest prefix shared by all strings ("" for an empty list)."""
    if not strs:
        return ""
    prefix = strs[0]
    for s in strs[1:]:
        while not s.startswith(prefix):
            prefix = prefix[:-1]
    return prefix


@problem(mixed_text, ("Hello, World!",), ("",))
def only_letters(s: str) -> str:
    """Return only the letters of s, in order."""
    return "".join(ch for ch in s if ch.isalpha())


@problem(lambda r: (word(r, 0, 10, "abc"), word(r, 0, 10, "abc")), ("kitten", "sitting"), ("", "abc"), ("abc", "abc"))
def edit_distance(a: str, b: str) -> int:
    """Return the Levenshtein distance (insertions, deletions, substitutions) between a and b."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


@problem(lambda r: (word(r, 0, 8, "abcd"), word(r, 0, 8, "abcd")), ("abcde", "ace"), ("abc", ""))
def longest_common_subsequence(a: str, b: str) -> int:
    """Return the length of the longest common subsequence of a and b."""
    dp = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, ca in enumerate(a):
        for j, cb in enumerate(b):
            dp[i + 1][j + 1] = dp[i][j] + 1 if ca == cb else max(dp[i][j + 1], dp[i + 1][j])
    return dp[-1][-1]


@problem(either(lambda r: ("".join(r.sample(string.ascii_letters, 52)) + word(r, 0, 4),), lambda r: (word(r, 0, 30, string.ascii_lowercase[: r.randint(20, 25)] + " "),)), ("the quick brown fox jumps over the lazy dog",), ("abc",))
def is_pangram(s: str) -> bool:
    """Return True if s contains every letter a-z at least once (case-insensitive)."""
    return set(string.ascii_lowercase) <= set(s.lower())


@problem(lambda r: (word(r, 0, 10, "ab"), word(r, 0, 10, "ab")), ("ab", "ba"), ("abc", "xbc"), ("", ""))
def hamming_distance(a: str, b: str) -> int:
    """Return how many positions differ between a and b; when lengths differ, each extra
    character of the longer string counts as one difference."""
    return sum(x != y for x, y in zip(a, b, strict=False)) + abs(len(a) - len(b))


@problem(mixed_text, ("a1b2c3",), ("",))
def sum_digits_in_string(s: str) -> int:
    """Return the sum of the digit characters in s."""
    return sum(int(ch) for ch in s if ch.isdigit())


@problem(lambda r: (word(r, 0, 8), r.randint(0, 12)), ("abc", 6), ("abcdef", 3), ("", 2))
def pad_or_truncate(s: str, n: int) -> str:
    """Return s cut to n characters, or padded on the right with "." to length n."""
    return s[:n].ljust(n, ".")


@problem(lambda r: (word(r, 0, 12, "abc"),), ("aabcc",), ("",))
def remove_adjacent_duplicates(s: str) -> str:
    """Repeatedly remove pairs of equal adjacent characters until none remain ("abbaca" -> "ca")."""
    stack: list[str] = []
    for ch in s:
        if stack and stack[-1] == ch:
            stack.pop()
        else:
            stack.append(ch)
    return "".join(stack)


@problem(lambda r: (word(r, 0, 10, "abc"),), ("aab",), ("",))
def char_histogram(s: str) -> list[list]:
    """Return [character, count] pairs for each distinct character, sorted by descending count,
    then by character."""
    counts = Counter(s)
    return [[ch, n] for ch, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


@problem(lambda r: (r.choice(["", "", "+", "-"]) + "".join(r.choice("0123456789") for _ in range(r.randint(0, 6))) + r.choice(["", "", "", "x", " "]),), ("42",), ("4x",), ("-17",))
def parse_int_or_none(s: str) -> int | None:
    """Return the integer that s spells (an optional + or - then one or more digits, nothing
    else), or None."""
    body = s[1:] if s[:1] in "+-" else s
    if not body or not body.isdigit() or not body.isascii():
        return None
    return int(s)


@problem(lambda r: (".".join(str(r.choice([r.randint(0, 300), r.randint(0, 255)])) for _ in range(r.choice([3, 4, 4, 5]))),), ("192.168.0.1",), ("256.1.1.1",), ("1.2.3",))
def is_ipv4(s: str) -> bool:
    """Return True if s is four decimal numbers 0-255 separated by dots, without leading zeros."""
    parts = s.split(".")
    return len(parts) == 4 and all(
        p.isdigit() and p.isascii() and (p == "0" or not p.startswith("0")) and int(p) <= 255 for p in parts
    )


@problem(lambda r: (word(r, 0, 12, "ab "),), ("a  b ",), ("",))
def collapse_spaces(s: str) -> str:
    """Replace every run of spaces with one space and strip spaces at both ends."""
    return " ".join(s.split())


@problem(lambda r: (r.randint(0, 12), r.randint(0, 59)), (3, 15), (12, 0), (0, 30))
def clock_angle(hours: int, minutes: int) -> float:
    """Return the smaller angle in degrees between the hour and minute hands at hours:minutes."""
    angle = abs(30 * (hours % 12) + 0.5 * minutes - 6 * minutes)
    return min(angle, 360 - angle)


@problem(lambda r: (word(r, 1, 6, "abc"),), ("abc",), ("a",))
def all_rotations(s: str) -> list[str]:
    """Return the rotations of s (len(s) of them), starting with s itself, each moving the first
    character to the end."""
    return [s[i:] + s[:i] for i in range(len(s))]


@problem(lambda r: (word(r, 0, 10, "abcd"), word(r, 0, 4, "abcd")), ("abcde", "ace"), ("abc", "acb"), ("", ""))
def is_subsequence(s: str, sub: str) -> bool:
    """Return True if sub can be made from s by deleting characters without reordering."""
    it = iter(s)
    return all(ch in it for ch in sub)


@problem(lambda r: (word(r, 0, 8, "aeioubcd"),), ("hello",), ("",))
def reverse_vowels(s: str) -> str:
    """Reverse the order of the vowels (a, e, i, o, u) in s, leaving other characters in place."""
    vowels = [ch for ch in s if ch in "aeiou"]
    return "".join(vowels.pop() if ch in "aeiou" else ch for ch in s)


@problem(lambda r: (word(r, 0, 10, "()"),), ("(()",), (")()())",), ("",))
def longest_valid_parens(s: str) -> int:
    """Return the length of the longest well-formed run of parentheses in s."""
    best, stack = 0, [-1]
    for i, ch in enumerate(s):
        if ch == "(":
            stack.append(i)
        else:
            stack.pop()
            if stack:
                best = max(best, i - stack[-1])
            else:
                stack.append(i)
    return best


# --- dicts and records --------------------------------------------------------------------------
@problem(word_list(), (["apple", "avocado", "banana"],), ([],))
def group_by_first_letter(items: list[str]) -> dict[str, list[str]]:
    """Map each first letter to the words starting with it, in their original order."""
    out: dict[str, list[str]] = {}
    for w in items:
        out.setdefault(w[0], []).append(w)
    return out


@problem(lambda r: ({word(r, 1, 3): r.randint(0, 5) for _ in range(r.randint(0, 5))},), ({"a": 1, "b": 2},), ({},))
def invert_dict(d: dict[str, int]) -> dict[str, list[str]]:
    """Map each value (as a string key) to the sorted list of keys that had it."""
    out: dict[str, list[str]] = {}
    for k, v in d.items():
        out.setdefault(str(v), []).append(k)
    return {k: sorted(v) for k, v in out.items()}


@problem(lambda r: ({word(r, 1, 2, "abc"): r.randint(0, 9) for _ in range(r.randint(0, 4))}, {word(r, 1, 2, "abc"): r.randint(0, 9) for _ in range(r.randint(0, 4))}), ({"a": 1, "b": 2}, {"b": 3, "c": 4}), ({}, {}))
def merge_add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Merge two dicts, adding the values of keys present in both."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


@problem(lambda r: ({word(r, 1, 4): r.randint(0, 99) for _ in range(r.randint(1, 5))},), ({"ann": 90, "bob": 72, "cy": 90},), ({"z": 1},))
def top_scorers(scores: dict[str, int]) -> list[str]:
    """Return, sorted by name, the names with the highest score in a non-empty dict."""
    best = max(scores.values())
    return sorted(name for name, s in scores.items() if s == best)


@problem(word_list(), (["bb", "a", "ccc", "dd"],), ([],))
def sort_by_length(items: list[str]) -> list[str]:
    """Sort the words by length, then alphabetically."""
    return sorted(items, key=lambda w: (len(w), w))


@problem(lambda r: ([[word(r, 1, 3), r.randint(1, 5)] for _ in range(r.randint(0, 6))],), ([["apple", 2], ["pear", 1], ["apple", 3]],), ([],))
def total_by_key(pairs: list[list]) -> dict[str, int]:
    """Sum the quantities of [name, quantity] pairs per name."""
    out: dict[str, int] = {}
    for name, qty in pairs:
        out[name] = out.get(name, 0) + qty
    return out


@problem(word_list(0, 8), (["eat", "tea", "tan", "ate", "nat", "bat"],), ([],))
def group_anagrams(items: list[str]) -> list[list[str]]:
    """Group words that are anagrams of each other: each group sorted, groups sorted by their
    first word."""
    groups: dict[str, list[str]] = {}
    for w in items:
        groups.setdefault("".join(sorted(w)), []).append(w)
    return sorted(sorted(g) for g in groups.values())


@problem(lambda r: ({word(r, 1, 2, "ab"): {word(r, 1, 2, "cd"): r.randint(0, 9) for _ in range(r.randint(0, 2))} for _ in range(r.randint(0, 3))},), ({"a": {"b": 1, "c": 2}},), ({},))
def flatten_dict(d: dict[str, dict[str, int]]) -> dict[str, int]:
    """Flatten a two-level dict into keys joined by a dot ({"a": {"b": 1}} -> {"a.b": 1})."""
    return {f"{k}.{k2}": v for k, inner in d.items() for k2, v in inner.items()}


@problem(lambda r: ([r.randint(0, 99) for _ in range(r.randint(0, 8))],), ([95, 81, 70, 65, 30],), ([],))
def grade_counts(scores: list[int]) -> dict[str, int]:
    """Count letter grades: A for 90+, B for 80-89, C for 70-79, D for 60-69, F below 60; only
    grades that occur are keys."""
    def grade(s: int) -> str:
        return "A" if s >= 90 else "B" if s >= 80 else "C" if s >= 70 else "D" if s >= 60 else "F"

    return dict(Counter(grade(s) for s in scores))


@problem(lambda r: ([[r.randint(0, 20), r.randint(0, 20)] for _ in range(r.randint(0, 5))],), ([[1, 3], [2, 6], [8, 10]],), ([],), ([[1, 4], [4, 5]],))
def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:
    """Merge overlapping or touching [start, end] intervals (start <= end is not guaranteed:
    swap such pairs first); return them sorted by start."""
    spans = sorted(sorted(iv) for iv in intervals)
    out: list[list[int]] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


# --- algorithms ---------------------------------------------------------------------------------
@problem(lambda r: ([[r.choice([0, 0, 1]) for _ in range(4)] for _ in range(r.randint(1, 4))],), ([[1, 1, 0], [0, 1, 0], [0, 0, 1]],), ([[0]],))
def count_islands(grid: list[list[int]]) -> int:
    """Count groups of 1s connected up, down, left or right in a rectangular grid."""
    seen, count = set(), 0
    for r0 in range(len(grid)):
        for c0 in range(len(grid[0])):
            if grid[r0][c0] == 1 and (r0, c0) not in seen:
                count += 1
                stack = [(r0, c0)]
                while stack:
                    r, c = stack.pop()
                    if (r, c) in seen or not (0 <= r < len(grid) and 0 <= c < len(grid[0])) or grid[r][c] != 1:
                        continue
                    seen.add((r, c))
                    stack += [(r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)]
    return count


def _maze(r: random.Random) -> tuple:
    rows, cols = r.randint(1, 5), r.randint(1, 5)
    return ([[0 if (i, j) in ((0, 0), (rows - 1, cols - 1)) else r.choice([0, 0, 0, 1]) for j in range(cols)] for i in range(rows)],)


@problem(_maze, ([[0, 0, 0], [1, 1, 0], [0, 0, 0]],), ([[0, 1], [1, 0]],))
def shortest_grid_path(grid: list[list[int]]) -> int:
    """Return the fewest up/down/left/right steps from the top-left to the bottom-right cell
    through 0 cells (1 is a wall), or -1 if there is no path or either end is a wall."""
    rows, cols = len(grid), len(grid[0])
    if grid[0][0] or grid[-1][-1]:
        return -1
    frontier, seen, steps = [(0, 0)], {(0, 0)}, 0
    while frontier:
        if (rows - 1, cols - 1) in frontier:
            return steps
        nxt = []
        for r, c in frontier:
            for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                if 0 <= nr < rows and 0 <= nc < cols and not grid[nr][nc] and (nr, nc) not in seen:
                    seen.add((nr, nc))
                    nxt.append((nr, nc))
        frontier, steps = nxt, steps + 1
    return -1


@problem(one_int(1, 7), (3,), (1,))
def generate_parentheses(n: int) -> list[str]:
    """Return every well-formed string of n pairs of parentheses, sorted."""
    out: list[str] = []

    def build(s: str, opened: int, closed: int) -> None:
        if len(s) == 2 * n:
            out.append(s)
            return
        if opened < n:
            build(s + "(", opened + 1, closed)
        if closed < opened:
            build(s + ")", opened, closed + 1)

    build("", 0, 0)
    return sorted(out)


@problem(lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 4))],), ([1, 2, 3],), ([],), ([1, 1],))
def permutations_sorted(nums: list[int]) -> list[list[int]]:
    """Return the distinct permutations of nums, in ascending lexicographic order ([] gives [[]])."""
    import itertools

    return [list(p) for p in sorted(set(itertools.permutations(nums)))]


@problem(lambda r: ([r.randint(1, 9) for _ in range(r.randint(0, 8))],), ([1, 2, 3, 1],), ([],), ([2, 7, 9, 3, 1],))
def max_non_adjacent_sum(nums: list[int]) -> int:
    """Return the largest sum of elements no two of which are adjacent (0 for an empty list)."""
    take, skip = 0, 0
    for x in nums:
        take, skip = skip + x, max(take, skip)
    return max(take, skip)


@problem(lambda r: ([[r.randint(1, 5), r.randint(1, 9)] for _ in range(r.randint(0, 5))], r.randint(0, 10)), ([[1, 1], [3, 4], [4, 5], [5, 7]], 7), ([], 5))
def knapsack(items: list[list[int]], capacity: int) -> int:
    """Given [weight, value] items (each usable once), return the largest total value whose total
    weight is at most capacity."""
    best = [0] * (capacity + 1)
    for weight, value in items:
        for c in range(capacity, weight - 1, -1):
            best[c] = max(best[c], best[c - weight] + value)
    return best[capacity]


@problem(lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 9))],), ([10, 9, 2, 5, 3, 7, 101, 18],), ([],))
def longest_increasing_subsequence(nums: list[int]) -> int:
    """Return the length of the longest strictly increasing subsequence."""
    import bisect

    tails: list[int] = []
    for x in nums:
        i = bisect.bisect_left(tails, x)
        tails[i : i + 1] = [x]
    return len(tails)


@problem(lambda r: (r.randint(1, 8), [[r.randint(0, 7), r.randint(0, 7)] for _ in range(r.randint(0, 8))]), (4, [[0, 1], [1, 2]]), (1, []))
def count_components(n: int, edges: list[list[int]]) -> int:
    """Count connected components of an undirected graph on nodes 0..n-1; edges naming nodes
    outside that range are ignored."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        if 0 <= a < n and 0 <= b < n:
            parent[find(a)] = find(b)
    return len({find(x) for x in range(n)})


@problem(lambda r: (r.randint(2, 6), [[r.randint(0, 5), r.randint(0, 5)] for _ in range(r.randint(0, 6))]), (3, [[0, 1], [1, 2]]), (2, [[0, 1], [1, 0]]))
def topological_order(n: int, edges: list[list[int]]) -> list[int]:
    """Return an order of nodes 0..n-1 where each edge [a, b] puts a before b, choosing the
    smallest available node at each step; return [] if there is a cycle (edges naming nodes
    outside 0..n-1 are ignored)."""
    import heapq

    edges = [e for e in edges if 0 <= e[0] < n and 0 <= e[1] < n]
    indegree = [0] * n
    for _, b in edges:
        indegree[b] += 1
    ready = [v for v in range(n) if indegree[v] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        v = heapq.heappop(ready)
        out.append(v)
        for a, b in edges:
            if a == v:
                indegree[b] -= 1
                if indegree[b] == 0:
                    heapq.heappush(ready, b)
    return out if len(out) == n else []


@problem(lambda r: ([r.randint(0, 5) for _ in range(r.randint(0, 8))],), ([0, 1, 0, 2, 1, 0, 1, 3, 2, 1, 2, 1],), ([],))
def trapped_water(heights: list[int]) -> int:
    """Return how much rain water the elevation map traps between its bars."""
    total = 0
    for i, h in enumerate(heights):
        left, right = max(heights[: i + 1]), max(heights[i:])
        total += min(left, right) - h
    return total


@problem(lambda r: ([r.randint(-5, 5) for _ in range(r.randint(0, 8))],), ([2, 3, -2, 4],), ([],), ([-2, 0, -1],))
def max_product_subarray(nums: list[int]) -> int:
    """Return the largest product of a non-empty contiguous run of nums (0 for an empty list)."""
    if not nums:
        return 0
    best = hi = lo = nums[0]
    for x in nums[1:]:
        hi, lo = max(x, hi * x, lo * x), min(x, hi * x, lo * x)
        best = max(best, hi)
    return best


@problem(lambda r: (r.randint(1, 10), r.randint(1, 10)), (3, 7), (1, 1))
def grid_paths(rows: int, cols: int) -> int:
    """Return how many right/down paths lead from the top-left to the bottom-right of a grid."""
    return math.comb(rows + cols - 2, rows - 1)


@problem(lambda r: ([r.randint(1, 20) for _ in range(r.randint(0, 8))],), ([5, 1, 4, 2, 3],), ([],))
def bubble_sort_swaps(nums: list[int]) -> int:
    """Return how many adjacent swaps bubble sort makes to sort nums ascending (the number of
    inversions)."""
    return sum(1 for i in range(len(nums)) for j in range(i + 1, len(nums)) if nums[i] > nums[j])


@problem(lambda r: ([r.randint(1, 9) for _ in range(r.randint(1, 6))], r.randint(1, 20)), ([2, 3, 5], 8), ([1], 1))
def count_combinations(coins: list[int], amount: int) -> int:
    """Return how many multisets of coin values (unlimited of each distinct value) sum to amount."""
    ways = [1] + [0] * amount
    for c in sorted(set(coins)):
        for a in range(c, amount + 1):
            ways[a] += ways[a - c]
    return ways[amount]


@problem(lambda r: ([r.choice([0, 0, 1, 1, 2, 3]) for _ in range(r.randint(2, 8))],), ([2, 3, 1, 1, 4],), ([3, 2, 1, 0, 4],), ([0],))
def can_jump(nums: list[int]) -> bool:
    """nums[i] is the longest jump from index i; return True if the last index is reachable from
    index 0."""
    reach = 0
    for i, x in enumerate(nums):
        if i > reach:
            return False
        reach = max(reach, i + x)
    return True


@problem(lambda r: (r.randint(1, 30),), (3,), (5,))
def fizzbuzz(n: int) -> list[str]:
    """Return the strings for 1..n: "Fizz" for multiples of 3, "Buzz" for 5, "FizzBuzz" for
    both, else the number."""
    return ["FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i) for i in range(1, n + 1)]


@problem(one_int(1, 12), (3,), (1,))
def spiral_matrix(n: int) -> list[list[int]]:
    """Return an n x n matrix filled with 1..n*n in clockwise spiral order from the top-left."""
    m = [[0] * n for _ in range(n)]
    r = c = 0
    dr, dc = 0, 1
    for k in range(1, n * n + 1):
        m[r][c] = k
        if not (0 <= r + dr < n and 0 <= c + dc < n) or m[r + dr][c + dc]:
            dr, dc = dc, -dr
        r, c = r + dr, c + dc
    return m


@problem(one_int(0, 8), (2,), (0,))
def gray_code(n: int) -> list[int]:
    """Return the n-bit reflected Gray code sequence starting from 0 (2**n numbers)."""
    return [i ^ (i >> 1) for i in range(2**n)]


@problem(lambda r: (r.randint(0, 1_000_000),), (1234567,), (0,), (1000,))
def with_thousands(n: int) -> str:
    """Return the non-negative integer with commas between groups of three digits."""
    return f"{n:,}"


@problem(lambda r: (r.randint(0, 200_000),), (3661,), (0,), (59,))
def format_duration(seconds: int) -> str:
    """Return a number of seconds as H:MM:SS (hours unpadded)."""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


@problem(lambda r: (r.randint(1, 12), r.randint(1, 28), r.randint(1900, 2100)), (3, 1, 2024), (1, 1, 2023))
def day_of_year(month: int, day: int, year: int) -> int:
    """Return the day's number within its Gregorian year (January 1 is 1)."""
    days = [31, 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return sum(days[: month - 1]) + day


@problem(lambda r: ([r.randint(1, 10) for _ in range(r.randint(0, 6))],), ([1, 2, 3, 4],), ([],))
def mean_rounded(nums: list[int]) -> float | None:
    """Return the mean rounded to 2 decimal places, or None for an empty list."""
    return round(sum(nums) / len(nums), 2) if nums else None
