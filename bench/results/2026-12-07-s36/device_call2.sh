#!/usr/bin/env bash
# Session 36, call 2: where the fused window backward's time goes. A/B on MiMo video (image forced
# to the fused kernel) of the wheel (fused v9a) against `noex` (-DSINKOPS_WBWD_FUSED_EXCHANGE=0: no
# cluster exchange, wrong sums), `o1` / `o2` (the row terms' O, lse, dlse loaded with the chunk's Q / dO, O
# into the chunk's dq slot; exchange 1 / 2) and
# the two kernels, one pass; then ncu (stall sections) of one fused launch with its SASS source page.
# Carry [".whl"] (the wheel + .whl/var_noex, var_sta, var_o1, var_o2).
set -uo pipefail
source tools/prof/device_sites.sh wheel noex sta o1 o2
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/window_bwd_variants.py
for pass in 1; do
  for v in wheel sta noex o1 o2; do
    SINKOPS_WBWD_FUSED=2 PYTHONPATH=/tmp/site_$v timeout 60 python3 $V $v 2>&1 | tail -1
  done
  SINKOPS_WBWD_FUSED=0 PYTHONPATH=/tmp/site timeout 60 python3 $V two-kernels 2>&1 | tail -1
done | tee $OUT/ab_parts.log
echo "A/B done ($(el) s)"
for v in o2 o1; do left 200 && PYTHONPATH=/tmp/site_$v timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "fused" > $OUT/tests_fused_$v.log 2>&1
echo "tests fused $v: $(tail -1 $OUT/tests_fused_$v.log) ($(el) s)"; grep -E "^(FAILED|ERROR)|^E  " $OUT/tests_fused_$v.log | head -5; done
left 260 && PYTHONPATH=/tmp/site_o2 timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section SourceCounters \
  --section Occupancy --section MemoryWorkloadAnalysis --import-source no -k regex:fused -c 1 -o $OUT/fused_video \
  python3 $R/tools/prof/one_window_bwd.py video > $OUT/ncu_run.log 2>&1
echo "ncu ($(el) s): $(tail -1 $OUT/ncu_run.log)"
ncu -i $OUT/fused_video.ncu-rep --page details > $OUT/ncu_details.txt 2>&1
ncu -i $OUT/fused_video.ncu-rep --page source --csv --print-source sass > $OUT/ncu_source.csv 2>&1
rm -f $OUT/fused_video.ncu-rep
grep -E "Duration|Registers|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|L2 Hit|DRAM Throughput" $OUT/ncu_details.txt | head -20
gzip -f $OUT/*.log $OUT/*.csv 2>/dev/null; echo "end ($(el) s)"
