# Strata machine profile: the H200 server this project's GPU checks run on
# (one H200, 141 GB HBM3e; 16 CPU cores; 128 GiB of host memory; one
# virtual disk). MEASURED: the GPU lines come from strata-calibrate --backend
# cuda on that machine (2026-11-30, bench/results/h200.profile). NOT
# MEASURED: the SSD lines and the CPU update rate are the built-in defaults
# (the machine has no NVMe drive of its own; its 64 GiB disk is a guest
# disk). Pass it with --profile and --gpu-mem 135GiB --cpu-mem 100GiB.
matmul_small_gflops 35.7729
matmul_medium_gflops 1744.72
matmul_large_gflops 50946.3
simple_ns_per_element 0.00570965
transcendental_ns_per_element 0.00340652
movement_ns_per_element 0.00770187
launch_us 5.15594
parallel_launch_us 0.01
copy_gbs 55.1955
ssd_read_gbs 1.5
ssd_write_gbs 1
ssd_small_read_gbs 0.5
ssd_small_write_gbs 0.5
ssd_read_latency_us 100
ssd_write_latency_us 100
overlap_slowdown 0.02
ssd_duplex_read_slowdown 0.5
ssd_duplex_write_slowdown 0.5
queue_round_trip_us 14.957
gpu 1
h2d_gbs 55.2424
d2h_gbs 55.1955
duplex_gbs 93.3032
gemm_peak_f32_gflops 50946.3
gemm_peak_bf16_gflops 772285
# Not measured: the built-in default.
cpu_update_gbs 20
