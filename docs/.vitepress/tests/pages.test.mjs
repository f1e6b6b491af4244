// The built site, opened as a reader would: key pages in headless Chromium (Debian's `chromium` package,
// driven by playwright-core; no browser download), each screenshotted into a temporary folder and checked
// for console errors, failed requests and empty content. Run after `npm run docs:build`:
//     npm run test:pages          (node --test docs/.vitepress/tests/pages.test.mjs)
// CHROMIUM (default /usr/bin/chromium) picks the browser; without one every test is skipped, with the
// reason. PAGES_SCREENSHOTS names the screenshot folder (default: a new folder under the system temp).
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const dist = path.resolve(here, '..', 'dist')
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium'
const launchArgs = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run',
]

let playwright = null
try {
  playwright = await import('playwright-core')
} catch {
  playwright = null
}
const skip = !playwright
  ? 'playwright-core is not installed (npm ci)'
  : !fs.existsSync(executablePath)
    ? `no Chromium at ${executablePath} (apt-get install -y chromium, or set CHROMIUM)`
    : false
if (skip) console.log(`# pages.test.mjs: SKIPPED: ${skip}`)

const types = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.woff2': 'font/woff2', '.ico': 'image/x-icon', '.txt': 'text/plain',
}

/** A static server for dist/ with VitePress's clean URLs: /a/b serves a/b.html, /a/ serves a/index.html. */
function serve() {
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname)
    if (url === '/favicon.ico' && !fs.existsSync(path.join(dist, 'favicon.ico'))) {
      // The site has no favicon; the browser asks for one by itself, which no page of ours links.
      res.writeHead(204)
      res.end()
      return
    }
    const candidates = url.endsWith('/') ? [url + 'index.html'] : [url, url + '.html', url + '/index.html']
    for (const candidate of candidates) {
      const file = path.join(dist, path.normalize(candidate))
      if (file.startsWith(dist) && fs.existsSync(file) && fs.statSync(file).isFile()) {
        res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream' })
        fs.createReadStream(file).pipe(res)
        return
      }
    }
    res.writeHead(404, { 'content-type': 'text/plain' })
    res.end('not found')
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

/** The key pages: a route and what must be on it. The interactive page is checked only where it was built. */
const pages = [
  { name: 'home', route: '/', content: '.VPHome', minText: 200 },
  { name: 'chapter-4', route: '/course/part0/ch04-first-kernel', content: '.vp-doc', minText: 1000 },
  { name: 'interactive', route: '/course/interactive', content: '.vp-doc', minText: 200, optional: 'course/interactive.html' },
  { name: 'atlas', route: '/atlas/', content: '.vp-doc', minText: 500 },
]

describe('the built site in Chromium', { skip }, () => {
  let server
  let browser
  let base
  let shots

  before(async () => {
    assert.ok(fs.existsSync(path.join(dist, 'index.html')), `no built site at ${dist}: run npm run docs:build first`)
    server = await serve()
    base = `http://127.0.0.1:${server.address().port}`
    browser = await playwright.chromium.launch({ executablePath, headless: true, args: launchArgs })
    shots = process.env.PAGES_SCREENSHOTS || fs.mkdtempSync(path.join(os.tmpdir(), 'hello-gpu-pages-'))
    fs.mkdirSync(shots, { recursive: true })
    console.log(`# screenshots: ${shots}`)
  })

  after(async () => {
    await browser?.close()
    await new Promise((resolve) => (server ? server.close(resolve) : resolve()))
  })

  /** Open a route; collect console errors, page errors and failed same-origin requests. */
  async function open(route) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
    const problems = []
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console: ${msg.text()} (${msg.location().url || 'no url'})`)
    })
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
    page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()} ${req.failure()?.errorText ?? ''}`))
    page.on('response', (res) => {
      if (res.url().startsWith(base) && res.status() >= 400) problems.push(`HTTP ${res.status()}: ${res.url()}`)
    })
    const response = await page.goto(base + route, { waitUntil: 'networkidle' })
    assert.equal(response.status(), 200, `${route}: HTTP ${response.status()}`)
    return { page, problems }
  }

  for (const spec of pages) {
    const missing = spec.optional && !fs.existsSync(path.join(dist, spec.optional))
    test(`${spec.name} (${spec.route}) renders without errors`, { skip: missing ? `${spec.route} is not in this site` : false }, async () => {
      const { page, problems } = await open(spec.route)
      try {
        const text = (await page.locator(spec.content).first().innerText()).trim()
        assert.ok(text.length >= spec.minText, `${spec.route}: ${spec.content} has ${text.length} characters of text, expected at least ${spec.minText}`)
        assert.ok((await page.title()).length > 0, `${spec.route}: no <title>`)
        await page.screenshot({ path: path.join(shots, `${spec.name}.png`), fullPage: true })
        assert.deepEqual(problems, [], `${spec.route}: ${problems.join('\n')}`)
      } finally {
        await page.close()
      }
    })
  }

  test('the atlas draws its SVGs and follows a click on the timeline', async () => {
    const { page, problems } = await open('/atlas/')
    try {
      const dots = page.locator('svg.atlas-timeline .arch-dot')
      assert.ok((await dots.count()) >= 15, 'the timeline should have every architecture')
      assert.ok((await page.locator('svg.atlas-hierarchy rect').count()) >= 5, 'the hierarchy SVG is empty')
      const lanesBefore = await page.locator('svg.atlas-unit rect[data-lane]').count()
      assert.equal(lanesBefore, 4 * 32, 'Hopper (the default) draws 4 sub-partitions of 32 lanes')
      assert.ok(await page.locator('table.atlas-table').innerText().then((t) => t.includes('H200 SXM')))

      await page.locator('svg.atlas-timeline .arch-dot[aria-label*="RDNA 4"]').click()
      await page.locator('table.atlas-table >> text=Radeon RX 9070 XT').waitFor()
      assert.equal(await page.locator('svg.atlas-unit rect[data-lane]').count(), 2 * 2 * 32, 'an RDNA WGP: 2 CUs x 2 SIMD32 x 32 lanes')
      assert.ok((await page.locator('svg.atlas-unit').textContent()).includes('WGP'))
      await page.screenshot({ path: path.join(shots, 'atlas-rdna4.png'), fullPage: true })

      await page.locator('svg.atlas-timeline .arch-dot[aria-label*="CDNA 3"]').focus()
      await page.keyboard.press('Enter')
      await page.locator('table.atlas-table >> text=Instinct MI300X').waitFor()
      assert.equal(await page.locator('svg.atlas-unit rect[data-lane]').count(), 4 * 16, 'a CDNA CU: 4 SIMD16')

      const sources = await page.locator('ol.atlas-sources li').count()
      assert.ok(sources >= 20, `the sources list has ${sources} entries`)
      assert.deepEqual(problems, [], problems.join('\n'))
    } finally {
      await page.close()
    }
  })
})
