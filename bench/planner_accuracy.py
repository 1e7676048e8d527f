#!/usr/bin/env python3
"""Planner accuracy on the H200 machine: tandem-plan's predicted step time and memory
against the engine's measured hybrid steps (bench/results/*_h200_2026-11-21.json).

Run from the repository root after building (build/tools/plan/tandem-plan):
    python3 bench/planner_accuracy.py
Writes bench/results/planner_accuracy_h200_2026-11-21.json and prints a table. The
quantized-state points (bf16+ecc8/q8/q8) include the data the planner's per-chunk
overhead was fitted on; the fp32-state points at fraction 0.5 are out of sample.
"""
import json, subprocess
prof = 'bench/results/profile_h200_2026-11-21.json'
# Measured step times (median) of tandem-bench-hybrid on the H200, 2026-11-21.
meas = {}
for path, model in [('bench/results/hybrid_llama3-8b_h200_2026-11-21.json', 'llama3-8b'),
                    ('bench/results/hybrid_llama3-3b_h200_2026-11-21.json', 'llama3-3b')]:
    for r in json.load(open(path)):
        if 'step_ms' in r:
            meas[(model, r['fraction'])] = (r['step_ms'], r['device_bytes'], r['host_bytes'])
# llama3-1b: the table printed by the run (its JSON did not come back): step ms only.
one_b = {0.25: 50.31, 0.5: 93.95, 0.75: 130.27}
for f, ms in one_b.items():
    meas[('llama3-1b', f)] = (ms, None, None)
# fp32 master and moments at fraction 0.5 (out of sample for the fitted chunk overhead).
for path, model in [('bench/results/hybrid_llama3-8b_f0.5_fp32_h200_2026-11-21.json', 'llama3-8b')]:
    for r in json.load(open(path)):
        if r.get('formats', '').startswith('master=f32'):
            meas[(model, r['fraction'], 'f32')] = (r['step_ms'], r['device_bytes'], r['host_bytes'])
meas[('llama3-3b', 0.5, 'f32')] = (294.34, None, None)  # printed table (JSON not returned)
meas[('llama3-1b', 0.5, 'f32')] = (110.37, None, None)  # printed table (JSON not returned)
rows = []
for model in ['llama3-1b', 'llama3-3b', 'llama3-8b']:
  for fmt in (['bf16+ecc8', 'q8', 'q8'], ['f32', 'f32', 'f32']):
    out = subprocess.run(['./build/tools/plan/tandem-plan', '--model', model, '--gpu-mem', '141GB',
                          '--host-mem', '128GiB', '--profile', prof, '--json',
                          '--master', fmt[0], '--m', fmt[1], '--v', fmt[2]],
                         capture_output=True, text=True).stdout
    plan = json.loads(out)
    for pt in plan['sweep']:
        f = pt['fraction']
        key = (model, f) if fmt[0] != 'f32' else (model, f, 'f32')
        if key not in meas or f not in (0.25, 0.5, 0.75):
            continue
        ms, dev, host = meas[key]
        g, h = pt['gpu_bytes'], pt['host_bytes_per_rank']
        # The engine's report covers the optimizer's own memory: everything but the
        # caller's weights, gradients and activations.
        pred_dev = g['total'] - g['weights'] - g['gradients'] - g['activations']
        pred_host = h['total'] - h['weights'] - h['gradients'] - h['activations']
        rows.append(dict(model=model, formats='/'.join(fmt), fraction=f, measured_ms=ms, predicted_ms=pt['step_ms']['step'],
                         error=pt['step_ms']['step'] / ms - 1, bottleneck=pt['bottleneck'],
                         engine_device_bytes=dev, predicted_device_bytes=pred_dev,
                         engine_host_bytes=host, predicted_host_bytes=pred_host))
print(f"{'formats':15s} {'model':10s} {'frac':>5s} {'measured':>9s} {'predicted':>9s} {'error':>7s} {'bottleneck':>10s}  bytes equal (device, host)")
for r in rows:
    eq = '' if r['engine_device_bytes'] is None else \
        f"{r['engine_device_bytes'] == r['predicted_device_bytes']}, {r['engine_host_bytes'] == r['predicted_host_bytes']}"
    print(f"{r['formats']:15s} {r['model']:10s} {r['fraction']:5.2f} {r['measured_ms']:9.2f} {r['predicted_ms']:9.2f} {100*r['error']:+6.1f}% {r['bottleneck']:>10s}  {eq}")
json.dump(rows, open('bench/results/planner_accuracy_h200_2026-11-21.json', 'w'), indent=2)
