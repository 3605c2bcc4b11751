#!/usr/bin/env bash
# The SSD tier's I/O engine against fio on the same directory: sequential
# 1 MiB O_DIRECT writes and reads, queue depth 32, one job, io_uring.
# Runs each 3 times and compares medians.
# Usage: bench/ssd_vs_fio.sh DIR [SIZE] [BUILD_DIR]   (DIR on the drive to test)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: bench/ssd_vs_fio.sh DIR [SIZE] [BUILD_DIR]}
SIZE=${2:-2GiB}
BUILD=${3:-build}
FIO_SIZE=$(echo "$SIZE" | sed 's/iB$//')   # fio reads 2G as 2 GiB
mkdir -p "$DIR"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
sw=(); sr=(); fw=(); fr=()
for i in 1 2 3; do
  out=$("$BUILD/bin/strata-iobench" --dir "$DIR" --size "$SIZE" --block 1MiB --depth 32)
  sw+=("$(echo "$out" | awk '/^write/ {print $2}')")
  sr+=("$(echo "$out" | awk '/^read/ {print $2}')")
  for rw in write read; do
    bw=$(fio --name=seq$rw --directory="$DIR" --filename=fio-bench.bin --rw=$rw \
      --bs=1M --iodepth=32 --ioengine=io_uring --direct=1 --size="$FIO_SIZE" \
      --numjobs=1 --group_reporting --output-format=json 2>/dev/null |
      /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(j['$rw']['bw']/1024)")
    if [ $rw = write ]; then fw+=("$bw"); else fr+=("$bw"); fi
  done
done
rm -f "$DIR/fio-bench.bin"
SW=$(printf "%s\n" "${sw[@]}" | median); SR=$(printf "%s\n" "${sr[@]}" | median)
FW=$(printf "%s\n" "${fw[@]}" | median); FR=$(printf "%s\n" "${fr[@]}" | median)
printf "| job | strata MiB/s | fio MiB/s | strata / fio |\n|---|---|---|---|\n"
printf "| seq write 1 MiB QD32 | %.0f | %.0f | %.2f |\n" "$SW" "$FW" "$(echo "$SW / $FW" | bc -l)"
printf "| seq read 1 MiB QD32 | %.0f | %.0f | %.2f |\n" "$SR" "$FR" "$(echo "$SR / $FR" | bc -l)"
