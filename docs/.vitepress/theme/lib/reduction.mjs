// A block's tree reduction, step by step, the logic behind the ReductionTree picture: which threads
// add which two slots in each step, which warps issue the step, and which of those diverge (some of
// their lanes active, some masked off). Three ways, after the reduce_sum ladder's rungs
// (src/hello_gpu/ops/reduce_sum/):
//
// - interleaved (v02_shared_tree_divergent): `for (s = 1; s < n; s *= 2) if (tid % (2*s) == 0)
//   cache[tid] += cache[tid + s]` - the active threads are spread over the whole block;
// - sequential (v03_sequential_addressing): `for (s = n/2; s > 0; s /= 2) if (tid < s) cache[tid] +=
//   cache[tid + s]` - the active threads are the first s, so whole warps drop out;
// - shuffle (v05_warp_shuffle): each warp adds its lanes with __shfl_down (offsets W/2 .. 1, every lane
//   executes, no shared memory, no __syncthreads), lane 0 of each warp writes its sum to shared
//   memory, one __syncthreads, and warp 0 adds those sums the same way.
//
// One thread per element (n threads, n a power of two); plain functions, no Vue: `node --test` checks them.

export const MODES = [
  { id: 'interleaved', label: '交错寻址（v02，发散）' },
  { id: 'sequential', label: '顺序寻址（v03）' },
  { id: 'shuffle', label: 'warp shuffle（v05）' },
]

function isPowerOfTwo(n) {
  return Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0
}

/** Per warp: lanes that exist, lanes active, whether it issues the step and whether it diverges. */
function warpsOf(n, warpSize, active) {
  const warps = []
  for (let w = 0; w * warpSize < n; w++) {
    const first = w * warpSize
    const lanes = Math.min(warpSize, n - first)
    let count = 0
    for (let lane = 0; lane < lanes; lane++) if (active.has(first + lane)) count++
    warps.push({ warp: w, lanes, active: count, issued: count > 0, divergent: count > 0 && count < lanes })
  }
  return warps
}

// `live[i]`: slot i holds a partial sum not yet added into another slot. An addition is useful when
// both of its slots are live (its source is then used up); the others are executed but add nothing
// the result needs (shuffle lanes above the offset, warp 0's lanes past the number of warps).
function makeStep(label, n, warpSize, values, live, ops, executing, sync, shared) {
  const next = values.slice()
  const nextLive = live.slice()
  const marked = ops.map((op) => {
    if (op.write !== undefined) {      // a move (through shared memory), not an addition
      if (op.src != null && op.src !== op.dst) nextLive[op.src] = false
      next[op.dst] = op.write
      nextLive[op.dst] = op.live
      return { ...op, useful: false, move: op.src != null }
    }
    next[op.dst] = values[op.dst] + values[op.src]
    const useful = live[op.dst] && live[op.src]
    if (useful) nextLive[op.src] = false
    return { ...op, useful }
  })
  const active = new Set(executing)
  const warps = warpsOf(n, warpSize, active)
  return {
    label,
    ops: marked,
    active: [...active].sort((a, b) => a - b),
    useful: marked.filter((op) => op.useful).length,   // additions the sum needs
    warps,
    issued: warps.filter((w) => w.issued).length,
    divergent: warps.filter((w) => w.divergent).length,
    sync,        // ends with __syncthreads
    shared,      // values live in shared memory (else: registers, one per lane)
    values: next,
    live: nextLive,
  }
}

/**
 * The steps of one block reducing `values` (n of them, a power of two) with warps of `warpSize` lanes.
 * Each step: `{ label, ops: [{ thread, dst, src, useful, move }], active, useful, warps, issued, divergent, sync, values, live }`,
 * `values` being the slots after the step; the first entry is the loaded state (no ops).
 */
export function reductionSteps(mode, values, warpSize = 32) {
  const n = values.length
  if (!isPowerOfTwo(n) || n < 2) throw new Error(`n = ${n}: a power of two from 2 is needed`)
  if (!isPowerOfTwo(warpSize)) throw new Error(`warp size ${warpSize}: a power of two is needed`)
  const everyone = [...Array(n).keys()]
  const steps = [makeStep('载入：每个线程把一个元素读进' + (mode === 'shuffle' ? '寄存器' : ' shared memory'), n, warpSize, values, Array(n).fill(true), [], everyone, mode !== 'shuffle', mode !== 'shuffle')]
  let current = values.slice()
  let live = Array(n).fill(true)
  const push = (step) => { steps.push(step); current = step.values; live = step.live }

  if (mode === 'interleaved') {
    for (let s = 1; s < n; s *= 2) {
      const ops = everyone.filter((tid) => tid % (2 * s) === 0).map((tid) => ({ thread: tid, dst: tid, src: tid + s }))
      push(makeStep(`s = ${s}：tid % ${2 * s} == 0 的线程做 cache[tid] += cache[tid + ${s}]`, n, warpSize, current, live, ops, ops.map((op) => op.thread), true, true))
    }
  } else if (mode === 'sequential') {
    for (let s = n / 2; s >= 1; s >>= 1) {
      const ops = everyone.filter((tid) => tid < s).map((tid) => ({ thread: tid, dst: tid, src: tid + s }))
      push(makeStep(`s = ${s}：tid < ${s} 的线程做 cache[tid] += cache[tid + ${s}]`, n, warpSize, current, live, ops, ops.map((op) => op.thread), true, true))
    }
  } else if (mode === 'shuffle') {
    // A block smaller than a warp is one warp of n lanes (the real kernel launches whole warps).
    const width = Math.min(warpSize, n)
    const warps = n / width
    // As block_sum: warp 0 adds the warps' sums, so there can be at most one warp's worth of warps.
    if (warps > width) throw new Error(`n = ${n}: the shuffle reduction holds at most ${width * width} threads with warps of ${width}`)
    const shuffle = (lanesOf, label) => {
      for (let offset = width / 2; offset >= 1; offset >>= 1) {
        const executing = []
        const ops = []
        for (const w of lanesOf) {
          for (let lane = 0; lane < width; lane++) {
            const tid = w * width + lane
            executing.push(tid)
            // Every lane executes the shuffle; only the lower `offset` lanes' sums are used later.
            if (lane < offset) ops.push({ thread: tid, dst: tid, src: tid + offset })
          }
        }
        push(makeStep(`${label}：value += __shfl_down(value, ${offset})`, n, warpSize, current, live, ops, executing, false, false))
      }
    }
    shuffle([...Array(warps).keys()], '每个 warp 内')
    if (warps > 1) {
      // Lane 0 of warp w writes warp_sums[w]; after __syncthreads lane w of warp 0 reads it back.
      const ops = []
      for (let w = 0; w < width; w++) ops.push({ thread: w, dst: w, src: w < warps ? w * width : null, write: w < warps ? current[w * width] : 0, live: w < warps })
      push(makeStep(`warp_sums[warp] = 每个 warp 的 lane 0；__syncthreads；warp 0 的 lane w 读 warp_sums[w]（w ≥ ${warps} 读 0）`, n, warpSize, current, live, ops, [...Array(width).keys()], true, true))
      shuffle([0], 'warp 0 内')
    }
  } else {
    throw new Error(`unknown mode ${mode}`)
  }
  return steps
}

/** Totals over the steps after the load: warp-steps issued, divergent warp-steps, syncs, useful adds. */
export function summary(steps) {
  const work = steps.slice(1)
  return {
    steps: work.length,
    warpSteps: work.reduce((sum, s) => sum + s.issued, 0),
    divergentWarpSteps: work.reduce((sum, s) => sum + s.divergent, 0),
    syncs: steps.filter((s) => s.sync).length,          // the load's __syncthreads included
    adds: work.reduce((sum, s) => sum + s.useful, 0),
    result: steps[steps.length - 1].values[0],
  }
}

/** n small whole numbers to add (deterministic), so the picture's sums can be checked by eye. */
export function sampleValues(n, seed = 7) {
  let a = seed >>> 0
  return Array.from({ length: n }, () => {
    a = (Math.imul(a, 1103515245) + 12345) >>> 0
    return 1 + ((a >>> 16) % 9)
  })
}
