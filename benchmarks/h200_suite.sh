#!/usr/bin/env bash
# Everything this project measures on the lent H200, in one device run (device time is scarce).
# Run from the repository root on the GPU machine after `source .gpu/setup.sh; source benchmarks/source_tree_env.sh`; results land in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/h200}
mkdir -p "$OUT"
export XDG_RUNTIME_DIR=/tmp PYTHONUNBUFFERED=1
# the GPU machine has no compiled CPU kernels: every benchmark runs with wgpu as the default device
export RUMUS_BACKEND=wgpu
python3 -c "import wgpu; print(wgpu.gpu.request_adapter_sync(power_preference='high-performance').info)" \
  | tee "$OUT/adapter.txt"
echo "== conformance on wgpu (H200)"
timeout 300 python3 -m pytest conformance/rumus_conformance -q -p no:cacheprovider \
  > "$OUT/conformance.txt" 2>&1; tail -3 "$OUT/conformance.txt"
grep -A200 "rumus conformance: op x dtype" "$OUT/conformance.txt" > "$OUT/matrix.txt"
echo "== GEMM / elementwise / MLP step vs torch CUDA"
timeout 240 python3 benchmarks/wgpu_core.py --sizes 1024 4096 8192 --json "$OUT/wgpu_core.json" \
  > "$OUT/wgpu_core.txt" 2>&1; tail -14 "$OUT/wgpu_core.txt"
echo "== CNN step (wgpu vs torch CUDA)"
timeout 180 python3 benchmarks/nn_cnn.py --device wgpu --torch-device cuda > "$OUT/cnn.txt" 2>&1; tail -6 "$OUT/cnn.txt"
echo "== transformer step (wgpu vs torch CUDA)"
timeout 240 python3 benchmarks/nn_transformer.py --device wgpu --torch-device cuda --steps 5 \
  > "$OUT/transformer.txt" 2>&1; tail -6 "$OUT/transformer.txt"
