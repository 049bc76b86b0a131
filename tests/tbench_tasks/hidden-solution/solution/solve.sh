#!/bin/bash
echo "SECRET-7d1f-answer" > /app/answer.txt
