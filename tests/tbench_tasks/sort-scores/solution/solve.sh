#!/bin/bash
sort -t, -k2,2nr /app/scores.csv | head -n 3 | cut -d, -f1 > /app/top.txt
