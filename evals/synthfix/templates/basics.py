"""General-purpose helpers: strings, numbers, lists, word statistics."""

from clover.evals.synthfix.templates import ModuleTemplate

TEXT = ModuleTemplate(
    key="text",
    module_names=("strings", "textutil", "strtools", "textops"),
    summary="string helpers (slugs, truncation, padding)",
    source=r'''"""String helpers used across the project."""

import re


def $slugify(text, sep="-"):
    """Lower-case `text` and join its words with `sep`."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return sep.join(words)


def $truncate(text, width=10, suffix="..."):
    """Shorten `text` to at most `width` characters, ending with `suffix` when cut."""
    if len(text) <= width:
        return text
    keep = width - len(suffix)
    return text[:keep] + suffix


def $count_vowels(text):
    """Number of vowels (a, e, i, o, u) in `text`, ignoring case."""
    total = 0
    for char in text.lower():
        if char in "aeiou":
            total += 1
    return total


def $is_palindrome(text):
    """True when `text` reads the same backwards, ignoring case and punctuation."""
    letters = [c.lower() for c in text if c.isalnum()]
    return letters == letters[::-1]


def $pad_left(text, width, fill=" "):
    """Right-align `text` in a field of `width` characters."""
    missing = width - len(text)
    if missing > 0:
        return fill * missing + text
    return text


def $initials(name, sep="."):
    """Initials of a full name: 'ada lovelace' -> 'A.L.'."""
    parts = name.split()
    result = ""
    for part in parts:
        result += part[0].upper() + sep
    return result
''',
    idents={
        "slugify": ("slugify", "make_slug", "to_slug", "slug_from"),
        "truncate": ("truncate", "shorten", "ellipsize", "clip_text"),
        "count_vowels": ("count_vowels", "vowel_count", "num_vowels", "tally_vowels"),
        "is_palindrome": ("is_palindrome", "palindromic", "is_symmetric_text", "reads_same_backwards"),
        "pad_left": ("pad_left", "left_pad", "rjust_text", "align_right"),
        "initials": ("initials", "name_initials", "get_initials", "abbreviate_name"),
    },
    cases=(
        ("slugify", "basic", '$slugify("Hello World")'),
        ("slugify", "punctuation", '$slugify("  Rock & Roll!  ")'),
        ("slugify", "custom_sep", '$slugify("a b c", sep="_")'),
        ("truncate", "short", '$truncate("short")'),
        ("truncate", "long", '$truncate("a very long sentence")'),
        ("truncate", "exact_width", '$truncate("exactly10!")'),
        ("truncate", "custom_suffix", '$truncate("abcdefghij", width=6, suffix="~")'),
        ("count_vowels", "mixed", '$count_vowels("Banana")'),
        ("count_vowels", "none", '$count_vowels("rhythm")'),
        ("count_vowels", "upper", '$count_vowels("AEIOU xyz")'),
        ("is_palindrome", "word", '$is_palindrome("Racecar")'),
        ("is_palindrome", "sentence", '$is_palindrome("A man, a plan, a canal: Panama")'),
        ("is_palindrome", "negative", '$is_palindrome("python")'),
        ("pad_left", "zeros", '$pad_left("7", 3, "0")'),
        ("pad_left", "spaces", '$pad_left("abc", 5)'),
        ("pad_left", "too_long", '$pad_left("toolong", 3)'),
        ("initials", "two_words", '$initials("ada lovelace")'),
        ("initials", "no_sep", '$initials("grace brewster hopper", sep="")'),
    ),
)

MATH = ModuleTemplate(
    key="math",
    module_names=("mathutils", "numeric", "mathx", "numtools"),
    summary="numeric helpers (clamping, averages, rounding)",
    source=r'''"""Numeric helpers."""


def $clamp(value, low, high):
    """Limit `value` to the closed range [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value


def $mean(values):
    """Arithmetic mean; 0.0 for an empty sequence."""
    if not values:
        return 0.0
    return sum(values) / len(values)


def $median(values):
    """Middle value of the sorted data (mean of the two middle values for even sizes)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def $percent_change(old, new):
    """Relative change from `old` to `new`, in percent."""
    return (new - old) / old * 100


def $lerp(start, end, t=0.5):
    """Linear interpolation between `start` and `end`."""
    return start + (end - start) * t


def $round_to_step(value, step=5):
    """Round `value` to the nearest multiple of `step`."""
    return round(value / step) * step


def $is_prime(n):
    """True for prime numbers."""
    if n < 2:
        return False
    for divisor in range(2, int(n ** 0.5) + 1):
        if n % divisor == 0:
            return False
    return True
''',
    idents={
        "clamp": ("clamp", "clip", "bound", "limit"),
        "mean": ("mean", "average", "arithmetic_mean", "avg"),
        "median": ("median", "middle_value", "median_of", "mid_value"),
        "percent_change": ("percent_change", "pct_change", "relative_change", "change_percent"),
        "lerp": ("lerp", "interpolate", "mix", "blend"),
        "round_to_step": ("round_to_step", "snap", "round_to_multiple", "quantize"),
        "is_prime": ("is_prime", "prime", "check_prime", "isprime"),
    },
    cases=(
        ("clamp", "inside", "$clamp(5, 0, 10)"),
        ("clamp", "lower", "$clamp(-3, 0, 10)"),
        ("clamp", "upper", "$clamp(15, 0, 10)"),
        ("clamp", "edge", "$clamp(10, 0, 10)"),
        ("mean", "basic", "$mean([1, 2, 3, 4])"),
        ("mean", "empty", "$mean([])"),
        ("mean", "single", "$mean([7])"),
        ("median", "odd", "$median([3, 1, 2])"),
        ("median", "even", "$median([4, 1, 3, 2])"),
        ("median", "single", "$median([5])"),
        ("percent_change", "increase", "$percent_change(50, 75)"),
        ("percent_change", "decrease", "$percent_change(200, 150)"),
        ("lerp", "midpoint", "$lerp(0, 10)"),
        ("lerp", "quarter", "$lerp(0, 8, t=0.25)"),
        ("lerp", "end", "$lerp(2, 4, t=1)"),
        ("round_to_step", "down", "$round_to_step(12)"),
        ("round_to_step", "up", "$round_to_step(13)"),
        ("round_to_step", "custom_step", "$round_to_step(23, step=10)"),
        ("is_prime", "two", "$is_prime(2)"),
        ("is_prime", "composite", "$is_prime(15)"),
        ("is_prime", "prime", "$is_prime(17)"),
        ("is_prime", "square", "$is_prime(25)"),
        ("is_prime", "one", "$is_prime(1)"),
    ),
)

LISTS = ModuleTemplate(
    key="lists",
    module_names=("listutils", "sequences", "seqtools", "collections_ext"),
    summary="list helpers (chunking, rotation, moving averages)",
    source=r'''"""Helpers for working with lists."""


def $chunk(items, size=2):
    """Split `items` into lists of `size` (the last one may be shorter)."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def $flatten(nested):
    """Concatenate a list of lists into one list."""
    result = []
    for group in nested:
        for item in group:
            result.append(item)
    return result


def $dedupe(items):
    """Drop repeated items, keeping the first occurrence of each."""
    seen = set()
    result = []
    for item in items:
        if item not in seen:
            seen.add(item)
            result.append(item)
    return result


def $rotate(items, steps=1):
    """Rotate `items` left by `steps` positions."""
    if not items:
        return []
    steps = steps % len(items)
    return items[steps:] + items[:steps]


def $pairwise_diffs(values):
    """Differences between neighbours: [1, 4, 9] -> [3, 5]."""
    return [values[i + 1] - values[i] for i in range(len(values) - 1)]


def $moving_average(values, window=3):
    """Averages of each run of `window` consecutive values."""
    result = []
    for start in range(len(values) - window + 1):
        result.append(sum(values[start : start + window]) / window)
    return result
''',
    idents={
        "chunk": ("chunk", "chunked", "batch", "batched"),
        "flatten": ("flatten", "flat", "concat_lists", "merge_lists"),
        "dedupe": ("dedupe", "unique", "remove_duplicates", "distinct"),
        "rotate": ("rotate", "rotate_left", "shift_items", "cycle_left"),
        "pairwise_diffs": ("pairwise_diffs", "deltas", "differences", "step_sizes"),
        "moving_average": ("moving_average", "rolling_mean", "sliding_average", "running_mean"),
    },
    cases=(
        ("chunk", "default", "$chunk([1, 2, 3, 4, 5])"),
        ("chunk", "size_three", "$chunk([1, 2, 3, 4, 5, 6], size=3)"),
        ("chunk", "empty", "$chunk([])"),
        ("flatten", "basic", "$flatten([[1, 2], [3], []])"),
        ("flatten", "strings", '$flatten([["a"], ["b", "c"]])'),
        ("dedupe", "numbers", "$dedupe([3, 1, 3, 2, 1])"),
        ("dedupe", "no_repeats", '$dedupe(["a", "b"])'),
        ("rotate", "default", "$rotate([1, 2, 3, 4])"),
        ("rotate", "wraps", "$rotate([1, 2, 3], steps=5)"),
        ("rotate", "empty", "$rotate([])"),
        ("pairwise_diffs", "squares", "$pairwise_diffs([1, 4, 9])"),
        ("pairwise_diffs", "single", "$pairwise_diffs([5])"),
        ("moving_average", "default", "$moving_average([1, 2, 3, 4, 5])"),
        ("moving_average", "window_two", "$moving_average([2, 4], window=2)"),
    ),
)

WORDS = ModuleTemplate(
    key="words",
    module_names=("wordstats", "textstats", "wordcount", "prose"),
    summary="word and sentence statistics",
    source=r'''"""Simple statistics over English text."""


def $word_count(text):
    """Number of whitespace-separated words."""
    return len(text.split())


def $word_frequencies(text):
    """Lower-cased word -> count, in order of first appearance; punctuation is stripped."""
    counts = {}
    for word in text.lower().split():
        word = word.strip(".,!?;:")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return counts


def $most_common_word(text):
    """The most frequent word (the earliest one wins ties); None for empty text."""
    counts = $word_frequencies(text)
    best = None
    best_count = 0
    for word, count in counts.items():
        if count > best_count:
            best, best_count = word, count
    return best


def $average_word_length(text, places=2):
    """Mean word length, rounded to `places` decimals; 0.0 for empty text."""
    words = text.split()
    if not words:
        return 0.0
    return round(sum(len(w) for w in words) / len(words), places)


def $sentence_count(text):
    """Sentences end with '.', '!' or '?' followed by a space or the end of the text."""
    count = 0
    for index, char in enumerate(text):
        if char in ".!?" and (index + 1 == len(text) or text[index + 1] == " "):
            count += 1
    return count
''',
    idents={
        "word_count": ("word_count", "count_words", "num_words", "words_in"),
        "word_frequencies": ("word_frequencies", "word_counts", "frequencies", "term_counts"),
        "most_common_word": ("most_common_word", "top_word", "commonest_word", "dominant_word"),
        "average_word_length": (
            "average_word_length",
            "mean_word_length",
            "avg_word_len",
            "word_length_mean",
        ),
        "sentence_count": ("sentence_count", "count_sentences", "num_sentences", "sentences_in"),
    },
    cases=(
        ("word_count", "basic", '$word_count("the quick brown fox")'),
        ("word_count", "extra_spaces", '$word_count("  spaced   out  ")'),
        ("word_frequencies", "repeats", '$word_frequencies("The cat saw the dog. The end!")'),
        ("word_frequencies", "empty", '$word_frequencies("")'),
        ("most_common_word", "clear_winner", '$most_common_word("a b a c a b")'),
        ("most_common_word", "tie", '$most_common_word("red blue blue red")'),
        ("most_common_word", "empty", '$most_common_word("")'),
        ("average_word_length", "basic", '$average_word_length("hi there you")'),
        ("average_word_length", "places", '$average_word_length("one three", places=1)'),
        ("average_word_length", "empty", '$average_word_length("")'),
        ("sentence_count", "three", '$sentence_count("Hi. How are you? Fine!")'),
        ("sentence_count", "decimal", '$sentence_count("Pi is 3.14 roughly.")'),
        ("sentence_count", "none", '$sentence_count("no punctuation")'),
    ),
)

TEMPLATES = (TEXT, MATH, LISTS, WORDS)
