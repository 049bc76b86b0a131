"""Business-flavoured modules: shopping cart, inventory, grades, unit conversion."""

from clover.evals.synthfix.templates import ModuleTemplate

CART = ModuleTemplate(
    key="cart",
    module_names=("cart", "checkout", "basket", "pricing"),
    summary="shopping cart totals, coupons and shipping",
    source=r'''"""Shopping cart arithmetic. Prices are floats in the shop currency."""


def $line_total(price, quantity, discount=0.0):
    """Price of one cart line after a fractional `discount` (0.1 = 10% off)."""
    return round(price * quantity * (1 - discount), 2)


def $cart_total(lines):
    """Sum of all `(price, quantity)` lines."""
    total = 0.0
    for price, quantity in lines:
        total += $line_total(price, quantity)
    return round(total, 2)


def $apply_coupon(total, percent, minimum=50):
    """Take `percent` off `total` when the total reaches `minimum`."""
    if total >= minimum:
        return round(total - total * percent / 100, 2)
    return total


def $shipping_cost(weight, express=False):
    """Flat 5.0 up to 2 kg, then 1.5 per extra kg; express shipping doubles the price."""
    cost = 5.0
    if weight > 2:
        cost += (weight - 2) * 1.5
    if express:
        cost *= 2
    return cost


def $split_bill(total_cents, people):
    """Split an amount in cents as evenly as possible; the first shares absorb the remainder."""
    base, extra = divmod(total_cents, people)
    return [base + 1 if i < extra else base for i in range(people)]
''',
    idents={
        "line_total": ("line_total", "line_price", "item_subtotal", "row_total"),
        "cart_total": ("cart_total", "order_total", "basket_total", "sum_lines"),
        "apply_coupon": ("apply_coupon", "discounted_total", "with_coupon", "redeem_coupon"),
        "shipping_cost": ("shipping_cost", "postage", "delivery_fee", "shipping_fee"),
        "split_bill": ("split_bill", "share_costs", "divide_bill", "split_evenly"),
    },
    cases=(
        ("line_total", "basic", "$line_total(2.5, 4)"),
        ("line_total", "discount", "$line_total(10, 3, discount=0.1)"),
        ("cart_total", "two_lines", "$cart_total([(2.5, 2), (1.0, 3)])"),
        ("cart_total", "empty", "$cart_total([])"),
        ("apply_coupon", "applies", "$apply_coupon(100, 10)"),
        ("apply_coupon", "below_minimum", "$apply_coupon(40, 10)"),
        ("apply_coupon", "at_minimum", "$apply_coupon(50, 20)"),
        ("shipping_cost", "light", "$shipping_cost(1)"),
        ("shipping_cost", "heavy", "$shipping_cost(4)"),
        ("shipping_cost", "express", "$shipping_cost(4, express=True)"),
        ("shipping_cost", "limit", "$shipping_cost(2)"),
        ("split_bill", "remainder", "$split_bill(1000, 3)"),
        ("split_bill", "even", "$split_bill(900, 3)"),
        ("split_bill", "small", "$split_bill(5, 2)"),
    ),
)

INVENTORY = ModuleTemplate(
    key="inventory",
    module_names=("inventory", "stock", "warehouse", "storeroom"),
    summary="an in-memory inventory of items in stock",
    source=r'''"""In-memory stock keeping."""


class $Inventory:
    """Counts of items in stock, keyed by item name."""

    def __init__(self, stock=None):
        self.stock = dict(stock or {})

    def $add(self, item, quantity=1):
        """Add `quantity` units of `item`; returns the new count."""
        self.stock[item] = self.stock.get(item, 0) + quantity
        return self.stock[item]

    def $remove(self, item, quantity=1):
        """Take units out of stock and return what is left; ValueError when there are not enough."""
        have = self.stock.get(item, 0)
        if quantity > have:
            raise ValueError(f"only {have} of {item} left")
        self.stock[item] = have - quantity
        return self.stock[item]

    def $total_units(self):
        """Units of all items together."""
        total = 0
        for count in self.stock.values():
            total += count
        return total

    def $low_stock(self, threshold=3):
        """Names of items with fewer than `threshold` units, sorted by name."""
        return sorted(name for name, count in self.stock.items() if count < threshold)
''',
    idents={
        "Inventory": ("Inventory", "Stock", "Warehouse", "StockBook"),
        "add": ("add", "restock", "put", "receive"),
        "remove": ("remove", "take", "withdraw", "dispatch"),
        "total_units": ("total_units", "count_all", "unit_count", "size"),
        "low_stock": ("low_stock", "running_low", "needs_reorder", "scarce_items"),
    },
    cases=(
        ("Inventory", "${add}_new", '$Inventory().$add("apple")'),
        ("Inventory", "${add}_existing", '$Inventory({"apple": 3}).$add("apple", 2)'),
        ("Inventory", "${remove}_some", '$Inventory({"pear": 5}).$remove("pear", 2)'),
        ("Inventory", "${remove}_all", '$Inventory({"pear": 2}).$remove("pear", 2)'),
        ("Inventory", "${remove}_too_many", '$Inventory({"pear": 1}).$remove("pear", 3)'),
        ("Inventory", "${total_units}", '$Inventory({"a": 2, "b": 5}).$total_units()'),
        ("Inventory", "${total_units}_empty", "$Inventory().$total_units()"),
        ("Inventory", "${low_stock}", '$Inventory({"x": 1, "y": 3, "w": 0}).$low_stock()'),
        ("Inventory", "${low_stock}_threshold", '$Inventory({"x": 1, "y": 3}).$low_stock(threshold=5)'),
    ),
)

GRADES = ModuleTemplate(
    key="grades",
    module_names=("grades", "scoring", "gradebook", "marks"),
    summary="grading and score statistics",
    source=r'''"""Turning exam scores into grades and summaries."""


def $letter_grade(score):
    """A for 90 and above, B for 80-89, C for 70-79, D for 60-69, F below 60."""
    if score >= 90:
        return "A"
    if score >= 80:
        return "B"
    if score >= 70:
        return "C"
    if score >= 60:
        return "D"
    return "F"


def $weighted_average(scores, weights):
    """Average of `scores` weighted by `weights`."""
    total = 0.0
    for score, weight in zip(scores, weights):
        total += score * weight
    return total / sum(weights)


def $normalize(values, low=0.0, high=1.0):
    """Rescale `values` linearly onto [low, high]; constant data maps to `low`."""
    smallest, largest = min(values), max(values)
    span = largest - smallest
    if span == 0:
        return [low for _ in values]
    return [low + (v - smallest) / span * (high - low) for v in values]


def $top_n(scores, n=3):
    """Names of the `n` best scorers, best first; ties go to the alphabetically first name."""
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return [name for name, _ in ranked[:n]]


def $pass_rate(scores, passing=60):
    """Percentage of scores at or above `passing`, one decimal."""
    if not scores:
        return 0.0
    passed = len([s for s in scores if s >= passing])
    return round(100 * passed / len(scores), 1)
''',
    idents={
        "letter_grade": ("letter_grade", "grade_for", "to_letter", "score_letter"),
        "weighted_average": ("weighted_average", "weighted_mean", "weighted_score", "combine_scores"),
        "normalize": ("normalize", "rescale", "min_max_scale", "scale_scores"),
        "top_n": ("top_n", "leaders", "best_students", "podium"),
        "pass_rate": ("pass_rate", "percent_passed", "success_rate", "passing_share"),
    },
    cases=(
        ("letter_grade", "a", "$letter_grade(95)"),
        ("letter_grade", "b_boundary", "$letter_grade(80)"),
        ("letter_grade", "c_fraction", "$letter_grade(79.5)"),
        ("letter_grade", "d_boundary", "$letter_grade(60)"),
        ("letter_grade", "f", "$letter_grade(12)"),
        ("weighted_average", "basic", "$weighted_average([80, 90], [1, 3])"),
        ("weighted_average", "single", "$weighted_average([70], [2])"),
        ("normalize", "basic", "$normalize([2, 4, 6])"),
        ("normalize", "constant", "$normalize([5, 5])"),
        ("normalize", "custom_range", "$normalize([0, 10], low=-1.0, high=1.0)"),
        ("top_n", "default", '$top_n({"ann": 90, "bob": 72, "cy": 90, "dee": 85})'),
        ("top_n", "one", '$top_n({"ann": 70, "bob": 72}, n=1)'),
        ("pass_rate", "mixed", "$pass_rate([50, 60, 70, 80])"),
        ("pass_rate", "empty", "$pass_rate([])"),
        ("pass_rate", "custom_passing", "$pass_rate([45, 59, 61], passing=50)"),
    ),
)

UNITS = ModuleTemplate(
    key="units",
    module_names=("units", "conversions", "convert", "measures"),
    summary="unit conversions and human-readable formatting",
    source=r'''"""Unit conversions and human-readable formatting."""


def $celsius_to_fahrenheit(celsius):
    """Degrees Celsius to degrees Fahrenheit."""
    return celsius * 1.8 + 32


def $fahrenheit_to_celsius(fahrenheit):
    """Degrees Fahrenheit to degrees Celsius, two decimals."""
    return round((fahrenheit - 32) / 1.8, 2)


def $km_to_miles(km, places=2):
    """Kilometres to miles, rounded to `places` decimals."""
    return round(km * 0.621371, places)


def $format_bytes(size, precision=1):
    """Human-readable size with binary units: 1536 -> '1.5 KB'."""
    units = ["B", "KB", "MB", "GB"]
    value = float(size)
    index = 0
    for _ in range(len(units) - 1):
        if value < 1024:
            break
        value /= 1024
        index += 1
    return f"{value:.{precision}f} {units[index]}"


def $minutes_to_clock(minutes):
    """150 -> '02:30'."""
    hours, rest = divmod(minutes, 60)
    return f"{hours:02d}:{rest:02d}"
''',
    idents={
        "celsius_to_fahrenheit": (
            "celsius_to_fahrenheit",
            "c_to_f",
            "to_fahrenheit",
            "fahrenheit_from_celsius",
        ),
        "fahrenheit_to_celsius": ("fahrenheit_to_celsius", "f_to_c", "to_celsius", "celsius_from_fahrenheit"),
        "km_to_miles": ("km_to_miles", "kilometres_to_miles", "to_miles", "miles_from_km"),
        "format_bytes": ("format_bytes", "human_size", "pretty_bytes", "size_label"),
        "minutes_to_clock": ("minutes_to_clock", "format_minutes", "hhmm", "clock_string"),
    },
    cases=(
        ("celsius_to_fahrenheit", "boiling", "$celsius_to_fahrenheit(100)"),
        ("celsius_to_fahrenheit", "freezing", "$celsius_to_fahrenheit(0)"),
        ("celsius_to_fahrenheit", "minus_forty", "$celsius_to_fahrenheit(-40)"),
        ("fahrenheit_to_celsius", "boiling", "$fahrenheit_to_celsius(212)"),
        ("fahrenheit_to_celsius", "mild", "$fahrenheit_to_celsius(50)"),
        ("km_to_miles", "ten", "$km_to_miles(10)"),
        ("km_to_miles", "marathon", "$km_to_miles(42.195, places=1)"),
        ("format_bytes", "bytes", "$format_bytes(512)"),
        ("format_bytes", "kilobytes", "$format_bytes(1536)"),
        ("format_bytes", "megabytes", "$format_bytes(5242880)"),
        ("format_bytes", "precision", "$format_bytes(1536, precision=0)"),
        ("minutes_to_clock", "basic", "$minutes_to_clock(150)"),
        ("minutes_to_clock", "under_hour", "$minutes_to_clock(45)"),
        ("minutes_to_clock", "ten_hours", "$minutes_to_clock(600)"),
    ),
)

TEMPLATES = (CART, INVENTORY, GRADES, UNITS)
