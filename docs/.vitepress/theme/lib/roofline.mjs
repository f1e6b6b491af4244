// The roofline of the ladder records, for the RooflineExplorer picture: the same arithmetic as
// src/hello_gpu/profile/roofline.py (`hello-gpu roofline OP --json`), ported line for line so the
// picture and the command agree (tests/roofline.test.mjs checks them against each other):
//
// - roofs: the measured ceilings (the ladder record's own `ceilings`, else records/<device>/ceilings.json;
//   the first with a figure wins, figure by figure) and the datasheet peaks of src/hello_gpu/bench/specs.json;
//   a point is held against the measured roof, else the datasheet one;
// - a point per entry with a median time and a work model: intensity = flops / bytes (counted bytes),
//   achieved = flops / median seconds (FLOP/s) and bytes / median seconds (bytes/s);
// - its verdict: latency-bound within 10 device call costs (graph_call_s; else 2 launch overheads) or
//   under 10% of the roof with a working set that fits in the L2; else memory-bound left of the ridge,
//   compute-bound right of it, with the fraction of the attainable roof.
// The module's thresholds and the reasons for each are in roofline.py's docstring.

export const LATENCY_LAUNCHES = 2
export const LATENCY_DEVICE_CALLS = 10
export const FAR_BELOW_FRACTION = 0.10
export const DEFAULT_LAUNCH_OVERHEAD_S = 5e-6
export const SUSPECT_BANDWIDTH_FRACTION = 1.10    // src/hello_gpu/bench/work.py

function positive(value) {
  return typeof value === 'number' && Number.isFinite(value) && value > 0
}

function first(...values) {
  return values.find(positive) ?? null
}

function key(text) {
  let k = String(text).trim().toLowerCase()
  if (k.startsWith('gfx')) k = k.split(':')[0]
  else if (k.startsWith('sm_')) k = k.replace(/[af]+$/, '')
  return k
}

/** The datasheet entry of specs.json for a device, by name (or alias) first and then by arch. */
export function specFor(specs, name, arch) {
  const gpus = (specs && specs.gpus) || []
  const find = (query) => {
    const k = key(query || '')
    if (!k) return null
    return gpus.find((g) => [g.name, g.arch, ...(g.aliases || [])].some((x) => key(x) === k)) || null
  }
  return (name && find(name)) || (arch && find(arch)) || null
}

/**
 * The roofs of one device and dtype: `ceilings` is a list of `[where, ceilingsDict]` in order of
 * preference; `specs` the parsed specs.json.
 */
export function roofsFrom(device, dtype, ceilings, { specs = null, environment = null } = {}) {
  const spec = specFor(specs, device?.name || '', device?.arch || '')
  const bandwidth = first(...ceilings.map(([, c]) => c.copy_bytes_per_s))
  const compute = first(...ceilings.map(([, c]) => (c.matmul_flops_per_s || {})[dtype]))
  const launch = first(...ceilings.map(([, c]) => c.launch_overhead_s))
  const graphCall = first(...ceilings.map(([, c]) => c.graph_call_s))
  const used = ceilings.filter(([, c]) => [c.copy_bytes_per_s, c.launch_overhead_s, (c.matmul_flops_per_s || {})[dtype]].some(positive))
  const sources = used.length ? used.map(([where]) => `measured: ${where}`) : ['measured: none (run `hello-gpu ceilings`)']
  if (spec) sources.push(`datasheet: ${spec.name} in bench/specs.json`)
  const l2 = (environment && environment.l2_bytes) || (spec ? spec.l2_bytes : null)
  const roofs = {
    device: device?.name || '?',
    dtype,
    bandwidth,
    compute,
    datasheetBandwidth: spec ? spec.bandwidth_bytes_per_s : null,
    datasheetCompute: spec ? (spec.peak_flops || {})[dtype] ?? null : null,
    launchOverheadS: launch,
    graphCallS: graphCall,
    l2Bytes: positive(l2) ? Math.trunc(l2) : null,
    sources,
  }
  roofs.memoryRoof = roofs.bandwidth || roofs.datasheetBandwidth || null
  roofs.computeRoof = roofs.compute || roofs.datasheetCompute || null
  roofs.ridge = roofs.memoryRoof && roofs.computeRoof ? roofs.computeRoof / roofs.memoryRoof : null
  return roofs
}

/** FLOP/s a roof allows at `intensity` FLOP/byte: min(compute, intensity x bandwidth). */
export function attainable(intensity, bandwidth, compute) {
  const limits = [compute, bandwidth ? intensity * bandwidth : null].filter((x) => x != null)
  return limits.length ? Math.min(...limits) : null
}

/** `{ "variant|shape": DRAM bytes per call }` from a profile record (ncu's measured bytes). */
export function measuredBytesByRung(profile) {
  const found = {}
  for (const entry of (profile && profile.entries) || []) {
    const measured = ((entry.extra || {}).bytes || {}).measured_dram_bytes
    if (positive(measured)) found[`${entry.variant}|${entry.shape}`] = measured
  }
  return found
}

/** A point per entry (of `dtype`, when given) with a median time and a work model with bytes. */
export function pointsFromRecord(record, { profile = null, dtype = null } = {}) {
  const measured = measuredBytesByRung(profile)
  const points = []
  for (const entry of record.entries || []) {
    if (dtype != null && entry.dtype !== dtype) continue
    const work = entry.work
    const timing = entry.timing || {}
    if (!work || !positive(timing.median) || !positive(work.bytes)) continue
    const seconds = timing.median
    const flops = work.flops || 0
    points.push({
      variant: entry.variant,
      shape: entry.shape,
      dtype: entry.dtype,
      route: (entry.extra || {}).route ?? null,
      role: entry.role || '',
      seconds,
      bytes: work.bytes,
      flops,
      measuredDramBytes: measured[`${entry.variant}|${entry.shape}`] ?? null,
      suspect: (entry.derived || {}).suspect ?? null,
      intensity: flops && work.bytes ? flops / work.bytes : null,
      flopRate: flops / seconds,
      byteRate: work.bytes / seconds,
    })
  }
  return points
}

/** What bounds a point: `{ bound, side, fraction }` as roofline.py's classify. */
export function classify(point, roofs) {
  const { ridge } = roofs
  const intensity = point.intensity
  let side = null, fraction = null
  if (roofs.memoryRoof && (intensity == null || ridge == null || intensity < ridge)) {
    side = 'memory'
    fraction = point.byteRate / roofs.memoryRoof
  } else if (roofs.computeRoof && point.flops) {
    side = 'compute'
    fraction = point.flopRate / roofs.computeRoof
  }
  const suspect = Boolean(point.suspect) || (fraction != null && fraction > SUSPECT_BANDWIDTH_FRACTION)
  const limit = roofs.graphCallS
    ? LATENCY_DEVICE_CALLS * roofs.graphCallS
    : LATENCY_LAUNCHES * (roofs.launchOverheadS || DEFAULT_LAUNCH_OVERHEAD_S)
  if (point.seconds <= limit) return { bound: 'latency', side, fraction, suspect, reason: 'fixed costs' }
  if (fraction != null && fraction < FAR_BELOW_FRACTION && roofs.l2Bytes && point.bytes <= roofs.l2Bytes) {
    return { bound: 'latency', side, fraction, suspect, reason: 'far below the roof, fits in L2' }
  }
  return { bound: side || 'unknown', side, fraction, suspect, reason: side ? `${side} roof` : 'no roofs' }
}

/**
 * A ladder record's roofline: roofs and classified points. `ceilingsRecord` is the ceilings.json
 * record beside it (or null), `profile` the OP.DTYPE.profile.json record (or null).
 */
export function rooflineOf(record, { dtype = null, ceilingsRecord = null, ceilingsWhere = 'ceilings.json', profile = null, specs = null, name = 'record' } = {}) {
  if (dtype == null) {
    const dtypes = [...new Set((record.entries || []).map((e) => e.dtype).filter(Boolean))].sort()
    dtype = dtypes[0] || 'float32'
  }
  const ceilings = []
  if (record.ceilings && typeof record.ceilings === 'object') ceilings.push([`${name} (the record's own)`, record.ceilings])
  if (ceilingsRecord && ceilingsRecord.ceilings && typeof ceilingsRecord.ceilings === 'object') ceilings.push([ceilingsWhere, ceilingsRecord.ceilings])
  const roofs = roofsFrom(record.device || {}, dtype, ceilings, { specs, environment: record.environment })
  const points = pointsFromRecord(record, { profile, dtype }).map((point) => ({ ...point, verdict: classify(point, roofs) }))
  return { dtype, roofs, points }
}
