#!/bin/bash
# A build-context generator that writes under /app and into a system folder.
mkdir -p /app/logs
for i in $(seq 1 20); do echo "entry $i" > "/app/logs/app-$i.log"; done
echo generated > /usr/local/share/clover-generated
