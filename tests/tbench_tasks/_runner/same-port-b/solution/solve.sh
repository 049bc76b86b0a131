#!/bin/bash
# Listen on 127.0.0.1:12355 (perl-base is in every Debian and Ubuntu image) and keep it.
perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 12355, Listen => 5)
  or die "cannot listen on 12355: $!\n"; open(my $f, ">", "/app/listening"); close $f;
  while (my $c = $s->accept) { print $c "b\n"; close $c }' > /app/server.log 2>&1 &
for i in $(seq 100); do [ -f /app/listening ] && break; sleep 0.1; done
cat /app/server.log
sleep 2
