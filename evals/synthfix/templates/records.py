"""Classes with several data attributes, where reading the wrong one is a realistic bug.

Train split only (templates.all_templates): the held-out benchmark keeps its module library so its
figures compare across model generations.
"""

from clover.evals.synthfix.templates import ModuleTemplate

ACCOUNT = ModuleTemplate(
    key="account",
    module_names=("account", "ledger", "wallet", "banking"),
    summary="a bank account with an overdraft limit and a withdrawal fee",
    source=r'''"""Bank accounts. Amounts are integer cents."""


class $Account:
    """An account with an overdraft `limit` and a flat `fee` per withdrawal."""

    def __init__(self, owner, balance=0, limit=0, fee=0):
        self.owner = owner
        self.balance = balance
        self.limit = limit
        self.fee = fee

    def $available(self):
        """What can still be withdrawn: the balance plus the overdraft limit."""
        return self.balance + self.limit

    def $withdraw(self, amount):
        """Take `amount` out and charge the fee; ValueError beyond the available funds."""
        if amount + self.fee > self.balance + self.limit:
            raise ValueError(f"{self.owner} cannot withdraw {amount}")
        self.balance -= amount + self.fee
        return self.balance

    def $statement(self):
        """One line for the monthly statement."""
        return f"{self.owner}: {self.balance} (limit {self.limit})"
''',
    idents={
        "Account": ("Account", "BankAccount", "Wallet", "Purse"),
        "available": ("available", "spendable", "headroom", "funds_left"),
        "withdraw": ("withdraw", "take_out", "debit", "pay_out"),
        "statement": ("statement", "summary_line", "describe", "report_line"),
    },
    cases=(
        ("Account", "${available}", '$Account("ann", 500, limit=200).$available()'),
        ("Account", "${available}_no_limit", '$Account("bo", 300).$available()'),
        ("Account", "${withdraw}", '$Account("ann", 500, fee=5).$withdraw(100)'),
        ("Account", "${withdraw}_overdraft", '$Account("ann", 100, limit=300, fee=10).$withdraw(250)'),
        ("Account", "${withdraw}_too_much", '$Account("cy", 100, limit=50, fee=2).$withdraw(149)'),
        ("Account", "${statement}", '$Account("dee", 1250, limit=400).$statement()'),
    ),
)

TRIP = ModuleTemplate(
    key="trip",
    module_names=("trips", "rides", "taxi", "fares"),
    summary="taxi trips priced by distance and waiting time",
    source=r'''"""Taxi trips: distance in km, waiting in minutes."""


class $Trip:
    """One ride and the rates that price it."""

    def __init__(self, distance, minutes, per_km=2.0, per_minute=0.5, base=3.0):
        self.distance = distance
        self.minutes = minutes
        self.per_km = per_km
        self.per_minute = per_minute
        self.base = base

    def $fare(self):
        """Base charge plus distance and waiting time."""
        return round(self.base + self.distance * self.per_km + self.minutes * self.per_minute, 2)

    def $average_speed(self):
        """Kilometres per hour over the whole ride."""
        return round(self.distance / (self.minutes / 60), 1)

    def $is_short(self, max_km=5):
        """Short rides stay under `max_km` kilometres."""
        return self.distance < max_km
''',
    idents={
        "Trip": ("Trip", "Ride", "Journey", "TaxiRide"),
        "fare": ("fare", "price", "total_fare", "cost"),
        "average_speed": ("average_speed", "speed", "mean_speed", "kmh"),
        "is_short": ("is_short", "short_ride", "is_local", "within_town"),
    },
    cases=(
        ("Trip", "${fare}", "$Trip(10, 20).$fare()"),
        ("Trip", "${fare}_rates", "$Trip(4, 6, per_km=1.5, per_minute=1.0, base=2.5).$fare()"),
        ("Trip", "${average_speed}", "$Trip(30, 45).$average_speed()"),
        ("Trip", "${average_speed}_slow", "$Trip(3, 20).$average_speed()"),
        ("Trip", "${is_short}", "$Trip(2, 40).$is_short()"),
        ("Trip", "${is_short}_long", "$Trip(12, 4).$is_short()"),
    ),
)

BOOK = ModuleTemplate(
    key="book",
    module_names=("library", "reading", "books", "shelf"),
    summary="reading progress through a book",
    source=r'''"""Reading progress."""


class $Book:
    """A book being read: `done` of `pages` pages."""

    def __init__(self, title, author, pages, done=0):
        self.title = title
        self.author = author
        self.pages = pages
        self.done = done

    def $progress(self):
        """Percent read, one decimal."""
        return round(100 * self.done / self.pages, 1)

    def $remaining(self):
        """Pages still to read."""
        return self.pages - self.done

    def $label(self):
        """How the shelf lists the book."""
        return f"{self.title} by {self.author}"

    def $is_finished(self):
        return self.done >= self.pages
''',
    idents={
        "Book": ("Book", "Volume", "Novel", "ReadingItem"),
        "progress": ("progress", "percent_read", "read_share", "completion"),
        "remaining": ("remaining", "pages_left", "to_read", "left_to_read"),
        "label": ("label", "shelf_label", "title_line", "caption"),
        "is_finished": ("is_finished", "finished", "is_done", "complete"),
    },
    cases=(
        ("Book", "${progress}", '$Book("Dune", "Herbert", 400, done=100).$progress()'),
        ("Book", "${progress}_third", '$Book("Emma", "Austen", 300, done=100).$progress()'),
        ("Book", "${remaining}", '$Book("Dune", "Herbert", 400, done=150).$remaining()'),
        ("Book", "${label}", '$Book("Emma", "Austen", 300).$label()'),
        ("Book", "${is_finished}", '$Book("Emma", "Austen", 300, done=300).$is_finished()'),
        ("Book", "${is_finished}_not_yet", '$Book("Dune", "Herbert", 400, done=12).$is_finished()'),
    ),
)

TEMPLATES = (ACCOUNT, TRIP, BOOK)
