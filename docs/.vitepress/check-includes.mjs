// Fails (exit 1) on any code include `<<< path` in docs/**/*.md whose file does not exist, is not a
// file, or lacks the `#region` it names. VitePress itself stops on a missing file only by accident (a
// stat that throws) and silently shows the whole file for a missing region, so `npm run docs:build`
// runs this first. `@` is docs/ (the site's srcDir); `@/../` is the repository root; a path without
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
  if (region) {
    const text = fs.readFileSync(resolved, 'utf8')
    const start = new RegExp(`^\\s*(//|#|<!--|/\\*)\\s*#?region\\s+${region.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\b`, 'm')
    if (!start.test(text)) return `no region "${region}" in ${path.relative(path.dirname(docs), resolved)}`
  }
  return null
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
