#!/bin/bash
clover-greet > /app/greeting.txt
