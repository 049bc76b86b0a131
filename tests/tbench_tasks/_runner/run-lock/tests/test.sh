#!/bin/bash
# /var/lock is a link to /run/lock in the image: it must lead somewhere (mailman locks there).
ls -ld /var/lock /run/lock
if touch /var/lock/clover-test.lock && [ "$(readlink -f /var/lock)" = /run/lock ] && [ -f /run/lock/clover-test.lock ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
