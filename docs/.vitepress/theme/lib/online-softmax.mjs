// One attention row, computed the way a fused kernel computes it: keys arrive a tile at a time, and the row
// carries only (m, l, a) between tiles - the running maximum, the sum of exp(s - m) and the sum of
// exp(s - m) v - rescaling l and a by alpha = exp(m_old - m_new) whenever the maximum grows. The logic behind
// the OnlineSoftmax picture of chapter 12, after the derivation in
// src/hello_gpu/ops/attention/t02_fused_online_softmax.py (whose worked example is EXAMPLES[0] here).
//
// Natural exponentials, as the derivation writes them (the kernels use exp2 with log2(e) folded into the
// scale: the same numbers). Values are one column of V (a scalar per key). Plain functions, no Vue:
// `node --test` checks them.

export const EXAMPLES = [
  { id: 't02', label: 't02 文件头的例子：8 个分数', scores: [1, 3, 2, 0, 4, 1, 1, 2], values: [1, 2, 3, 4, 5, 6, 7, 8] },
  { id: 'rising', label: '最大值一路变大（每块都要缩放）', scores: [0, 1, 2, 3, 4, 5, 6, 7], values: [1, 2, 3, 4, 5, 6, 7, 8] },
  { id: 'large', label: '大分数（直接算 float32 的 exp 会溢出）', scores: [95, 99, 97, 100, 98, 96, 101, 94], values: [1, 2, 3, 4, 5, 6, 7, 8] },
]
export const TILE_SIZES = [1, 2, 4, 8]

/** The three-pass softmax-weighted mean: m = max s, l = sum exp(s - m), o = sum exp(s - m) v / l. */
export function threePass(scores, values) {
  const m = Math.max(...scores)
  let l = 0
  let a = 0
  scores.forEach((s, j) => {
    const e = Math.exp(s - m)
    l += e
    a += e * values[j]
  })
  return { m, l, a, o: a / l }
}

/** The textbook formula without the shift, in float32 (Math.fround after each operation): exp(s) overflows
 * to Infinity past ~88.7, and Infinity / Infinity is NaN. */
export function unshiftedFloat32(scores, values) {
  let l = Math.fround(0)
  let a = Math.fround(0)
  scores.forEach((s, j) => {
    const e = Math.fround(Math.exp(s))
    l = Math.fround(l + e)
    a = Math.fround(a + Math.fround(e * values[j]))
  })
  return { l, a, o: Math.fround(a / l) }
}

/**
 * The tiles of an online-softmax pass over `scores` with `tile` keys a tile. Each step:
 * `{ tile, keys: [j...], before: {m, l, a}, tileMax, m, alpha, terms: [exp(s_j - m)...], l, a, o }`,
 * `o = a / l` being what the row would output if the keys stopped here. A row's state starts at
 * m = -Infinity, l = a = 0; alpha = exp(m_old - m_new) is 0 on the first tile (nothing to rescale) and 1
 * whenever the maximum does not change.
 */
export function onlineSteps(scores, values, tile) {
  if (!Number.isInteger(tile) || tile < 1) throw new Error(`tile must be a positive whole number, got ${tile}`)
  if (scores.length !== values.length || !scores.length) throw new Error('one value per score, at least one score')
  const steps = []
  let m = -Infinity
  let l = 0
  let a = 0
  for (let start = 0; start < scores.length; start += tile) {
    const keys = []
    for (let j = start; j < Math.min(start + tile, scores.length); j++) keys.push(j)
    const tileMax = Math.max(...keys.map((j) => scores[j]))
    const newMax = Math.max(m, tileMax)
    const alpha = m === -Infinity ? 0 : Math.exp(m - newMax)
    const terms = keys.map((j) => Math.exp(scores[j] - newMax))
    const before = { m, l, a }
    l = l * alpha + terms.reduce((x, y) => x + y, 0)
    a = a * alpha + terms.reduce((x, e, i) => x + e * values[keys[i]], 0)
    m = newMax
    steps.push({ tile: steps.length, keys, before, tileMax, m, alpha, terms, l, a, o: a / l })
  }
  return steps
}
