import { test } from 'node:test'
import assert from 'node:assert/strict'
import { accesses, analyse, coalesce, PATTERNS, ELEMENT_SIZES } from '../lib/coalescing.mjs'

const cases = [
  // pattern, element bytes, sectors, lines, efficiency
  ['contiguous', 4, 4, 1, 1],          // 32 floats: 128 bytes, one line
  ['contiguous', 2, 2, 1, 1],          // 32 bfloat16: 64 bytes
  ['contiguous', 1, 1, 1, 1],
  ['contiguous', 8, 8, 2, 1],
  ['vector128', 4, 16, 4, 1],          // float4: 512 bytes, 4 lines, still every byte used
  ['vector128', 2, 16, 4, 1],
  ['stride2', 4, 8, 2, 0.5],
  ['stride4', 4, 16, 4, 0.25],
  ['stride16', 4, 32, 16, 4 / 32],     // chapter 3: 1024 bytes of sectors for 128 useful ones
  ['stride32', 4, 32, 32, 4 / 32],     // every thread its own line and sector
  ['stride32', 8, 32, 32, 8 / 32],
  ['offset1', 4, 5, 2, 128 / 160],     // bytes 4..131: one sector more, two lines
  ['offset1', 1, 2, 1, 32 / 64],
]

for (const [pattern, size, sectors, lines, efficiency] of cases) {
  test(`${pattern} with ${size}-byte elements: ${sectors} sectors, ${lines} lines`, () => {
    const r = coalesce(pattern, size)
    assert.equal(r.accesses.length, 32)
    assert.equal(r.sectors, sectors)
    assert.equal(r.lines, lines)
    assert.equal(r.movedBytes, sectors * 32)
    assert.ok(Math.abs(r.efficiency - efficiency) < 1e-12, `${r.efficiency} != ${efficiency}`)
    assert.equal(r.requests, 1)
  })
}

test('addresses: element index times element size, from an aligned start', () => {
  assert.deepEqual(accesses('stride2', 4).slice(0, 3).map((a) => a.address), [0, 8, 16])
  assert.deepEqual(accesses('offset1', 2).slice(0, 2).map((a) => a.address), [2, 4])
  assert.deepEqual(accesses('vector128', 2).slice(0, 2).map((a) => [a.address, a.bytes]), [[0, 16], [16, 16]])
})

test('random: the same seed gives the same warp, the picture never moves by itself', () => {
  assert.deepEqual(accesses('random', 4, { seed: 3 }), accesses('random', 4, { seed: 3 }))
  assert.notDeepEqual(accesses('random', 4, { seed: 3 }), accesses('random', 4, { seed: 4 }))
  const r = coalesce('random', 4, { seed: 3 })
  assert.ok(r.sectors > 4 && r.sectors <= 32)
  assert.ok(r.efficiency > 0 && r.efficiency <= 0.5)
})

test('a byte two threads ask for is moved and counted once', () => {
  const r = analyse([{ address: 0, bytes: 4 }, { address: 0, bytes: 4 }])
  assert.equal(r.usedBytes, 4)
  assert.equal(r.requestedBytes, 8)
  assert.equal(r.sectors, 1)
})

test('every pattern and size runs; efficiency in (0, 1]; sectors per line at most 4', () => {
  for (const { id } of PATTERNS) {
    for (const size of ELEMENT_SIZES) {
      const r = coalesce(id, size)
      assert.ok(r.efficiency > 0 && r.efficiency <= 1, `${id} ${size}`)
      assert.ok(r.sectors >= r.idealSectors)
      for (const line of r.lineSectors) assert.ok(line.sectors.length >= 1 && line.sectors.length <= 4)
    }
  }
  assert.throws(() => coalesce('contiguous', 3))
  assert.throws(() => coalesce('nope', 4))
})
