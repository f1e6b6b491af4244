// Fails (exit 1) on any code include `<<< path` in docs/**/*.md whose file does not exist, is not a
// file, or lacks the `#region` it names. VitePress itself stops on a missing file only by accident (a
// stat that throws) and silently shows the whole file for a missing region, so `npm run docs:build`
// runs this first. A region is found the way VitePress 1.6 finds it (REGION_MARKERS, from its snippet
// plugin: a start line and an end line of the same syntax, e.g. `# region NAME` / `# endregion NAME` in
// Python, `// #region NAME` in C++): a looser match here would pass a marker VitePress ignores. `@` is docs/ (the site's srcDir); `@/../` is the repository root; a path without
// `@` is relative to the page. Lines inside fenced code blocks are examples, not includes.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const docs = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

function pages(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return entry.name === '.vitepress' || entry.name === 'node_modules' ? [] : pages(full)
    return entry.name.endsWith('.md') ? [full] : []
  })
}

/** The problem with one include line's target, or null when it is fine. */
export function includeProblem(spec, page) {
  const target = spec.replace(/\s*\[[^\]]*\]\s*$/, '').replace(/\{[^}]*\}\s*$/, '').trim()
  const [file, region] = target.split('#')
  const resolved = file.startsWith('@') ? path.join(docs, file.slice(1)) : path.resolve(path.dirname(page), file)
  if (!fs.existsSync(resolved)) return `no such file ${path.relative(path.dirname(docs), resolved)}`
  if (!fs.statSync(resolved).isFile()) return `not a file: ${path.relative(path.dirname(docs), resolved)}`
  if (region && !hasRegion(fs.readFileSync(resolved, 'utf8'), region)) {
    return `no region "${region}" in ${path.relative(path.dirname(docs), resolved)}`
  }
  return null
}

// The region syntaxes of VitePress 1.6's snippet plugin (findRegion), tried on each trimmed line.
const REGION_MARKERS = [
  /^\/\/ ?#?((?:end)?region) ([\w*-]+)$/, // JavaScript, TypeScript, C, C++, CUDA, HIP
  /^\/\* ?#((?:end)?region) ([\w*-]+) ?\*\/$/, // CSS
  /^#pragma ((?:end)?region) ([\w*-]+)$/, // C, C++
  /^<!-- #?((?:end)?region) ([\w*-]+) -->$/, // HTML, Markdown
  /^#((?:End )Region) ([\w*-]+)$/, // Visual Basic
  /^::#((?:end)region) ([\w*-]+)$/, // Bat
  /^# ?((?:end)?region) ([\w*-]+)$/, // Python, shell
]

/** Whether ``text`` has the region ``name`` as VitePress reads it: a start line, then an end line of the same syntax. */
export function hasRegion(text, name) {
  let marker = null
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (marker === null) {
      marker = REGION_MARKERS.find((m) => { const f = m.exec(line); return f && f[2] === name && /^[rR]egion$/.test(f[1]) }) ?? null
    } else {
      const f = marker.exec(line)
      if (f && f[2] === name && /^[Ee]nd ?[rR]egion$/.test(f[1])) return true
    }
  }
  return false
}

export function checkIncludes(files = pages(docs)) {
  const problems = []
  for (const page of files) {
    let fence = null
    fs.readFileSync(page, 'utf8').split('\n').forEach((line, index) => {
      const opening = line.match(/^\s*(`{3,}|~{3,})/)
      if (opening) {
        if (fence === null) fence = opening[1]
        else if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, '') === '') fence = null
        return
      }
      if (fence !== null) return
      const include = line.match(/^\s*<<<\s+(\S.*)$/)
      if (!include) return
      const problem = includeProblem(include[1].trim(), page)
      if (problem) problems.push(`${path.relative(path.dirname(docs), page)}:${index + 1}: ${problem}`)
    })
  }
  return problems
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = checkIncludes(process.argv.length > 2 ? process.argv.slice(2).map((f) => path.resolve(f)) : undefined)
  for (const problem of problems) console.error(`include: ${problem}`)
  if (problems.length) {
    console.error(`${problems.length} broken code include(s) (<<< ...) in docs/`)
    process.exit(1)
  }
}
