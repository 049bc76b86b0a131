#!/bin/bash
sed -i 's/colour/color/g' /app/notes.txt
