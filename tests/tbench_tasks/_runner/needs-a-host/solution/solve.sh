#!/bin/bash
# Fetch what the task needs from a host: where it cannot be resolved, nothing is fetched.
getent hosts downloads.clover-unreachable.org > /app/fetched.txt || echo "cannot resolve downloads.clover-unreachable.org"
