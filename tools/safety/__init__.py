"""What bounds a step: shell analysis and permission rules (what may start), the permission gate,
the exec check (every program at the moment it starts), the sandbox, the step boundary
(what a step may leave behind, decided on what it changed) and secret redaction."""
