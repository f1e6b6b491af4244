// The roofline picture's arithmetic against the project's own (src/hello_gpu/profile/roofline.py): a
// synthetic record with figures worked out by hand, and, where a Python with the package's
// dependencies is at hand (HG_PYTHON, else the repository's .venv), every point of three committed
// ladder records compared with `load_roofline(...).to_dict()`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { rooflineOf, roofsFrom, classify, specFor, attainable } from '../lib/roofline.mjs'
import { loadRooflines } from '../roofline.data.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..')
const specs = JSON.parse(fs.readFileSync(path.join(root, 'src/hello_gpu/bench/specs.json'), 'utf8'))
const close = (a, b, rel = 1e-9) => (a == null && b == null) || Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b))

test('datasheet lookup: by name or alias (case-insensitive), else by arch', () => {
  assert.equal(specFor(specs, 'NVIDIA H200', 'sm_90').name, 'NVIDIA H200 SXM')
  assert.equal(specFor(specs, 'nvidia h200', '').name, 'NVIDIA H200 SXM')
  assert.ok(specFor(specs, 'some unknown GPU', 'sm_90a'))
  assert.equal(specFor(specs, 'some unknown GPU', 'sm_1'), null)
})

test('a hand-worked record: intensity, rates, fraction of the roof and the verdicts', () => {
  const device = { name: 'NVIDIA H200', arch: 'sm_90' }
  const ceilings = { ceilings: { copy_bytes_per_s: 4e12, graph_call_s: 1e-6, matmul_flops_per_s: { float32: 40e12 } } }
  const entry = (variant, seconds, bytes, flops) => ({ variant, shape: 'x', dtype: 'float32', role: 'rung', extra: { route: 'hip' },
    timing: { median: seconds }, work: { bytes, flops } })
  const record = {
    device, environment: { l2_bytes: 50e6 },
    entries: [
      entry('big', 1e-3, 2e9, 1e8),         // 2 TB/s, I = 0.05: memory-bound at 50%
      entry('tiny', 5e-6, 1e6, 1e5),        // within 10 x 1 us: latency
      entry('fits', 20e-6, 1e6, 1e5),       // 50 GB/s with 1 MB: under 10% and fits in L2: latency
      entry('dense', 1e-3, 1e6, 2e10),      // I = 2e4 > ridge 10: compute-bound, 20 TFLOP/s = 50%
      { variant: 'untimed', shape: 'x', dtype: 'float32', work: { bytes: 1, flops: 1 }, timing: {} },
    ],
  }
  const { roofs, points } = rooflineOf(record, { ceilingsRecord: ceilings, specs })
  assert.equal(roofs.memoryRoof, 4e12)
  assert.equal(roofs.computeRoof, 40e12)
  assert.equal(roofs.ridge, 10)
  assert.equal(roofs.datasheetBandwidth, 4.8e12)
  assert.equal(points.length, 4)
  const by = Object.fromEntries(points.map((p) => [p.variant, p]))
  assert.equal(by.big.intensity, 0.05)
  assert.equal(by.big.byteRate, 2e12)
  assert.deepEqual([by.big.verdict.bound, by.big.verdict.fraction], ['memory', 0.5])
  assert.equal(by.tiny.verdict.bound, 'latency')
  assert.equal(by.fits.verdict.bound, 'latency')
  assert.deepEqual([by.dense.verdict.bound, by.dense.verdict.fraction], ['compute', 0.5])
  assert.equal(attainable(0.05, 4e12, 40e12), 2e11)
  assert.equal(attainable(100, 4e12, 40e12), 40e12)
})

test('no measured ceilings: the datasheet roofs hold the points', () => {
  const roofs = roofsFrom({ name: 'NVIDIA H200', arch: 'sm_90' }, 'bfloat16', [], { specs })
  assert.equal(roofs.bandwidth, null)
  assert.equal(roofs.memoryRoof, 4.8e12)
  assert.equal(roofs.computeRoof, 989.5e12)
  const point = { seconds: 1, bytes: 2.4e12, flops: 1, intensity: 1 / 2.4e12, byteRate: 2.4e12, flopRate: 1 }
  assert.deepEqual([classify(point, roofs).bound, classify(point, roofs).fraction], ['memory', 0.5])
})

test('the data loader reads every committed ladder record', () => {
  const ladders = loadRooflines()
  assert.ok(ladders.length >= 1)
  for (const ladder of ladders) {
    assert.ok(ladder.points.length > 0, ladder.file)
    assert.ok(ladder.roofs.memoryRoof > 0, ladder.file)
    for (const point of ladder.points) assert.ok(point.seconds > 0 && point.bytes > 0)
  }
})

function python() {
  const candidates = [process.env.HG_PYTHON, path.join(root, '.venv/bin/python')].filter(Boolean)
  return candidates.find((p) => fs.existsSync(p)) || null
}

const compared = [['vector_add', 'float32'], ['softmax', 'bfloat16'], ['reduce_sum', 'float32']]

test('the same roofs, points and verdicts as `hello-gpu roofline --json` (Python)', (t) => {
  const exe = python()
  if (!exe) return t.skip('no Python with the package (set HG_PYTHON or create .venv)')
  const script = [
    'import json, sys, warnings',
    'from pathlib import Path',
    'from hello_gpu.profile.roofline import load_roofline',
    'warnings.simplefilter("ignore")',
    'out = {}',
    `for op, dtype in ${JSON.stringify(compared)}:`,
    '    r = load_roofline(op, dtype=dtype, records_dir=Path(sys.argv[1]), device="nvidia-h200", use_cache=False)',
    '    out[op + "." + dtype] = r.to_dict()',
    'print(json.dumps(out))',
  ].join('\n')
  const out = execFileSync(exe, ['-c', script, path.join(root, 'records')], {
    env: { ...process.env, PYTHONPATH: path.join(root, 'src') }, encoding: 'utf8', maxBuffer: 64 << 20,
  })
  const expected = JSON.parse(out)
  const ladders = loadRooflines()
  for (const [op, dtype] of compared) {
    const want = expected[`${op}.${dtype}`]
    const got = ladders.find((l) => l.device === 'nvidia-h200' && l.op === op && l.dtype === dtype)
    assert.ok(got, `${op}.${dtype} loaded`)
    assert.ok(close(got.roofs.bandwidth, want.roofs.bandwidth))
    assert.ok(close(got.roofs.compute, want.roofs.compute))
    assert.ok(close(got.roofs.datasheetBandwidth, want.roofs.datasheet_bandwidth))
    assert.ok(close(got.roofs.datasheetCompute, want.roofs.datasheet_compute))
    assert.ok(close(got.roofs.ridge, want.roofs.ridge))
    assert.equal(got.points.length, want.verdicts.length, `${op}.${dtype}: number of points`)
    want.verdicts.forEach((v, i) => {
      const p = got.points[i]
      const where = `${op}.${dtype} ${v.variant} ${v.shape}`
      assert.deepEqual([p.variant, p.shape], [v.variant, v.shape], where)
      assert.ok(close(p.seconds, v.seconds), where)
      assert.ok(close(p.intensity, v.counted_intensity), where)
      assert.equal(p.verdict.bound, v.bound, where)
      assert.equal(p.verdict.side, v.side, where)
      assert.ok(close(p.verdict.fraction, v.fraction_of_attainable), where)
      if (v.measured_over_counted != null) assert.ok(close(p.measuredDramBytes / p.bytes, v.measured_over_counted), where)
    })
  }
})
