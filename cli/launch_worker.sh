#!/bin/sh
# A rank for the `backplane launch` tests (cli/CMakeLists.txt):
#   env      prints the distributed variables it was given
#   fail     rank 1 exits 3 after a moment; the others sleep until stopped
#   killed D rank 1 ignores SIGTERM and writes D.ready; rank 0 waits for that
#            file, then is killed by SIGKILL
#   args ... prints its arguments
#   sleep F  writes its pid to F.RANK, sleeps, and on SIGTERM writes F.RANK.term
#            and exits
case "$1" in
  env)
    # The OpenMP threads the launcher should have given: the usable cores
    # (nproc) / ranks, less one where 3 or more are left, at least 1.
    share=$(( $(nproc) / LOCAL_WORLD_SIZE ))
    if [ "$share" -ge 4 ]; then want=$((share - 1)); elif [ "$share" -lt 1 ]; then want=1; else want=$share; fi
    [ "$OMP_NUM_THREADS" = "$want" ] && verdict=expected || verdict="not $want"
    echo "rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE lws=$LOCAL_WORLD_SIZE group=$GROUP_RANK addr=$MASTER_ADDR port=$MASTER_PORT threads=$OMP_NUM_THREADS ($verdict)" ;;
  fail)
    if [ "$RANK" = 1 ]; then sleep 0.2; exit 3; fi
    exec sleep 60 ;;
  killed)
    if [ "$RANK" = 0 ]; then
      while [ ! -e "$2.ready" ]; do sleep 0.05; done
      rm -f "$2.ready"
      kill -9 $$
    fi
    trap '' TERM
    touch "$2.ready"
    sleep 60 ;;
  args)
    shift
    echo "args: $*" ;;
  sleep)
    trap 'echo TERM > "$2.$RANK.term"; exit 0' TERM
    echo $$ > "$2.$RANK"
    sleep 60 &
    wait ;;
  *)
    echo "launch_worker.sh: unknown mode '$1'" >&2; exit 2 ;;
esac
