#!/bin/bash
subj="/O=Clover/CN=task"
if [ "$(sed -e 's/x/x/g' /app/notes.txt)" = "$(printf 'color one\ncolor two')" ] && grep -q "</title>" /app/page.html \
   && [ "$(cat /app/subject.txt)" = "$subj" ]; then
  echo PASS; echo 1 > /logs/verifier/reward.txt
else
  echo FAIL; echo 0 > /logs/verifier/reward.txt
fi
