import { test } from 'node:test'
import assert from 'node:assert/strict'
import { EXAMPLES, TILE_SIZES, onlineSteps, threePass, unshiftedFloat32 } from '../lib/online-softmax.mjs'

const close = (x, y, what) => assert.ok(Math.abs(x - y) <= 1e-12 * Math.max(1, Math.abs(y)), `${what}: ${x} vs ${y}`)

test('every example and tile size ends where the three-pass softmax does', () => {
  for (const { id, scores, values } of EXAMPLES) {
    const exact = threePass(scores, values)
    for (const tile of [...TILE_SIZES, 3, 5]) {
      const steps = onlineSteps(scores, values, tile)
      const last = steps.at(-1)
      assert.equal(steps.length, Math.ceil(scores.length / tile), `${id} tile ${tile}`)
      assert.equal(last.m, exact.m)
      close(last.l, exact.l, `${id} tile ${tile} l`)
      close(last.o, exact.o, `${id} tile ${tile} o`)
    }
  }
})

test("t02's worked example: two tiles of 4, the numbers of its docstring", () => {
  const { scores, values } = EXAMPLES.find((e) => e.id === 't02')
  const [first, second] = onlineSteps(scores, values, 4)
  assert.equal(first.m, 3)
  assert.equal(first.alpha, 0)                                 // nothing carried yet
  assert.equal(first.l.toFixed(3), '1.553')
  assert.equal(first.a.toFixed(3), '3.438')
  assert.equal(second.m, 4)
  assert.equal(second.alpha.toFixed(3), '0.368')               // e^(3 - 4)
  assert.equal(second.l.toFixed(3), '1.806')
  assert.equal(second.a.toFixed(3), '7.995')
  assert.equal(second.o.toFixed(3), '4.426')
})

test('alpha is exactly 1 when a tile does not raise the maximum, and every term is at most 1', () => {
  const steps = onlineSteps([5, 1, 2, 3], [1, 1, 1, 1], 1)
  assert.deepEqual(steps.slice(1).map((s) => s.alpha), [1, 1, 1])
  for (const { scores, values } of EXAMPLES) {
    for (const step of onlineSteps(scores, values, 2)) assert.ok(step.terms.every((e) => e > 0 && e <= 1))
  }
})

test('without the shift, float32 exp overflows on the large scores: NaN, while the online pass is finite', () => {
  const { scores, values } = EXAMPLES.find((e) => e.id === 'large')
  assert.ok(Number.isNaN(unshiftedFloat32(scores, values).o))
  assert.ok(Number.isFinite(onlineSteps(scores, values, 4).at(-1).o))
  const small = EXAMPLES.find((e) => e.id === 't02')
  const float32 = unshiftedFloat32(small.scores, small.values).o
  const exact = threePass(small.scores, small.values).o
  assert.ok(Math.abs(float32 - exact) < 1e-6 * exact, `small scores need no shift: ${float32} vs ${exact}`)
})

test('bad tiles and mismatched inputs are refused', () => {
  assert.throws(() => onlineSteps([1, 2], [1, 2], 0), /positive whole number/)
  assert.throws(() => onlineSteps([1, 2], [1], 1), /one value per score/)
})
