#!/usr/bin/env bash
# The figures that need a CUDA GPU, in one pass with a time budget (for a lent GPU machine):
#   1. the tests marked `gpu`;
#   2. supernet training overhead (issue 10): the largest subnet's training step through the supernet against
#      the same network alone, bf16 autocast and channels-last, batch 128, at the CPU-sized settings and at
#      ImageNet-sized ones (224 px), with peak memory;
#   3. torch-CUDA latency tables (issue 9): every space profiled unit by unit on the GPU (batch 1, fp32, each
#      timing's 10th percentile: batch-1 eager timings on a GPU are launch-bound and their median drifts) and
#      judged on 100 random whole networks, then fp16 for the spaces time allows; `graph` times CUDA-graph
#      replays instead of eager runs (`--cuda-graph`: the GPU's own work, without the host's launches).
# Each step has its own timeout and the whole pass a budget (BUDGET_S, default 420 s): a step that would start
# after it is skipped and says so. Which steps run, in which order, is set by STEPS (default
# "tests graph fp16 fp32 overheadsmall overhead224": what the leases of 2026-11-26/27 did not reach first), the
# spaces of the overhead on CPU-sized settings by SMALL_SPACES (default: all), and the tables' spaces by
# GRAPH_SPACES, FP32_SPACES and FP16_SPACES (space labels of latency_tables.py),
# so that a short lease can go first to what an earlier one did not reach. Everything lands in OUTDIR (logs and
# JSON; the tables themselves in a scratch folder, their figures merged into OUTDIR/latency_cuda.json).
#
#   bash benchmarks/gpu_figures.sh OUTDIR [DEVICE_LABEL]
#   STEPS="tests fp32 overheadsmall" FP32_SPACES="convnext darts" SMALL_SPACES=mbv3 bash benchmarks/gpu_figures.sh OUT
set -u
OUT=${1:?usage: gpu_figures.sh OUTDIR [DEVICE_LABEL]}
LABEL=${2:-cuda-gpu}
BUDGET_S=${BUDGET_S:-420}
PY=${PYTHON:-python3}
DEV=${TORCH_DEVICE:-cuda}  # cpu for a dry run of the script itself
STEPS=${STEPS:-tests graph fp16 fp32 overheadsmall overhead224}
SMALL_SPACES=${SMALL_SPACES:-mbv3,ofa_mbv3,vit,convnext,nb201,darts}
FP32_SPACES=${FP32_SPACES:-mbv3 ofa_mbv3 fbnet-cifar100 nb201 darts vit convnext}
FP16_SPACES=${FP16_SPACES:-ofa_mbv3 convnext darts fbnet-cifar100 nb201 vit mbv3}
GRAPH_SPACES=${GRAPH_SPACES:-mbv3 ofa_mbv3 fbnet-cifar100 nb201 darts vit convnext}
for s in $STEPS; do  # every step name is checked before the lease is spent on any
    case $s in
        tests|overhead224|overheadsmall|fp32|fp16|graph) ;;
        *) echo "unknown step '$s' in STEPS (tests, graph, fp16, fp32, overheadsmall, overhead224)"; exit 2 ;;
    esac
done
mkdir -p "$OUT"
SCRATCH=$(mktemp -d)
export PYTHONUNBUFFERED=1

step() {  # step NAME TIMEOUT_S COMMAND...: run unless the budget is spent
    local name=$1 limit=$2
    shift 2
    if (( SECONDS + 10 > BUDGET_S )); then
        echo "== $name: skipped (budget of ${BUDGET_S}s spent at ${SECONDS}s)"
        return 0
    fi
    (( limit > BUDGET_S - SECONDS )) && limit=$(( BUDGET_S - SECONDS ))
    echo "== $name (at ${SECONDS}s, limit ${limit}s)"
    timeout "$limit" "$@"
    local rc=$?
    (( rc == 124 )) && echo "== $name: stopped at its ${limit}s limit"
    (( rc != 0 && rc != 124 )) && echo "== $name: exit status $rc"
    return 0
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
$PY - <<'EOF' | tee -a "$OUT/env.txt"
import onnxruntime, torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))
print("onnxruntime", onnxruntime.__version__, onnxruntime.get_available_providers())
import hwnas.cli, hwnas.latency.tables, hwnas.supernet.cells, mlxtend, optuna, pymoo  # noqa: E401,F401
print("hwnas imports: ok")
EOF

tests() {
    step "tests marked gpu" 90 $PY -m pytest -m gpu -n 0 -p no:cacheprovider -q -rs tests/supernet/test_train.py \
        tests/latency/test_backend_torch.py tests/latency/test_backend_tensorrt.py tests/latency/test_backend_trtexec.py
}
# 3 timed rounds of 3 steps each way; 16 (32) sandwich steps with fresh subnets (on a GPU the first ones build cuDNN
# plans for every new layer shape: see docs/results/supernet-overhead.md)
overhead224() {
    step "supernet overhead, 224 px" 120 $PY benchmarks/supernet_overhead.py --device "$DEV" --amp --batch 128 \
        --steps 3 --repeats 3 --sandwich-steps 16 \
        --spaces ofa_mbv3,vit,convnext,mbv3 --space-param 'ofa_mbv3.resolutions=[224]' \
        --space-param vit.resolution=224 --space-param 'vit.patch_sizes=[16]' \
        --space-param 'vit.embed_dims=[192,216,240]' --space-param 'vit.depths=[12,13,14]' \
        --space-param 'vit.num_heads=[3,4]' --space-param 'vit.mlp_ratios=[3.5,4.0]' \
        --space-param convnext.resolution=224 --space-param convnext.stem_stride=4 \
        --space-param mbv3.resolution=224 --out "$OUT/overhead_224.json"
}
overheadsmall() {
    step "supernet overhead, CPU-sized spaces" 120 $PY benchmarks/supernet_overhead.py --device "$DEV" --amp \
        --batch 128 --steps 3 --repeats 3 --sandwich-steps 32 --spaces "$SMALL_SPACES" --out "$OUT/overhead_small.json"
}
lat() {  # lat PRECISION LABEL [--cuda-graph]
    step "latency table, torch-CUDA $1, $2 ${3:-}" 150 $PY benchmarks/latency_tables.py --backend torch \
        --backend-device "$DEV" --device "$LABEL" --precision "$1" --only "$2" --networks 100 --warmup 10 \
        --repeats 50 --min-time 0.02 --rounds 2 --statistic p10 --repeat-check 20 --out "$SCRATCH/$1${3:-}/$2" ${3:-}
}
fp32() { for label in $FP32_SPACES; do lat fp32 "$label"; done; }
fp16() { for label in $FP16_SPACES; do lat fp16 "$label"; done; }
graph() { for label in $GRAPH_SPACES; do lat fp32 "$label" --cuda-graph; done; }
for s in $STEPS; do "$s"; done

$PY - "$SCRATCH" "$OUT/latency_cuda.json" <<'EOF'
import json, pathlib, sys
rows = []
for p in sorted(pathlib.Path(sys.argv[1]).glob("*/*/summary.json")):
    s = json.loads(p.read_text())
    for r in s["rows"]:
        rows.append({**r, "precision": s["precision"], "device": s["device"], "backend": s.get("backend"),
                     "cuda_graph": s.get("cuda_graph", False), "protocol": s["protocol"]})
pathlib.Path(sys.argv[2]).write_text(json.dumps(rows, indent=1) + "\n")
f = lambda d: f"{d['mape_pct']:.1f} % / {100 * d['within_10pct']:.0f} % / {d['kendall_tau']:.2f}" if d else "-"
for r in rows:
    ms = r["measured_ms"]
    print(f"{r['label']:15s} {r['precision']}{' graph' if r['cuda_graph'] else ''} units {r['units']:3d} profile {r['profile_wall_s']:5.0f}s nets "
          f"{min(ms):.2f}-{max(ms):.2f} ms | raw {f(r['raw'])} | cal {f(r['calibrated_heldout'])} | "
          f"learned {f(r['learned_heldout'])} | {r['answers']} | re-timed {f(r['remeasured'])}")
EOF
echo "== done at ${SECONDS}s"
