#!/bin/bash
printf '3\n4\n5\n' > /tmp/clover-sum-$$.txt
got=$(bash /app/sum.sh /tmp/clover-sum-$$.txt)
printf '10\n-2\n' > /tmp/clover-sum2-$$.txt
got2=$(bash /app/sum.sh /tmp/clover-sum2-$$.txt)
rm -f /tmp/clover-sum-$$.txt /tmp/clover-sum2-$$.txt
if [ "$got" = "12" ] && [ "$got2" = "8" ]; then
  echo "PASS"; echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: got '$got' and '$got2', expected 12 and 8"; echo 0 > /logs/verifier/reward.txt
fi
