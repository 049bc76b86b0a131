"""The library of small realistic modules the generator plants bugs in.

Each `ModuleTemplate` is correct Python with `$placeholders` for identifiers. Every placeholder has
several spellings: even positions are used by the train split, odd ones by the held-out split, so the
two splits never share a function, class or module name. `cases` are example calls
`(unit, label, expression)`; the generator evaluates them against the correct and the buggy code to
decide which become the failing test and which stay as passing tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from string import Template


@dataclass(frozen=True)
class ModuleTemplate:
    key: str
    module_names: tuple[str, ...]
    summary: str  # one line for the README
    source: str
    idents: dict[str, tuple[str, ...]]
    cases: tuple[tuple[str, str, str], ...]
    test_imports: tuple[str, ...] = field(default=())

    def split_choices(self, alternatives: tuple[str, ...], split: str) -> tuple[str, ...]:
        return alternatives[0::2] if split == "train" else alternatives[1::2]

    def render(self, names: dict[str, str]) -> str:
        return Template(self.source).substitute(names)

    def expr(self, expression: str, names: dict[str, str]) -> str:
        return Template(expression).substitute(names)


def all_templates(split: str = "heldout") -> tuple[ModuleTemplate, ...]:
    """The module library of `split`. The train split also has records.py's classes; the held-out
    library stays fixed so its instances, and the figures measured on them, do not move."""
    from clover.evals.synthfix.templates import basics, domain, formats, records

    library = (*basics.TEMPLATES, *domain.TEMPLATES, *formats.TEMPLATES)
    return (*library, *records.TEMPLATES) if split == "train" else library
