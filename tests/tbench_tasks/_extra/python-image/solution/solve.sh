#!/bin/bash
python -c "import clover_tiny; print(clover_tiny.VALUE)" > /app/out.txt
