"""The wordings of the repository questions chat_tasks.py asks and the thinking that opens each kind's
answer: listed wordings, widened by templated ones, so that a small model learns a request's kind from
its words, not from a few memorised strings."""

from __future__ import annotations

FIND = [
    "Where is `{name}` defined?",
    "where's {name}?",
    "Find the definition of {name}.",
    "Which module has the {name} function?",
    "In which file is {name}?",
    "show me where {name} lives",
    "Where can I find {name}?",
    "what file is `{name}` in?",
    "Locate the {name} function.",
    "where does {name} come from?",
    "Show me the code of {name}.",
    "Where is the function {name}?",
    "which file has {name}",
    "What file is {name} defined in?",
    "find {name}",
    "Where's `{name}`?",
    "Show me {name}.",
    "In which module is the function {name} defined?",
    "look up {name} for me",
    "Which file contains the definition of {name}?",
    "where is {name} implemented?",
]
TESTS = [
    "run the test suite",
    "Do the tests pass?",
    "please run pytest",
    "Check that the tests pass.",
    "can you run the tests for me?",
    "are the tests green?",
    "Test it.",
    "run pytest please",
    "Could you check the test suite?",
    "Are there failing tests?",
    "tests?",
    "Run all the tests.",
    "run the tests please",
    "Please run the test suite.",
    "pytest",
    "Does everything pass?",
    "Run the unit tests.",
    "Can you test this project?",
    "check the tests",
    "Run tests.",
    "Are the tests passing?",
]
ABOUT = [
    "What is this project?",
    "Give me an overview of this repo.",
    "what's in this repository?",
    "What is this code for?",
    "Describe this project briefly.",
    "What does this project do?",
    "what is this repo about?",
    "Give me a tour of this codebase.",
    "Tell me about this project.",
    "What's this package for?",
    "summarize the repository",
]
FILES = [
    "List the Python files.",
    "which files are in this project?",
    "Show me the source files.",
    "What modules are there?",
    "list the files",
    "What files does this repo have?",
    "Show the project structure.",
    "Which Python files are there?",
    "ls",
]

# Templated wordings on top of the lists above: a small model taught a few dozen fixed strings per kind
# answered "Run the tests." with "You're welcome." (benchmarks/chat_routing.py); many wordings make the
# kind a property of the request's words, not of a memorised string. The templates avoid the measured
# prompts' exact wordings (tests/test_chat_rows.py checks).
_TEMPLATES: dict[str, tuple[list[str], list[str]]] = {
    "tests": (
        [
            "please run {}",
            "Can you run {}?",
            "Could you run {}?",
            "Go ahead and run {}.",
            "Execute {}.",
            "run {} now",
            "Kick off {}.",
            "I'd like you to run {}.",
            "Let's run {}.",
            "Run {} and tell me the result.",
        ],
        [
            "the tests",
            "the test suite",
            "pytest",
            "all the tests",
            "the unit tests",
            "every test",
            "the project's tests",
            "the tests in this repo",
        ],
    ),
    "tests2": (
        [
            "Does {} pass?",
            "Is {} passing?",
            "Is {} green?",
            "Does {} still pass?",
            "Is {} failing?",
            "Did I break {}?",
            "Is {} OK?",
            "what's the state of {}?",
        ],
        ["the test suite", "the build", "everything", "pytest", "the testsuite", "the suite"],
    ),
    "tests3": (
        [
            "Are {} passing?",
            "Do {} pass now?",
            "Are {} green?",
            "Are {} OK?",
            "are {} failing?",
            "Do {} still pass?",
            "How are {} doing?",
            "Did {} break?",
        ],
        ["the tests", "all tests", "my tests", "the unit tests", "the tests here", "these tests"],
    ),
    "find": (
        [
            "Where is {} defined?",
            "Where does {} live?",
            "find where {} is defined",
            "Show me the definition of {}.",
            "Which module defines {}?",
            "Where is {} implemented?",
            "What file has the definition of {}?",
            "Can you find {}?",
            "where do I find {}?",
        ],
        ["`{name}`", "the function {name}", "the {name} function", "{name}()"],
    ),
    "files": (
        ["{}", "{}?", "Can you {}?", "please {}"],
        [
            "list the python files",
            "show me the files",
            "what files are there",
            "list the source files",
            "show the python modules",
            "which modules does this project have",
            "list the modules",
        ],
    ),
}


def _with_templates(kind: str, listed: list[str]) -> list[str]:
    """`listed` followed by every templated wording of `kind` (its _TEMPLATES entries) not listed."""
    filled = [
        f.format(x)
        for k, (forms, fills) in _TEMPLATES.items()
        if k.rstrip("23") == kind
        for f in forms
        for x in fills
    ]
    return list(dict.fromkeys(listed + filled))


TESTS, FIND, FILES = (
    _with_templates("tests", TESTS),
    _with_templates("find", FIND),
    _with_templates("files", FILES),
)

THINK = {  # first tokens distinct from every other kind's (chat_rows.py THOUGHTS says why)
    "find": "Find the definition of `{name}`: outline finds it.",
    "tests": "Test run: run the tests with pytest and report the result.",
    "about": "Overview: view the top of the repository to find the README or the main module.",
    "files": "List the Python files with glob.",
}
OFFER = [
    "I can view a file, find a definition or run the tests.",
    "If something is broken, describe the bug and I'll try to fix it.",
    "",
]
