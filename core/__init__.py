"""The protocols and shared types every part of Clover plugs into; imports nothing of ours."""
