"""Modules around dates, small text formats and plane geometry."""

from clover.evals.synthfix.templates import ModuleTemplate

DATES = ModuleTemplate(
    key="dates",
    module_names=("dateranges", "calendar_utils", "dates", "daytools"),
    summary="date ranges on ISO dates",
    source=r'''"""Date range helpers working on ISO dates (YYYY-MM-DD)."""

from datetime import date, timedelta


def $days_between(start, end):
    """Whole days from `start` to `end` (negative when `end` comes first)."""
    return (date.fromisoformat(end) - date.fromisoformat(start)).days


def $overlaps(a_start, a_end, b_start, b_end):
    """True when the closed ranges [a_start, a_end] and [b_start, b_end] share a day."""
    return a_start <= b_end and b_start <= a_end


def $date_range(start, days, step=1):
    """`days` ISO dates beginning at `start`, `step` days apart."""
    first = date.fromisoformat(start)
    result = []
    for i in range(days):
        result.append((first + timedelta(days=i * step)).isoformat())
    return result


def $is_weekend(day):
    """True for Saturdays and Sundays."""
    return date.fromisoformat(day).weekday() >= 5


def $add_business_days(start, count):
    """The date `count` working days (Monday to Friday) after `start`."""
    current = date.fromisoformat(start)
    added = 0
    for _ in range(count * 2 + 7):
        if added == count:
            break
        current += timedelta(days=1)
        if current.weekday() < 5:
            added += 1
    return current.isoformat()


def $month_end(day):
    """Last day of the month that contains `day`."""
    d = date.fromisoformat(day)
    first_of_next = date(d.year + (d.month == 12), d.month % 12 + 1, 1)
    return (first_of_next - timedelta(days=1)).isoformat()
''',
    idents={
        "days_between": ("days_between", "day_span", "count_days", "delta_days"),
        "overlaps": ("overlaps", "ranges_overlap", "intersects", "periods_overlap"),
        "date_range": ("date_range", "dates_from", "iter_dates", "day_sequence"),
        "is_weekend": ("is_weekend", "weekend", "on_weekend", "is_rest_day"),
        "add_business_days": ("add_business_days", "workdays_after", "business_day_offset", "shift_workdays"),
        "month_end": ("month_end", "last_day_of_month", "end_of_month", "month_last_day"),
    },
    cases=(
        ("days_between", "january", '$days_between("2024-01-01", "2024-01-31")'),
        ("days_between", "backwards", '$days_between("2024-03-10", "2024-03-01")'),
        ("overlaps", "partial", '$overlaps("2024-01-01", "2024-01-10", "2024-01-05", "2024-01-20")'),
        ("overlaps", "touching", '$overlaps("2024-01-01", "2024-01-10", "2024-01-10", "2024-01-12")'),
        ("overlaps", "disjoint", '$overlaps("2024-01-01", "2024-01-03", "2024-02-01", "2024-02-03")'),
        ("date_range", "leap", '$date_range("2024-02-27", 4)'),
        ("date_range", "weekly", '$date_range("2024-01-01", 3, step=7)'),
        ("is_weekend", "saturday", '$is_weekend("2024-06-01")'),
        ("is_weekend", "sunday", '$is_weekend("2024-06-02")'),
        ("is_weekend", "monday", '$is_weekend("2024-06-03")'),
        ("add_business_days", "over_weekend", '$add_business_days("2024-06-07", 1)'),
        ("add_business_days", "midweek", '$add_business_days("2024-06-03", 3)'),
        ("add_business_days", "zero", '$add_business_days("2024-06-05", 0)'),
        ("month_end", "february", '$month_end("2024-02-10")'),
        ("month_end", "december", '$month_end("2023-12-05")'),
        ("month_end", "already_last", '$month_end("2024-04-30")'),
    ),
)

PARSERS = ModuleTemplate(
    key="parsers",
    module_names=("parsers", "config_parse", "parsing", "readers"),
    summary="parsers for small configuration strings",
    source=r'''"""Parsers for small configuration strings."""


def $parse_key_values(text, sep=";", assign="="):
    """'a=1;b=2' -> {'a': '1', 'b': '2'}; blank entries are skipped."""
    result = {}
    for chunk in text.split(sep):
        chunk = chunk.strip()
        if not chunk:
            continue
        key, _, value = chunk.partition(assign)
        result[key.strip()] = value.strip()
    return result


def $parse_duration(text):
    """'1h30m', '45s', '2m5s' -> seconds; ValueError for anything else."""
    units = {"h": 3600, "m": 60, "s": 1}
    total = 0
    number = ""
    for char in text:
        if char.isdigit():
            number += char
        elif char in units and number:
            total += int(number) * units[char]
            number = ""
        else:
            raise ValueError(f"bad duration: {text!r}")
    return total


def $parse_bool(text, default=False):
    """Read yes/no style flags; unknown words give `default`."""
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    return default


def $parse_version(text):
    """'1.2.3' -> (1, 2, 3); missing parts count as 0."""
    parts = [int(p) for p in text.split(".")][:3]
    return tuple(parts + [0] * (3 - len(parts)))


def $compare_versions(a, b):
    """-1, 0 or 1 as version `a` is older than, equal to or newer than `b`."""
    left, right = $parse_version(a), $parse_version(b)
    if left < right:
        return -1
    if left > right:
        return 1
    return 0
''',
    idents={
        "parse_key_values": ("parse_key_values", "parse_pairs", "read_settings", "split_pairs"),
        "parse_duration": ("parse_duration", "duration_seconds", "to_seconds", "parse_timespan"),
        "parse_bool": ("parse_bool", "as_bool", "read_flag", "truthy"),
        "parse_version": ("parse_version", "version_tuple", "split_version", "read_version"),
        "compare_versions": ("compare_versions", "version_cmp", "cmp_versions", "order_versions"),
    },
    cases=(
        ("parse_key_values", "basic", '$parse_key_values("a=1;b=2")'),
        ("parse_key_values", "spaces", '$parse_key_values(" x = 10 ; ; y=z ")'),
        ("parse_key_values", "custom", '$parse_key_values("k:v,m:n", sep=",", assign=":")'),
        ("parse_duration", "hours_minutes", '$parse_duration("1h30m")'),
        ("parse_duration", "seconds", '$parse_duration("45s")'),
        ("parse_duration", "minutes_seconds", '$parse_duration("2m5s")'),
        ("parse_duration", "invalid", '$parse_duration("5x")'),
        ("parse_bool", "yes", '$parse_bool("Yes")'),
        ("parse_bool", "off", '$parse_bool(" off ")'),
        ("parse_bool", "unknown", '$parse_bool("maybe")'),
        ("parse_bool", "unknown_default", '$parse_bool("maybe", default=True)'),
        ("parse_version", "full", '$parse_version("1.2.3")'),
        ("parse_version", "short", '$parse_version("2.0")'),
        ("parse_version", "major_only", '$parse_version("4")'),
        ("compare_versions", "older", '$compare_versions("1.2.0", "1.10.0")'),
        ("compare_versions", "equal", '$compare_versions("2.0", "2.0.0")'),
        ("compare_versions", "newer", '$compare_versions("3.1", "3.0.9")'),
    ),
)

GEOMETRY = ModuleTemplate(
    key="geometry",
    module_names=("geometry", "shapes", "geom", "planar"),
    summary="plane geometry helpers",
    source=r'''"""Plane geometry on plain numbers and (x, y) tuples."""

import math


def $distance(x1, y1, x2, y2):
    """Euclidean distance between two points."""
    return math.hypot(x2 - x1, y2 - y1)


def $rect_area(width, height):
    """Area of a rectangle; ValueError for negative sizes."""
    if width < 0 or height < 0:
        raise ValueError("negative size")
    return width * height


def $rect_perimeter(width, height):
    """Perimeter of a rectangle."""
    return 2 * (width + height)


def $point_in_rect(px, py, left, top, width, height):
    """True when the point lies inside the rectangle or on its edge."""
    return left <= px <= left + width and top <= py <= top + height


def $midpoint(x1, y1, x2, y2):
    """The point halfway between two points."""
    return ((x1 + x2) / 2, (y1 + y2) / 2)


def $polygon_perimeter(points):
    """Perimeter of the closed polygon through `points`."""
    total = 0.0
    for i in range(len(points)):
        x1, y1 = points[i]
        x2, y2 = points[(i + 1) % len(points)]
        total += $distance(x1, y1, x2, y2)
    return total
''',
    idents={
        "distance": ("distance", "dist", "euclidean", "point_distance"),
        "rect_area": ("rect_area", "rectangle_area", "area_of_rect", "box_area"),
        "rect_perimeter": ("rect_perimeter", "rectangle_perimeter", "perimeter_of_rect", "box_perimeter"),
        "point_in_rect": ("point_in_rect", "contains_point", "inside_rect", "hit_test"),
        "midpoint": ("midpoint", "halfway", "centre_of", "mid"),
        "polygon_perimeter": ("polygon_perimeter", "path_length", "outline_length", "poly_perimeter"),
    },
    cases=(
        ("distance", "triangle", "$distance(0, 0, 3, 4)"),
        ("distance", "same_point", "$distance(1, 1, 1, 1)"),
        ("distance", "negative", "$distance(-1, 2, 2, 6)"),
        ("rect_area", "basic", "$rect_area(3, 4)"),
        ("rect_area", "zero", "$rect_area(0, 5)"),
        ("rect_area", "negative", "$rect_area(-1, 2)"),
        ("rect_perimeter", "basic", "$rect_perimeter(3, 4)"),
        ("point_in_rect", "inside", "$point_in_rect(1, 1, 0, 0, 2, 2)"),
        ("point_in_rect", "edge", "$point_in_rect(2, 2, 0, 0, 2, 2)"),
        ("point_in_rect", "outside", "$point_in_rect(3, 1, 0, 0, 2, 2)"),
        ("midpoint", "basic", "$midpoint(0, 0, 4, 2)"),
        ("polygon_perimeter", "triangle", "$polygon_perimeter([(0, 0), (3, 0), (3, 4)])"),
        ("polygon_perimeter", "square", "$polygon_perimeter([(0, 0), (1, 0), (1, 1), (0, 1)])"),
    ),
)

TEMPLATES = (DATES, PARSERS, GEOMETRY)
