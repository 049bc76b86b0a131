"""The interactive `clover chat` terminal: prompt, streamed rendering, approvals, sessions."""
