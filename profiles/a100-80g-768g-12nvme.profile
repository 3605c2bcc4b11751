# Strata machine profile: one A100-80GB (SXM4) in a server with 768 GB of
# host memory and 12 PCIe 4.0 NVMe drives (Fuyou's other configuration,
# arXiv 2403.06504). NOT MEASURED: every figure is a datasheet value or an
# assumption, marked on its line. Pass it with --profile, and
# --gpu-mem 78GiB --cpu-mem 700GiB, one --ssd-dir per drive.
#
# Matrix products (GFLOP/s). Datasheet (NVIDIA A100 datasheet): 19.5
# TFLOP/s fp32 (non-tensor; Strata's CUDA GEMMs accumulate in fp32 without
# TF32), 312 TFLOP/s dense bf16 tensor. Sustained rates assumed at 70% /
# 35% / 5% of the fp32 peak for large / medium / small products; bf16
# products (--precision bf16) scale by the ratio of the two peaks.
matmul_small_gflops 975
matmul_medium_gflops 6800
matmul_large_gflops 13650
gemm_peak_f32_gflops 19500
gemm_peak_bf16_gflops 312000
# Streaming kernels at the 2039 GB/s of HBM2e (datasheet), 12 bytes an
# element, 80% of peak assumed.
simple_ns_per_element 0.0074
transcendental_ns_per_element 0.0074
movement_ns_per_element 0.0074
launch_us 5
parallel_launch_us 0.01
gpu 1
# PCIe 4.0 x16, as above: 25 GB/s assumed a direction, 40 GB/s both.
h2d_gbs 25
d2h_gbs 25
duplex_gbs 40
copy_gbs 25
# 12 drives at 6.8 / 4.0 GB/s (datasheet), striped; an upper bound.
ssd_read_gbs 81.6
ssd_write_gbs 48
ssd_small_read_gbs 6.8
ssd_small_write_gbs 4
ssd_read_latency_us 100
ssd_write_latency_us 100
ssd_duplex_read_slowdown 0.5
ssd_duplex_write_slowdown 0.5
overlap_slowdown 0.02
queue_round_trip_us 15
# CPU AdamW: assumed 50 GB/s, as above.
cpu_update_gbs 50
