#!/bin/bash
for i in $(seq 1 20); do cat "/app/logs/app-$i.log"; done > /app/all.log
