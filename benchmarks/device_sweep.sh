# The whole H200 + 16-core sweep of the second release's issues, one command per part, each under a timeout,
# outputs under $OUT (the device tool's folder). Run from the repository root on the lent machine:
#   source .gpu/setup.sh; source benchmarks/source_tree_env.sh; python3 csrc/build_cpu_kernels.py
#   bash benchmarks/device_sweep.sh gpu     # LM step (fp32, autocast), row kernels, compiled steps vs torch CUDA
#   bash benchmarks/device_sweep.sh gpu2    # CNN conv A/B, CNN kernels, small steps + sync, amp tests on the GPU
#   bash benchmarks/device_sweep.sh cpu     # CPU at 1-16 threads, compiled CPU steps
#   bash benchmarks/device_sweep.sh conf    # the conformance suite on the GPU (float16/bfloat16 columns), the demos
set -u
OUT=${OUT:-/tmp/sweep}; mkdir -p "$OUT"
B=benchmarks
t() { local name=$1 secs=$2; shift 2; echo "== $name: $*" >> "$OUT/$name.txt"
      local s=$(date +%s); timeout "$secs" "$@" >> "$OUT/$name.txt" 2>&1; echo "== rc $? in $(( $(date +%s) - s )) s" >> "$OUT/$name.txt"; }
case "${1:-gpu}" in
gpu)
  t gpu_scale 150 python3 $B/gpu_scale.py --steps 3 --reps 3
  t gpu_scale_f16 100 python3 $B/gpu_scale.py --no-torch --autocast float16 --steps 3 --reps 3
  t gpu_rows 200 python3 $B/gpu_rows.py
  t compile_steps 90 python3 $B/compile_steps.py --device wgpu:0 --torch-device cuda
  ;;
gpu2)
  t compile_cnn_im2col 60 env RUMUS_WGPU_CONV_IM2COL=1 python3 $B/compile_steps.py --device wgpu:0 --torch-device cuda --models CNN
  t wgpu_cnn_kernels 60 python3 $B/wgpu_cnn_kernels.py --device wgpu:0 --torch-device cuda
  t wgpu_core 60 python3 $B/wgpu_core.py --sizes 1024
  t amp_tests_gpu 150 env RUMUS_BACKEND=wgpu python3 -m pytest -q tests/amp tests/wgpu/test_subnormal_truth.py
  ;;
cpu)
  # each library's thread counts in one process, 3 rounds (~3 min on 16 cores); raw rounds in the .json files
  t cpu_scaling 300 env RUMUS_BACKEND=cpu python3 $B/cpu_scaling.py --threads 1 2 4 8 16 --quick --rounds 3 --json "$OUT/cpu_scaling.json"
  t compile_cpu 90 env RUMUS_NUM_THREADS=16 RUMUS_BACKEND=cpu python3 $B/compile_steps.py --models MLP CNN --rounds 3
  t busy_neighbour 150 env RUMUS_BACKEND=cpu python3 $B/cpu_busy_neighbour.py --threads 16 --rounds 5 --torch --quick --json "$OUT/busy_neighbour.json"
  ;;
conf)
  t conformance_gpu 300 env RUMUS_BACKEND=wgpu python3 -m rumus conformance --backend wgpu -q --xfails conformance/known-gaps/wgpu.txt
  t demo_gpu_f16 120 env RUMUS_BACKEND=wgpu python3 -m rumus demo --out "$OUT/demo_f16" --epochs 8 --amp float16
  ;;
esac
