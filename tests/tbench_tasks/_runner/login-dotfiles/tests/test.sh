#!/bin/bash
# What a test appends to ~/.bashrc reaches a login shell (tmux starts one): only when /root has the
# image's .profile, which reads .bashrc.
ls -la /root
echo 'export CLOVER_FROM_BASHRC=yes' >> ~/.bashrc
out=$(bash -l -i -c 'echo "v=$CLOVER_FROM_BASHRC"' 2>/dev/null </dev/null | tail -1)
echo "login shell: $out"
if [ "$out" = v=yes ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
