"""Text in and out of the model (torch-free): the tokenizer, the chat format and parsing a reply's
thinking and tool calls."""
