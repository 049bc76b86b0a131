#!/bin/bash
# The server the solution started answers with this task's name: not the other task's, which
# listens on the same port at the same time.
sleep 2
exec 3<>/dev/tcp/127.0.0.1/12355 && read -r name <&3
echo "port 12355 answered: $name"
if [ "$name" = a ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
