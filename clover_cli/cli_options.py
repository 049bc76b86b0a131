"""The options several `clover` commands share (main.py declares the commands), one alias each, so a
command's signature reads as its list of options and each is spelt and documented once."""

from __future__ import annotations

from typing import Annotated

import typer

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="'embedded', a checkpoint directory, scripted:FILE, or a server model name."
    ),
]
BaseUrlOpt = Annotated[
    str | None, typer.Option("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
]
ApiKeyOpt = Annotated[
    str | None, typer.Option("--api-key", help="API key (default: $OPENAI_API_KEY).", show_default=False)
]
ToolFormatOpt = Annotated[str | None, typer.Option("--tool-format", help="native | text | auto")]
ThinkOpt = Annotated[
    bool | None, typer.Option("--think/--no-think", help="Thinking mode.", show_default=False)
]
ModeOpt = Annotated[
    str | None, typer.Option("--mode", help="Permission mode: plan | ask | auto-edit | yolo.")
]
AddDirOpt = Annotated[
    list[str] | None, typer.Option("--add-dir", help="Also allow file tools in this directory.")
]
PrintOpt = Annotated[
    str | None,
    typer.Option(
        "--print",
        "-p",
        help="One-shot: answer PROMPT and exit ('-': the prompt is stdin; piped stdin is "
        "appended). Calls needing approval are refused and reported; exit codes below.",
        show_default=False,
    ),
]
OutputFormatOpt = Annotated[str, typer.Option("--output-format", help="With -p: text | json | stream-json")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Allow every tool call (yolo mode).")]
AllowHomeOpt = Annotated[
    bool,
    typer.Option("--allow-home", help="Let the workspace be (or hold) your home directory or /."),
]
# `--resume` alone (no ID) opens a picker: main() gives the bare option this value (typer has no
# optional option values).
PICK = "pick"
ResumeOpt = Annotated[
    str | None,
    typer.Option(
        "--resume",
        "-r",
        metavar="[ID]",
        show_default=False,
        help="Continue a saved session: an ID, 'last', or nothing to pick one from a list.",
    ),
]
ContinueOpt = Annotated[
    bool, typer.Option("--continue", "-c", help="Continue the most recent session in this directory.")
]
