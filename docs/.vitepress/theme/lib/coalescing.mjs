// Memory coalescing, the arithmetic behind the CoalescingDemo picture: which bytes the 32 threads of
// one warp ask for in one load instruction, which 32-byte sectors and 128-byte cache lines those bytes
// fall in, and how much of what moves is used. Plain functions, no Vue: `node --test` checks them.
//
// The model is NVIDIA's (chapter 3, docs/course/part0/ch03-memory.md): a warp's load is one request;
// L1 handles it line by line (128 bytes) and L2 and DRAM move whole 32-byte sectors, so a byte that is
// asked for costs its whole sector. The buffer starts at a 256-byte boundary, as cudaMalloc returns.

export const WARP = 32
export const SECTOR_BYTES = 32
export const LINE_BYTES = 128
/** Bytes one thread loads in the 128-bit vector pattern (float4, or 8 bfloat16). */
export const VECTOR_BYTES = 16
/** The random pattern picks element indices in [0, RANDOM_SPAN * 32). */
export const RANDOM_SPAN = 32

export const PATTERNS = [
  { id: 'contiguous', label: '连续：线程 t 读元素 t' },
  { id: 'vector128', label: '128-bit 向量（float4）：线程 t 读 16 字节' },
  { id: 'stride2', label: '步长 2：线程 t 读元素 2t' },
  { id: 'stride4', label: '步长 4：线程 t 读元素 4t' },
  { id: 'stride16', label: '步长 16：线程 t 读元素 16t（vector_add 的 v02_strided_chunks）' },
  { id: 'stride32', label: '步长 32：线程 t 读元素 32t' },
  { id: 'offset1', label: '偏移 1 个元素：线程 t 读元素 t+1' },
  { id: 'random', label: '随机：每个线程读一个随机元素（gather）' },
]

export const ELEMENT_SIZES = [1, 2, 4, 8]

/** A small deterministic generator (mulberry32), so a seed gives the same "random" warp every time. */
export function rng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Each thread's access: `{ thread, address, bytes }`, address in bytes from the (aligned) buffer start. */
export function accesses(pattern, elementBytes = 4, { seed = 1, warp = WARP } = {}) {
  if (!ELEMENT_SIZES.includes(elementBytes)) throw new Error(`element size ${elementBytes}: expected one of ${ELEMENT_SIZES}`)
  const random = rng(seed)
  const list = []
  for (let t = 0; t < warp; t++) {
    let index, bytes = elementBytes
    switch (pattern) {
      case 'contiguous': index = t; break
      case 'vector128': index = t * (VECTOR_BYTES / elementBytes); bytes = VECTOR_BYTES; break
      case 'stride2': index = 2 * t; break
      case 'stride4': index = 4 * t; break
      case 'stride16': index = 16 * t; break
      case 'stride32': index = 32 * t; break
      case 'offset1': index = t + 1; break
      case 'random': index = Math.floor(random() * RANDOM_SPAN * warp); break
      default: throw new Error(`unknown pattern ${pattern}`)
    }
    list.push({ thread: t, address: index * elementBytes, bytes })
  }
  return list
}

/** Sectors, lines and efficiency of one warp's accesses. */
export function analyse(list) {
  const usedBytes = new Set()
  const sectors = new Map()   // sector index -> bytes of it used
  const lines = new Map()     // line index -> sector indices used
  for (const { address, bytes } of list) {
    for (let b = address; b < address + bytes; b++) {
      if (usedBytes.has(b)) continue
      usedBytes.add(b)
      const sector = Math.floor(b / SECTOR_BYTES)
      sectors.set(sector, (sectors.get(sector) || 0) + 1)
      const line = Math.floor(b / LINE_BYTES)
      if (!lines.has(line)) lines.set(line, new Set())
      lines.get(line).add(sector)
    }
  }
  const requested = list.reduce((sum, a) => sum + a.bytes, 0)
  const moved = sectors.size * SECTOR_BYTES
  const used = usedBytes.size
  // The best case for the same request: its unique bytes packed into as few sectors as possible.
  const idealSectors = Math.ceil(used / SECTOR_BYTES)
  return {
    requests: 1,                       // one load instruction of the warp
    requestedBytes: requested,         // sum over threads (counts a byte twice if two threads read it)
    usedBytes: used,                   // distinct bytes asked for
    sectors: sectors.size,
    lines: lines.size,
    movedBytes: moved,
    efficiency: moved ? used / moved : 0,
    idealSectors,
    sectorUse: [...sectors.entries()].sort((a, b) => a[0] - b[0]).map(([sector, bytes]) => ({ sector, bytes })),
    lineSectors: [...lines.entries()].sort((a, b) => a[0] - b[0]).map(([line, set]) => ({ line, sectors: [...set].sort((a, b) => a - b) })),
  }
}

/** `accesses` and `analyse` together: what the picture shows. */
export function coalesce(pattern, elementBytes = 4, options = {}) {
  const list = accesses(pattern, elementBytes, options)
  return { accesses: list, ...analyse(list) }
}
