#!/bin/bash
wc -l < /app/data.txt | tr -d ' ' > count.txt
