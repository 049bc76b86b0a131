#!/bin/bash
echo 'Hello, Clover!' > /app/hello.txt
