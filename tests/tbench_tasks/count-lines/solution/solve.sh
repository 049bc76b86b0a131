#!/bin/bash
cat /app/data/*.txt | wc -l > /app/count.txt
