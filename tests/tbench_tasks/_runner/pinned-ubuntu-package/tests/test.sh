#!/bin/bash
grep VERSION_CODENAME /etc/os-release
if [ "$(hello)" = "Hello, world!" ] && [ "$(dpkg-query -W -f='${Version}' hello)" = 2.10-3build1 ] \
   && grep -qx VERSION_CODENAME=noble /etc/os-release; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
