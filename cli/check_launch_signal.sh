#!/bin/sh
# `backplane launch` passes SIGTERM on: the launcher, sent SIGTERM while its
# two ranks sleep, must pass it to both (each writes a .term file) and exit
# 143 (128 + SIGTERM). --grace 60: a rank stopped by SIGKILL instead would
# make the test time out. Then a launcher started with SIGCHLD ignored
# must still see a rank fail.
#   check_launch_signal.sh BACKPLANE WORKER TMPDIR
set -u
backplane=$1 worker=$2 dir=$3
rm -f "$dir"/launch_pid.*
"$backplane" launch --nproc 2 --grace 60 -- "$worker" sleep "$dir/launch_pid" &
launcher=$!
i=0
while [ ! -s "$dir/launch_pid.0" ] || [ ! -s "$dir/launch_pid.1" ]; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "the ranks did not start"; kill -9 $launcher; exit 1; }
  sleep 0.1
done
kill -TERM $launcher
wait $launcher
code=$?
[ $code = 143 ] || { echo "launcher exited $code, expected 143"; exit 1; }
for r in 0 1; do
  pid=$(cat "$dir/launch_pid.$r")
  if kill -0 "$pid" 2>/dev/null; then echo "rank $r (pid $pid) still runs"; kill -9 "$pid"; exit 1; fi
  [ -s "$dir/launch_pid.$r.term" ] || { echo "rank $r did not receive SIGTERM"; exit 1; }
done
echo "both ranks received SIGTERM and stopped; launcher exit 143"

# Started with SIGCHLD ignored (perl-base is Essential; the kernel would reap the ranks itself and
# their statuses would be lost), the launcher must still see rank 1 fail.
perl -e '$SIG{CHLD} = "IGNORE"; exec @ARGV' "$backplane" launch --nproc 2 -- "$worker" fail &
launcher=$!
i=0
while kill -0 $launcher 2>/dev/null; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "with SIGCHLD ignored the launcher did not end"; kill -9 $launcher; exit 1; }
  sleep 0.1
done
wait $launcher
code=$?
[ $code = 1 ] || { echo "with SIGCHLD ignored the launcher exited $code, expected 1 (rank 1 failed)"; exit 1; }
echo "with SIGCHLD ignored: rank 1's failure seen, exit 1"
