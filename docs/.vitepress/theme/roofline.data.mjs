// Build-time data for the RooflineExplorer: every ladder record (kind "ladder") under records/<device>/,
// with the ceilings.json record and the profile record beside it and the datasheet table
// (src/hello_gpu/bench/specs.json), turned into roofs and points by lib/roofline.mjs. The picture is
// fed by the records only: re-recording a ladder and rebuilding the site moves its points.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { rooflineOf } from './lib/roofline.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch {
    return null
  }
}

/** Every ladder record of every device folder under `recordsDir`, as roofs and points. */
export function loadRooflines(recordsDir = path.join(root, 'records'), specsFile = path.join(root, 'src/hello_gpu/bench/specs.json')) {
  const specs = readJson(specsFile)
  const ladders = []
  const folders = fs.existsSync(recordsDir)
    ? fs.readdirSync(recordsDir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort()
    : []
  for (const device of folders) {
    const folder = path.join(recordsDir, device)
    const ceilingsRecord = readJson(path.join(folder, 'ceilings.json'))
    for (const file of fs.readdirSync(folder).filter((f) => f.endsWith('.json')).sort()) {
      const record = readJson(path.join(folder, file))
      if (!record || record.kind !== 'ladder' || !Array.isArray(record.entries)) continue
      const op = (record.extra || {}).op || file.split('.')[0]
      const dtypes = [...new Set(record.entries.map((e) => e.dtype).filter(Boolean))].sort()
      for (const dtype of dtypes) {
        const profile = readJson(path.join(folder, `${op}.${dtype}.profile.json`))
        const { roofs, points } = rooflineOf(record, {
          dtype, ceilingsRecord, ceilingsWhere: `${device}/ceilings.json`, profile, specs, name: file,
        })
        ladders.push({
          device, deviceName: (record.device || {}).name || device, file: `records/${device}/${file}`,
          op, dtype, commit: ((record.environment || {}).git || {}).commit || null, roofs, points,
        })
      }
    }
  }
  return ladders
}

export default {
  watch: ['../../../records/*/*.json', '../../../src/hello_gpu/bench/specs.json'],
  load() {
    return loadRooflines()
  },
}
