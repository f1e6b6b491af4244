import { test } from 'node:test'
import assert from 'node:assert/strict'
import { reductionSteps, summary, sampleValues, MODES } from '../lib/reduction.mjs'

const sum = (xs) => xs.reduce((a, b) => a + b, 0)

test('every mode adds everything into slot 0, for every n the picture offers and both warp sizes', () => {
  for (const { id } of MODES) {
    for (const n of [2, 8, 16, 32, 64, 256]) {
      for (const warp of [8, 32]) {
        if (id === 'shuffle' && n > warp * warp) {
          assert.throws(() => reductionSteps(id, sampleValues(n), warp))   // block_sum's limit
          continue
        }
        const values = sampleValues(n)
        const steps = reductionSteps(id, values, warp)
        assert.equal(summary(steps).result, sum(values), `${id} n=${n} warp=${warp}`)
        assert.equal(summary(steps).adds, n - 1, `${id} n=${n} warp=${warp}: n-1 useful additions`)
      }
    }
  }
})

test("v02's comment: 256 threads, interleaved, 47 warp-steps; sequential (v03) 12", () => {
  const values = sampleValues(256)
  const inter = summary(reductionSteps('interleaved', values, 32))
  const seq = summary(reductionSteps('sequential', values, 32))
  assert.equal(inter.steps, 8)
  assert.equal(inter.warpSteps, 47)
  assert.equal(seq.warpSteps, 12)
  assert.equal(inter.syncs, 9)          // after the load and after each of the 8 steps
})

test('interleaved: every warp issues the first step with half its lanes (divergent)', () => {
  const [, step] = reductionSteps('interleaved', sampleValues(64), 32)
  assert.equal(step.active.length, 32)
  assert.deepEqual(step.warps.map((w) => [w.active, w.divergent]), [[16, true], [16, true]])
})

test('sequential: whole warps drop out; divergence only once fewer than a warp is active', () => {
  const steps = reductionSteps('sequential', sampleValues(64), 8)
  assert.deepEqual(steps[1].warps.map((w) => w.issued), [true, true, true, true, false, false, false, false])
  assert.equal(steps[1].divergent, 0)
  assert.equal(steps[3].divergent, 0)                 // s = 8: warp 0 full
  assert.equal(steps[4].divergent, 1)                 // s = 4: half of warp 0
})

test('shuffle: no divergence inside a warp, one __syncthreads, offsets W/2 .. 1 twice', () => {
  const steps = reductionSteps('shuffle', sampleValues(64), 32)
  const s = summary(steps)
  assert.equal(s.divergentWarpSteps, 0)
  assert.equal(s.syncs, 1)
  assert.equal(s.steps, 5 + 1 + 5)
  assert.equal(steps[1].issued, 2)
  assert.equal(steps[7].issued, 1)                    // only warp 0 adds the warp sums
  const moves = steps[6].ops.filter((op) => op.move)
  assert.deepEqual(moves.map((op) => [op.src, op.dst]), [[0, 0], [32, 1]])   // warp_sums[w] -> lane w
  assert.deepEqual(steps[6].live.map((x, i) => (x ? i : -1)).filter((i) => i >= 0), [0, 1])
})

test('n must be a power of two', () => {
  assert.throws(() => reductionSteps('sequential', [1, 2, 3], 32))
  assert.throws(() => reductionSteps('nope', [1, 2], 32))
})
