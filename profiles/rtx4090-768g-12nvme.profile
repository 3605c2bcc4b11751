# Strata machine profile: a workstation as in Fuyou's evaluation (Liao et
# al., "Adding NVMe SSDs to Enable and Accelerate 100B Model Fine-tuning on
# a Single GPU", arXiv 2403.06504): one RTX 4090 (24 GB), 768 GB of host
# memory, 12 PCIe 4.0 NVMe drives. NOT MEASURED: every figure is a datasheet
# value or an assumption, marked on its line. Pass it with --profile, and
# --gpu-mem 22GiB --cpu-mem 700GiB (leave room for the driver and the OS),
# one --ssd-dir per drive.
#
# Matrix products (GFLOP/s). Datasheet (NVIDIA Ada architecture whitepaper):
# 82.6 TFLOP/s fp32 (non-tensor), 165.2 TFLOP/s dense bf16/fp16 tensor with
# fp32 accumulate. Sustained rates assumed at 70% / 35% / 5% of the fp32
# peak for large / medium / small products.
matmul_small_gflops 4000
matmul_medium_gflops 29000
matmul_large_gflops 58000
gemm_peak_f32_gflops 82600
gemm_peak_bf16_gflops 165200
# Streaming kernels at the 1008 GB/s of GDDR6X (datasheet), 12 bytes an
# element (two reads, one write), 80% of peak assumed.
simple_ns_per_element 0.015
transcendental_ns_per_element 0.015
movement_ns_per_element 0.015
launch_us 5
parallel_launch_us 0.01
gpu 1
# PCIe 4.0 x16: 32 GB/s raw a direction; 25 GB/s assumed for pinned copies,
# 40 GB/s both directions together.
h2d_gbs 25
d2h_gbs 25
duplex_gbs 40
copy_gbs 25
# 12 drives at 6.8 GB/s read, 4.0 GB/s write each (a PCIe 4.0 datacenter
# drive's datasheet sequential rates, e.g. Samsung PM9A3 3.84 TB), striped:
# an upper bound that assumes the host's PCIe lanes carry all twelve.
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
# CPU AdamW over the bytes it touches: assumed 50 GB/s (a two-socket server
# with eight DDR4 channels a socket streams ~300 GB/s; AdamW is far from it).
cpu_update_gbs 50
# Data parallel across the machine's GPUs (LoHan's 2x and 4x RTX 4090
# runs): GeForce cards have no NVLink and, assumed here, no peer-to-peer
# over PCIe, so NCCL stages collectives through host memory over each
# GPU's own link: assumed a 12 GB/s bus rate (about half a pinned copy's
# 25 GB/s, the data crossing the link both ways) and 30 us a collective;
# a collective crosses the GPU's host link, sharing it with the offload's copies.
comm_gbs 12
comm_latency_us 30
comm_on_host_link 1
# Across machines (more ranks than --ranks-per-node): assumed one 100 Gb/s
# NIC a machine (12.5 GB/s each way) and 50 us a collective.
net_gbs 12.5
net_latency_us 50
