"""How the local Clover model is steered: the grammar its tool calls are decoded under, the
workspace that grounds their values, and the search that chooses its edits.

Between model/ (the network and its block-diffusion decoder) and the backends (backends/local.py
drives these modules for each turn). Imports core, tools, kernels, model and itself: nothing of the
backends or the CLI (tests/test_layering.py checks).

Constrained decoding (what a token may be):
- tool_grammar.py   tool calls well formed by construction: the grammar over the decoder's tokens
- call_syntax.py    the call's XML syntax (`<function=...>`, `<parameter=...>`) as token tries
- typed_values.py   integers, numbers, booleans and arrays as the parser reads them back
- grounding.py      what a grounded value may be: the workspace's paths, old_str, symbols
- value_nodes.py    the token-level automata of grounded values (vocabulary trie, candidate sets)
- mentions.py       what the conversation names: the copy prior of grounded values
- answer_spans.py   an answer's `code spans` copy the conversation or tool output

Program repair (what the embedded model's edit becomes):
- edit_choice.py    its own str_replace, or a one-site repair a check verifies
- repairs.py        the one-site repairs of a snippet
- edit_scope.py     test files and docstrings held back unless the request names them
- issue_checks.py   what an issue says a call should return, as runnable checks
- check_safety.py   which of those checks may run (an issue is untrusted text)
- reproduce.py      those checks run against candidate edits in the agent's environment
- probe_script.py   the stand-alone script that runs them (standard library only)

Honesty:
- competence.py     outside its competence a small checkpoint says so instead of looping
"""
